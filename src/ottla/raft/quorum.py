"""KRaft consensus for one replica, sans-I/O: messages and time in, messages out.

As in KIP-595 (with KIP-996 pre-vote): followers pull entries from the leader with
Fetch; the leader advances the high watermark to the offset a majority of voters has
fetched, once an entry of its own epoch is among them (a new leader first appends a
leader-change entry); a follower whose log diverged learns the leader's end offset for
its last epoch in the Fetch response and truncates to it; a follower that hears nothing
from its leader for ``fetch_timeout_ms`` first asks for pre-votes, which do not bump
any epoch, and only a majority of them starts a real election; a leader that has not
been fetched from by a majority for 1.5 fetch timeouts resigns (check quorum).

Entries are batches spanning ``count`` offsets. A leader counts only the part of its own
log that is flushed toward the high watermark, and a follower fetches the next entries
only once what it has is flushed: a Fetch offset acknowledges durable entries. The
leader parks a Fetch that finds nothing new (long polling) and answers it when entries
arrive, the high watermark moves past what the fetcher knows, or its wait ends.

Observers (brokers) are replicas outside the voter set: they never vote or campaign;
they find the leader by asking any voter and then fetch like followers, without
counting toward the high watermark.

The replica never reads a clock or touches a socket: the driver passes ``now_ms`` and
delivers the returned :class:`Outgoing` messages. ``epoch`` and ``voted_for`` are the
durable quorum state; a driver must persist ``quorum_state()`` after each call that
changed it and before sending what the call returned.

Snapshots, taken (``create_snapshot``) or installed (the leader's, fetched), are
decided here and written by the driver, off its event loop: ``take_snapshot_write``
hands over the next :class:`SnapshotWrite` (one at a time), and ``snapshot_written``
says it is durable, whereupon the log adopts it. While an install is under way the log
is about to be replaced, so the replica leaves it alone: it neither fetches nor
campaigns (a new leader would append to it) until the snapshot is in.

The voters (KIP-853): with ``kraft.version`` 1 the voter set is log state
(``voter_set.py``): the last VotersRecord in the log, committed or not, falling back to
the snapshot's or the bootstrap's, and a truncation reverts it. Majorities, the high
watermark, elections and check quorum always count the current set. The leader changes
it one voter at a time (``add_voter``, ``remove_voter``, ``update_voter``, with Kafka's
rules and errors), only once it has committed an entry of its epoch and the previous
change is committed; Add and Remove are answered when their VotersRecord commits
(``take_voter_change_results``). A leader that removed itself leads until then, and
resigns.

``kraft.version`` is log state as well: a static quorum (``controller.quorum.voters``)
runs at 0 until its leader is asked to upgrade (``upgrade_kraft_version``, Kafka's
``LeaderState.maybeAppendUpgradedKRaftVersion``) and appends one batch with the
KRaftVersionRecord and the static voters' VotersRecord; from then on the voters are the
log's. What that record says of each voter (directory id, endpoints, supported kraft
versions) the leader learns from the voters themselves: as in Kafka 4.4, a voter
following a leader tells it with UpdateRaftVoter (``UpdateVoterRequest``) once per
leader at ``kraft.version`` 0, which the leader keeps in memory (Kafka's volatile
voters), and at 1 whenever the log's voter set says otherwise than its
``local_listeners`` and supported versions, which the leader answers with a new
VotersRecord. It asks a fetch timeout after it starts following, and again every fetch
timeout while the leader has not taken it; as Kafka's RequestManager, a follower has one
request to its leader in flight at a time, so a due UpdateRaftVoter waits for the
(parked) Fetch's answer and the next Fetch for the UpdateRaftVoter's.

The replica records Kafka's ``raft-metrics`` sampled stats (``metrics``: commit and
election latencies, appended and fetched records) with the ``now_ms`` it is given.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ottla.protocol.errors import ErrorCode
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import (
    BeginQuorumEpoch,
    Committed,
    EndQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    KRaftVersionUpgrade,
    LeaderChange,
    Outgoing,
    Snapshot,
    SnapshotWrite,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoterApiVersionsRequest,
    VoterApiVersionsResponse,
    VoteRequest,
    VoteResponse,
)
from ottla.raft.raft_metrics import RaftMetrics
from ottla.raft.voter_set import (
    Endpoint,
    LogHistory,
    ReplicaKey,
    VoterNode,
    VoterSet,
    VoterSetHistory,
)

CAUGHT_UP_WINDOW_MS = 3_600_000
"""Kafka's LeaderState.isReplicaCaughtUp: a new voter must have caught up with the
leader, and fetched within the last hour."""
OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""Kafka's LeaderState: an observer that has not fetched for this long is forgotten
(when the leader next describes its replicas)."""


class Role(Enum):
    UNATTACHED = "unattached"
    FOLLOWER = "follower"
    PROSPECTIVE = "prospective"  # collecting pre-votes
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True)
class RaftConfig:
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    fetch_backoff_ms: int = 50  # pause after a failed Fetch before the next
    fetch_max_wait_ms: int = 500  # how long the leader may park a Fetch (long polling)
    max_fetch_entries: int = 64


class RaftError(RuntimeError):
    """A broken invariant (e.g. truncating committed entries): the replica must stop."""


@dataclass(frozen=True, slots=True)
class VoterChangeResult:
    """The answer to an AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter request."""

    request_id: int
    error: ErrorCode
    message: str | None = None


@dataclass(slots=True)
class _PendingChange:
    """An Add or Remove whose VotersRecord is appended, answered once it commits; an
    Add first waits for the new voter's ApiVersions (``adding``, no offset yet). An Add
    that does not ``ack_when_committed`` is ``answered`` once appended, yet stays the
    change in flight until it commits (Kafka's AddVoterHandlerState)."""

    request_id: int
    offset: int
    deadline_ms: int
    adding: VoterNode | None = None
    ack_when_committed: bool = True
    answered: bool = False


def kafka_replica_key(key: ReplicaKey) -> str:
    """A ReplicaKey as Kafka's messages print it."""
    directory = "<undefined>" if key.directory_id is None else key.directory_id
    return f"ReplicaKey(id={key.id}, directoryId={directory})"


def kafka_voter_keys(voters: VoterSet) -> str:
    """``VoterSet.voterKeys()`` as Kafka's messages print it (a Java set). Kafka's is an
    immutable set, whose order changes from one JVM start to the next; Ottla lists the
    voters by id."""
    return "[" + ", ".join(kafka_replica_key(k) for k in voters.keys) + "]"


@dataclass(slots=True)
class _Progress:
    """The leader's view of a replica that fetches from it (Kafka's ReplicaState)."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1

    def fetched(self, offset: int, leader_end: int, now_ms: int) -> None:
        if offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif self.leader_end_at_last_fetch > 0 and offset >= self.leader_end_at_last_fetch:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.end_offset = offset
        self.last_fetch_ms = now_ms
        self.leader_end_at_last_fetch = leader_end


class RaftReplica:
    def __init__(self, node_id: int, voters: VoterSet | set[int] | frozenset[int],
                 log: MemoryLog, rng: random.Random, config: RaftConfig | None = None, *,
                 epoch: int = 0, voted_for: int | None = None,
                 directory_id: str | None = None, kraft_version: int = 0,
                 bootstrap_servers: tuple[int, ...] = (),
                 local_listeners: tuple[Endpoint, ...] = (),
                 supported_kraft_versions: tuple[int, int] = (0, 1)) -> None:
        """``voters``: the static set (``kraft.version`` 0), or the bootstrap's, which
        the log's snapshot and VotersRecords supersede (``kraft.version`` 1; empty for
        a node formatted without initial controllers, which learns them from the log).
        ``bootstrap_servers``: whom an observer asks for the leader besides the voters
        (``controller.quorum.bootstrap.servers``; the driver names them).
        ``local_listeners`` and ``supported_kraft_versions``: this node as a voter would
        have the voter set say (UpdateRaftVoter); the driver may set the listeners once
        bound, before ``start``."""
        self.bootstrap_voters = VoterSet.of(voters)
        if not self.bootstrap_voters.nodes and (kraft_version < 1 or not bootstrap_servers):
            raise ValueError("a quorum needs at least one voter")
        self.bootstrap_servers = bootstrap_servers
        self.node_id = node_id
        self.directory_id = directory_id
        self.key = ReplicaKey(node_id, directory_id)
        self.local_listeners = local_listeners
        self.supported_kraft_versions = supported_kraft_versions
        self.log = log
        self.rng = rng
        self.config = config or RaftConfig()
        self.epoch = epoch
        self.voted_for = voted_for
        self.leader_id: int | None = None
        self.role = Role.UNATTACHED
        self.high_watermark = log.start_offset  # a snapshot only holds committed entries
        self.applied = 0
        self.epoch_start_offset = -1
        """Where this leader's epoch begins (its leader-change entry)."""
        self.metrics = RaftMetrics()
        self.bootstrap_kraft_version = kraft_version
        self._history = VoterSetHistory(self._snapshot_voters(log.snapshot))
        self._kraft_history: LogHistory[int] = LogHistory(
            self._snapshot_kraft_version(log.snapshot))
        offset = log.start_offset
        for entry in log.entries_between(log.start_offset, log.end_offset):
            self._track_control(offset, entry)
            offset += entry.count
        self._volatile_voters: VoterSet | None = None
        """A static quorum's leader: the voters as their UpdateRaftVoter told it (Kafka's
        in-memory voters of KRaftVersionUpgrade), which an upgrade writes to the log."""
        self._pending_change: _PendingChange | None = None
        self._change_results: list[VoterChangeResult] = []
        self._outbox: list[Outgoing] = []
        """Requests decided outside ``tick``/``handle`` (an AddRaftVoter's ApiVersions),
        sent with their next answer."""
        self._votes: set[int] = set()
        self._deadline = 0  # election timer (or, for a leader, the check-quorum time)
        # follower
        self._fetch_sent_ms: int | None = None
        self._next_fetch_ms = 0
        self._last_leader_contact = -(1 << 62)
        self._discover_next = 0  # observer: the voter asked next for the leader
        self._snapshot_wanted: tuple[int, int, int] | None = None
        """(end offset, epoch, our log end) of the snapshot a FetchSnapshot asked for."""
        self._snapshot_next: SnapshotWrite | None = None
        """Decided, for ``take_snapshot_write`` to hand over."""
        self._snapshot_writing: SnapshotWrite | None = None
        """Handed over, not yet ``snapshot_written``."""
        self._update_voter_due_ms = 0  # Kafka's FollowerState updateVoterSetPeriodTimer
        self._update_voter_sent_ms: int | None = None
        self._has_updated_leader = False  # this leader took our UpdateRaftVoter
        # leader
        self._replica_end: dict[int, int] = {}
        self._last_fetch: dict[int, int] = {}
        self._last_caught_up: dict[int, int] = {}
        self._observers: dict[ReplicaKey, _Progress] = {}
        self._parked: dict[int, tuple[FetchRequest, int]] = {}  # id -> (fetch, deadline)

    # --- durable state ------------------------------------------------------------------

    def quorum_state(self) -> dict[str, Any]:
        return {"leaderEpoch": self.epoch, "votedId": self.voted_for,
                "leaderId": self.leader_id}

    @property
    def local_node(self) -> VoterNode:
        """This replica as a voter: its key, listeners and supported kraft versions."""
        return VoterNode(self.key, self.local_listeners, self.supported_kraft_versions)

    @property
    def voter_set(self) -> VoterSet:
        """The voter set in force: the last one in the log, committed or not."""
        return self._history.last()

    @property
    def voters(self) -> frozenset[int]:
        return self.voter_set.ids

    @property
    def is_voter(self) -> bool:
        """False for an observer: a broker, or a controller not (or no longer) voting."""
        return self.voter_set.is_voter(self.key)

    @property
    def majority(self) -> int:
        return self.voter_set.majority

    def voter_set_at(self, offset: int) -> VoterSet:
        """The voter set in force at ``offset`` (not below the log start)."""
        return self._history.value_at(offset)

    def _snapshot_voters(self, snapshot: Snapshot | None) -> VoterSet:
        if snapshot is not None and snapshot.voters is not None:
            return snapshot.voters
        return self.bootstrap_voters

    def _snapshot_kraft_version(self, snapshot: Snapshot | None) -> int:
        """A snapshot with voters was taken at ``kraft.version`` 1."""
        if snapshot is not None and snapshot.voters is not None:
            return max(1, self.bootstrap_kraft_version)
        return self.bootstrap_kraft_version

    @property
    def kraft_version(self) -> int:
        """The ``kraft.version`` in force: the last one in the log, committed or not."""
        return self._kraft_history.last()

    def _track_control(self, offset: int, entry: Entry) -> bool:
        """Record the voter set or kraft.version ``entry`` (at ``offset``) sets; whether
        the voters changed."""
        payload = entry.payload
        if isinstance(payload, (KRaftVersionUpgrade, LeaderChange)):
            self._kraft_history.add_at(offset, payload.kraft_version)
            self._history.add_at(offset, payload.voters)
            return True
        if isinstance(payload, VoterSet):
            self._history.add_at(offset, payload)
            return True
        return False

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    # --- driving -----------------------------------------------------------------------

    def start(self, now_ms: int) -> list[Outgoing]:
        """After construction (or a restart with the persisted epoch and vote)."""
        if self.voter_set.is_only_voter(self.key):
            self.epoch += 1
            self.voted_for = self.node_id
            return self._become_leader(now_ms)
        if not self.is_voter:
            self._deadline = now_ms
            return self._discover(now_ms)
        self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        return []

    def propose(self, payload: Any, now_ms: int, count: int = 1) -> int | None:
        """Append ``payload`` as one entry of ``count`` offsets if leader; its base offset
        (committed later), else None. Parked fetches learn of it on the next ``tick``."""
        if not self.is_leader:
            return None
        offset = self.log.end_offset
        self._append([Entry(self.epoch, payload, count)], now_ms)
        self._maybe_advance_high_watermark(now_ms)
        return offset

    def take_committed(self) -> Committed | None:
        """Entries below the high watermark not yet handed to the state machine, after
        the snapshot to load first when the state machine is behind the log start."""
        if self.applied >= self.high_watermark:
            return None
        snapshot = None
        if self.applied < self.log.start_offset:
            snapshot = self.log.snapshot
            assert snapshot is not None
            self.applied = snapshot.end_offset
        committed = Committed(self.applied,
                              self.log.entries_between(self.applied, self.high_watermark),
                              snapshot)
        self.applied = self.high_watermark
        return committed

    def create_snapshot(self, end_offset: int, data: Any) -> bool:
        """Keep the state machine at ``end_offset`` (committed and applied) in place of
        the log before it, once the driver has written it (``take_snapshot_write``);
        False when there is nothing new to snapshot or a snapshot is being written."""
        if self._snapshot_next is not None or self._snapshot_writing is not None or \
                end_offset > min(self.high_watermark, self.applied) or \
                end_offset <= self.log.start_offset:
            return False
        voters = self._history.value_at(end_offset - 1) \
            if self._kraft_history.value_at(end_offset - 1) >= 1 else None
        snapshot = Snapshot(end_offset, self.log.epoch_at(end_offset - 1), data, voters)
        self._snapshot_next = SnapshotWrite(snapshot, install=False)
        return True

    def take_snapshot_write(self) -> SnapshotWrite | None:
        """The snapshot the driver should make durable now, if any. One at a time: an
        install decided while a take is being written waits for it, so the two never
        change the log's files at once."""
        if self._snapshot_writing is not None or self._snapshot_next is None:
            return None
        self._snapshot_writing, self._snapshot_next = self._snapshot_next, None
        return self._snapshot_writing

    def snapshot_written(self, write: SnapshotWrite, now_ms: int) -> list[Outgoing]:
        """``write`` is durable: the log adopts it (an installed one moves the high
        watermark to its end: a leader's snapshot holds only committed entries), and a
        follower fetches on from there."""
        if write is not self._snapshot_writing:
            raise ValueError(f"not the snapshot being written: {write.snapshot!r}")
        self._snapshot_writing = None
        self.log.end_snapshot(write)
        if write.install:
            self.high_watermark = max(self.high_watermark, write.snapshot.end_offset)
            self._history.reset(self._snapshot_voters(write.snapshot))
            self._kraft_history.reset(self._snapshot_kraft_version(write.snapshot))
        else:
            self._history.truncate_old_entries(self.log.start_offset)
            self._kraft_history.truncate_old_entries(self.log.start_offset)
        self._voters_changed(now_ms)
        return self._maybe_fetch(now_ms)

    @property
    def _installing(self) -> bool:
        """A leader's snapshot is decided and not yet in the log, which it will replace."""
        return any(w is not None and w.install
                   for w in (self._snapshot_next, self._snapshot_writing))

    def tick(self, now_ms: int) -> list[Outgoing]:
        """Timers, and whatever a flush or a proposal since the last call made possible
        (a higher high watermark, parked fetches to answer, the next Fetch to send)."""
        return self._tick(now_ms) + self._settle_changes(now_ms) + \
            self._drain_parked(now_ms) + self.take_outgoing()

    def _tick(self, now_ms: int) -> list[Outgoing]:
        if self.role is Role.LEADER:
            alive = sum(1 for v in self.voters if v == self.node_id or
                        now_ms - self._last_fetch.get(v, -(1 << 62))
                        < self.config.fetch_timeout_ms * 3 // 2)
            # As Kafka, a lone voter never expires check quorum, even when it is not the
            # leader (which removed itself): resigning before that voter has the record
            # would leave it campaigning in the older set, for the leader's vote it
            # cannot get (its log is behind).
            if alive < self.majority and len(self.voters) > 1:
                return self.resign(now_ms)
            self._maybe_advance_high_watermark(now_ms)
            return []
        if now_ms >= self._deadline:
            if self.role is Role.FOLLOWER and \
                    now_ms - self._last_leader_contact < self.config.fetch_timeout_ms:
                self._deadline = self._last_leader_contact + self.config.fetch_timeout_ms
            elif self._installing:
                pass  # a leader's first entry would go to the log being replaced
            elif self.is_voter:
                return self._become_prospective(now_ms)
            elif self.role is Role.FOLLOWER:
                # An observer whose leader went quiet looks for the leader again.
                self.role = Role.UNATTACHED
                self.leader_id = None
                self._fetch_sent_ms = None
        if self.role is Role.FOLLOWER:
            return self._maybe_fetch(now_ms)
        if not self.is_voter:
            return self._discover(now_ms)
        return []

    def resign(self, now_ms: int) -> list[Outgoing]:
        """Give up leadership of this epoch and let the others elect a successor."""
        if not self.is_leader:
            return []
        others = tuple(sorted((v for v in self.voters if v != self.node_id),
                              key=lambda v: -self._replica_end.get(v, 0)))
        self.role = Role.UNATTACHED
        self.leader_id = None
        self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        return [Outgoing(v, EndQuorumEpoch(self.node_id, self.epoch, others))
                for v in others] + self._drain_parked(now_ms)

    def handle(self, source: int, message: Any, now_ms: int) -> list[Outgoing]:
        return self._handle(source, message, now_ms) + self._settle_changes(now_ms) + \
            self._drain_parked(now_ms) + self.take_outgoing()

    def take_outgoing(self) -> list[Outgoing]:
        """What a voter change decided to send (``tick`` and ``handle`` return it too)."""
        out, self._outbox = self._outbox, []
        return out

    def _handle(self, source: int, message: Any, now_ms: int) -> list[Outgoing]:
        match message:
            case VoteRequest():
                return self._on_vote_request(source, message, now_ms)
            case VoteResponse():
                return self._on_vote_response(message, now_ms)
            case BeginQuorumEpoch():
                return self._on_begin_quorum_epoch(message, now_ms)
            case EndQuorumEpoch():
                return self._on_end_quorum_epoch(message, now_ms)
            case FetchRequest():
                return self._on_fetch(message, now_ms)
            case FetchResponse():
                return self._on_fetch_response(source, message, now_ms)
            case FetchSnapshotRequest():
                return self._on_fetch_snapshot(message, now_ms)
            case FetchSnapshotResponse():
                return self._on_fetch_snapshot_response(message, now_ms)
            case UpdateVoterRequest():
                return self._on_update_voter_request(source, message, now_ms)
            case UpdateVoterResponse():
                return self._on_update_voter_response(source, message, now_ms)
            case VoterApiVersionsRequest():
                # What this replica's node answers to ApiVersions (the driver leaves
                # that to the node's ApiVersions handler).
                return [Outgoing(source, VoterApiVersionsResponse(
                    ErrorCode.none, self.supported_kraft_versions))]
            case VoterApiVersionsResponse():
                self._on_voter_api_versions(source, message, now_ms)
                return []
        raise TypeError(f"not a Raft message: {message!r}")

    # --- what DescribeQuorum reports ---------------------------------------------------

    def replica_states(self, now_ms: int | None = None
                       ) -> tuple[list[tuple[ReplicaKey, int, int, int]],
                                  list[tuple[ReplicaKey, int, int, int]]]:
        """The leader's view of voters and observers: (key, log end offset, last fetch
        time, last caught-up time), -1 where unknown. Given ``now_ms``, observers that
        have not fetched for ``OBSERVER_SESSION_TIMEOUT_MS`` are forgotten first, as
        Kafka's LeaderState.observerStates forgets them."""
        if now_ms is not None:
            self._observers = {key: p for key, p in self._observers.items()
                               if now_ms - p.last_fetch_ms < OBSERVER_SESSION_TIMEOUT_MS}
        voters = []
        for node in self.voter_set.nodes:
            v = node.key.id
            if v == self.node_id:
                voters.append((node.key, self.log.end_offset, -1, -1))
            else:
                voters.append((node.key, self._replica_end.get(v, -1),
                               self._last_fetch.get(v, -1), self._last_caught_up.get(v, -1)))
        observers = [(key, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
                     for key, p in sorted(self._observers.items())]
        if not self.is_voter and self.is_leader:  # a leader removing itself observes
            observers.append((self.key, self.log.end_offset, -1, -1))
        return voters, observers

    @property
    def uncommitted_voter_change(self) -> bool:
        """An AddRaftVoter or RemoveRaftVoter this leader is handling: its VotersRecord
        not committed yet (Kafka's ``uncommitted-voter-change``)."""
        return self.is_leader and self._pending_change is not None

    def observer_keys(self) -> list[ReplicaKey]:
        """The observers the leader has heard from, by id and directory id."""
        return sorted(self._observers)

    # --- voter changes (KIP-853: AddVoterHandler, RemoveVoterHandler, UpdateVoterHandler) --

    def add_voter(self, request_id: int, voter: VoterNode, now_ms: int,
                  ack_when_committed: bool = True) -> VoterChangeResult | None:
        """AddRaftVoter: if the rules allow it, ask the new voter its kraft versions
        (a ``VoterApiVersionsRequest`` out of the next ``tick``/``handle`` or
        ``take_outgoing``) and, on its answer, append the set with it; None until then
        and while its VotersRecord is not committed (the answer comes through
        ``take_voter_change_results``; once appended when not ``ack_when_committed``,
        AddRaftVoter v1)."""
        error = self._change_refused(request_id, voter.key, now_ms, "add")
        if error is not None:
            return error
        if voter.key.id in self.voters:
            return VoterChangeResult(request_id, ErrorCode.duplicate_voter,
                                     self._duplicate_message(voter.key))
        # As Kafka's AddVoterHandler: ask the new voter its kraft versions first; the
        # rest is decided on its answer (``_on_voter_api_versions``).
        self._pending_change = _PendingChange(
            request_id, -1, now_ms + self.config.request_timeout_ms, voter,
            ack_when_committed)
        self._outbox.append(Outgoing(voter.key.id, VoterApiVersionsRequest(voter)))
        return None

    def _duplicate_message(self, key: ReplicaKey) -> str:
        return (f"The voter id for {kafka_replica_key(key)} is already part of the set of "
                f"voters {kafka_voter_keys(self.voter_set)}.")

    def _on_voter_api_versions(self, source: int, resp: VoterApiVersionsResponse,
                               now_ms: int) -> None:
        """The new voter's ApiVersions: refuse as Kafka's handleApiVersionsResponse does
        (its error, a kraft.version range without the finalized one, a voter not caught
        up), else append the set with it and its range."""
        pending = self._pending_change
        if pending is None or pending.adding is None or pending.offset >= 0 or \
                pending.adding.key.id != source or not self.is_leader:
            return  # not the answer awaited (Kafka: "not expected")
        voter = pending.adding

        def refuse(error: ErrorCode, message: str) -> None:
            self._pending_change = None
            self._change_results.append(VoterChangeResult(pending.request_id, error, message))
        if resp.error is not ErrorCode.none:
            return refuse(ErrorCode.request_timed_out,
                          "Aborted add voter operation for since API_VERSIONS returned an "
                          f"error {resp.error.name.upper()}")
        finalized = self.kraft_version
        if resp.kraft_versions is None or \
                not resp.kraft_versions[0] <= finalized <= resp.kraft_versions[1]:
            # Kafka's words, its unclosed parenthesis included.
            supported = "(min: 0, max: 0)" if resp.kraft_versions is None else \
                f"(min: {resp.kraft_versions[0]}, max: {resp.kraft_versions[1]}"
            return refuse(ErrorCode.invalid_request,
                          f"Aborted add voter operation for {kafka_replica_key(voter.key)} "
                          f"since the kraft.version range {supported} doesn't support the "
                          f"finalized version {finalized}")
        progress = self._observers.get(voter.key)
        if progress is None or progress.last_caught_up_ms < 0 or \
                progress.last_fetch_ms <= now_ms - CAUGHT_UP_WINDOW_MS:
            return refuse(ErrorCode.request_timed_out,
                          f"Aborted add voter operation for {kafka_replica_key(voter.key)} "
                          "since it is lagging behind")
        new = self.voter_set.add_voter(
            VoterNode(voter.key, voter.endpoints, resp.kraft_versions))
        if new is None:
            return refuse(ErrorCode.duplicate_voter, self._duplicate_message(voter.key))
        pending.offset = self._append_voters(new, now_ms)
        if not pending.ack_when_committed:
            pending.answered = True
            self._change_results.append(VoterChangeResult(pending.request_id,
                                                          ErrorCode.none))

    def remove_voter(self, request_id: int, key: ReplicaKey, now_ms: int
                     ) -> VoterChangeResult | None:
        """RemoveRaftVoter: as ``add_voter``; the last voter cannot be removed (Kafka
        answers VOTER_NOT_FOUND, as for a key that is not a voter)."""
        error = self._change_refused(request_id, key, now_ms, "remove")
        if error is not None:
            return error
        new = self.voter_set.remove_voter(key)
        if new is None:
            return VoterChangeResult(
                request_id, ErrorCode.voter_not_found,
                f"Cannot remove voter {kafka_replica_key(key)} from the set of voters "
                f"{kafka_voter_keys(self.voter_set)}")
        self._pending_change = _PendingChange(
            request_id, self._append_voters(new, now_ms),
            now_ms + self.config.request_timeout_ms)
        return None

    def update_voter(self, request_id: int, voter: VoterNode, now_ms: int
                     ) -> VoterChangeResult:
        """UpdateRaftVoter: a voter's endpoints and supported kraft versions, with the
        checks and errors of Kafka 4.4's UpdateVoterHandler, answered at once: at
        ``kraft.version`` 1 a VotersRecord with the voter's node is appended (to commit
        before the next change), at 0 the leader's in-memory voters take it (the
        directory id too). The response carries no message."""
        def refuse(error: ErrorCode) -> VoterChangeResult:
            return VoterChangeResult(request_id, error)
        if not self.is_leader:
            return refuse(ErrorCode.not_leader_or_follower)
        low, high = voter.kraft_versions
        if voter.key.id < 0 or voter.key.directory_id is None or \
                low < 0 or high < 0 or high < low:
            return refuse(ErrorCode.invalid_request)  # KafkaRaftClient's, before the rest
        self._expire_pending_change(now_ms)
        if self._pending_change is not None or \
                self.high_watermark <= self.epoch_start_offset:
            return refuse(ErrorCode.request_timed_out)
        reconfigurable = self.kraft_version >= 1
        if reconfigurable:
            if self._history.last_offset() >= self.high_watermark:
                return refuse(ErrorCode.request_timed_out)  # the last set not committed
            voters: VoterSet | None = self.voter_set
        else:
            voters = self._volatile_voters
        if voters is None:
            return refuse(ErrorCode.request_timed_out)
        if not low <= self.kraft_version <= high:
            return refuse(ErrorCode.invalid_request)
        new = voters.update_voter(voter) if reconfigurable else \
            voters.update_voter_ignoring_directory_id(voter)
        if new is None:
            return refuse(ErrorCode.voter_not_found)
        if reconfigurable:
            self._append_voters(new, now_ms)
        else:
            self._volatile_voters = new
        if voter.key.id in self._last_fetch:
            self._last_fetch[voter.key.id] = now_ms  # contact, for check quorum
        return VoterChangeResult(request_id, ErrorCode.none)

    def upgrade_kraft_version(self, version: int, now_ms: int, validate_only: bool = False
                              ) -> tuple[ErrorCode, str | None]:
        """UpdateFeatures of ``kraft.version`` (Kafka's ``maybeAppendUpgradedKRaftVersion``):
        append the KRaftVersionRecord and the voters' VotersRecord, or say why not, with
        Kafka's error and message. No change when already at ``version``. The voters are
        the leader's in-memory ones: the static set, each voter as its UpdateRaftVoter
        in this epoch said; one not heard from counts, as in Kafka, as supporting only
        kraft.version 0 (and has no directory id)."""
        name = "kraft.version"
        if not self.is_leader:
            return ErrorCode.unknown_server_error, None  # Kafka's NotLeaderException
        current = self.kraft_version
        if version == current:
            return ErrorCode.none, None
        if current > version:
            return (ErrorCode.invalid_update_version,
                    f"Invalid upgrade of {name} from version {current} to {version} because "
                    "the new version is a downgrade")
        voters = self._volatile_voters
        if voters is None or voters.ids != self.voter_set.ids:
            # Kafka's IllegalStateException ("missing voters"): UNKNOWN_SERVER_ERROR.
            return ErrorCode.unknown_server_error, None
        if not voters.supports(version):
            return (ErrorCode.invalid_update_version,
                    f"Invalid upgrade of {name} to {version} because not all of the "
                    "voters support it")
        if any(n.key.directory_id is None for n in voters.nodes):
            # Kafka's IllegalStateException "Directory id must be known for all of the
            # voters", which reaches the client as an UNKNOWN_SERVER_ERROR without text.
            return ErrorCode.unknown_server_error, None
        if not validate_only:
            upgrade = KRaftVersionUpgrade(version, voters)
            self._append([Entry(self.epoch, upgrade, 2)], now_ms)
            self._maybe_advance_high_watermark(now_ms)
        return ErrorCode.none, None

    def take_voter_change_results(self) -> list[VoterChangeResult]:
        """Add and Remove answers decided since the last call: the VotersRecord
        committed (NONE), timed out, or leadership was lost."""
        results, self._change_results = self._change_results, []
        return results

    def _change_refused(self, request_id: int, key: ReplicaKey, now_ms: int, verb: str
                        ) -> VoterChangeResult | None:
        """The checks an Add or Remove passes first, in Kafka 4.4's order and with its
        errors and words (KafkaRaftClient, then Add/RemoveVoterHandler); ``verb`` is
        "add" or "remove"."""
        def refuse(error: ErrorCode, message: str | None) -> VoterChangeResult:
            return VoterChangeResult(request_id, error, message)
        if not self.is_leader:
            return refuse(ErrorCode.not_leader_or_follower, None)
        if key.id < 0 or key.directory_id is None:
            return refuse(ErrorCode.invalid_request,
                          f"{verb.capitalize()} voter request didn't include a valid voter")
        if self._change_pending(now_ms):
            return refuse(ErrorCode.request_timed_out, "Request timed out waiting for leader "
                          "to handle previous voter change request")
        if self.high_watermark <= self.epoch_start_offset:
            return refuse(ErrorCode.request_timed_out, "Request timed out waiting for leader "
                          "to establish HWM and fence previous voter changes")
        if self.kraft_version < 1:
            doing = "adding" if verb == "add" else "removing"
            return refuse(ErrorCode.unsupported_version,
                          f"Cluster doesn't support {doing} voter because the kraft.version "
                          f"feature is {self.kraft_version}")
        if not self._voters_committed():
            return refuse(ErrorCode.request_timed_out,
                          "Request timed out waiting for voters to commit the latest voter "
                          f"change at Optional[{self._history.last_offset()}] with HWM "
                          f"{self.high_watermark}")
        return None

    def _change_pending(self, now_ms: int) -> bool:
        """One change at a time: an Add or Remove waits for its answer (or expiry)."""
        self._expire_pending_change(now_ms)
        return self._pending_change is not None

    def _voters_committed(self) -> bool:
        """The last VotersRecord is committed (a change that timed out may not be): the
        next change must wait for it too."""
        return self._history.last_offset() < self.high_watermark

    def _expire_pending_change(self, now_ms: int) -> None:
        pending = self._pending_change
        if pending is not None and now_ms >= pending.deadline_ms:
            self._pending_change = None
            if not pending.answered:  # Kafka's expiry: the error, no message
                self._change_results.append(VoterChangeResult(
                    pending.request_id, ErrorCode.request_timed_out))

    def _append_voters(self, voters: VoterSet, now_ms: int) -> int:
        offset = self.log.end_offset
        self._append([Entry(self.epoch, voters)], now_ms)
        self._maybe_advance_high_watermark(now_ms)
        return offset

    def _settle_changes(self, now_ms: int) -> list[Outgoing]:
        """Answer the pending change when its record commits (or leadership ends); a
        leader no longer among the committed voters resigns."""
        pending = self._pending_change
        if pending is not None:
            if not self.is_leader:
                self._pending_change = None
                if not pending.answered:  # Kafka's: the error, no message
                    self._change_results.append(VoterChangeResult(
                        pending.request_id, ErrorCode.not_leader_or_follower))
            elif 0 <= pending.offset < self.high_watermark:
                self._pending_change = None
                if not pending.answered:
                    self._change_results.append(VoterChangeResult(pending.request_id,
                                                                  ErrorCode.none))
            else:
                self._expire_pending_change(now_ms)
        if self.is_leader and not self.is_voter and \
                self.high_watermark > self._history.last_offset():
            return self.resign(now_ms)
        return []

    # --- the log, and the voter set it carries ---------------------------------------------

    def _append(self, entries: list[Entry] | tuple[Entry, ...], now_ms: int) -> None:
        offset = self.log.end_offset
        self.log.append(entries)
        changed = False
        for entry in entries:
            changed = self._track_control(offset, entry) or changed
            offset += entry.count
            if self.is_leader:
                self.metrics.leader_appended(offset, entry.count, now_ms)
        if changed:
            self._voters_changed(now_ms)

    def _truncate(self, offset: int, now_ms: int) -> None:
        self.log.truncate_to(offset)  # may end below ``offset``: whole batches go
        offset = self.log.end_offset
        self._kraft_history.truncate_new_entries(offset)
        if self._history.last_offset() >= offset:
            self._history.truncate_new_entries(offset)
            self._voters_changed(now_ms)

    def _voters_changed(self, now_ms: int) -> None:
        """A leader tracks the new voters (an added one starts from where it fetched as
        an observer) and forgets the removed ones, which fetch on as observers."""
        if not self.is_leader:
            return
        voters = self.voters - {self.node_id}
        for v in list(self._replica_end):
            if v not in voters:
                del self._replica_end[v]
                self._last_fetch.pop(v, None)
                self._last_caught_up.pop(v, None)
        for v in voters:
            if v not in self._replica_end:
                node = self.voter_set.node(v)
                progress = self._observers.pop(node.key, None) if node is not None else None
                self._replica_end[v] = max(progress.end_offset, 0) if progress else 0
                self._last_fetch[v] = now_ms
        self._maybe_advance_high_watermark(now_ms)

    # --- transitions ---------------------------------------------------------------------

    def _reset_election_timer(self, now_ms: int, base_ms: int) -> None:
        self._deadline = now_ms + base_ms + self.rng.randrange(
            self.config.election_backoff_max_ms + 1)

    def _observe_epoch(self, epoch: int, leader_id: int | None, now_ms: int) -> None:
        """Move to a newer epoch: forget the vote, follow the leader if known."""
        if epoch > self.epoch:
            self.epoch = epoch
            self.voted_for = None
            self.leader_id = None
            self.role = Role.UNATTACHED
            self._fetch_sent_ms = None  # an answer to a fetch of an older epoch is void
            self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        if leader_id is not None and epoch == self.epoch and self.leader_id is None \
                and leader_id != self.node_id:
            self._become_follower(leader_id, now_ms)

    def _become_follower(self, leader_id: int, now_ms: int) -> None:
        """Follow ``leader_id`` for a fetch timeout. Only messages from the leader itself
        count as contact (``_last_leader_contact``): a leader learned by hearsay must not
        make this node refuse pre-votes, or voters could keep vouching for a dead one."""
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.metrics.leader_known(now_ms)
        self._update_voter_due_ms = now_ms + self.config.fetch_timeout_ms
        self._update_voter_sent_ms = None
        self._has_updated_leader = False
        self._fetch_sent_ms = None
        self._next_fetch_ms = now_ms
        self._deadline = now_ms + self.config.fetch_timeout_ms

    def _log_is_current(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _vote_request(self, pre_vote: bool) -> list[Outgoing]:
        # A pre-vote carries the current epoch (KIP-996's ReplicaEpoch): only a won
        # pre-vote moves the prospective to the next one.
        return [Outgoing(v.key.id, VoteRequest(
            self.node_id, self.epoch, self.log.last_epoch, self.log.end_offset, pre_vote,
            self.directory_id, v.key.directory_id))
            for v in self.voter_set.nodes if v.key.id != self.node_id]

    def _won(self) -> bool:
        """A majority of the current voters granted (the set may change mid-election)."""
        return len(self._votes & self.voters) >= self.majority

    def _become_prospective(self, now_ms: int) -> list[Outgoing]:
        self.role = Role.PROSPECTIVE
        self.leader_id = None
        self._votes = {self.node_id}
        self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        if self._won():
            return self._become_candidate(now_ms)  # the only voter left
        self.metrics.election_started(now_ms)
        return self._vote_request(pre_vote=True)

    def _become_candidate(self, now_ms: int) -> list[Outgoing]:
        self.epoch += 1
        self.voted_for = self.node_id
        self.leader_id = None
        self.role = Role.CANDIDATE
        self._votes = {self.node_id}
        self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        if self._won():
            return self._become_leader(now_ms)
        self.metrics.election_started(now_ms)
        return self._vote_request(pre_vote=False)

    def _become_leader(self, now_ms: int) -> list[Outgoing]:
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self._replica_end = {v: 0 for v in self.voters if v != self.node_id}
        self._last_fetch = {v: now_ms for v in self.voters}
        self._last_caught_up = {}
        self._observers = {}
        self._volatile_voters = None
        if self.kraft_version < 1:
            # Kafka's LeaderState: the static voters (supporting kraft.version 0 only, as
            # configured voters do) with this leader as it knows itself.
            static = VoterSet(tuple(VoterNode(n.key, n.endpoints, (0, 0))
                                    for n in self.voter_set.nodes))
            self._volatile_voters = static.update_voter_ignoring_directory_id(
                self.local_node)
        self._pending_change = None
        self.epoch_start_offset = self.log.end_offset
        self.metrics.leadership_lost()  # what a past leadership left uncommitted
        self.metrics.leader_known(now_ms)
        bootstrap_only = self._history.last_offset() < 0 and \
            (self.log.snapshot is None or self.log.snapshot.voters is None)
        if self.kraft_version >= 1 and \
                (bootstrap_only or self.voter_set.needs_update(self.local_node)):
            # As Kafka's appendStartOfEpochControlRecords: a set known only from the
            # bootstrap checkpoint goes into the log, where replicas formatted without
            # initial controllers learn it, and so does a set that says otherwise of
            # this leader's listeners or versions, with this leader as it is now; both
            # in the leader-change batch, with the KRaftVersionRecord.
            voters = self.voter_set.update_voter(self.local_node) or self.voter_set
            start = Entry(self.epoch, LeaderChange(self.kraft_version, voters), 3)
        else:
            start = Entry(self.epoch, None)  # the leader change alone
        self._append([start], now_ms)  # commits the epoch
        self._maybe_advance_high_watermark(now_ms)
        return [Outgoing(v.key.id, BeginQuorumEpoch(self.node_id, self.epoch,
                                                    v.key.directory_id))
                for v in self.voter_set.nodes if v.key.id != self.node_id]

    # --- elections -----------------------------------------------------------------------

    def _on_vote_request(self, source: int, req: VoteRequest, now_ms: int) -> list[Outgoing]:
        if not self.is_voter if self.kraft_version < 1 else \
                req.voter_directory_id not in (None, self.directory_id):
            # Kafka checks the voter key the candidate names (KIP-853): a replica whose
            # disk was replaced (another directory id) lost its log and votes, and must
            # not vote as the voter it was. A static quorum's observers never vote.
            return [Outgoing(source, VoteResponse(self.node_id, self.epoch, False,
                                                  req.pre_vote, self.leader_id))]
        up_to_date = self._log_is_current(req.last_epoch, req.end_offset)
        if req.epoch > self.epoch:
            # A pre-vote's epoch is one the requester already reached through a won
            # election: as Kafka does, any vote request of a newer epoch moves this node
            # there. Without it a voter stranded in a newer epoch could never rejoin a
            # leader of an older one, which ignores it, nor win a pre-vote.
            self._observe_epoch(req.epoch, None, now_ms)
        if req.pre_vote:
            # Grant only if the candidate could win and we have no live leader: a node
            # cut off from a healthy quorum cannot disrupt it.
            live_leader = self.is_leader or (
                self.role is Role.FOLLOWER and
                now_ms - self._last_leader_contact < self.config.fetch_timeout_ms)
            granted = req.epoch == self.epoch and up_to_date and not live_leader
            # Name the leader only while it is live, or the candidate would follow a
            # dead one (KIP-996 sends it to the leader it is told about).
            return [Outgoing(source, VoteResponse(self.node_id, self.epoch, granted, True,
                                                  self.leader_id if live_leader else None))]
        granted = req.epoch == self.epoch and up_to_date and \
            self.voted_for in (None, req.candidate_id) and self.leader_id is None
        if granted:
            self.voted_for = req.candidate_id
            self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        return [Outgoing(source, VoteResponse(self.node_id, self.epoch, granted, False,
                                              self.leader_id))]

    def _on_vote_response(self, resp: VoteResponse, now_ms: int) -> list[Outgoing]:
        if resp.epoch > self.epoch and not (resp.pre_vote and resp.granted):
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            return self._maybe_fetch(now_ms)
        if resp.pre_vote and self.role is Role.PROSPECTIVE and resp.epoch == self.epoch \
                and resp.leader_id is not None and resp.leader_id != self.node_id:
            # KIP-996: the voter knows a leader of our epoch; follow it, stop asking.
            self._become_follower(resp.leader_id, now_ms)
            return self._maybe_fetch(now_ms)
        if resp.pre_vote and self.role is Role.PROSPECTIVE and resp.granted \
                and resp.epoch <= self.epoch:
            # A pre-vote does not move the voter's epoch: a grant may carry an older one.
            self._votes.add(resp.voter_id)
            if self._won():
                return self._become_candidate(now_ms)
        elif not resp.pre_vote and self.role is Role.CANDIDATE and resp.granted \
                and resp.epoch == self.epoch:
            self._votes.add(resp.voter_id)
            if self._won():
                return self._become_leader(now_ms)
        return []

    def _on_begin_quorum_epoch(self, msg: BeginQuorumEpoch, now_ms: int) -> list[Outgoing]:
        if msg.epoch < self.epoch or \
                msg.voter_directory_id not in (None, self.directory_id):
            return []  # old, or for the voter whose disk this one replaced
        if msg.epoch == self.epoch and self.is_leader and msg.leader_id != self.node_id:
            raise RaftError(f"two leaders in epoch {msg.epoch}: {self.node_id} and "
                            f"{msg.leader_id}")
        self._observe_epoch(msg.epoch, msg.leader_id, now_ms)
        if self.role is Role.FOLLOWER and self.leader_id == msg.leader_id:
            self._last_leader_contact = now_ms
            return self._maybe_fetch(now_ms)
        return []

    def _on_end_quorum_epoch(self, msg: EndQuorumEpoch, now_ms: int) -> list[Outgoing]:
        if msg.epoch == self.epoch and self.leader_id == msg.leader_id and not self.is_leader:
            self.role = Role.UNATTACHED
            self.leader_id = None
            rank = msg.preferred_successors.index(self.node_id) \
                if self.node_id in msg.preferred_successors else len(self.voters)
            # The most caught-up successor asks first; the others wait a little longer.
            self._deadline = now_ms + rank * self.config.election_timeout_ms // 2
        return []

    # --- replication ---------------------------------------------------------------------

    def _maybe_fetch(self, now_ms: int) -> list[Outgoing]:
        """A follower's next request to its leader: as Kafka's pollFollowerAsVoter, one
        at a time (its RequestManager: none while a Fetch, parked or not, or an
        UpdateRaftVoter awaits its answer or request timeout), an UpdateRaftVoter when
        one is due, else a Fetch."""
        if self.role is not Role.FOLLOWER or self.leader_id is None:
            return []
        if self._in_flight(self._fetch_sent_ms, now_ms) or \
                self._in_flight(self._update_voter_sent_ms, now_ms):
            return []
        update = self._maybe_update_voter(now_ms)
        if update:
            return update
        if now_ms < self._next_fetch_ms or self._installing:
            return []
        if self.log.flushed_end_offset < self.log.end_offset:
            return []  # a fetch offset acknowledges what we have: flush it first
        self._fetch_sent_ms = now_ms
        return [Outgoing(self.leader_id, FetchRequest(
            self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch,
            self.config.fetch_max_wait_ms, self.high_watermark, self.directory_id))]

    def _in_flight(self, sent_ms: int | None, now_ms: int) -> bool:
        return sent_ms is not None and now_ms - sent_ms < self.config.request_timeout_ms

    def _maybe_update_voter(self, now_ms: int) -> list[Outgoing]:
        """Kafka 4.4's pollFollowerAsVoter, with no request to the leader in flight:
        each fetch timeout a voter checks whether the leader must hear from it
        (``_should_update_voter``) and sends UpdateRaftVoter if so; the period starts
        again when it is sent (or not needed). A due one waits for the Fetch in flight."""
        if not self.is_voter or now_ms < self._update_voter_due_ms:
            return []
        if not self._should_update_voter():
            self._update_voter_due_ms = now_ms + self.config.fetch_timeout_ms
            return []
        self._update_voter_sent_ms = now_ms
        self._update_voter_due_ms = now_ms + self.config.fetch_timeout_ms
        return [Outgoing(self.leader_id, UpdateVoterRequest(self.local_node, self.epoch))]

    def _should_update_voter(self) -> bool:
        """Kafka's shouldSendUpdateVoteRequest: at kraft.version 1 when the log's voter
        set says otherwise of this voter; at 0 once per leader."""
        if self.kraft_version >= 1:
            return self.voter_set.needs_update(self.local_node)
        return not self._has_updated_leader

    def _on_update_voter_request(self, source: int, req: UpdateVoterRequest, now_ms: int
                                 ) -> list[Outgoing]:
        """UpdateRaftVoter delivered to the core (the driver's controller API layer
        checks the cluster id and listener first): Kafka's epoch checks, then
        ``update_voter``."""
        if req.epoch < self.epoch:
            error = ErrorCode.fenced_leader_epoch
        elif req.epoch > self.epoch:
            error = ErrorCode.unknown_leader_epoch
        else:
            error = self.update_voter(0, req.voter, now_ms).error
        return [Outgoing(source, UpdateVoterResponse(error, self.leader_id, self.epoch))]

    def _on_update_voter_response(self, source: int, resp: UpdateVoterResponse,
                                  now_ms: int) -> list[Outgoing]:
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            return self._maybe_fetch(now_ms)
        if self.role is not Role.FOLLOWER or resp.epoch != self.epoch or \
                source != self.leader_id:
            return []
        self._update_voter_sent_ms = None
        if resp.error in (ErrorCode.none, ErrorCode.unsupported_version):
            # As Kafka: taken (or a leader that has no UpdateRaftVoter): do not ask again
            # at kraft.version 0; the answer is contact with the leader.
            self._has_updated_leader = True
            self._last_leader_contact = now_ms
        return self._maybe_fetch(now_ms)  # the leader is free for the next request

    def _discover(self, now_ms: int) -> list[Outgoing]:
        """An observer without a leader asks the voters in turn; whoever answers names
        the leader (or is it)."""
        if self._fetch_sent_ms is not None and \
                now_ms - self._fetch_sent_ms < self.config.request_timeout_ms:
            return []
        if now_ms < self._next_fetch_ms or self._installing:
            return []
        voters = [v for v in sorted(self.voters) if v != self.node_id] + \
            [b for b in self.bootstrap_servers if b not in self.voters]
        if not voters:
            return []
        target = voters[self._discover_next % len(voters)]
        self._discover_next += 1
        self._fetch_sent_ms = now_ms
        return [Outgoing(target, FetchRequest(
            self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch, 0,
            self.high_watermark, self.directory_id))]

    def _on_fetch(self, req: FetchRequest, now_ms: int) -> list[Outgoing]:
        if req.epoch > self.epoch:
            self._observe_epoch(req.epoch, None, now_ms)
        if not self.is_leader or req.epoch != self.epoch:
            error = "fenced_leader_epoch" if req.epoch < self.epoch else "not_leader"
            return [Outgoing(req.replica_id, FetchResponse(
                self.leader_id, self.epoch, self.high_watermark, error=error))]
        key = ReplicaKey(req.replica_id, req.replica_directory_id)
        voter = req.replica_id in self._replica_end and self.voter_set.is_voter(key)
        if voter:
            self._last_fetch[req.replica_id] = now_ms  # any fetch is contact (check quorum)
        snapshot = self.log.snapshot
        epoch, end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if snapshot is not None and (req.fetch_offset < self.log.start_offset or
                                     (req.fetch_offset > 0 and end < self.log.start_offset)):
            # What it needs (or where it diverged) was compacted into a snapshot.
            return [Outgoing(req.replica_id, FetchResponse(
                self.node_id, self.epoch, self.high_watermark, base_offset=req.fetch_offset,
                snapshot_end_offset=snapshot.end_offset, snapshot_epoch=snapshot.epoch))]
        if req.fetch_offset > 0 and (epoch != req.last_fetched_epoch or end < req.fetch_offset):
            return [Outgoing(req.replica_id, FetchResponse(
                self.node_id, self.epoch, self.high_watermark, base_offset=req.fetch_offset,
                diverging_epoch=epoch, diverging_end_offset=end))]
        if voter:
            self._replica_end[req.replica_id] = req.fetch_offset
            if req.fetch_offset >= self.log.end_offset:
                self._last_caught_up[req.replica_id] = now_ms
            self._maybe_advance_high_watermark(now_ms)
        elif req.replica_id != self.node_id:
            self._observers.setdefault(key, _Progress()).fetched(
                req.fetch_offset, self.log.end_offset, now_ms)
        self._parked.pop(req.replica_id, None)  # a newer fetch replaces a parked one
        if req.max_wait_ms > 0 and req.fetch_offset >= self.log.end_offset and \
                req.known_high_watermark >= self.high_watermark:
            self._parked[req.replica_id] = (req, now_ms + req.max_wait_ms)
            return []
        return [self._fetch_answer(req)]

    def _fetch_answer(self, req: FetchRequest) -> Outgoing:
        entries = self.log.read(req.fetch_offset, self.config.max_fetch_entries)
        return Outgoing(req.replica_id, FetchResponse(
            self.node_id, self.epoch, self.high_watermark, entries, req.fetch_offset))

    def _drain_parked(self, now_ms: int) -> list[Outgoing]:
        """Answer the parked fetches that have news, or whose wait is over; a replica
        that is no longer leader sends them away."""
        if not self._parked:
            return []
        out = []
        for replica_id, (req, deadline) in list(self._parked.items()):
            if not self.is_leader or req.epoch != self.epoch:
                out.append(Outgoing(replica_id, FetchResponse(
                    self.leader_id, self.epoch, self.high_watermark, error="not_leader")))
            elif self.log.end_offset > req.fetch_offset or \
                    self.high_watermark > req.known_high_watermark or now_ms >= deadline:
                out.append(self._fetch_answer(req))
            else:
                continue
            del self._parked[replica_id]
        return out

    def _on_fetch_snapshot(self, req: FetchSnapshotRequest, now_ms: int) -> list[Outgoing]:
        if self.is_leader and req.replica_id in self._last_fetch:
            self._last_fetch[req.replica_id] = now_ms  # downloading is contact too
        snapshot = self.log.snapshot
        if not self.is_leader or req.epoch != self.epoch or snapshot is None or \
                (snapshot.end_offset, snapshot.epoch) != (req.end_offset, req.snapshot_epoch):
            snapshot = None  # gone or not ours to give: the follower fetches again
        return [Outgoing(req.replica_id, FetchSnapshotResponse(
            self.leader_id, self.epoch, snapshot))]

    def _on_fetch_snapshot_response(self, resp: FetchSnapshotResponse, now_ms: int
                                    ) -> list[Outgoing]:
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            return self._maybe_fetch(now_ms)
        if resp.epoch < self.epoch or self.role is not Role.FOLLOWER or \
                resp.leader_id != self.leader_id:
            return []
        self._fetch_sent_ms = None
        self._last_leader_contact = now_ms
        snapshot = resp.snapshot
        wanted, self._snapshot_wanted = self._snapshot_wanted, None
        # The leader sends a replica to a snapshot when its log ends before the
        # leader's log start or diverged below it; either way the whole log goes, even
        # a longer one. Everything the replica knows is committed precedes the snapshot
        # end, so nothing committed is lost. Only the snapshot asked for, with the log
        # as it was when asked, is installed: a late answer must not undo entries
        # fetched (and acknowledged) since.
        # The driver writes it, and until then nothing touches the log (``_installing``);
        # a take not yet handed over is older than the snapshot, so it is dropped.
        if snapshot is not None and snapshot.end_offset > self.high_watermark and \
                wanted == (snapshot.end_offset, snapshot.epoch, self.log.end_offset):
            self._snapshot_next = SnapshotWrite(snapshot, install=True)
        return self._maybe_fetch(now_ms)

    def _maybe_advance_high_watermark(self, now_ms: int) -> None:
        """The majority's end offset, counting only the flushed part of our own log."""
        if not self.is_leader:
            return
        ends = [self._replica_end.get(v, 0) for v in self.voters if v != self.node_id]
        if self.is_voter:  # a leader removing itself does not count (KIP-853)
            ends.append(self.log.flushed_end_offset)
        ends.sort(reverse=True)
        candidate = ends[self.majority - 1]
        if candidate > self.high_watermark and \
                self.log.epoch_at(candidate - 1) == self.epoch:
            self.high_watermark = candidate
            self.metrics.committed(candidate, now_ms)

    def _on_fetch_response(self, source: int, resp: FetchResponse, now_ms: int
                           ) -> list[Outgoing]:
        if not self.is_voter and self.role is Role.UNATTACHED:
            # Any answer ends this round of discovery: ask the next voter soon.
            self._fetch_sent_ms = None
            self._next_fetch_ms = now_ms + self.config.fetch_backoff_ms
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            return self._maybe_fetch(now_ms)
        if resp.epoch < self.epoch:
            return []
        if self.leader_id is None and resp.leader_id is not None:
            # Same epoch, and the answer names its leader: an observer found it.
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            return self._maybe_fetch(now_ms)
        if self.role is not Role.FOLLOWER or resp.leader_id != self.leader_id or \
                source != self.leader_id or resp.error is not None:
            if self.role is Role.FOLLOWER and source == self.leader_id:
                self._fetch_sent_ms = None
                self._next_fetch_ms = now_ms + self.config.fetch_backoff_ms
                if not self.is_voter and resp.error == "not_leader":
                    # It resigned (or was removed): an observer looks for the leader
                    # again rather than ask it until its fetch timeout.
                    self.role = Role.UNATTACHED
                    self.leader_id = None
            return []
        self._last_leader_contact = now_ms
        if self._installing:
            return []  # a late answer: the log it would change is being replaced
        if resp.base_offset != self.log.end_offset:
            return []  # an answer to an older Fetch: the current one is on its way
        self._fetch_sent_ms = None
        if resp.snapshot_end_offset >= 0:
            self._fetch_sent_ms = now_ms
            self._snapshot_wanted = (resp.snapshot_end_offset, resp.snapshot_epoch,
                                     self.log.end_offset)
            return [Outgoing(resp.leader_id, FetchSnapshotRequest(
                self.node_id, self.epoch, resp.snapshot_end_offset, resp.snapshot_epoch))]
        if resp.diverging_epoch >= 0:
            _, own_end = self.log.end_offset_for_epoch(resp.diverging_epoch)
            target = min(resp.diverging_end_offset, own_end)
            if target < self.high_watermark:
                raise RaftError(f"node {self.node_id} would truncate committed offsets "
                                f"{target}..{self.high_watermark}")
            self._truncate(target, now_ms)
            if self.log.end_offset < self.high_watermark:
                raise RaftError(f"node {self.node_id} truncated committed offsets "
                                f"{self.log.end_offset}..{self.high_watermark}")
            return self._maybe_fetch(now_ms)
        if resp.entries:
            self._append(resp.entries, now_ms)
            self.metrics.fetched(sum(entry.count for entry in resp.entries), now_ms)
        self.high_watermark = max(self.high_watermark,
                                  min(resp.high_watermark, self.log.end_offset))
        return self._maybe_fetch(now_ms)
