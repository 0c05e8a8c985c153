"""Hand-driven Raft schedules that random faults rarely produce."""

from __future__ import annotations

import random
from collections.abc import Callable

from ottla.protocol.errors import ErrorCode
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Entry, FetchResponse, Outgoing
from ottla.raft.quorum import RaftConfig, RaftReplica
from tests.simulation.raft_cluster import SimulatedDisk


class Cluster:
    """Replicas whose messages are delivered only between nodes we let talk."""

    def __init__(self, n: int, config: RaftConfig, log_factory: Callable[[], MemoryLog]
                 = MemoryLog) -> None:
        self.config = config
        self.now = 0
        self.logs = {i: log_factory() for i in range(1, n + 1)}
        self.manual_flush: set[int] = set()
        """Nodes whose logs are flushed only by ``flush``; the others after every step."""
        self.durable = {i: (0, None) for i in self.logs}
        self.nodes = {i: self._replica(i) for i in self.logs}
        self.queue: list[tuple[int, Outgoing]] = []
        self.applied: dict[int, list[Entry]] = {i: [] for i in self.logs}

    def _replica(self, i: int) -> RaftReplica:
        epoch, voted = self.durable[i]
        return RaftReplica(i, set(self.logs), self.logs[i], random.Random(i), self.config,
                           epoch=epoch, voted_for=voted)

    def restart(self, i: int) -> None:
        self.nodes[i] = self._replica(i)
        self.applied[i] = []

    def flush(self, i: int) -> None:
        self.logs[i].flush()
        self._after(i, self.nodes[i].tick(self.now))

    def _after(self, i: int, out: list[Outgoing]) -> None:
        if i not in self.manual_flush:
            self.logs[i].flush()
        r = self.nodes[i]
        self.durable[i] = (r.epoch, r.voted_for)
        committed = r.take_committed()
        if committed is not None:
            self.applied[i] = self.applied[i][:committed.base_offset] + committed.entries
        self.queue += [(i, o) for o in out]
        write = r.take_snapshot_write()
        if write is not None:  # written at once: these schedules are not about its timing
            self._after(i, r.snapshot_written(write, self.now))

    def pump(self, talking: set[int],
             drop: Callable[[int, Outgoing], bool] = lambda s, o: False) -> None:
        """Deliver queued messages among ``talking`` until none are left; others vanish."""
        while self.queue:
            source, out = self.queue.pop(0)
            if source in talking and out.destination in talking and not drop(source, out):
                dest = out.destination
                self._after(dest, self.nodes[dest].handle(source, out.message, self.now))

    def run(self, ticking: set[int], talking: set[int], until: Callable[[], bool],
            drop: Callable[[int, Outgoing], bool] = lambda s, o: False) -> None:
        for _ in range(3000):
            if until():
                return
            self.now += 10
            for i in sorted(ticking):
                self._after(i, self.nodes[i].tick(self.now))
            self.pump(talking, drop)
        raise AssertionError("the schedule did not reach its goal")

    def propose(self, i: int, payload: str) -> None:
        assert self.nodes[i].propose(payload, self.now) is not None
        self._after(i, self.nodes[i].tick(self.now))


def test_a_leader_does_not_commit_an_old_epoch_entry_by_counting_replicas() -> None:
    """Raft's Figure 8 in KRaft terms: entry X of epoch 1 reaches a majority only under
    the leader of epoch 3; had that leader counted it committed, the leader of epoch 4
    (whose log is newer but lacks X) would overwrite a committed entry."""
    c = Cluster(5, RaftConfig(max_fetch_entries=1))
    everyone = set(c.nodes)
    # Epoch 1: node 1 leads, everyone holds its leader-change entry (offset 0).
    c.run({1}, everyone, lambda: c.nodes[1].is_leader)
    c.run(everyone - {1}, everyone, lambda: all(log.end_offset == 1 for log in c.logs.values()))
    # X at offset 1 reaches node 2 only.
    c.propose(1, "X")
    c.run({2}, {1, 2}, lambda: c.logs[2].end_offset == 2)
    # Node 1 is gone; node 5 leads epoch 2 with 3 and 4 but keeps its entry to itself.
    c.now += 5000
    c.run({5}, {3, 4, 5}, lambda: c.nodes[5].is_leader,
          drop=lambda s, o: isinstance(o.message, FetchResponse))
    assert c.logs[5].entries[1].epoch == 2 and c.logs[3].end_offset == 1
    # Node 5 is gone; node 1 comes back and leads epoch 3 with 2 and 3.
    c.restart(1)
    c.now += 5000
    c.run({1}, {1, 2, 3}, lambda: c.nodes[1].is_leader and c.nodes[1].epoch == 3,
          drop=lambda s, o: isinstance(o.message, FetchResponse))
    assert c.logs[3].end_offset == 1
    # Node 3 copies X; then 2 and 3 fetch at offset 2 (X acknowledged by a majority) but
    # the answers carrying epoch 3's entry are lost.
    lost = {"n": 0}

    def lose_epoch_3(source: int, out: Outgoing) -> bool:
        msg = out.message
        if isinstance(msg, FetchResponse) and msg.entries and msg.entries[0].epoch == 3:
            lost["n"] += 1
            return True
        return False

    c.run({2, 3}, {1, 2, 3}, lambda: c.logs[3].end_offset == 2 and lost["n"] >= 2,
          drop=lose_epoch_3)
    assert c.logs[2].end_offset == c.logs[3].end_offset == 2
    assert c.nodes[1].high_watermark < 2, "X (epoch 1) was committed by counting replicas"
    # Node 1 is gone; node 5 leads epoch 4 with 2, 3 and 4 and truncates X away.
    c.now += 5000
    c.run({5}, {2, 3, 4, 5}, lambda: c.nodes[5].is_leader and c.nodes[5].epoch >= 4)
    c.run({2, 3, 4}, {2, 3, 4, 5},
          lambda: all(c.logs[i].end_offset == c.logs[5].end_offset for i in (2, 3, 4))
          and c.nodes[5].high_watermark == c.logs[5].end_offset)
    assert [e.payload for e in c.logs[2].entries[:2]] == [None, None]  # X is gone
    # Nothing any node applied was later replaced.
    final = c.logs[5].entries
    for node, applied in c.applied.items():
        assert applied == final[:len(applied)], f"node {node} applied {applied}"


def test_a_leader_counts_only_its_flushed_entries_toward_the_high_watermark() -> None:
    """X reaches the leader's page cache and one follower's disk: one durable copy of
    three, so not committed. The leader crashes before its fsync and loses X; node 3,
    which never had it, wins with the leader's vote and overwrites it. Had the leader
    counted its unflushed X, X would have been committed, applied, then lost."""
    c = Cluster(3, RaftConfig(), log_factory=SimulatedDisk)
    everyone = set(c.nodes)
    c.run({1}, everyone, lambda: c.nodes[1].is_leader)
    c.run(everyone - {1}, everyone,
          lambda: all(c.nodes[i].high_watermark == 1 for i in everyone))
    c.manual_flush.add(1)
    c.propose(1, "X")
    c.run({2}, {1, 2}, lambda: c.nodes[1]._replica_end[2] == 2)  # 2 fetched at 2: has X
    assert c.logs[2].flushed_end_offset == 2 and c.logs[1].flushed_end_offset == 1
    assert c.nodes[1].high_watermark == 1, "X was committed with one durable copy"
    # Node 1 crashes before its fsync: X is gone from its log.
    c.logs[1].lose_unflushed()
    c.manual_flush.discard(1)
    c.restart(1)
    c.now += 5000
    c.run({3}, {1, 3}, lambda: c.nodes[3].is_leader)
    c.run({1, 2}, everyone,
          lambda: all(c.nodes[i].high_watermark == c.logs[3].end_offset for i in everyone))
    assert [e.payload for e in c.logs[2].entries] == [None, None]  # X was never committed
    final = c.logs[3].entries
    for node, applied in c.applied.items():
        assert applied == final[:len(applied)], f"node {node} applied {applied}"


def test_late_answers_do_not_undo_what_a_follower_fetched_since() -> None:
    """A Fetch answered after the follower moved on (it timed out and fetched again)
    must not truncate it or send it to a snapshot, and only the snapshot it asked for,
    with its log unchanged since, is installed."""
    from ottla.raft.messages import (
        BeginQuorumEpoch,
        FetchRequest,
        FetchSnapshotResponse,
        Snapshot,
    )

    log = MemoryLog()
    follower = RaftReplica(2, {1, 2, 3}, log, random.Random(1), RaftConfig())
    follower.start(0)
    sent = follower.handle(1, BeginQuorumEpoch(1, 1), 10)
    assert [type(o.message) for o in sent] == [FetchRequest]
    entries = tuple(Entry(1, f"e{i}") for i in range(5))
    follower.handle(1, FetchResponse(1, 1, 0, entries, base_offset=0), 20)
    assert log.end_offset == 5
    late = [FetchResponse(1, 1, 3, base_offset=0, snapshot_end_offset=3, snapshot_epoch=1),
            FetchResponse(1, 1, 3, base_offset=0, diverging_epoch=0, diverging_end_offset=0)]
    for answer in late:
        assert follower.handle(1, answer, 30) == []
    assert log.read(0, 10) == entries
    stray = FetchSnapshotResponse(1, 1, Snapshot(40, 1, "not asked for"))
    follower.handle(1, stray, 40)
    assert (log.start_offset, log.end_offset) == (0, 5)


def test_snapshots_are_adopted_once_written_and_an_install_holds_the_follower() -> None:
    """The driver writes a snapshot off its loop and says when it is durable; till then
    the log is unchanged. An install decided while a take is being written waits for
    it; while an install is under way the follower neither fetches, appends a late
    answer nor campaigns (a new leader would append to the log being replaced)."""
    from ottla.raft.messages import (
        BeginQuorumEpoch,
        FetchRequest,
        FetchSnapshotRequest,
        FetchSnapshotResponse,
        Snapshot,
        SnapshotWrite,
        UpdateVoterRequest,
        UpdateVoterResponse,
    )
    from ottla.raft.quorum import Role

    log = MemoryLog()
    follower = RaftReplica(2, {1, 2, 3}, log, random.Random(1), RaftConfig())
    follower.start(0)
    follower.handle(1, BeginQuorumEpoch(1, 1), 10)
    entries = tuple(Entry(1, f"e{i}") for i in range(5))
    follower.handle(1, FetchResponse(1, 1, 5, entries, base_offset=0), 20)
    assert follower.take_committed() is not None
    assert follower.create_snapshot(3, "state at 3")
    assert not follower.create_snapshot(4, "state at 4")  # one at a time
    take = follower.take_snapshot_write()
    assert take == SnapshotWrite(Snapshot(3, 1, "state at 3"), install=False)
    assert follower.take_snapshot_write() is None
    assert log.start_offset == 0 and log.snapshot is None

    sent = follower.handle(1, FetchResponse(1, 1, 5, base_offset=5, snapshot_end_offset=40,
                                            snapshot_epoch=1), 30)
    assert [type(o.message) for o in sent] == [FetchSnapshotRequest]
    leader_snapshot = Snapshot(40, 1, "leader state")
    assert follower.handle(1, FetchSnapshotResponse(1, 1, leader_snapshot), 40) == []
    assert follower.take_snapshot_write() is None  # the take is still being written
    assert follower.snapshot_written(take, 50) == []
    assert (log.start_offset, log.end_offset) == (3, 5)
    install = follower.take_snapshot_write()
    assert install == SnapshotWrite(leader_snapshot, install=True)

    # Long past the fetch timeout: no Fetch, no election, only (as Kafka's
    # pollFollowerAsVoter) the UpdateRaftVoter it owes this leader at kraft.version 0.
    assert [type(o.message) for o in follower.tick(5000)] == [UpdateVoterRequest]
    assert follower.role is Role.FOLLOWER
    late = FetchResponse(1, 1, 5, (Entry(1, "late"),), base_offset=5)
    assert follower.handle(1, late, 5001) == []
    assert (log.start_offset, log.end_offset, follower.high_watermark) == (3, 5, 5)
    # Answered: the leader is free for a Fetch again, but not while installing.
    assert follower.handle(1, UpdateVoterResponse(ErrorCode.none, 1, 1), 5001) == []

    sent = follower.snapshot_written(install, 5002)
    assert (log.start_offset, log.end_offset, follower.high_watermark) == (40, 40, 40)
    assert [(type(o.message), o.message.fetch_offset) for o in sent] == [(FetchRequest, 40)]
    committed = follower.take_committed()
    assert committed is not None and committed.snapshot == leader_snapshot


def test_a_voter_stranded_in_a_newer_epoch_rejoins_the_quorum() -> None:
    """A voter that became a candidate of the next epoch while cut off (its vote requests
    all lost) comes back to a leader still in the old one. The leader's messages are
    older than its epoch and a live leader's followers refuse its pre-votes; as in Kafka,
    its pre-vote request (carrying its epoch) moves the others to that epoch, and an
    election there brings all three under one leader."""
    c = Cluster(3, RaftConfig())
    everyone = set(c.nodes)
    c.run(everyone, everyone, lambda: any(r.is_leader for r in c.nodes.values()) and
          all(r.leader_id is not None for r in c.nodes.values()))
    leader = next(i for i, r in c.nodes.items() if r.is_leader)
    stranded = max(everyone - {leader})
    epoch = c.nodes[leader].epoch
    c.durable[stranded] = (epoch + 1, stranded)  # a candidate of the next epoch, restarted
    c.restart(stranded)

    def one_leader_everyone_follows() -> bool:
        epochs = {r.epoch for r in c.nodes.values()}
        leaders = [i for i, r in c.nodes.items() if r.is_leader]
        return len(epochs) == 1 and len(leaders) == 1 and all(
            r.leader_id == leaders[0] for r in c.nodes.values())

    c.run(everyone, everyone, one_leader_everyone_follows)
    assert c.nodes[stranded].epoch > epoch
    c.propose(next(i for i, r in c.nodes.items() if r.is_leader), "after")
    c.run(everyone, everyone, lambda: all(
        any(e.payload == "after" for e in applied) for applied in c.applied.values()))
