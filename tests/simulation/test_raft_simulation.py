"""KRaft under simulated loss, delay, reordering, partitions and crashes, many seeds."""

from __future__ import annotations

import os

import pytest

from tests.simulation.metadata_cluster import MetadataQuorum
from tests.simulation.raft_cluster import SimulatedQuorum

SEEDS = int(os.environ.get("OTTLA_SIM_SEEDS", "200"))
CHAOS_MS = 15_000
RECOVERY_BOUND_MS = 10_000


@pytest.mark.parametrize("voters", [3, 5])
def test_raft_is_safe_under_faults_and_recovers_after_healing(voters) -> None:
    """Nodes snapshot every 40 applied offsets and drop the log before it, so replicas
    that fall behind (partitioned, crashed) catch up through FetchSnapshot. Two
    observers (brokers) follow the log and must catch up too."""
    snapshots_loaded = 0
    for seed in range(SEEDS // 2):
        sim = SimulatedQuorum(seed * 2 + voters, voters, observers=2)
        try:
            sim.run_until(CHAOS_MS, chaos=True)
            committed_before = sim.committed_end
            sim.heal()
            healed_at = sim.now
            deadline = healed_at + RECOVERY_BOUND_MS
            while sim.now < deadline and (sim.leader() is None
                                          or sim.committed_end <= committed_before):
                sim.run_until(sim.now + 100, chaos=False)
            assert sim.leader() is not None, "no leader elected after the partition healed"
            assert sim.committed_end > committed_before, "nothing committed after healing"
            sim.run_until(sim.now + 3_000, chaos=False)
            # Every live node applied a prefix of the one committed log, and they agree.
            for n, applied in sim.applied.items():
                assert sim.digest(applied) == sim.digest(sim.committed[:len(applied)]), n
            caught_up = [n for n in sim.voter_ids
                         if sim.applied_end[n] >= sim.committed_end - 64]
            assert len(caught_up) >= voters // 2 + 1
            for observer in sim.ids[voters:]:
                assert sim.applied_end[observer] >= committed_before, \
                    f"observer {observer} did not catch up"
        except AssertionError as e:
            raise AssertionError(f"seed {seed * 2 + voters} ({voters} voters): {e}") from e
        snapshots_loaded += sim.snapshots_loaded
    assert snapshots_loaded > 0, "no run exercised loading a snapshot"


def test_a_single_voter_commits_alone() -> None:
    sim = SimulatedQuorum(1, 1)
    sim.run_until(1_000, chaos=False)
    assert sim.leader() == 1
    assert len(sim.committed) > 10


@pytest.mark.parametrize("voters", [3, 5])
def test_controllers_agree_on_the_metadata_under_faults(voters) -> None:
    """Real QuorumControllers on the voters and an observer: every node's image has the
    same digest at every sampled offset, claims start from the committed state and
    renouncing reverts to it; metadata transactions end, abort or are left open and
    aborted by the next leader. (Half of OTTLA_SIM_SEEDS for each quorum size.)"""
    claims = renounced_with_pending = loaded = compared = 0
    transactions = {"begun": 0, "ended": 0, "aborted": 0, "dangling": 0}
    for seed in range(SEEDS // 2):
        sim = MetadataQuorum(seed * 2 + voters, voters, observers=1)
        try:
            sim.run_until(CHAOS_MS, chaos=True)
            sim.heal()
            sim.run_until(sim.now + 5_000, chaos=False)
            assert sim.leader() is not None
            observer = sim.ids[-1]
            assert sim.applied_end[observer] >= sim.committed_end - 64
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from e
        claims += sim.claims
        renounced_with_pending += sim.renounced_with_pending
        loaded += sim.snapshots_loaded
        compared += len(sim.digests)
        for kind, count in sim.transactions.items():
            transactions[kind] += count
    assert claims > SEEDS // 2 and renounced_with_pending > 0 and loaded > 0, \
        (claims, renounced_with_pending, loaded)
    assert all(transactions.values()), transactions
    assert compared > 10 * SEEDS, compared
