"""One partition's replication over three brokers and a controller under simulated loss,
delay, reordering, cut links, crashes and fencing, one test per seed (issue 18).

Replay a failing seed (fixed or fresh) alone with::

    OTTLA_SIM_SEED=<n> .venv/bin/pytest tests/simulation/test_partition_replication.py -k fresh

The brokers run the real ``PartitionState`` and leader-epoch functions, the controller is
a real ``QuorumController``; ``partition_cluster`` says what is real and what is
modelled, and which invariants are checked as a run goes. Each seed is its own test,
named by its value: a failure reads
``test_replication_is_safe_under_faults_and_converges_after_healing[seed 17]``, names the
broken ``Invariant``, ends with the last steps of the run and the replay command.

The seeds 1..``OTTLA_SIM_SEEDS`` (250 by default) run every time; beside them
``OTTLA_SIM_FRESH_SEEDS`` fresh ones (100 by default), from a
start drawn at random each run (ids ``fresh seed <n>``), explore what the fixed ones do
not. ``OTTLA_SIM_SEED=<n>`` runs seed ``n`` instead of the fixed seeds and starts the fresh
ones at ``n`` (one of them, unless ``OTTLA_SIM_FRESH_SEEDS`` says more).
``OTTLA_SIM_CHAOS_MS`` sets how long each seed is under faults (20 s of simulated time by
default)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from ottla.broker.replication.partition_state import LeaderAndIsr, PartitionState
from tests.simulation import partition_cluster
from tests.simulation.fresh import fresh_start
from tests.simulation.partition_cluster import (
    Invariant,
    PartitionCluster,
    Stats,
    Violation,
)
from tests.simulation.workloads import PARTITION_CHAOS_MS, Knobs, simulate_partition

SEEDS = int(os.environ.get("OTTLA_SIM_SEEDS", "250"))
ONLY = os.environ.get("OTTLA_SIM_SEED")
FRESH = int(os.environ.get("OTTLA_SIM_FRESH_SEEDS", "1" if ONLY is not None else "100"))
FRESH_START = fresh_start(ONLY)
"""The first fresh seed: ``OTTLA_SIM_SEED``, or drawn anew each run, far above the fixed."""
CHAOS_MS = int(os.environ.get("OTTLA_SIM_CHAOS_MS", str(PARTITION_CHAOS_MS)))
"""Simulated time under faults (``OTTLA_SIM_CHAOS_MS``)."""
COVERAGE_SEEDS = 20
"""How many seeds the coverage test runs to show the faults reach what they should."""

CASES = [int(ONLY)] if ONLY is not None else list(range(1, SEEDS + 1))
FRESH_CASES = [FRESH_START + i for i in range(FRESH)]


def replay(seed: int) -> str:
    chaos = f"OTTLA_SIM_CHAOS_MS={CHAOS_MS} " if "OTTLA_SIM_CHAOS_MS" in os.environ else ""
    return (f"replay: {chaos}OTTLA_SIM_SEED={seed} .venv/bin/pytest "
            "tests/simulation/test_partition_replication.py -k fresh")


def run(seed: int) -> PartitionCluster:
    """``workloads.simulate_partition``: a broken rule raised with the seed, the replay
    command and the last steps; a failure of the model propagates as it is."""
    sim, error = simulate_partition(seed, Knobs(chaos_ms=CHAOS_MS))
    if isinstance(error, AssertionError):
        raise AssertionError(f"seed {seed} at {sim.now} ms: {error}; {replay(seed)}\n"
                             f"The last steps:\n{sim.history()}") from error
    if error is not None:
        raise error
    return sim


@pytest.mark.parametrize("seed", CASES + FRESH_CASES, ids=[f"seed {s}" for s in CASES]
                         + [f"fresh seed {s}" for s in FRESH_CASES])
def test_replication_is_safe_under_faults_and_converges_after_healing(seed: int) -> None:
    run(seed)


def test_the_faults_reach_elections_truncations_and_isr_changes() -> None:
    """A handful of seeds is enough for every fault the checker relies on to happen."""
    total = Stats()
    for seed in range(1, COVERAGE_SEEDS + 1):
        stats = run(seed).stats
        for name, value in vars(stats).items():
            setattr(total, name, getattr(total, name) + value)
    counts = vars(total)
    for name in ("acked", "leader_changes", "leaderless", "truncations", "diverging",
                 "isr_shrinks", "isr_expands", "fenced", "crashes", "restarts_with_checkpoint",
                 "alter_refused", "consumer_reads", "produce_refused"):
        assert counts[name] > 0, f"no run had {name}: {counts}"


# --- the checker has teeth: a broken rule fails some of the first seeds ------------------


def assert_caught(seeds: int, *invariants: Invariant) -> None:
    """The first of seeds 1..``seeds`` that fails does so by breaking one of
    ``invariants``, the rules the mutation breaks: not by the convergence bound, another
    rule or a crash of the model (those propagate as they are)."""
    for seed in range(1, seeds + 1):
        try:
            run(seed)
        except AssertionError as e:
            violation = e.__cause__
            if not isinstance(violation, Violation):
                raise
            assert violation.invariant in invariants, (
                f"caught by {violation.invariant.name}, not by "
                f"{' or '.join(i.name for i in invariants)}: {e}")
            return
    raise AssertionError(f"none of the first {seeds} seeds caught it")


def test_a_high_watermark_that_ignores_the_isr_is_caught(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A leader's high watermark at its log end, whatever its followers have: it
    acknowledges writes only it holds, which a leader elected after it lacks, or which no
    member of the ISR the controller commits when it goes has."""

    def at_the_log_end(self: PartitionState) -> bool:
        if self.log_end_offset > self.high_watermark:
            self.high_watermark = self.log_end_offset
            return True
        return False

    monkeypatch.setattr(PartitionState, "_maybe_increment_high_watermark", at_the_log_end)
    assert_caught(50, Invariant.ISR_HAS_ACKED, Invariant.ACKED_IN_LEADER)


def test_a_follower_that_keeps_its_diverged_records_is_caught(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The leader never answers a fetch with its diverging epoch (KIP-101/KIP-320's rule
    gone), so a follower keeps the records an old leader wrote past what the new one has
    and appends the new leader's after them: two histories under one high watermark."""
    monkeypatch.setattr(partition_cluster, "diverging_epoch", lambda *args, **kw: None)
    assert_caught(20, Invariant.ONE_HISTORY, Invariant.COMMITTED_KEPT,
                  Invariant.ACKED_IN_LEADER)


def test_a_follower_that_does_not_truncate_on_divergence_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Told where the leader's epoch ends, the follower cuts nothing (its truncation
    offset is its own log end): it asks again forever, never catches up, and the ISR
    never grows back after healing."""
    monkeypatch.setattr(partition_cluster, "truncation_offset",
                        lambda log, epoch, end_offset, start, log_end: log_end)
    assert_caught(20, Invariant.CONVERGES)


def test_a_leader_going_back_to_an_older_partition_epoch_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata older than the partition epoch an AlterPartition answer gave taken as it
    comes (the ISR the controller has since grown goes back to the smaller one): the
    leader counts its high watermark over fewer replicas than the controller's ISR."""
    update = PartitionState.update

    def takes_older(self: PartitionState, assignment: LeaderAndIsr, now_ms: int) -> bool:
        if assignment.partition_epoch < self.assignment.partition_epoch:
            self.assignment = dataclasses.replace(
                self.assignment, partition_epoch=assignment.partition_epoch - 1)
        return update(self, assignment, now_ms)

    monkeypatch.setattr(PartitionState, "update", takes_older)
    assert_caught(150, Invariant.HW_OVER_ISR)


def test_clearing_an_isr_change_whose_outcome_is_unknown_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The AlterPartitionManager answering every failure as "not made": the leader stops
    counting a member the controller may have added."""
    monkeypatch.setattr(partition_cluster, "KEEP_PENDING_ON_UNKNOWN_OUTCOME", False)
    assert_caught(200, Invariant.HW_OVER_ISR)
