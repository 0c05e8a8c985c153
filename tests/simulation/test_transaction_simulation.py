"""Transactions under simulated loss, delay, duplication, slow replication, coordinator and
partition leader crashes, dying, stalling and pausing producers, one test per seed.

The coordinator is the real ``CoordinatorRuntime`` with ``TransactionCoordinatorShard``s,
the partition leaders keep their producer state in the real ``ProducerStateManager``;
``transaction_cluster`` says what is real and what is modelled, and which invariants are
checked as a run goes. Each seed is its own test, named by its value: a failure reads
``test_transactions_are_atomic_under_faults_and_complete_after_healing[seed 17]``, ends
with the last steps of the run, and replays alone with ``OTTLA_TXN_SIM_SEED=17
.venv/bin/python -m pytest tests/simulation/test_transaction_simulation.py``.
``OTTLA_TXN_SIM_SEEDS`` sets how many seeds run (``DEFAULT_SEEDS`` by default, about 20 s
for the module on a 2-core machine), ``OTTLA_TXN_SIM_CHAOS_MS`` how long each is under
faults (15 s of simulated time by default).
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from ottla.coordinator.transaction.metadata import TransactionMetadata
from ottla.storage.producer_state import ProducerStateManager
from tests.simulation import transaction_cluster
from tests.simulation.transaction_cluster import Stats, TransactionCluster

DEFAULT_SEEDS = 150
SEEDS = int(os.environ.get("OTTLA_TXN_SIM_SEEDS", str(DEFAULT_SEEDS)))
ONLY = os.environ.get("OTTLA_TXN_SIM_SEED")
CHAOS_MS = int(os.environ.get("OTTLA_TXN_SIM_CHAOS_MS", "15000"))
"""Simulated time under faults; the healed cluster then has ``HEAL_BOUND_MS`` to be quiet."""
HEAL_BOUND_MS = 15_000
COVERAGE_SEEDS = 20
"""How many seeds the coverage test runs to show the faults reach what they should."""

CASES = [int(ONLY)] if ONLY is not None else list(range(1, SEEDS + 1))


def replay(seed: int) -> str:
    chaos = f"OTTLA_TXN_SIM_CHAOS_MS={CHAOS_MS} " if "OTTLA_TXN_SIM_CHAOS_MS" in os.environ \
        else ""
    return (f"replay: {chaos}OTTLA_TXN_SIM_SEED={seed} .venv/bin/python -m pytest "
            "tests/simulation/test_transaction_simulation.py")


def simulate(seed: int) -> tuple[TransactionCluster, str | None]:
    """Faults for ``CHAOS_MS``, then heal and wait, up to ``HEAL_BOUND_MS``, for every
    transaction to be complete everywhere; then the final checks. Returns the cluster and
    what broke (None if nothing), with the replay command and the last steps."""
    sim = TransactionCluster(seed)
    try:
        sim.run_until(CHAOS_MS, chaos=True)
        sim.heal()
        deadline = sim.now + HEAL_BOUND_MS
        while sim.now < deadline and sim.convergence_problem() is not None:
            sim.run_until(sim.now + 100)
        problem = sim.convergence_problem()
        assert problem is None, f"not quiet {HEAL_BOUND_MS} ms after healing: {problem}"
        sim.check_final()
    except Exception as e:
        return sim, (f"seed {seed} at {sim.now} ms: {type(e).__name__}: {e}; {replay(seed)}\n"
                     f"The last steps:\n{sim.history()}")
    return sim, None


@pytest.mark.parametrize("seed", CASES, ids=[f"seed {s}" for s in CASES])
def test_transactions_are_atomic_under_faults_and_complete_after_healing(seed: int) -> None:
    _, failure = simulate(seed)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def test_the_faults_reach_crashes_lost_markers_timeouts_and_fencing() -> None:
    """A handful of seeds is enough for every fault the checker relies on to happen (a
    seed that breaks an invariant counts up to where it broke: its own test reports it)."""
    total = Stats()
    for seed in range(1, COVERAGE_SEEDS + 1):
        stats = simulate(seed)[0].stats
        for name, value in vars(stats).items():
            setattr(total, name, getattr(total, name) + value)
    counts = vars(total)
    for name in ("commits", "aborts", "coordinator_crashes", "partition_crashes",
                 "markers_lost", "timed_out", "fence_aborts", "fenced", "deaths", "stalls",
                 "epoch_bumps", "verify_refused", "fenced_writes_refused", "duplicated",
                 "txn_records_cut", "markers_truncated", "reads"):
        assert counts[name] > 0, f"no run had {name}: {counts}"


def test_the_model_answers_a_failed_verification_as_the_produce_handler_does() -> None:
    from ottla.broker.handlers.produce import _VERIFY_ERRORS

    assert transaction_cluster.VERIFY_ERRORS == _VERIFY_ERRORS


# --- the checker has teeth: a broken rule fails the first seeds ----------------------------


def first_failure(seeds: int) -> str | None:
    for seed in range(1, seeds + 1):
        failure = simulate(seed)[1]
        if failure is not None:
            return failure
    return None


def test_a_last_stable_offset_that_ignores_open_transactions_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ProducerStateManager, "first_unstable_offset", lambda self: None)
    failure = first_failure(3)
    assert failure is not None and "passed the open transaction" in failure.split(";")[0], \
        failure


def test_a_log_value_that_loses_the_partitions_is_caught(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A reloaded PrepareCommit without its partitions would complete with no marker."""
    from_value = TransactionMetadata.from_value

    def without_partitions(transactional_id: str, value: object) -> TransactionMetadata:
        return dataclasses.replace(from_value(transactional_id, value),  # type: ignore[arg-type]
                                   partitions=frozenset())

    monkeypatch.setattr(TransactionMetadata, "from_value", staticmethod(without_partitions))
    failure = first_failure(3)
    assert failure is not None and "the live shard has" in failure.split(";")[0], failure
