r"""Offset commits through a group coordinator whose ``__consumer_offsets`` partitions change
leader, under simulated loss, delay, slow replication and slow loads, one test per seed
(issue 34, fault (c)).

Replay a failing seed (fixed or fresh) alone with::

    OTTLA_OFFSET_SIM_SEED=<n> .venv/bin/pytest -k fresh \
        tests/simulation/test_offset_commit_simulation.py

The coordinator is the real ``CoordinatorRuntime`` with ``GroupCoordinatorShard``s;
``offset_commit_cluster`` says what is real and what is modelled, and which invariants are
checked as a run goes. A failure names the broken ``Invariant``, ends with the last steps
of the run and the replay command.

The seeds 1..``OTTLA_OFFSET_SIM_SEEDS`` (``DEFAULT_SEEDS``) run every time; beside them
``OTTLA_OFFSET_SIM_FRESH_SEEDS`` fresh ones (``DEFAULT_FRESH``), from a start drawn at
random each run (ids ``fresh seed <n>``). ``OTTLA_OFFSET_SIM_SEED=<n>`` runs seed ``n``
instead of the fixed seeds and starts the fresh ones at ``n`` (one of them, unless
``OTTLA_OFFSET_SIM_FRESH_SEEDS`` says more). ``OTTLA_OFFSET_SIM_CHAOS_MS`` sets how long
each seed is under faults.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import pytest

from ottla.coordinator.group.offset_metadata_manager import OffsetMetadataManager
from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.protocol.errors import KafkaError
from tests.simulation.fresh import fresh_start
from tests.simulation.offset_commit_cluster import (
    Invariant,
    OffsetCommitCluster,
    Stats,
    Violation,
)
from tests.simulation.workloads import OFFSET_COMMIT_CHAOS_MS, Knobs, simulate_offset_commits

DEFAULT_SEEDS = 100
DEFAULT_FRESH = 20
SEEDS = int(os.environ.get("OTTLA_OFFSET_SIM_SEEDS", str(DEFAULT_SEEDS)))
ONLY = os.environ.get("OTTLA_OFFSET_SIM_SEED")
FRESH = int(os.environ.get("OTTLA_OFFSET_SIM_FRESH_SEEDS",
                           "1" if ONLY is not None else str(DEFAULT_FRESH)))
FRESH_START = fresh_start(ONLY)
"""The first fresh seed: ``OTTLA_OFFSET_SIM_SEED``, or drawn anew each run."""
CHAOS_MS = int(os.environ.get("OTTLA_OFFSET_SIM_CHAOS_MS", str(OFFSET_COMMIT_CHAOS_MS)))
COVERAGE_SEEDS = 20

CASES = [int(ONLY)] if ONLY is not None else list(range(1, SEEDS + 1))
FRESH_CASES = [FRESH_START + i for i in range(FRESH)]


def replay(seed: int) -> str:
    chaos = f"OTTLA_OFFSET_SIM_CHAOS_MS={CHAOS_MS} " \
        if "OTTLA_OFFSET_SIM_CHAOS_MS" in os.environ else ""
    return (f"replay: {chaos}OTTLA_OFFSET_SIM_SEED={seed} .venv/bin/pytest "
            "tests/simulation/test_offset_commit_simulation.py -k fresh")


class Failure(NamedTuple):
    error: Exception
    report: str


def simulate(seed: int) -> tuple[OffsetCommitCluster, Failure | None]:
    """``workloads.simulate_offset_commits`` for ``CHAOS_MS``: the cluster and what broke
    (None if nothing)."""
    sim, error = simulate_offset_commits(seed, Knobs(chaos_ms=CHAOS_MS))
    if error is None:
        return sim, None
    return sim, Failure(error, f"seed {seed} at {sim.now} ms: {type(error).__name__}: "
                               f"{error}; {replay(seed)}\nThe last steps:\n{sim.history()}")


@pytest.mark.parametrize("seed", CASES + FRESH_CASES, ids=[f"seed {s}" for s in CASES]
                         + [f"fresh seed {s}" for s in FRESH_CASES])
def test_acknowledged_commits_survive_coordinator_failover(seed: int) -> None:
    _, failure = simulate(seed)
    if failure is not None:
        pytest.fail(failure.report, pytrace=False)


def test_the_faults_reach_failovers_cut_tails_and_retries() -> None:
    """A handful of seeds is enough for every fault the checker relies on to happen."""
    total = Stats()
    for seed in range(1, COVERAGE_SEEDS + 1):
        stats = simulate(seed)[0].stats
        for name, value in vars(stats).items():
            setattr(total, name, getattr(total, name) + value)
    for name, value in vars(total).items():
        assert value > 0, f"no run had {name}: {vars(total)}"


# --- the checker has teeth: a broken rule fails the first seeds ----------------------------


def assert_caught(seeds: int, invariant: Invariant) -> int:
    """The first of seeds 1..``seeds`` that fails does so by breaking ``invariant``; its
    number."""
    for seed in range(1, seeds + 1):
        failure = simulate(seed)[1]
        if failure is None:
            continue
        assert isinstance(failure.error, Violation), f"not a violation: {failure.report}"
        assert failure.error.invariant is invariant, (
            f"caught by {failure.error.invariant.name}, not by {invariant.name}: "
            f"{failure.report}")
        return seed
    raise AssertionError(f"none of the first {seeds} seeds caught it")


def answered_at_append(self: CoordinatorRuntime[Any], tp: tuple[str, int], operation: Any,
                       reply: Any, now_ms: int) -> None:
    """``CoordinatorRuntime.write`` broken (fault (c)): the reply goes once the records are
    appended, not once the high watermark passes them (the runner's tests use it too)."""
    context = self.active(tp)
    self.now_ms = max(self.now_ms, now_ms)

    def at_once(shard: Any, now: int) -> Any:
        try:
            result = operation(shard, now)
        except KafkaError as e:
            reply(e)
            raise
        reply(result.response)
        return result

    self._run(context, at_once, None)


def test_a_commit_acknowledged_before_it_is_durable_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34's fault (c): the coordinator answers a write (OffsetCommit) once its
    records are appended to the leader, not once the high watermark passes them. A leader
    change that cuts the uncommitted tail then loses an acknowledged commit."""
    monkeypatch.setattr(CoordinatorRuntime, "write", answered_at_append)
    assert_caught(10, Invariant.ACKED_VISIBLE)


def test_an_offset_fetch_that_reads_above_the_high_watermark_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OffsetFetch shows commits the high watermark has not passed: a leader change that
    cuts them takes back an offset a member was shown."""
    monkeypatch.setattr(OffsetMetadataManager, "_committed_view",
                        lambda self, group_id: self._by_group.get(group_id, {}))
    assert_caught(30, Invariant.NEVER_BACK)
