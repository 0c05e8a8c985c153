"""KRaft consensus for one replica, sans-I/O: messages and time in, messages out.

As in KIP-595 (with KIP-996 pre-vote): followers pull entries from the leader with
Fetch; the leader advances the high watermark to the offset a majority of voters has
fetched, once an entry of its own epoch is among them (a new leader first appends a
leader-change entry); a follower whose log diverged learns the leader's end offset for
its last epoch in the Fetch response and truncates to it; a follower that hears nothing
from its leader for ``fetch_timeout_ms`` first asks for pre-votes, which do not bump
any epoch, and only a majority of them starts a real election; a leader that has not
been fetched from by a majority for 1.5 fetch timeouts resigns (check quorum).

The replica never reads a clock or touches a socket: the driver passes ``now_ms`` and
delivers the returned :class:`Outgoing` messages. ``epoch`` and ``voted_for`` are the
durable quorum state; a driver must persist ``quorum_state()`` after each call that
changed it and before sending what the call returned.
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
    fetch_backoff_ms: int = 50  # pause after an empty Fetch (stands in for long polling)
    max_fetch_entries: int = 64


class RaftError(RuntimeError):
    """A broken invariant (e.g. truncating committed entries): the replica must stop."""


class RaftReplica:
    def __init__(self, node_id: int, voters: set[int] | frozenset[int], log: MemoryLog,
                 rng: random.Random, config: RaftConfig | None = None, *,
                 epoch: int = 0, voted_for: int | None = None) -> None:
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not among the voters {sorted(voters)}")
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.log = log
        self.rng = rng
        self.config = config or RaftConfig()
        self.epoch = epoch
        self.voted_for = voted_for
        self.leader_id: int | None = None
        self.role = Role.UNATTACHED
        self.high_watermark = log.start_offset  # a snapshot only holds committed entries
        self.applied = 0
        self._votes: set[int] = set()
        self._deadline = 0  # election timer (or, for a leader, the check-quorum time)
        # follower
        self._fetch_sent_ms: int | None = None
        self._next_fetch_ms = 0
        self._last_leader_contact = -(1 << 62)
        # leader
        self._replica_end: dict[int, int] = {}
        self._last_fetch: dict[int, int] = {}

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
        self._reset_election_timer(now_ms, self.config.fetch_timeout_ms)
        return []

    def propose(self, payload: Any, now_ms: int) -> int | None:
        """Append ``payload`` if leader; its offset (committed later), else None."""
        if not self.is_leader:
            return None
        offset = self.log.end_offset
        self.log.append([Entry(self.epoch, payload)])
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
        """Record the state machine at ``end_offset`` (committed and applied) and drop
        the log before it; False when there is nothing new to snapshot."""
        if end_offset > min(self.high_watermark, self.applied) or \
                end_offset <= self.log.start_offset:
            return False
        self.log.take_snapshot(Snapshot(end_offset, self.log.epoch_at(end_offset - 1), data))
        return True

    def tick(self, now_ms: int) -> list[Outgoing]:
        if self.role is Role.LEADER:
            alive = sum(1 for v in self.voters if v == self.node_id or
                        now_ms - self._last_fetch.get(v, -(1 << 62))
                        < self.config.fetch_timeout_ms * 3 // 2)
            if alive < self.majority:
                return self.resign(now_ms)
            return []
        if now_ms >= self._deadline:
            if self.role is Role.FOLLOWER and \
                    now_ms - self._last_leader_contact < self.config.fetch_timeout_ms:
                self._deadline = self._last_leader_contact + self.config.fetch_timeout_ms
            else:
                return self._become_prospective(now_ms)
        if self.role is Role.FOLLOWER:
            return self._maybe_fetch(now_ms)
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
        return [Outgoing(v, EndQuorumEpoch(self.node_id, self.epoch, others)) for v in others]

    def handle(self, source: int, message: Any, now_ms: int) -> list[Outgoing]:
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
                return self._on_fetch_response(message, now_ms)
            case FetchSnapshotRequest():
                return self._on_fetch_snapshot(message, now_ms)
            case FetchSnapshotResponse():
                return self._on_fetch_snapshot_response(message, now_ms)
        raise TypeError(f"not a Raft message: {message!r}")

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
        request = VoteRequest(self.node_id, self.epoch + 1 if pre_vote else self.epoch,
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
        self.log.append([Entry(self.epoch, None)])  # leader change: commits the epoch
        self._maybe_advance_high_watermark()
        begin = BeginQuorumEpoch(self.node_id, self.epoch)
        return [Outgoing(v, begin) for v in sorted(self.voters) if v != self.node_id]

    # --- elections -----------------------------------------------------------------------

    def _on_vote_request(self, source: int, req: VoteRequest, now_ms: int) -> list[Outgoing]:
        up_to_date = self._log_is_current(req.last_epoch, req.end_offset)
        if req.pre_vote:
            # Grant only if the candidate could win and we have no live leader: a node
            # cut off from a healthy quorum cannot disrupt it.
            live_leader = self.is_leader or (
                self.role is Role.FOLLOWER and
                now_ms - self._last_leader_contact < self.config.fetch_timeout_ms)
            granted = req.epoch > self.epoch and up_to_date and not live_leader
            # Name the leader only while it is live, or the candidate would follow a
            # dead one (KIP-996 sends it to the leader it is told about).
            return [Outgoing(source, VoteResponse(self.node_id, self.epoch, granted, True,
                                                  self.leader_id if live_leader else None))]
        if req.epoch > self.epoch:
            self._observe_epoch(req.epoch, None, now_ms)
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
        if now_ms < self._next_fetch_ms:
            return []
        self._fetch_sent_ms = now_ms
        return [Outgoing(self.leader_id, FetchRequest(
            self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch))]

    def _on_fetch(self, req: FetchRequest, now_ms: int) -> list[Outgoing]:
        if req.epoch > self.epoch:
            self._observe_epoch(req.epoch, None, now_ms)
        if not self.is_leader or req.epoch != self.epoch:
            error = "fenced_leader_epoch" if req.epoch < self.epoch else "not_leader"
            return [Outgoing(req.replica_id, FetchResponse(
                self.leader_id, self.epoch, self.high_watermark, error=error))]
        snapshot = self.log.snapshot
        epoch, end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if snapshot is not None and (req.fetch_offset < self.log.start_offset or
                                     (req.fetch_offset > 0 and end < self.log.start_offset)):
            # What it needs (or where it diverged) was compacted into a snapshot.
            return [Outgoing(req.replica_id, FetchResponse(
                self.node_id, self.epoch, self.high_watermark,
                snapshot_end_offset=snapshot.end_offset, snapshot_epoch=snapshot.epoch))]
        if req.fetch_offset > 0 and (epoch != req.last_fetched_epoch or end < req.fetch_offset):
            return [Outgoing(req.replica_id, FetchResponse(
                self.node_id, self.epoch, self.high_watermark,
                diverging_epoch=epoch, diverging_end_offset=end))]
        if req.replica_id in self._replica_end:
            self._replica_end[req.replica_id] = req.fetch_offset
            self._last_fetch[req.replica_id] = now_ms
            self._maybe_advance_high_watermark()
        entries = self.log.read(req.fetch_offset, self.config.max_fetch_entries)
        return [Outgoing(req.replica_id, FetchResponse(
            self.node_id, self.epoch, self.high_watermark, entries, req.fetch_offset))]

    def _on_fetch_snapshot(self, req: FetchSnapshotRequest, now_ms: int) -> list[Outgoing]:
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
        if snapshot is not None and snapshot.end_offset > self.log.end_offset:
            self.log.install_snapshot(snapshot)
            self.high_watermark = max(self.high_watermark, snapshot.end_offset)
        return self._maybe_fetch(now_ms)

    def _maybe_advance_high_watermark(self) -> None:
        ends = sorted([self.log.end_offset, *self._replica_end.values()], reverse=True)
        candidate = ends[self.majority - 1]
        if candidate > self.high_watermark and \
                self.log.epoch_at(candidate - 1) == self.epoch:
            self.high_watermark = candidate

    def _on_fetch_response(self, resp: FetchResponse, now_ms: int) -> list[Outgoing]:
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            return self._maybe_fetch(now_ms)
        if resp.epoch < self.epoch or self.role is not Role.FOLLOWER or \
                resp.leader_id != self.leader_id or resp.error is not None:
            return []
        self._fetch_sent_ms = None
        self._last_leader_contact = now_ms
        if resp.snapshot_end_offset >= 0:
            self._fetch_sent_ms = now_ms
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
        if resp.base_offset != self.log.end_offset:
            return self._maybe_fetch(now_ms)  # an answer to an older Fetch: ask again
        if resp.entries:
            self.log.append(resp.entries)
        else:
            self._next_fetch_ms = now_ms + self.config.fetch_backoff_ms
        self.high_watermark = max(self.high_watermark,
                                  min(resp.high_watermark, self.log.end_offset))
        return self._maybe_fetch(now_ms)
