"""Upgrading a static quorum's kraft.version in the consensus core (KIP-853).

Expectations are Kafka 4.4's (LeaderState.maybeAppendUpgradedKRaftVersion,
KRaftControlRecordStateMachine): the leader appends a KRaftVersionRecord with a
VotersRecord of the static voters, their directory ids now known; kraft.version and the
voters are log state from then on (a restart reads them back, a snapshot carries them,
a truncation undoes them); the leader learns each voter's directory id, endpoints and
supported versions from its UpdateRaftVoter (a voter sends it a fetch timeout after it
starts following a leader), a voter it has not heard from is taken to support
kraft.version 0 only, and a downgrade is refused.
"""

from __future__ import annotations

import random

from ottla.protocol.errors import ErrorCode
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Entry, KRaftVersionUpgrade, UpdateVoterResponse
from ottla.raft.quorum import RaftConfig, RaftReplica
from ottla.raft.voter_set import Endpoint, ReplicaKey, VoterNode, VoterSet
from ottla.raft.voters_record import control_voters, upgrade_batch
from tests.unit.test_raft_voter_changes import Quorum

NOT_ALL = (ErrorCode.invalid_update_version,
           "Invalid upgrade of kraft.version to 1 because not all of the voters support it")


def endpoint(v: int) -> Endpoint:
    return Endpoint("CONTROLLER", "h", 9090 + v)


def static_voters(ids: list[int]) -> VoterSet:
    """controller.quorum.voters as the driver hands it over: no directory ids."""
    return VoterSet(tuple(VoterNode(ReplicaKey(v), (endpoint(v),)) for v in ids))


class StaticQuorum(Quorum):
    """Replicas of a ``controller.quorum.voters`` quorum, each with its own directory."""

    def __init__(self, voters: list[int], nodes: list[int]) -> None:
        self.now = 0
        self.bootstrap = static_voters(voters)
        self.logs = {n: MemoryLog() for n in nodes}
        self.nodes = {n: self.replica(n) for n in nodes}
        self.down: set[int] = set()
        self.queue = []
        self.sent = []
        self.results = []
        for n, r in self.nodes.items():
            self._after(n, r.start(self.now))

    def replica(self, n: int) -> RaftReplica:
        return RaftReplica(n, self.bootstrap, self.logs[n], random.Random(n), RaftConfig(),
                           directory_id=f"dir-{n}", kraft_version=0,
                           local_listeners=(endpoint(n),))


def updated(q: Quorum, leader: RaftReplica) -> set[int]:
    """The voters whose UpdateRaftVoter this leader took in its epoch."""
    return {out.destination for source, out in q.sent
            if source == leader.node_id and isinstance(out.message, UpdateVoterResponse)
            and out.message.error is ErrorCode.none and out.message.epoch == leader.epoch}


def heard_from_all(q: Quorum, leader: RaftReplica) -> None:
    """Every other voter told the leader about itself (UpdateRaftVoter)."""
    q.run_until(lambda: updated(q, leader) >= set(leader.voters) - {leader.node_id})


def test_the_leader_upgrades_with_the_static_voters_and_their_directory_ids() -> None:
    q = StaticQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    heard_from_all(q, leader)
    assert leader.kraft_version == 0
    end = leader.log.end_offset
    assert leader.upgrade_kraft_version(1, q.now) == (ErrorCode.none, None)
    # One batch of two records: the KRaftVersionRecord and the VotersRecord.
    entry = leader.log.entries_between(end, leader.log.end_offset)[0]
    assert leader.log.end_offset == end + 2 and isinstance(entry.payload, KRaftVersionUpgrade)
    upgraded = VoterSet(tuple(VoterNode(ReplicaKey(v, f"dir-{v}"), (endpoint(v),))
                              for v in (1, 2, 3)))
    assert entry.payload == KRaftVersionUpgrade(1, upgraded)
    assert leader.kraft_version == 1 and leader.voter_set == upgraded  # at once
    q.run_until(lambda: all(r.kraft_version == 1 and r.voter_set == upgraded and
                            r.high_watermark > end for r in q.nodes.values()))
    # Asked again: nothing to do, nothing appended.
    before = leader.log.end_offset
    assert leader.upgrade_kraft_version(1, q.now) == (ErrorCode.none, None)
    assert leader.log.end_offset == before


def test_after_the_upgrade_voters_can_be_added_and_removed() -> None:
    q = StaticQuorum([1, 2, 3], [1, 2, 3, 4])
    leader = q.leader()
    added = leader.add_voter(1, VoterNode(ReplicaKey(4, "dir-4")), q.now)
    assert added is not None and added.error is ErrorCode.unsupported_version
    heard_from_all(q, leader)
    assert leader.upgrade_kraft_version(1, q.now) == (ErrorCode.none, None)
    q.run_until(lambda: leader.high_watermark == leader.log.end_offset and
                q.nodes[4].log.end_offset == leader.log.end_offset)
    assert leader.add_voter(2, VoterNode(ReplicaKey(4, "dir-4")), q.now) is None
    assert q.result(2).error is ErrorCode.none
    q.run_until(lambda: all(r.voters == {1, 2, 3, 4} for r in q.nodes.values()))
    assert q.nodes[4].is_voter
    assert leader.remove_voter(3, ReplicaKey(3, "dir-3"), q.now) is None
    assert q.result(3).error is ErrorCode.none
    assert leader.voters == {1, 2, 4}


def test_a_voter_not_heard_from_in_this_epoch_blocks_the_upgrade() -> None:
    """Kafka's leader starts its epoch with the static voters supporting kraft.version 0
    only, and learns better from each voter: until then the upgrade is refused."""
    q = StaticQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    silent = next(n for n in q.nodes if n != leader.node_id)
    q.down.add(silent)
    leader.resign(q.now)
    leader = q.leader()
    end = leader.log.end_offset
    assert leader.upgrade_kraft_version(1, q.now) == NOT_ALL
    assert leader.kraft_version == 0 and leader.log.end_offset == end


def test_validate_only_appends_nothing_and_a_downgrade_is_refused() -> None:
    q = StaticQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    heard_from_all(q, leader)
    end = leader.log.end_offset
    assert leader.upgrade_kraft_version(1, q.now, validate_only=True) == (ErrorCode.none, None)
    assert leader.log.end_offset == end and leader.kraft_version == 0
    assert leader.upgrade_kraft_version(1, q.now) == (ErrorCode.none, None)
    assert leader.upgrade_kraft_version(0, q.now) == (
        ErrorCode.invalid_update_version,
        "Invalid upgrade of kraft.version from version 1 to 0 because the new version is a "
        "downgrade")
    assert leader.kraft_version == 1


def test_kraft_version_and_voters_come_back_from_the_log_and_from_a_snapshot() -> None:
    q = StaticQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    heard_from_all(q, leader)
    leader.upgrade_kraft_version(1, q.now)
    q.run_until(lambda: all(r.high_watermark == leader.log.end_offset
                            for r in q.nodes.values()))
    upgraded = leader.voter_set
    # A restart with controller.quorum.voters: the log's kraft.version and voters win.
    again = q.replica(leader.node_id)
    assert again.kraft_version == 1 and again.voter_set == upgraded
    # A snapshot past the upgrade carries the voters (Kafka writes them at kraft.version 1).
    end = leader.high_watermark
    while leader.take_committed() is not None:
        pass
    assert leader.create_snapshot(end, b"state")
    write = leader.take_snapshot_write()
    assert write is not None and write.snapshot.voters == upgraded
    leader.snapshot_written(write, q.now)
    assert leader.kraft_version == 1 and leader.voter_set == upgraded


def test_a_truncated_upgrade_is_undone() -> None:
    """An uncommitted upgrade a follower drops (the leader that wrote it lost its
    epoch) takes kraft.version back to 0 with it, as it does the voters."""
    log = MemoryLog()
    replica = RaftReplica(2, static_voters([1, 2, 3]), log, random.Random(2),
                          directory_id="dir-2", kraft_version=0)
    log.append([Entry(1, None)])
    replica._append([Entry(1, KRaftVersionUpgrade(1, static_voters([1, 2, 3])), 2)], 0)
    assert replica.kraft_version == 1
    replica._truncate(1, 0)
    assert replica.kraft_version == 0 and replica.voter_set == static_voters([1, 2, 3])


def test_the_upgrade_batch_is_kafkas_two_control_records() -> None:
    voters = VoterSet((VoterNode(ReplicaKey(1, "AAAAAAAAAAAAAAAAAAAAAQ"),
                                 (Endpoint("CONTROLLER", "localhost", 9093),)),))
    batch = upgrade_batch(1, voters, 1000)
    assert control_voters(batch) == KRaftVersionUpgrade(1, voters)
