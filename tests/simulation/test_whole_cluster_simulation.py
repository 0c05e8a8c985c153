"""The whole cluster under one seed's faults: three controllers on the KRaft quorum and
three brokers replicating a partition through them (issue 34), one test per seed.

Replay a failing seed alone with::

    .venv/bin/python -m tests.simulation --workload cluster --seed <n> --trace

or ``OTTLA_SIM_SEED=<n> .venv/bin/pytest tests/simulation/test_whole_cluster_simulation.py
-k fresh``. ``whole_cluster`` says what runs (the real Raft replica, QuorumController,
OffsetControl, MetadataLoader, PartitionState, and the CoordinatorRuntime with its
GroupCoordinatorShards) and what is modelled. The seeds
1..``OTTLA_SIM_SEEDS`` (150 by default) run every time, and ``OTTLA_SIM_FRESH_SEEDS`` (30)
fresh ones from a start drawn each run; ``OTTLA_SIM_CHAOS_MS`` sets when the faults stop
(20 s of simulated time by default).
"""

from __future__ import annotations

import enum
import os

import pytest

from ottla.broker.replication.partition_state import PartitionState
from ottla.coordinator.group.offset_metadata_manager import OffsetMetadataManager
from ottla.coordinator.runtime import CoordinatorRuntime
from tests.simulation import offset_commit_cluster as oc
from tests.simulation import whole_cluster
from tests.simulation.fresh import fresh_start
from tests.simulation.partition_cluster import AlterPartitionAnswer, Invariant, Stats
from tests.simulation.test_offset_commit_simulation import answered_at_append
from tests.simulation.whole_cluster import (
    FAULT_KINDS,
    ClusterInvariant,
    ProducerIdsAllocated,
    WholeCluster,
)
from tests.simulation.workloads import CLUSTER_CHAOS_MS, Knobs, simulate_cluster

SEEDS = int(os.environ.get("OTTLA_SIM_SEEDS", "150"))
ONLY = os.environ.get("OTTLA_SIM_SEED")
FRESH = int(os.environ.get("OTTLA_SIM_FRESH_SEEDS", "1" if ONLY is not None else "30"))
FRESH_START = fresh_start(ONLY)
CHAOS_MS = int(os.environ.get("OTTLA_SIM_CHAOS_MS", str(CLUSTER_CHAOS_MS)))
COVERAGE_SEEDS = 20

CASES = [int(ONLY)] if ONLY is not None else list(range(1, SEEDS + 1))
FRESH_CASES = [FRESH_START + i for i in range(FRESH)]


def run(seed: int) -> WholeCluster:
    """``workloads.simulate_cluster``: a broken rule raised with the seed, the replay
    command and the last steps; a failure of the model propagates as it is."""
    sim, error = simulate_cluster(seed, Knobs(chaos_ms=CHAOS_MS))
    if isinstance(error, AssertionError):
        raise AssertionError(
            f"seed {seed} at {sim.now} ms: {error}; replay: .venv/bin/python -m "
            f"tests.simulation --workload cluster --seed {seed} --chaos-ms {CHAOS_MS} --trace"
            f"\nThe last steps:\n{sim.history()}") from error
    if error is not None:
        raise error
    return sim


@pytest.mark.parametrize("seed", CASES + FRESH_CASES, ids=[f"seed {s}" for s in CASES]
                         + [f"fresh seed {s}" for s in FRESH_CASES])
def test_the_cluster_keeps_every_acknowledged_write_and_converges_after_healing(
        seed: int) -> None:
    run(seed)


def test_the_faults_reach_every_part_of_the_cluster() -> None:
    """A handful of seeds crash controllers and brokers, cut links, and through them move
    the partition's leadership and ISR by the quorum's committed records, the group
    coordinator with the leadership, and brokers restarted ask for new producer id
    blocks."""
    total = Stats()
    injected: dict[str, int] = {}
    offsets: dict[str, int] = {}
    claims = loads = blocks = issued = 0
    for seed in range(1, COVERAGE_SEEDS + 1):
        sim = run(seed)
        for name, value in vars(sim.part.stats).items():
            setattr(total, name, getattr(total, name) + value)
        for kind, count in sim.injected.items():
            injected[kind] = injected.get(kind, 0) + count
        claims += sim.quorum.claims
        for name, value in vars(sim.offsets.stats).items():
            offsets[name] = offsets.get(name, 0) + value
        loads += sim.offsets.loads
        blocks += sim.part.blocks_allocated
        issued += len(sim.part.issued)
    assert set(injected) == set(FAULT_KINDS), injected
    assert claims > COVERAGE_SEEDS, "the controllers never failed over"
    assert loads > COVERAGE_SEEDS, "the group coordinator never moved"
    assert blocks > 3 * COVERAGE_SEEDS and issued > 100 * COVERAGE_SEEDS, (blocks, issued)
    for name in ("commits_acked", "fetches", "crashes", "load_in_progress", "not_coordinator"):
        assert offsets[name] > 0, f"no run had {name}: {offsets}"
    counts = vars(total)
    for name in ("acked", "leader_changes", "truncations", "isr_shrinks", "isr_expands",
                 "fenced", "crashes", "alter_refused", "alter_timed_out", "consumer_reads"):
        assert counts[name] > 0, f"no run had {name}: {counts}"


def assert_caught(seeds: int, *invariants: enum.Enum) -> None:
    """The first of seeds 1..``seeds`` that fails breaks one of ``invariants`` (the
    partition's or the offset commits'): not the convergence bound, another rule or a
    crash of the model (those propagate as they are)."""
    for seed in range(1, seeds + 1):
        try:
            run(seed)
        except AssertionError as e:
            invariant = getattr(e.__cause__, "invariant", None)
            if not isinstance(invariant, enum.Enum):
                raise
            assert invariant in invariants, (
                f"caught by {invariant.name}, not by "
                f"{' or '.join(i.name for i in invariants)}: {e}")
            return
    raise AssertionError(f"none of the first {seeds} seeds caught it")


def test_a_controller_answering_before_its_records_commit_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The active controller answers an AlterPartition as soon as it has appended the ISR
    change: the leader counts its high watermark over the new, smaller ISR while the
    quorum has not committed it, and a failover can lose it."""
    monkeypatch.setattr(whole_cluster, "EARLY_ANSWERS", (AlterPartitionAnswer,))
    assert_caught(30, Invariant.HW_OVER_ISR, Invariant.ISR_HAS_ACKED)


def test_a_producer_id_block_answered_before_it_commits_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The active controller answers AllocateProducerIds once its ProducerIdsRecord is
    appended: a failover that loses the record gives the next controller the same
    block for another broker, and a producer id is handed out twice."""
    monkeypatch.setattr(whole_cluster, "EARLY_ANSWERS", (ProducerIdsAllocated,))
    assert_caught(60, ClusterInvariant.UNIQUE_PRODUCER_IDS)


def test_a_high_watermark_that_ignores_the_isr_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34's fault (a) in the whole cluster: the leader's high watermark at its log
    end, whatever its followers have. The leader then serves below it what no follower
    has, which the next leader lacks."""

    def at_the_log_end(self: PartitionState) -> bool:
        if self.log_end_offset > self.high_watermark:
            self.high_watermark = self.log_end_offset
            return True
        return False

    monkeypatch.setattr(PartitionState, "_maybe_increment_high_watermark", at_the_log_end)
    assert_caught(30, Invariant.ISR_HAS_ACKED, Invariant.ACKED_IN_LEADER, Invariant.ONE_HISTORY)


def test_a_commit_acknowledged_before_it_is_durable_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34's fault (c) in the whole cluster: the coordinator answers an OffsetCommit
    once appended to the leader; a leader elected without that tail loses it, and the
    final log lacks a commit its member was told was made."""
    monkeypatch.setattr(CoordinatorRuntime, "write", answered_at_append)
    assert_caught(10, oc.Invariant.ACKED_VISIBLE, oc.Invariant.QUIET)


def test_an_offset_fetch_that_reads_above_the_high_watermark_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OffsetFetch shows commits the leader's high watermark has not passed: a new leader
    without them takes back an offset a member was shown."""
    monkeypatch.setattr(OffsetMetadataManager, "_committed_view",
                        lambda self, group_id: self._by_group.get(group_id, {}))
    assert_caught(60, oc.Invariant.NEVER_BACK)
