"""A voter's UpdateRaftVoter in the consensus core (KIP-853), as Kafka 4.4 sends and
handles it (KafkaRaftClient.pollFollowerAsVoter / shouldSendUpdateVoteRequest,
UpdateVoterHandler, LeaderState.appendStartOfEpochControlRecords).

A voter following a leader waits one fetch timeout, then tells it its directory id,
listeners and supported kraft.version range: at kraft.version 0 once per leader (the
leader keeps it in memory, nothing is written), at 1 whenever the log's voter set says
otherwise (the leader appends a VotersRecord with the new node), and again every fetch
timeout while the leader refuses it, one request to the leader at a time (never beside
a parked Fetch). A new leader whose own node is out of date writes itself into the voter
set when its epoch starts.
"""

from __future__ import annotations

import random

from ottla.protocol.errors import ErrorCode
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import (
    FetchRequest,
    FetchResponse,
    Outgoing,
    UpdateVoterRequest,
    UpdateVoterResponse,
)
from ottla.raft.quorum import RaftConfig, RaftReplica, Role
from ottla.raft.voter_set import Endpoint, ReplicaKey, VoterNode, VoterSet
from tests.unit.test_raft_kraft_version import StaticQuorum, endpoint
from tests.unit.test_raft_voter_changes import Quorum, key

FETCH_TIMEOUT_MS = RaftConfig().fetch_timeout_ms


def update_requests(q: Quorum) -> list[tuple[int, int, UpdateVoterRequest]]:
    """(sender, destination, request) of every UpdateRaftVoter sent so far."""
    return [(source, out.destination, out.message) for source, out in q.sent
            if isinstance(out.message, UpdateVoterRequest)]


def run_for(q: Quorum, ms: int) -> None:
    for _ in range(ms // 10):
        q.step()


def test_a_static_voter_tells_each_leader_once_a_fetch_timeout_after_following() -> None:
    q = StaticQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    elected = q.now
    followers = sorted(set(q.nodes) - {leader.node_id})
    q.run_until(lambda: len(update_requests(q)) == 2)
    # Not before a fetch timeout of following (the leader's BeginQuorumEpoch arrives in
    # the step it is elected), nor much after.
    assert elected + FETCH_TIMEOUT_MS - 10 <= q.now <= elected + FETCH_TIMEOUT_MS + 100
    assert sorted(update_requests(q)) == [
        (f, leader.node_id, UpdateVoterRequest(
            VoterNode(ReplicaKey(f, f"dir-{f}"), (endpoint(f),), (0, 1)), leader.epoch))
        for f in followers]
    run_for(q, 3 * FETCH_TIMEOUT_MS)
    assert len(update_requests(q)) == 2  # taken: not asked again of this leader
    answers = [out.message for source, out in q.sent
               if isinstance(out.message, UpdateVoterResponse)]
    assert answers == [UpdateVoterResponse(ErrorCode.none, leader.node_id, leader.epoch)] * 2
    # Only in memory: no VotersRecord at kraft.version 0.
    assert leader.kraft_version == 0 and leader.voter_set == q.bootstrap

    old_epoch = leader.epoch
    q._after(leader.node_id, leader.resign(q.now))
    successor = q.leader()
    assert successor.epoch > old_epoch
    q.run_until(lambda: len(update_requests(q)) == 4)
    assert {(s, d, m.epoch) for s, d, m in update_requests(q)[2:]} == {
        (f, successor.node_id, successor.epoch) for f in set(q.nodes) - {successor.node_id}}


class UnansweredQuorum(StaticQuorum):
    """UpdateRaftVoter requests are lost on the way (the test answers them by hand); a
    request timeout half the fetch timeout, so that a follower waiting for a lost one
    does not campaign."""

    REQUEST_TIMEOUT_MS = FETCH_TIMEOUT_MS // 2

    def replica(self, n: int) -> RaftReplica:
        return RaftReplica(n, self.bootstrap, self.logs[n], random.Random(n),
                           RaftConfig(request_timeout_ms=self.REQUEST_TIMEOUT_MS),
                           directory_id=f"dir-{n}", kraft_version=0,
                           local_listeners=(endpoint(n),))

    def _after(self, n: int, out: list) -> None:
        super()._after(n, out)
        self.queue = [(s, o) for s, o in self.queue
                      if not isinstance(o.message, UpdateVoterRequest)]


def test_a_refused_update_is_sent_again_a_fetch_timeout_later() -> None:
    """A leader that cannot take it yet (REQUEST_TIMED_OUT, as Kafka's while a voter
    change is pending) is asked again a fetch timeout after the last request, once the
    Fetch then parked at the leader is answered (at most its max wait later)."""
    q = UnansweredQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    follower = next(n for n in q.nodes if n != leader.node_id)

    def sent() -> int:
        return sum(1 for s, _, _ in update_requests(q) if s == follower)
    q.run_until(lambda: sent() == 1)
    first = q.now
    refusal = UpdateVoterResponse(ErrorCode.request_timed_out, leader.node_id, leader.epoch)
    q._after(follower, q.nodes[follower].handle(leader.node_id, refusal, q.now))
    q.run_until(lambda: sent() == 2)
    wait = RaftConfig().fetch_max_wait_ms
    assert first + FETCH_TIMEOUT_MS - 10 <= q.now <= first + FETCH_TIMEOUT_MS + wait + 20


def test_no_fetch_while_an_update_awaits_its_answer() -> None:
    """Kafka's RequestManager: one request to the leader at a time. While the lost
    UpdateRaftVoter is in flight the follower does not fetch; at its request timeout it
    fetches again, and asks again a fetch timeout after it last asked."""
    q = UnansweredQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    follower = next(n for n in q.nodes if n != leader.node_id)

    def fetches() -> int:
        return sum(1 for s, out in q.sent
                   if s == follower and isinstance(out.message, FetchRequest))
    q.run_until(lambda: len(update_requests(q)) >= 1 and
                any(s == follower for s, _, _ in update_requests(q)))
    asked = q.now
    before = fetches()
    run_for(q, UnansweredQuorum.REQUEST_TIMEOUT_MS - 10)
    assert fetches() == before
    q.run_until(lambda: fetches() > before)
    assert q.now == asked + UnansweredQuorum.REQUEST_TIMEOUT_MS
    assert q.nodes[follower].role is Role.FOLLOWER
    q.run_until(lambda: sum(1 for s, _, _ in update_requests(q) if s == follower) == 2)
    wait = RaftConfig().fetch_max_wait_ms
    assert asked + FETCH_TIMEOUT_MS <= q.now <= asked + FETCH_TIMEOUT_MS + wait + 20


class TimedQuorum(StaticQuorum):
    """A static quorum that notes when each message was sent."""

    def __init__(self, voters: list[int], nodes: list[int]) -> None:
        self.timeline: list[tuple[int, int, Outgoing]] = []
        super().__init__(voters, nodes)

    def _after(self, n: int, out: list[Outgoing]) -> None:
        super()._after(n, out)
        self.timeline += [(self.now, n, o) for o in out]


def test_an_update_due_while_the_fetch_is_parked_waits_for_its_answer() -> None:
    """As Kafka 4.4's pollFollowerAsVoter through its RequestManager: the UpdateRaftVoter
    that falls due while the follower's Fetch is parked at the leader (long polling,
    nothing new) goes when that Fetch is answered, in the next Fetch's place, and the
    next Fetch only once the UpdateRaftVoter is answered: never two requests at once."""
    q = TimedQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    elected = q.now  # the followers follow since this step: their update is due then
    follower = next(n for n in q.nodes if n != leader.node_id)
    # An entry 100 ms on answers the parked fetches then: the next ones are parked over
    # the due time.
    run_for(q, 100)
    assert leader.propose("entry", q.now) is not None
    q.run_until(lambda: any(s == follower for s, _, _ in update_requests(q)))
    run_for(q, FETCH_TIMEOUT_MS)
    between = [(t, s, type(o.message).__name__) for t, s, o in q.timeline
               if t >= elected and isinstance(o.message, (
                   FetchRequest, FetchResponse, UpdateVoterRequest, UpdateVoterResponse))
               and (s, o.destination) in ((follower, leader.node_id),
                                          (leader.node_id, follower))]
    # Requests and answers alternate: one request in flight at a time.
    kinds = [kind for _, _, kind in between]
    for request, response in zip(kinds[::2], kinds[1::2]):
        assert (request, response) in (("FetchRequest", "FetchResponse"),
                                        ("UpdateVoterRequest", "UpdateVoterResponse"))
    i = kinds.index("UpdateVoterRequest")
    (fetched, _, _), (answered, _, _), (updated_at, _, _) = between[i - 2:i + 1]
    due = elected + FETCH_TIMEOUT_MS
    wait = RaftConfig().fetch_max_wait_ms
    # The Fetch before it was parked over the due time and answered at its max wait;
    # the update left with that answer, not when it fell due.
    assert fetched < due < answered == fetched + wait == updated_at
    assert kinds[i + 1:i + 3] == ["UpdateVoterResponse", "FetchRequest"]


def test_the_leader_takes_updates_in_memory_at_kraft_version_0() -> None:
    q = StaticQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    q.run_until(lambda: leader.high_watermark > leader.epoch_start_offset)
    other = next(n for n in q.nodes if n != leader.node_id)
    end = leader.log.end_offset
    moved = VoterNode(ReplicaKey(other, f"dir-{other}"), (Endpoint("CONTROLLER", "h2", 1),))
    assert leader.update_voter(1, moved, q.now).error is ErrorCode.none
    assert leader.log.end_offset == end  # nothing written
    unknown = VoterNode(ReplicaKey(9, "dir-9"), (endpoint(9),))
    assert leader.update_voter(2, unknown, q.now).error is ErrorCode.voter_not_found
    only_1 = VoterNode(ReplicaKey(other, f"dir-{other}"), (endpoint(other),), (1, 1))
    assert leader.update_voter(3, only_1, q.now).error is ErrorCode.invalid_request
    no_directory = VoterNode(ReplicaKey(other), (endpoint(other),))
    assert leader.update_voter(4, no_directory, q.now).error is ErrorCode.invalid_request
    follower = q.nodes[other]
    assert follower.update_voter(5, moved, q.now).error is ErrorCode.not_leader_or_follower


def test_a_stale_or_future_epoch_is_refused() -> None:
    q = StaticQuorum([1, 2, 3], [1, 2, 3])
    leader = q.leader()
    other = next(n for n in q.nodes if n != leader.node_id)
    node = VoterNode(ReplicaKey(other, f"dir-{other}"), (endpoint(other),))
    for epoch, error in ((leader.epoch - 1, ErrorCode.fenced_leader_epoch),
                         (leader.epoch + 1, ErrorCode.unknown_leader_epoch)):
        [out] = leader.handle(other, UpdateVoterRequest(node, epoch), q.now)
        assert out.message == UpdateVoterResponse(error, leader.node_id, leader.epoch)


class ListeningQuorum(Quorum):
    """A kraft.version 1 quorum whose voter set names each voter's listener; a replica
    may listen elsewhere (``moved``), as a controller restarted on another port."""

    def __init__(self, voters: list[int], moved: dict[int, Endpoint]) -> None:
        self.now = 0
        self.bootstrap = VoterSet(tuple(VoterNode(key(v), (endpoint(v),)) for v in voters))
        self.logs = {n: MemoryLog() for n in voters}
        self.nodes = {n: RaftReplica(n, self.bootstrap, self.logs[n], random.Random(n),
                                     RaftConfig(), directory_id=key(n).directory_id,
                                     kraft_version=1,
                                     local_listeners=(moved.get(n, endpoint(n)),))
                      for n in voters}
        self.down: set[int] = set()
        self.queue = []
        self.sent = []
        self.results = []
        for n, r in self.nodes.items():
            self._after(n, r.start(self.now))


def test_a_voter_listening_elsewhere_updates_the_voter_set_at_kraft_version_1() -> None:
    q = ListeningQuorum([1, 2, 3], {})
    leader = q.leader()
    moved_id = next(n for n in q.nodes if n != leader.node_id)
    run_for(q, 2 * FETCH_TIMEOUT_MS)
    assert update_requests(q) == []  # every voter is as the set says: nothing to send

    # The voter restarts listening on another port.
    new_endpoint = Endpoint("CONTROLLER", "h", 7000)
    q.nodes[moved_id] = RaftReplica(moved_id, q.bootstrap, q.logs[moved_id],
                                    random.Random(9), RaftConfig(),
                                    directory_id=key(moved_id).directory_id,
                                    kraft_version=1, local_listeners=(new_endpoint,))
    q._after(moved_id, q.nodes[moved_id].start(q.now))
    updated = VoterNode(key(moved_id), (new_endpoint,), (0, 1))
    q.run_until(lambda: all(r.voter_set.node(moved_id) == updated for r in q.nodes.values())
                and leader.high_watermark == leader.log.end_offset)
    assert [(s, d) for s, d, _ in update_requests(q)] == [(moved_id, leader.node_id)]
    run_for(q, 3 * FETCH_TIMEOUT_MS)
    assert len(update_requests(q)) == 1  # the set says what it should now
    assert leader.voter_set.node(leader.node_id) == VoterNode(
        key(leader.node_id), (endpoint(leader.node_id),), (0, 1))


def test_a_new_leader_listening_elsewhere_writes_itself_into_the_voter_set() -> None:
    """Kafka's appendStartOfEpochControlRecords: the leader's own node is brought up to
    date with its epoch's first records."""
    q = ListeningQuorum([1], {1: Endpoint("CONTROLLER", "h", 7001)})
    leader = q.leader()
    assert leader.voter_set.node(1) == VoterNode(key(1), (Endpoint("CONTROLLER", "h", 7001),))
    assert leader.high_watermark == leader.log.end_offset


def test_update_raft_voter_crosses_the_wire_as_kafkas_v0() -> None:
    from ottla.common.uuids import kafka_uuid_text
    from ottla.protocol.api import ApiKey, request_schema, response_schema
    from ottla.protocol.messages import build
    from ottla.raft import wire

    directory = "AAAAAAAAAAAAAAAAAAAABw"
    node = VoterNode(ReplicaKey(2, directory), (Endpoint("CONTROLLER", "127.0.0.1", 9093),))
    api_key, version, body = wire.encode_request(UpdateVoterRequest(node, 5), 1, "cluster")
    assert (api_key, version) == (ApiKey.UPDATE_RAFT_VOTER, 0)
    request = build(request_schema(api_key, version), body)
    assert (request.cluster_id, request.current_leader_epoch, request.voter_id,
            kafka_uuid_text(request.voter_directory_id)) == ("cluster", 5, 2, directory)
    assert [(e.name, e.host, e.port) for e in request.listeners] == [
        ("CONTROLLER", "127.0.0.1", 9093)]
    assert (request.k_raft_version_feature.min_supported_version,
            request.k_raft_version_feature.max_supported_version) == (0, 1)
    answer = build(response_schema(api_key, version), {
        "throttle_time": 0, "error_code": ErrorCode.request_timed_out, "current_leader": {
            "leader_id": 1, "leader_epoch": 5, "host": "127.0.0.1", "port": 9093}})
    assert wire.decode_response(UpdateVoterRequest(node, 5), 1, answer, None) == \
        UpdateVoterResponse(ErrorCode.request_timed_out, 1, 5)
