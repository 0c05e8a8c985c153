"""Transactions under simulated loss, delay, duplication, slow replication, coordinator and
partition leader crashes, dying, stalling and pausing producers, one test per seed.

Replay a failing seed (fixed or fresh) alone with::

    OTTLA_TXN_SIM_SEED=<n> .venv/bin/pytest tests/simulation/test_transaction_simulation.py -k fresh

The coordinator is the real ``CoordinatorRuntime`` with ``TransactionCoordinatorShard``s,
the partition leaders keep their producer state in the real ``ProducerStateManager``;
``transaction_cluster`` says what is real and what is modelled, and which invariants are
checked as a run goes. Each seed is its own test, named by its value: a failure reads
``test_transactions_are_atomic_under_faults_and_complete_after_healing[seed 17]``, names the
broken ``Invariant``, ends with the last steps of the run and the replay command.

The seeds 1..``OTTLA_TXN_SIM_SEEDS`` (``DEFAULT_SEEDS`` by default, about 45 s for the module
on a 2-core machine) run every time; beside them ``OTTLA_TXN_SIM_FRESH_SEEDS`` fresh ones
(``DEFAULT_FRESH`` by default, about a sixth more time), from a start drawn at random each
run (ids ``fresh seed <n>``), explore what the fixed ones do not. ``OTTLA_TXN_SIM_SEED=<n>``
runs seed ``n`` instead of the fixed seeds and starts the fresh ones at ``n`` (one of them,
unless ``OTTLA_TXN_SIM_FRESH_SEEDS`` says more). ``OTTLA_TXN_SIM_CHAOS_MS`` sets how long
each seed is under faults (15 s of simulated time by default).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple

import pytest

from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.coordinator.transaction.metadata import TransactionMetadata
from ottla.storage.producer_state import ProducerStateManager
from tests.simulation import transaction_cluster
from tests.simulation.fresh import fresh_start
from tests.simulation.transaction_cluster import (
    Invariant,
    Stats,
    TransactionCluster,
    Violation,
)
from tests.simulation.workloads import TRANSACTION_CHAOS_MS, Knobs, simulate_transactions

DEFAULT_SEEDS = 150
DEFAULT_FRESH = 30
SEEDS = int(os.environ.get("OTTLA_TXN_SIM_SEEDS", str(DEFAULT_SEEDS)))
ONLY = os.environ.get("OTTLA_TXN_SIM_SEED")
FRESH = int(os.environ.get("OTTLA_TXN_SIM_FRESH_SEEDS",
                           "1" if ONLY is not None else str(DEFAULT_FRESH)))
FRESH_START = fresh_start(ONLY)
"""The first fresh seed: ``OTTLA_TXN_SIM_SEED``, or drawn anew each run, far above the fixed."""
CHAOS_MS = int(os.environ.get("OTTLA_TXN_SIM_CHAOS_MS", str(TRANSACTION_CHAOS_MS)))
"""Simulated time under faults; the healed cluster then has
``workloads.TRANSACTION_HEAL_BOUND_MS`` to be quiet."""
COVERAGE_SEEDS = 20
"""How many seeds the coverage test runs to show the faults reach what they should."""

CASES = [int(ONLY)] if ONLY is not None else list(range(1, SEEDS + 1))
FRESH_CASES = [FRESH_START + i for i in range(FRESH)]


def replay(seed: int) -> str:
    chaos = f"OTTLA_TXN_SIM_CHAOS_MS={CHAOS_MS} " if "OTTLA_TXN_SIM_CHAOS_MS" in os.environ \
        else ""
    return (f"replay: {chaos}OTTLA_TXN_SIM_SEED={seed} .venv/bin/pytest "
            "tests/simulation/test_transaction_simulation.py -k fresh")


class Failure(NamedTuple):
    """What broke a seed: the exception (a ``Violation`` names its invariant) and the
    report a reader needs (seed, exception, replay command, the last steps)."""

    error: Exception
    report: str


def simulate(seed: int) -> tuple[TransactionCluster, Failure | None]:
    """``workloads.simulate_transactions`` for ``CHAOS_MS``: the cluster and what broke
    (None if nothing)."""
    sim, error = simulate_transactions(seed, Knobs(chaos_ms=CHAOS_MS))
    if error is None:
        return sim, None
    return sim, Failure(error, f"seed {seed} at {sim.now} ms: {type(error).__name__}: "
                               f"{error}; {replay(seed)}\nThe last steps:\n{sim.history()}")


@pytest.mark.parametrize("seed", CASES + FRESH_CASES, ids=[f"seed {s}" for s in CASES]
                         + [f"fresh seed {s}" for s in FRESH_CASES])
def test_transactions_are_atomic_under_faults_and_complete_after_healing(seed: int) -> None:
    _, failure = simulate(seed)
    if failure is not None:
        pytest.fail(failure.report, pytrace=False)


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


def assert_caught(seeds: int, invariant: Invariant) -> None:
    """The first of seeds 1..``seeds`` that fails does so by breaking ``invariant``, the
    rule the mutation breaks: not by the healing bound, another rule or an exception of
    the model."""
    for seed in range(1, seeds + 1):
        failure = simulate(seed)[1]
        if failure is None:
            continue
        assert isinstance(failure.error, Violation), f"not a violation: {failure.report}"
        assert failure.error.invariant is invariant, (
            f"caught by {failure.error.invariant.name}, not by {invariant.name}: "
            f"{failure.report}")
        return
    raise AssertionError(f"none of the first {seeds} seeds caught it")


def test_a_last_stable_offset_that_ignores_open_transactions_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ProducerStateManager, "first_unstable_offset", lambda self: None)
    assert_caught(3, Invariant.LAST_STABLE_OFFSET)


def test_a_log_value_that_loses_the_partitions_is_caught(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A reloaded PrepareCommit without its partitions would complete with no marker."""
    from_value = TransactionMetadata.from_value

    def without_partitions(transactional_id: str, value: object) -> TransactionMetadata:
        return dataclasses.replace(from_value(transactional_id, value),  # type: ignore[arg-type]
                                   partitions=frozenset())

    monkeypatch.setattr(TransactionMetadata, "from_value", staticmethod(without_partitions))
    assert_caught(3, Invariant.REPLAY)


def test_markers_written_before_the_transaction_state_is_durable_are_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanner reading the coordinator's state before its high watermark covers it
    (a read_committed that answers at once): markers go out for a PrepareCommit or
    PrepareAbort a coordinator failover may lose, and the next coordinator decides the
    transaction otherwise, after a reader was shown it."""

    def at_once(self: CoordinatorRuntime, tp: tuple[str, int], operation: Any,
                reply: Any) -> None:
        reply(operation(self.active(tp).shard))

    monkeypatch.setattr(CoordinatorRuntime, "read_committed", at_once)
    assert_caught(20, Invariant.READ_COMMITTED)


def test_a_scanner_that_restarts_a_completed_marker_job_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``SCAN_RECHECKS`` off: a job the scanner read before its sender completed it starts
    again, and its markers end the id's next transaction, which then completes with a
    partition that never had its own marker."""
    monkeypatch.setattr(transaction_cluster, "SCAN_RECHECKS", False)
    assert_caught(20, Invariant.MARKERS_BEFORE_COMPLETE)
