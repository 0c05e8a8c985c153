"""KRaft under simulated loss, delay, reordering, partitions and crashes, one test per seed.

Each seed is its own test, named by its real value: a failure reads
``test_raft_is_safe_under_faults_and_recovers_after_healing[3 voters, seed 17]`` and
replays alone with ``OTTLA_SIM_SEED=17 python -m pytest tests/simulation``.
``OTTLA_SIM_SEEDS`` sets how many seeds run (200 by default, half per quorum size).
"""

from __future__ import annotations

import os

import pytest

from tests.simulation.metadata_cluster import MetadataQuorum
from tests.simulation.raft_cluster import SimulatedQuorum

SEEDS = int(os.environ.get("OTTLA_SIM_SEEDS", "200"))
ONLY = os.environ.get("OTTLA_SIM_SEED")
CHAOS_MS = 15_000
RECOVERY_BOUND_MS = 10_000
COVERAGE_SEEDS = 12
"""How many seeds the coverage tests run to show the faults reach what they should."""


def cases() -> list[tuple[int, int]]:
    """(voters, seed): odd seeds for 3 voters, the next even ones for 5."""
    if ONLY is not None:
        return [(voters, int(ONLY)) for voters in (3, 5)]
    return [(voters, n * 2 + voters) for voters in (3, 5) for n in range(SEEDS // 2)]


CASES = cases()
IDS = [f"{voters} voters, seed {seed}" for voters, seed in CASES]


def replay(seed: int) -> str:
    return f"replay: OTTLA_SIM_SEED={seed} .venv/bin/python -m pytest tests/simulation"


def run_raft(seed: int, voters: int) -> SimulatedQuorum:
    """Nodes snapshot every 40 applied offsets and drop the log before it, so replicas
    that fall behind (partitioned, crashed) catch up through FetchSnapshot. Two
    observers (brokers) follow the log and must catch up too."""
    sim = SimulatedQuorum(seed, voters, observers=2)
    try:
        sim.run_until(CHAOS_MS, chaos=True)
        committed_before = sim.committed_end
        sim.heal()
        deadline = sim.now + RECOVERY_BOUND_MS
        while sim.now < deadline and (sim.leader() is None
                                      or sim.committed_end <= committed_before):
            sim.run_until(sim.now + 100, chaos=False)
        assert sim.leader() is not None, "no leader elected after the partition healed"
        assert sim.committed_end > committed_before, "nothing committed after healing"
        sim.run_until(sim.now + 3_000, chaos=False)
        # Every live node applied a prefix of the one committed log, and they agree.
        for n, applied in sim.applied.items():
            assert sim.digest(applied) == sim.digest(sim.committed[:len(applied)]), n
        caught_up = [n for n in sim.voter_ids if sim.applied_end[n] >= sim.committed_end - 64]
        assert len(caught_up) >= voters // 2 + 1
        for observer in sim.ids[voters:]:
            assert sim.applied_end[observer] >= committed_before, \
                f"observer {observer} did not catch up"
    except AssertionError as e:
        raise AssertionError(f"seed {seed} ({voters} voters): {e}; {replay(seed)}") from e
    return sim


def run_metadata(seed: int, voters: int) -> MetadataQuorum:
    """Real QuorumControllers on the voters and an observer: every node's image has the
    same digest at every sampled offset, claims start from the committed state and
    renouncing reverts to it; metadata transactions end, abort or are left open and
    aborted by the next leader."""
    sim = MetadataQuorum(seed, voters, observers=1)
    try:
        sim.run_until(CHAOS_MS, chaos=True)
        sim.heal()
        sim.run_until(sim.now + 5_000, chaos=False)
        assert sim.leader() is not None
        observer = sim.ids[-1]
        assert sim.applied_end[observer] >= sim.committed_end - 64
    except AssertionError as e:
        raise AssertionError(f"seed {seed} ({voters} voters): {e}; {replay(seed)}") from e
    return sim


@pytest.mark.parametrize(("voters", "seed"), CASES, ids=IDS)
def test_raft_is_safe_under_faults_and_recovers_after_healing(voters: int, seed: int) -> None:
    run_raft(seed, voters)


@pytest.mark.parametrize(("voters", "seed"), CASES, ids=IDS)
def test_controllers_agree_on_the_metadata_under_faults(voters: int, seed: int) -> None:
    sim = run_metadata(seed, voters)
    assert sim.digests, "no image was compared"


def test_the_faults_make_replicas_catch_up_through_snapshots() -> None:
    """A handful of seeds is enough for some replica to fall behind the log start."""
    loaded = sum(run_raft(n * 2 + 3, 3).snapshots_loaded for n in range(COVERAGE_SEEDS))
    assert loaded > 0, "no run exercised loading a snapshot"


def test_the_faults_reach_claims_renouncing_and_every_transaction_ending() -> None:
    claims = renounced_with_pending = loaded = 0
    transactions = {"begun": 0, "ended": 0, "aborted": 0, "dangling": 0}
    for n in range(COVERAGE_SEEDS):
        sim = run_metadata(n * 2 + 3, 3)
        claims += sim.claims
        renounced_with_pending += sim.renounced_with_pending
        loaded += sim.snapshots_loaded
        for kind, count in sim.transactions.items():
            transactions[kind] += count
    assert claims > COVERAGE_SEEDS and renounced_with_pending > 0 and loaded > 0, \
        (claims, renounced_with_pending, loaded)
    assert all(transactions.values()), transactions


def test_a_single_voter_commits_alone() -> None:
    sim = SimulatedQuorum(1, 1)
    sim.run_until(1_000, chaos=False)
    assert sim.leader() == 1
    assert len(sim.committed) > 10
