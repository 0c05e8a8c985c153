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
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

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
    Outgoing,
    Snapshot,
    SnapshotWrite,
    VoteRequest,
    VoteResponse,
)


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


class RaftReplica:
    def __init__(self, node_id: int, voters: set[int] | frozenset[int], log: MemoryLog,
                 rng: random.Random, config: RaftConfig | None = None, *,
                 epoch: int = 0, voted_for: int | None = None) -> None:
        if not voters:
            raise ValueError("a quorum needs at least one voter")
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.is_voter = node_id in self.voters
        """False for an observer: a broker that follows the log without voting."""
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
        # leader
        self._replica_end: dict[int, int] = {}
        self._last_fetch: dict[int, int] = {}
        self._last_caught_up: dict[int, int] = {}
        self._observers: dict[int, tuple[int, int]] = {}  # id -> (fetch offset, time)
        self._parked: dict[int, tuple[FetchRequest, int]] = {}  # id -> (fetch, deadline)

    # --- durable state ------------------------------------------------------------------

    def quorum_state(self) -> dict[str, Any]:
        return {"leaderEpoch": self.epoch, "votedId": self.voted_for,
                "leaderId": self.leader_id}

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    # --- driving -----------------------------------------------------------------------

    def start(self, now_ms: int) -> list[Outgoing]:
        """After construction (or a restart with the persisted epoch and vote)."""
        if self.voters == {self.node_id}:
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
        self.log.append([Entry(self.epoch, payload, count)])
        self._maybe_advance_high_watermark()
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
        snapshot = Snapshot(end_offset, self.log.epoch_at(end_offset - 1), data)
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
        return self._maybe_fetch(now_ms)

    @property
    def _installing(self) -> bool:
        """A leader's snapshot is decided and not yet in the log, which it will replace."""
        return any(w is not None and w.install
                   for w in (self._snapshot_next, self._snapshot_writing))

    def tick(self, now_ms: int) -> list[Outgoing]:
        """Timers, and whatever a flush or a proposal since the last call made possible
        (a higher high watermark, parked fetches to answer, the next Fetch to send)."""
        return self._tick(now_ms) + self._drain_parked(now_ms)

    def _tick(self, now_ms: int) -> list[Outgoing]:
        if self.role is Role.LEADER:
            alive = sum(1 for v in self.voters if v == self.node_id or
                        now_ms - self._last_fetch.get(v, -(1 << 62))
                        < self.config.fetch_timeout_ms * 3 // 2)
            if alive < self.majority:
                return self.resign(now_ms)
            self._maybe_advance_high_watermark()
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
        return self._handle(source, message, now_ms) + self._drain_parked(now_ms)

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
        raise TypeError(f"not a Raft message: {message!r}")

    # --- what DescribeQuorum reports ---------------------------------------------------

    def replica_states(self) -> tuple[list[tuple[int, int, int, int]],
                                      list[tuple[int, int, int, int]]]:
        """The leader's view of voters and observers: (id, log end offset, last fetch
        time, last caught-up time), -1 where unknown."""
        voters = []
        for v in sorted(self.voters):
            if v == self.node_id:
                voters.append((v, self.log.end_offset, -1, -1))
            else:
                voters.append((v, self._replica_end.get(v, -1), self._last_fetch.get(v, -1),
                               self._last_caught_up.get(v, -1)))
        observers = [(o, end, at, at if end >= self.high_watermark else -1)
                     for o, (end, at) in sorted(self._observers.items())]
        return voters, observers

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
        self._fetch_sent_ms = None
        self._next_fetch_ms = now_ms
        self._deadline = now_ms + self.config.fetch_timeout_ms

    def _log_is_current(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _vote_request(self, pre_vote: bool) -> list[Outgoing]:
        # A pre-vote carries the current epoch (KIP-996's ReplicaEpoch): only a won
        # pre-vote moves the prospective to the next one.
        request = VoteRequest(self.node_id, self.epoch,
                              self.log.last_epoch, self.log.end_offset, pre_vote)
        return [Outgoing(v, request) for v in sorted(self.voters) if v != self.node_id]

    def _become_prospective(self, now_ms: int) -> list[Outgoing]:
        self.role = Role.PROSPECTIVE
        self.leader_id = None
        self._votes = {self.node_id}
        self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        return self._vote_request(pre_vote=True)

    def _become_candidate(self, now_ms: int) -> list[Outgoing]:
        self.epoch += 1
        self.voted_for = self.node_id
        self.leader_id = None
        self.role = Role.CANDIDATE
        self._votes = {self.node_id}
        self._reset_election_timer(now_ms, self.config.election_timeout_ms)
        if len(self._votes) >= self.majority:
            return self._become_leader(now_ms)
        return self._vote_request(pre_vote=False)

    def _become_leader(self, now_ms: int) -> list[Outgoing]:
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self._replica_end = {v: 0 for v in self.voters if v != self.node_id}
        self._last_fetch = {v: now_ms for v in self.voters}
        self._last_caught_up = {}
        self._observers = {}
        self.epoch_start_offset = self.log.end_offset
        self.log.append([Entry(self.epoch, None)])  # leader change: commits the epoch
        self._maybe_advance_high_watermark()
        begin = BeginQuorumEpoch(self.node_id, self.epoch)
        return [Outgoing(v, begin) for v in sorted(self.voters) if v != self.node_id]

    # --- elections -----------------------------------------------------------------------

    def _on_vote_request(self, source: int, req: VoteRequest, now_ms: int) -> list[Outgoing]:
        if not self.is_voter:
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
            if len(self._votes) >= self.majority:
                return self._become_candidate(now_ms)
        elif not resp.pre_vote and self.role is Role.CANDIDATE and resp.granted \
                and resp.epoch == self.epoch:
            self._votes.add(resp.voter_id)
            if len(self._votes) >= self.majority:
                return self._become_leader(now_ms)
        return []

    def _on_begin_quorum_epoch(self, msg: BeginQuorumEpoch, now_ms: int) -> list[Outgoing]:
        if msg.epoch < self.epoch:
            return []
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
        if self.role is not Role.FOLLOWER or self.leader_id is None:
            return []
        if self._fetch_sent_ms is not None and \
                now_ms - self._fetch_sent_ms < self.config.request_timeout_ms:
            return []  # one Fetch in flight at a time
        if now_ms < self._next_fetch_ms or self._installing:
            return []
        if self.log.flushed_end_offset < self.log.end_offset:
            return []  # a fetch offset acknowledges what we have: flush it first
        self._fetch_sent_ms = now_ms
        return [Outgoing(self.leader_id, FetchRequest(
            self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch,
            self.config.fetch_max_wait_ms, self.high_watermark))]

    def _discover(self, now_ms: int) -> list[Outgoing]:
        """An observer without a leader asks the voters in turn; whoever answers names
        the leader (or is it)."""
        if self._fetch_sent_ms is not None and \
                now_ms - self._fetch_sent_ms < self.config.request_timeout_ms:
            return []
        if now_ms < self._next_fetch_ms or self._installing:
            return []
        voters = sorted(self.voters)
        target = voters[self._discover_next % len(voters)]
        self._discover_next += 1
        self._fetch_sent_ms = now_ms
        return [Outgoing(target, FetchRequest(
            self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch, 0,
            self.high_watermark))]

    def _on_fetch(self, req: FetchRequest, now_ms: int) -> list[Outgoing]:
        if req.epoch > self.epoch:
            self._observe_epoch(req.epoch, None, now_ms)
        if not self.is_leader or req.epoch != self.epoch:
            error = "fenced_leader_epoch" if req.epoch < self.epoch else "not_leader"
            return [Outgoing(req.replica_id, FetchResponse(
                self.leader_id, self.epoch, self.high_watermark, error=error))]
        if req.replica_id in self._replica_end:
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
        if req.replica_id in self._replica_end:
            self._replica_end[req.replica_id] = req.fetch_offset
            if req.fetch_offset >= self.log.end_offset:
                self._last_caught_up[req.replica_id] = now_ms
            self._maybe_advance_high_watermark()
        elif req.replica_id not in self.voters:
            self._observers[req.replica_id] = (req.fetch_offset, now_ms)
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

    def _maybe_advance_high_watermark(self) -> None:
        """The majority's end offset, counting only the flushed part of our own log."""
        if not self.is_leader:
            return
        ends = sorted([self.log.flushed_end_offset, *self._replica_end.values()],
                      reverse=True)
        candidate = ends[self.majority - 1]
        if candidate > self.high_watermark and \
                self.log.epoch_at(candidate - 1) == self.epoch:
            self.high_watermark = candidate

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
            self.log.truncate_to(target)
            return self._maybe_fetch(now_ms)
        if resp.entries:
            self.log.append(resp.entries)
        self.high_watermark = max(self.high_watermark,
                                  min(resp.high_watermark, self.log.end_offset))
        return self._maybe_fetch(now_ms)
