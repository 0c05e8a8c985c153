"""KRaft under simulated loss, delay, reordering, partitions and crashes, one test per seed.

Replay a failing seed (fixed or fresh, either quorum size) alone with::

    OTTLA_SIM_SEED=<n> .venv/bin/pytest tests/simulation/test_raft_simulation.py -k fresh

Each seed is its own test, named by its real value: a failure reads
``test_raft_is_safe_under_faults_and_recovers_after_healing[3 voters, seed 17]``, names the
broken invariant and ends with the replay command. ``OTTLA_SIM_SEEDS`` sets how many fixed
seeds run (100 by default, CI's time budget; half per quorum size); beside them
``OTTLA_SIM_FRESH_SEEDS`` fresh ones (``DEFAULT_FRESH`` by default, the quorum sizes in
turn), from a start drawn at random each run (ids ``fresh: 3 voters, seed <n>``), explore
what the fixed ones do not. ``OTTLA_SIM_SEED=<n>`` runs seed ``n`` with 3 and 5 voters
instead of the fixed seeds and starts the fresh ones at ``n`` (one seed, both sizes,
unless ``OTTLA_SIM_FRESH_SEEDS`` says more).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import Enum
from pathlib import Path

import pytest

from ottla.controller.offset_control import OffsetControl
from ottla.metadata import records as meta
from ottla.raft.file_log import FileRaftLog
from ottla.raft.messages import Entry, Outgoing
from ottla.raft.quorum import RaftReplica, Role
from tests.simulation import raft_cluster
from tests.simulation.fresh import fresh_start
from tests.simulation.metadata_cluster import MetadataInvariant, MetadataQuorum
from tests.simulation.raft_cluster import (
    Invariant,
    SimulatedDisk,
    SimulatedQuorum,
    Violation,
    encoded,
)
from tests.simulation.workloads import simulate_metadata, simulate_raft

DEFAULT_FRESH = 40
SEEDS = int(os.environ.get("OTTLA_SIM_SEEDS", "100"))
ONLY = os.environ.get("OTTLA_SIM_SEED")
FRESH = int(os.environ.get("OTTLA_SIM_FRESH_SEEDS",
                           "1" if ONLY is not None else str(DEFAULT_FRESH)))
FRESH_START = fresh_start(ONLY)
"""The first fresh seed: ``OTTLA_SIM_SEED``, or drawn anew each run, far above the fixed."""
COVERAGE_SEEDS = 12
"""How many seeds the coverage tests run to show the faults reach what they should."""


def cases() -> list[tuple[int, int]]:
    """(voters, seed): odd seeds for 3 voters, the next even ones for 5."""
    if ONLY is not None:
        return [(voters, int(ONLY)) for voters in (3, 5)]
    return [(voters, n * 2 + voters) for voters in (3, 5) for n in range(SEEDS // 2)]


def fresh_cases() -> list[tuple[int, int]]:
    """(voters, seed) from ``FRESH_START``: both sizes for a replayed seed, else the
    sizes in turn."""
    if ONLY is not None:
        return [(voters, FRESH_START + i) for i in range(FRESH) for voters in (3, 5)]
    return [((3, 5)[i % 2], FRESH_START + i) for i in range(FRESH)]


CASES = cases() + fresh_cases()
IDS = [f"{voters} voters, seed {seed}" for voters, seed in cases()] + \
    [f"fresh: {voters} voters, seed {seed}" for voters, seed in fresh_cases()]


def replay(seed: int) -> str:
    return (f"replay: OTTLA_SIM_SEED={seed} .venv/bin/pytest "
            "tests/simulation/test_raft_simulation.py -k fresh")


def failed(seed: int, voters: int, e: Exception) -> AssertionError:
    """``e`` (a ``Violation`` names its invariant) with the seed and its replay."""
    return AssertionError(f"seed {seed} ({voters} voters): {type(e).__name__}: {e}; "
                          f"{replay(seed)}")


def run_raft(seed: int, voters: int) -> SimulatedQuorum:
    """``workloads.simulate_raft``; a failure raised with its seed and replay command."""
    sim, error = simulate_raft(seed, voters)
    if error is not None:
        raise failed(seed, voters, error) from error
    return sim


def run_metadata(seed: int, voters: int) -> MetadataQuorum:
    """``workloads.simulate_metadata``; a failure raised with its seed and replay command."""
    sim, error = simulate_metadata(seed, voters)
    if error is not None:
        raise failed(seed, voters, error) from error
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


@pytest.mark.parametrize(("torn", "cut", "zeros"), [
    (0, 5, False), (1, 40, False), (1, 120, True), (2, 30, True), (2, 61, False)])
def test_a_torn_tail_is_dropped_as_the_file_log_drops_it(tmp_path: Path, torn: int, cut: int,
                                                        zeros: bool) -> None:
    """The simulated disk keeps of a crash's torn tail what the real ``FileRaftLog``
    keeps when it opens a segment holding the same bytes: the whole batches before the
    torn one (``cut`` bytes of it written, then zeros to its length or nothing)."""
    disk = SimulatedDisk()
    flushed = [Entry(1, "a", 1), Entry(1, "b" * 300, 2)]
    disk.append(flushed)
    disk.flush()
    disk.append([Entry(2, "c", 1), Entry(2, "d" * 100, 3), Entry(2, "e", 1)])
    tail = disk.unpersisted()
    batch = encoded(*tail[torn])
    assert cut < len(batch)
    written = b"".join(encoded(*t) for t in tail[:torn]) + batch[:cut] + \
        (bytes(len(batch) - cut) if zeros else b"")
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    (directory / f"{0:020d}.log").write_bytes(
        encoded(0, flushed[0]) + encoded(1, flushed[1]) + written)
    real = FileRaftLog(str(directory), 1, [1, 2, 3], meta)
    try:
        assert disk.lose_unflushed(written) == torn
        assert disk.end_offset == real.end_offset == tail[torn][0]
    finally:
        real.close()


# --- the checker has teeth: a broken rule fails some of the first seeds ------------------


def assert_caught(run: Callable[[int, int], object], tries: int, invariant: Enum) -> None:
    """The first of the first ``tries`` three-voter seeds of the fixed range that fails
    does so by breaking ``invariant``, the rule the mutation breaks: not by the recovery
    bound, another rule or an exception of the replicas (those propagate as they are)."""
    for n in range(tries):
        try:
            run(n * 2 + 3, 3)
        except AssertionError as e:
            violation = e.__cause__
            if not isinstance(violation, Violation):
                raise
            assert violation.invariant is invariant, (
                f"caught by {violation.invariant.name}, not by {invariant.name}: {e}")
            return
    raise AssertionError(f"none of the first {tries} seeds caught it")


def test_a_candidate_that_forgets_its_own_vote_is_caught(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A candidate free to vote again in its own epoch: two candidates can both win it."""
    become_candidate = RaftReplica._become_candidate

    def forgets(self: RaftReplica, now_ms: int) -> list[Outgoing]:
        out = become_candidate(self, now_ms)
        if self.role is Role.CANDIDATE:
            self.voted_for = None
        return out

    monkeypatch.setattr(RaftReplica, "_become_candidate", forgets)
    assert_caught(run_raft, 30, Invariant.ONE_LEADER_PER_EPOCH)


def test_a_controller_that_renounces_without_reverting_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller losing its leadership keeps the records it replayed but that never
    committed: its state is no longer its node's committed image."""

    def keeps_uncommitted(self: OffsetControl) -> None:
        self.claim_epoch = -1
        self.replayed_end = self.committed_end

    monkeypatch.setattr(OffsetControl, "renounce", keeps_uncommitted)
    assert_caught(run_metadata, 12, MetadataInvariant.CONTROLLER_IS_COMMITTED)


def test_a_voter_whose_fsync_lies_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Voter 1's flushes report success and persist nothing: it acknowledges entries a
    crash would lose, so the leader commits entries only one disk holds."""
    monkeypatch.setattr(raft_cluster, "FSYNC_LIES_ON", 1)
    assert_caught(run_raft, 3, Invariant.COMMITTED_IS_DURABLE)


def test_a_voter_whose_fsync_lies_loses_committed_entries(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Unchecked, the lie costs committed entries: once voter 1 crashes and loses what it
    acknowledged, a leader elected without them overwrites them (no Raft survives it)."""
    monkeypatch.setattr(raft_cluster, "FSYNC_LIES_ON", 1)
    monkeypatch.setattr(SimulatedQuorum, "check_durable", lambda *_: None)
    assert_caught(run_raft, 20, Invariant.ONE_COMMITTED_LOG)
