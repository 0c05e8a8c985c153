"""AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter in the consensus core (KIP-853).

The expected answers are Kafka's (AddVoterHandler, RemoveVoterHandler,
UpdateVoterHandler, KafkaRaftClientReconfigTest): one change at a time, only from a
leader that committed an entry of its epoch, only with kraft.version 1; the new voter,
asked its kraft versions with ApiVersions first, a caught-up observer supporting the
finalized kraft.version; the set effective when appended, answered when committed.
"""

from __future__ import annotations

import random

import pytest

from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.raft import wire
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    LeaderChange,
    Outgoing,
    VoterApiVersionsRequest,
    VoterApiVersionsResponse,
    VoteRequest,
    VoteResponse,
    written_voters,
)
from ottla.raft.quorum import RaftConfig, RaftReplica, Role, VoterChangeResult
from ottla.raft.voter_set import ReplicaKey, VoterNode, VoterSet, VoterSetHistory


def key(n: int, incarnation: int = 0) -> ReplicaKey:
    return ReplicaKey(n, f"dir-{n}-{incarnation}")


class Quorum:
    """Replicas of ``voters`` (and spare ``nodes``) delivering every message at once."""

    def __init__(self, voters: list[int], nodes: list[int], kraft_version: int = 1) -> None:
        self.now = 0
        self.bootstrap = VoterSet(tuple(VoterNode(key(v)) for v in voters))
        self.logs = {n: MemoryLog() for n in nodes}
        self.nodes = {n: RaftReplica(n, self.bootstrap, self.logs[n], random.Random(n),
                                     RaftConfig(), directory_id=key(n).directory_id,
                                     kraft_version=kraft_version) for n in nodes}
        self.down: set[int] = set()
        self.queue: list[tuple[int, Outgoing]] = []
        self.sent: list[tuple[int, Outgoing]] = []
        self.results: list[VoterChangeResult] = []
        for n, r in self.nodes.items():
            self._after(n, r.start(self.now))

    def _after(self, n: int, out: list[Outgoing]) -> None:
        self.results += self.nodes[n].take_voter_change_results()
        self.queue += [(n, o) for o in out]
        self.sent += [(n, o) for o in out]

    def step(self, ms: int = 10) -> None:
        self.now += ms
        for n in sorted(self.nodes):
            if n not in self.down:
                self._after(n, self.nodes[n].tick(self.now))
        while self.queue:
            source, out = self.queue.pop(0)
            if source in self.down or out.destination in self.down:
                continue
            dest = out.destination
            self._after(dest, self.nodes[dest].handle(source, out.message, self.now))

    def run_until(self, done: object, steps: int = 2000) -> None:
        assert callable(done)
        for _ in range(steps):
            if done():
                return
            self.step()
        raise AssertionError("never reached")

    def leader(self) -> RaftReplica:
        self.run_until(lambda: any(r.is_leader and r.high_watermark > r.epoch_start_offset
                                   for n, r in self.nodes.items() if n not in self.down))
        return next(r for n, r in self.nodes.items() if r.is_leader and n not in self.down)

    def result(self, request_id: int) -> VoterChangeResult:
        self.run_until(lambda: any(r.request_id == request_id for r in self.results))
        return next(r for r in self.results if r.request_id == request_id)


def test_a_voter_is_added_when_caught_up_effective_at_once_answered_at_commit() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3, 4])
    leader = q.leader()
    q.run_until(lambda: q.nodes[4].log.end_offset == leader.log.end_offset)
    assert leader.add_voter(7, VoterNode(key(4)), q.now) is None
    # As Kafka's AddVoterHandler, the leader first asks the new voter its versions.
    assert leader.take_outgoing() == [Outgoing(4, VoterApiVersionsRequest(VoterNode(key(4))))]
    assert leader.voters == {1, 2, 3}
    q._after(leader.node_id, leader.handle(4, VoterApiVersionsResponse(ErrorCode.none, (0, 1)),
                                           q.now))
    # Effective when appended, before it commits: the leader counts four voters.
    assert leader.voters == {1, 2, 3, 4} and leader.majority == 3
    assert not any(r.request_id == 7 for r in q.results)
    assert q.result(7).error is ErrorCode.none
    q.run_until(lambda: all(r.voters == {1, 2, 3, 4} for r in q.nodes.values()))
    assert q.nodes[4].is_voter


def test_a_new_voter_must_have_caught_up_as_an_observer() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3, 4])
    q.down.add(4)
    leader = q.leader()
    assert leader.add_voter(1, VoterNode(key(4)), q.now) is None
    leader.take_outgoing()
    leader.handle(4, VoterApiVersionsResponse(ErrorCode.none, (0, 1)), q.now)
    [result] = leader.take_voter_change_results()
    assert result == VoterChangeResult(
        1, ErrorCode.request_timed_out,
        "Aborted add voter operation for ReplicaKey(id=4, directoryId=dir-4-0) "
        "since it is lagging behind")
    assert leader.voters == {1, 2, 3}
    assert not leader.uncommitted_voter_change


def test_the_new_voter_must_support_the_finalized_kraft_version() -> None:
    """Kafka's handleApiVersionsResponse: an error from the new voter, or a kraft.version
    range without the finalized one (none named counts as 0-0), refuses the add with
    Kafka's words (its missing word and unclosed parenthesis included)."""
    q = Quorum([1, 2, 3], [1, 2, 3, 4])
    leader = q.leader()
    q.run_until(lambda: q.nodes[4].log.end_offset == leader.log.end_offset)
    who = "ReplicaKey(id=4, directoryId=dir-4-0)"
    for request_id, answer, expected in (
            (1, VoterApiVersionsResponse(ErrorCode.none, (0, 0)), (
                ErrorCode.invalid_request,
                f"Aborted add voter operation for {who} since the kraft.version range "
                "(min: 0, max: 0 doesn't support the finalized version 1")),
            (2, VoterApiVersionsResponse(ErrorCode.none, None), (
                ErrorCode.invalid_request,
                f"Aborted add voter operation for {who} since the kraft.version range "
                "(min: 0, max: 0) doesn't support the finalized version 1")),
            (3, VoterApiVersionsResponse(ErrorCode.broker_not_available, None), (
                ErrorCode.request_timed_out,
                "Aborted add voter operation for since API_VERSIONS returned an error "
                "BROKER_NOT_AVAILABLE"))):
        assert leader.add_voter(request_id, VoterNode(key(4)), q.now) is None
        assert [type(o.message) for o in leader.take_outgoing()] == [VoterApiVersionsRequest]
        leader.handle(4, answer, q.now)
        assert leader.take_voter_change_results() == [VoterChangeResult(request_id, *expected)]
        assert leader.voters == {1, 2, 3}
    # An answer nobody waits for changes nothing.
    leader.handle(4, VoterApiVersionsResponse(ErrorCode.none, (0, 1)), q.now)
    assert leader.voters == {1, 2, 3} and leader.take_voter_change_results() == []


def test_only_the_leader_changes_voters() -> None:
    """KafkaRaftClient's validateLeaderOnlyRequest: the error alone, no message."""
    q = Quorum([1, 2, 3], [1, 2, 3, 4])
    leader = q.leader()
    follower = next(r for r in q.nodes.values() if r.is_voter and not r.is_leader)
    for result in (follower.add_voter(1, VoterNode(key(4)), q.now),
                   follower.remove_voter(2, key(leader.node_id), q.now),
                   follower.update_voter(3, VoterNode(key(follower.node_id)), q.now)):
        assert result is not None
        assert (result.error, result.message) == (ErrorCode.not_leader_or_follower, None)


def test_a_static_quorum_refuses_changes() -> None:
    """kraft.version 0: the voters are controller.quorum.voters, never changed (Kafka's
    Add/RemoveVoterHandler answer UNSUPPORTED_VERSION with these words)."""
    q = Quorum([1], [1, 2], kraft_version=0)
    leader = q.leader()
    removed = leader.remove_voter(1, key(1), q.now)
    assert removed is not None and (removed.error, removed.message) == (
        ErrorCode.unsupported_version,
        "Cluster doesn't support removing voter because the kraft.version feature is 0")
    added = leader.add_voter(2, VoterNode(key(2)), q.now)
    assert added is not None and (added.error, added.message) == (
        ErrorCode.unsupported_version,
        "Cluster doesn't support adding voter because the kraft.version feature is 0")


def test_a_leader_that_has_not_committed_in_its_epoch_refuses() -> None:
    """Kafka's testRemoveVoterWithoutFencedPreviousLeaders: no high watermark yet."""
    voters = VoterSet(tuple(VoterNode(key(n)) for n in (1, 2, 3)))
    leader = RaftReplica(1, voters, MemoryLog(), random.Random(1), directory_id="dir-1-0",
                         kraft_version=1)
    leader.start(0)
    leader.tick(10_000)  # prospective
    leader.handle(2, VoteResponse(2, 0, True, True), 10_001)  # candidate of epoch 1
    leader.handle(2, VoteResponse(2, 1, True, False), 10_002)
    assert leader.is_leader and leader.high_watermark <= leader.epoch_start_offset
    for result in (leader.remove_voter(1, key(2), 10_003),
                   leader.add_voter(2, VoterNode(key(4)), 10_003)):
        assert result is not None and (result.error, result.message) == (
            ErrorCode.request_timed_out, "Request timed out waiting for leader to establish "
            "HWM and fence previous voter changes")


def test_one_change_at_a_time() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3, 4])
    leader = q.leader()
    q.run_until(lambda: q.nodes[4].log.end_offset == leader.log.end_offset)
    others = [n for n in (1, 2, 3) if n != leader.node_id]
    q.down.add(others[0])
    q.down.add(others[1])  # nothing commits: the change stays in flight
    assert leader.remove_voter(1, key(others[0]), q.now) is None
    record_offset = leader.log.end_offset - 1
    pending = (ErrorCode.request_timed_out,
               "Request timed out waiting for leader to handle previous voter change request")
    for result in (leader.add_voter(2, VoterNode(key(4)), q.now),
                   leader.remove_voter(3, key(others[1]), q.now)):
        assert result is not None and (result.error, result.message) == pending
    update = leader.update_voter(4, VoterNode(key(leader.node_id)), q.now)
    assert (update.error, update.message) == (ErrorCode.request_timed_out, None)
    # KafkaRaftClient refuses a kraft.version range that is no range before that.
    for versions in ((1, 0), (-1, 1)):
        bad = leader.update_voter(6, VoterNode(key(leader.node_id), kraft_versions=versions),
                                  q.now)
        assert bad.error is ErrorCode.invalid_request
    # The first times out (Kafka's expiry: the error alone), but its record is not
    # committed: still one at a time, in Kafka's words.
    expires = q.now + RaftConfig().request_timeout_ms
    q.run_until(lambda: q.now >= expires)
    assert leader.is_leader  # a lone voter of the old three never resigns in time
    expired = q.result(1)
    assert (expired.error, expired.message) == (ErrorCode.request_timed_out, None)
    result = leader.remove_voter(5, key(others[1]), q.now)
    assert result is not None and (result.error, result.message) == (
        ErrorCode.request_timed_out,
        "Request timed out waiting for voters to commit the latest voter change at "
        f"Optional[{record_offset}] with HWM {leader.high_watermark}")


def test_a_change_answered_when_appended_is_still_in_flight_until_it_commits() -> None:
    """AddRaftVoter v1 with ack_when_committed false: NONE once the VotersRecord is
    appended; the next change waits for its commit all the same."""
    q = Quorum([1, 2, 3], [1, 2, 3, 4])
    leader = q.leader()
    q.run_until(lambda: q.nodes[4].log.end_offset == leader.log.end_offset)
    assert leader.add_voter(1, VoterNode(key(4)), q.now, ack_when_committed=False) is None
    leader.take_outgoing()
    leader.handle(4, VoterApiVersionsResponse(ErrorCode.none, (0, 1)), q.now)
    assert leader.take_voter_change_results() == [VoterChangeResult(1, ErrorCode.none)]
    assert leader.high_watermark < leader.log.end_offset
    other = next(n for n in (1, 2, 3) if n != leader.node_id)
    refused = leader.remove_voter(2, key(other), q.now)
    assert refused is not None and refused.message == (
        "Request timed out waiting for leader to handle previous voter change request")
    q.run_until(lambda: leader.high_watermark == leader.log.end_offset)
    assert not any(r.request_id == 1 for r in q.results)  # answered once only
    assert leader.remove_voter(3, key(other), q.now) is None


def test_leadership_lost_answers_the_pending_change_without_a_message() -> None:
    """Kafka's LeaderState.close: NOT_LEADER_OR_FOLLOWER, no message."""
    q = Quorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    others = [n for n in (1, 2, 3) if n != leader.node_id]
    q.down.update(others)
    assert leader.remove_voter(1, key(others[0]), q.now) is None
    q._after(leader.node_id, leader.resign(q.now))
    assert q.result(1) == VoterChangeResult(1, ErrorCode.not_leader_or_follower)


def test_adding_an_existing_voter_id_is_a_duplicate() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    other = next(n for n in (1, 2, 3) if n != leader.node_id)
    result = leader.add_voter(1, VoterNode(key(other, 1)), q.now)
    assert result is not None and (result.error, result.message) == (
        ErrorCode.duplicate_voter,
        f"The voter id for ReplicaKey(id={other}, directoryId=dir-{other}-1) is already "
        "part of the set of voters [ReplicaKey(id=1, directoryId=dir-1-0), "
        "ReplicaKey(id=2, directoryId=dir-2-0), ReplicaKey(id=3, directoryId=dir-3-0)].")


def test_removing_an_unknown_voter_or_a_stale_directory_id_is_not_found() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    other = next(n for n in (1, 2, 3) if n != leader.node_id)
    voters = ("[ReplicaKey(id=1, directoryId=dir-1-0), ReplicaKey(id=2, directoryId=dir-2-0), "
              "ReplicaKey(id=3, directoryId=dir-3-0)]")
    for stale in (key(other, 1), key(9)):
        result = leader.remove_voter(1, stale, q.now)
        assert result is not None and (result.error, result.message) == (
            ErrorCode.voter_not_found,
            f"Cannot remove voter ReplicaKey(id={stale.id}, directoryId={stale.directory_id})"
            f" from the set of voters {voters}")
    assert leader.voters == {1, 2, 3}


def test_the_last_voter_cannot_be_removed() -> None:
    """Kafka's testRemoveVoterToEmptyVoterSet: VOTER_NOT_FOUND."""
    q = Quorum([1], [1])
    leader = q.leader()
    result = leader.remove_voter(1, key(1), q.now)
    assert result is not None and (result.error, result.message) == (
        ErrorCode.voter_not_found,
        "Cannot remove voter ReplicaKey(id=1, directoryId=dir-1-0) from the set of voters "
        "[ReplicaKey(id=1, directoryId=dir-1-0)]")
    assert leader.voters == {1}


def test_a_voter_without_a_directory_id_is_an_invalid_request() -> None:
    q = Quorum([1], [1, 2])
    leader = q.leader()
    for result, verb in ((leader.add_voter(1, VoterNode(ReplicaKey(2)), q.now), "Add"),
                         (leader.remove_voter(2, ReplicaKey(1), q.now), "Remove"),
                         (leader.remove_voter(3, ReplicaKey(-1, "dir"), q.now), "Remove")):
        assert result is not None and (result.error, result.message) == (
            ErrorCode.invalid_request, f"{verb} voter request didn't include a valid voter")


def test_update_voter_checks_the_kraft_versions_and_the_voter() -> None:
    q = Quorum([1], [1])
    leader = q.leader()
    result = leader.update_voter(1, VoterNode(key(1), kraft_versions=(0, 0)), q.now)
    assert result.error is ErrorCode.invalid_request
    result = leader.update_voter(2, VoterNode(key(1, 1)), q.now)
    assert result.error is ErrorCode.voter_not_found
    node = VoterNode(key(1), endpoints=(), kraft_versions=(0, 1))
    assert leader.update_voter(3, node, q.now).error is ErrorCode.none


def test_a_leader_removing_itself_leads_until_it_commits_then_resigns() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    assert leader.remove_voter(1, leader.key, q.now) is None
    assert not leader.is_voter and leader.is_leader
    q.sent.clear()
    assert q.result(1).error is ErrorCode.none
    assert not leader.is_leader
    assert any(isinstance(o.message, EndQuorumEpoch) for n, o in q.sent
               if n == leader.node_id)
    q.run_until(lambda: any(r.is_leader and r.high_watermark > r.epoch_start_offset
                            for r in q.nodes.values()))
    new = next(r for r in q.nodes.values() if r.is_leader)
    assert new.node_id != leader.node_id and new.voters == {1, 2, 3} - {leader.node_id}


def test_a_follower_reverts_to_the_previous_set_when_truncated() -> None:
    log = MemoryLog()
    follower = RaftReplica(2, VoterSet((VoterNode(key(1)), VoterNode(key(2)))), log,
                           random.Random(2), directory_id="dir-2-0", kraft_version=1)
    follower.start(0)
    follower.handle(1, BeginQuorumEpoch(1, 1), 0)
    grown = VoterSet((VoterNode(key(1)), VoterNode(key(2)), VoterNode(key(3))))
    follower.handle(1, FetchResponse(1, 1, 0, (Entry(1, None), Entry(1, grown)), 0), 1)
    assert follower.voters == {1, 2, 3}  # appended, not committed: in force already
    follower.handle(1, BeginQuorumEpoch(1, 2), 2)  # a new epoch, whose leader lacks it
    follower.tick(3)
    follower.handle(1, FetchResponse(1, 2, 0, base_offset=2, diverging_epoch=1,
                                     diverging_end_offset=1), 3)
    assert log.end_offset == 1 and follower.voters == {1, 2}


def test_a_replaced_disk_is_an_observer_and_cannot_vote_as_the_old_voter() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    other = next(n for n in (1, 2, 3) if n != leader.node_id)
    fetch = FetchRequest(other, leader.epoch, 0, 0, 0, -1, "dir-new")
    leader.handle(other, fetch, q.now)
    assert ReplicaKey(other, "dir-new") in leader.observer_keys()
    fresh = RaftReplica(other, q.bootstrap, MemoryLog(), random.Random(0),
                        directory_id="dir-new", kraft_version=1)
    assert not fresh.is_voter
    out = fresh.handle(3, VoteRequest(3, 5, 0, 0, False, "dir-3-0", f"dir-{other}-0"), 0)
    assert [o.message.granted for o in out if isinstance(o.message, VoteResponse)] == [False]
    fresh.handle(3, BeginQuorumEpoch(3, 6, f"dir-{other}-0"), 0)
    assert fresh.epoch == 0 and fresh.leader_id is None  # both addressed to the old disk


def test_a_quorum_of_one_grows_to_three() -> None:
    q = Quorum([1], [1, 2, 3])
    leader = q.leader()
    assert leader.node_id == 1
    for request_id, n in ((1, 2), (2, 3)):
        q.run_until(lambda n=n: q.nodes[n].log.end_offset >= leader.log.end_offset)
        q.run_until(lambda n=n, r=request_id: leader.add_voter(r, VoterNode(key(n)), q.now)
                    is None)
        assert q.result(request_id).error is ErrorCode.none
    q.run_until(lambda: all(r.voters == {1, 2, 3} for r in q.nodes.values()))
    assert leader.majority == 2 and leader.role is Role.LEADER


def test_the_voter_set_history_keys_sets_by_offset() -> None:
    one = VoterSet.of({1})
    two = VoterSet.of({1, 2})
    three = VoterSet.of({1, 2, 3})
    history = VoterSetHistory(one)
    history.add_at(5, two)
    history.add_at(9, three)
    assert [history.value_at(o) for o in (4, 5, 8, 9)] == [one, two, two, three]
    history.truncate_new_entries(9)
    assert history.last() == two and history.last_offset() == 5
    history.truncate_old_entries(7)
    assert history.value_at(0) == two and history.last_offset() == -1
    with pytest.raises(ValueError):
        VoterSet((VoterNode(key(1)), VoterNode(key(1, 1))))


def test_directory_ids_and_the_leader_endpoint_cross_the_wire() -> None:
    """Fetch v18 and Vote v2 carry the directory ids (KIP-853); a Fetch answer names
    where the leader listens (NodeEndpoints), for an observer that knows no voter yet."""
    directory = "AAAAAAAAAAAAAAAAAAAABw"
    fetch = FetchRequest(4, 2, 10, 1, 500, 9, directory)
    api_key, version, body = wire.encode_request(fetch, 1, "c")
    decoded = wire.decode_request(api_key, build(request_schema(api_key, version), body))
    assert decoded == (4, fetch)
    vote = VoteRequest(2, 3, 1, 10, False, directory, "AAAAAAAAAAAAAAAAAAAACA")
    api_key, version, body = wire.encode_request(vote, 3, "c")
    assert wire.decode_request(api_key, build(request_schema(api_key, version), body)) == \
        (2, vote)
    begin = BeginQuorumEpoch(1, 3, directory)
    api_key, version, body = wire.encode_request(begin, 4, "c")
    body["leader_endpoints"] = [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9093}]
    request = build(request_schema(api_key, version), body)
    assert wire.decode_request(api_key, request) == (1, begin)
    assert wire.leader_endpoints(request) == [("CONTROLLER", "127.0.0.1", 9093)]
    answer = build(response_schema(ApiKey.FETCH, 18), wire.fetch_response(
        FetchResponse(1, 2, 9), 0, leader_endpoint=(1, "127.0.0.1", 9093)))
    assert wire.node_endpoints(answer) == [(1, "127.0.0.1", 9093)]


def test_a_first_leader_writes_the_bootstrap_voters_into_the_log() -> None:
    """As Kafka's appendStartOfEpochControlRecords: a set known only from the bootstrap
    checkpoint goes into the leader-change batch (with the KRaftVersionRecord), where
    replicas formatted without initial controllers learn it; the next leader does not
    write it again."""
    q = Quorum([1], [1, 2])
    leader = q.leader()
    assert leader.log.entries[0] == Entry(leader.epoch, LeaderChange(1, q.bootstrap), 3)
    assert [e for e in leader.log.entries if written_voters(e.payload) is not None] == [
        leader.log.entries[0]]
    observer = RaftReplica(3, VoterSet(()), MemoryLog(), random.Random(3),
                           directory_id="dir-3-0", kraft_version=1, bootstrap_servers=(1,))
    q.nodes[3] = observer
    q._after(3, observer.start(q.now))
    q.run_until(lambda: observer.voter_set == q.bootstrap and observer.leader_id == 1)
    assert not observer.is_voter
    with pytest.raises(ValueError):
        RaftReplica(3, VoterSet(()), MemoryLog(), random.Random(3), kraft_version=1)
