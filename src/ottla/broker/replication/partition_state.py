"""The replication state of one partition on this broker, sans-I/O (Kafka's ``Partition``
without its log).

It knows the role (leader or follower) and epochs the metadata image gave, the ISR, this
replica's log end offset, each follower's fetch position as the leader sees it, and the
high watermark that follows from them: the smallest log end offset of the ISR, which only
ever grows on a leader. It is told the log end after each append and each follower fetch,
with ``now_ms``; it answers whether the high watermark moved and whether an ``acks=all``
write is complete. It never reads a clock or a file, so replication's invariants are
tested here without a broker.

With one replica the ISR is the leader alone and the high watermark is its log end, the
behaviour of a single node; the follower side (fetching, truncation, ISR changes through
AlterPartition) extends this state rather than replacing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ottla.protocol.errors import ErrorCode, KafkaError

NO_EPOCH = -1
UNKNOWN_OFFSET = -1


class EpochHistory(Protocol):
    """Where each leader epoch of a log starts (the leader-epoch cache)."""

    @property
    def latest_epoch(self) -> int: ...

    def end_offset_for_leader_epoch(self, epoch: int, log_end_offset: int
                                    ) -> tuple[int, int]: ...


def leader_epoch_entries(entries: list[tuple[int, int]], leader_epoch: int,
                         log_end_offset: int) -> list[tuple[int, int]]:
    """A leader's epochs ((epoch, start offset), ascending) as Kafka's leader-epoch cache
    holds them: Kafka's new leader assigns its epoch at its log end when it takes over
    (``Partition.makeLeader``), Ottla's log only on the first append in it, so until then
    the epoch is added here where Kafka's cache would have it (an entry at or above the
    log end, of an epoch that wrote nothing, gives way to it as in Kafka's ``assign``)."""
    if leader_epoch <= NO_EPOCH or (entries and entries[-1][0] >= leader_epoch):
        return entries
    return [(e, start) for e, start in entries if start < log_end_offset] + \
        [(leader_epoch, log_end_offset)]


def diverging_epoch(history: EpochHistory, last_fetched_epoch: int, fetch_offset: int,
                    log_start_offset: int, log_end_offset: int,
                    leader_epoch: int = NO_EPOCH) -> tuple[int, int] | None:
    """On the leader: where a fetcher's log diverged from this one, as (epoch, end
    offset), or None if it has not (Kafka's ``Partition.readRecords``): the epoch of
    its last batch ends here before its fetch offset, or this log never had it.

    ``leader_epoch`` is this leader's own epoch, which starts at the log end until
    something is appended in it (Kafka's new leader puts it in its cache at once): a
    fetcher whose last epoch is above every epoch of the log but below that one is told
    where the log's latest epoch ends, rather than refused, so it truncates what the
    previous leader gave it and nobody else has even while nothing is produced."""
    latest = history.latest_epoch if leader_epoch > NO_EPOCH else NO_EPOCH
    if latest < last_fetched_epoch < leader_epoch:
        epoch, end_offset = latest if latest > NO_EPOCH else last_fetched_epoch, log_end_offset
    else:
        epoch, end_offset = history.end_offset_for_leader_epoch(last_fetched_epoch,
                                                                log_end_offset)
    if end_offset < 0 or epoch < 0:
        raise KafkaError(ErrorCode.offset_out_of_range,
                         f"The end of epoch {last_fetched_epoch} is not known")
    if fetch_offset < log_start_offset:
        raise KafkaError(ErrorCode.offset_out_of_range,
                         f"Offset {fetch_offset} is before the log start {log_start_offset}")
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


def truncation_offset(history: EpochHistory, leader_epoch: int, leader_end_offset: int,
                      log_start_offset: int, log_end_offset: int) -> int:
    """On a follower told it diverged: where to cut its log (Kafka's
    ``getOffsetTruncationState``). To where the leader's copy of the epoch ends, or this
    replica's own copy if that ends earlier; if this replica never had that epoch, to
    where its largest earlier epoch ends (it fetches again and may cut further)."""
    own_epoch, own_end = history.end_offset_for_leader_epoch(leader_epoch, log_end_offset)
    if leader_epoch < 0 or own_epoch < 0:
        target = min(leader_end_offset, log_end_offset)
    elif own_epoch != leader_epoch:
        target = min(own_end, log_end_offset)
    else:
        target = min(own_end, leader_end_offset, log_end_offset)
    return max(target, log_start_offset)


@dataclass(slots=True)
class LeaderAndIsr:
    """What the metadata image says about the partition (Kafka's ``LeaderAndIsr``)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    leader_recovery_state: int = 0
    """1 (RECOVERING) after an unclean election until the leader reports it recovered
    (KIP-704)."""


@dataclass(slots=True)
class ReplicaState:
    """A follower as its leader sees it (Kafka's ``ReplicaState``)."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    """When its fetch last reached the leader's log end; the ISR shrinks on its age."""
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    """The leader's log end at the follower's last fetch: a fetch that reaches it shows
    the follower was caught up as of that fetch (Kafka's ``lastFetchLeaderLogEndOffset``)."""
    broker_epoch: int = -1
    """The follower's broker epoch from its last fetch (ReplicaState, KIP-903)."""


@dataclass(slots=True)
class PartitionState:
    local_id: int
    assignment: LeaderAndIsr
    log_end_offset: int = 0
    high_watermark: int = 0
    followers: dict[int, ReplicaState] = field(default_factory=dict)
    pending_isr: list[int] | None = None
    """An ISR change sent to the controller (AlterPartition) and not yet answered."""
    leader_epoch_start_offset: int = 0
    hw_min_isr: int = 0
    """With Eligible Leader Replicas (KIP-966), ``min.insync.replicas``: the high
    watermark does not advance while the ISR is smaller, so a replica that left it keeps
    everything committed and stays eligible. 0 when ELR is off."""
    """The log end when this replica became leader in its epoch: a follower joins the ISR
    only once it has everything the previous leaders wrote."""

    @property
    def is_leader(self) -> bool:
        return self.assignment.leader == self.local_id

    @property
    def leader_epoch(self) -> int:
        return self.assignment.leader_epoch

    @property
    def isr(self) -> list[int]:
        return self.assignment.isr

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided; without transactions, the high watermark."""
        return self.high_watermark

    def update(self, assignment: LeaderAndIsr, now_ms: int) -> bool:
        """Take a new assignment from the metadata image; True if the high watermark moved.

        A replica that becomes leader (or a leader of a new epoch) forgets what it knew of
        its followers' positions: they are known again from their next fetch. Until then a
        follower in the ISR counts as caught up as of now, as Kafka's new leader does, so
        the ISR does not shrink the moment leadership moves.

        An assignment older than the partition epoch this replica has is ignored, as
        Kafka's ``makeLeader`` does: an AlterPartition answer (``isr_answered``) may give
        the new epoch before the metadata's earlier ones arrive, and going back to an
        ISR the controller has since grown would advance the high watermark without a
        member it counts."""
        if assignment.partition_epoch < self.assignment.partition_epoch:
            return False
        new_epoch = assignment.leader_epoch != self.assignment.leader_epoch
        if assignment.partition_epoch != self.assignment.partition_epoch or new_epoch:
            self.pending_isr = None  # answered, or overtaken by the controller
        self.assignment = assignment
        if not self.is_leader:
            self.followers.clear()
            return False
        others = [r for r in assignment.replicas if r != self.local_id]
        if new_epoch:
            self.leader_epoch_start_offset = self.log_end_offset
            self.followers = {r: ReplicaState(r, last_caught_up_ms=now_ms if r in assignment.isr
                                              else 0) for r in others}
        else:
            self.followers = {r: self.followers.get(r) or ReplicaState(r) for r in others}
        return self._maybe_increment_high_watermark()

    def on_local_append(self, log_end_offset: int) -> bool:
        """The local log grew to ``log_end_offset``; True if the high watermark moved."""
        self.log_end_offset = log_end_offset
        return self.is_leader and self._maybe_increment_high_watermark()

    def on_truncation(self, log_end_offset: int) -> None:
        """The local log was cut back (a follower diverged, or records deleted)."""
        self.log_end_offset = log_end_offset
        self.high_watermark = min(self.high_watermark, log_end_offset)

    def on_leader_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower learns its leader's high watermark from a fetch; its own is that as
        far as its log reaches (it may move back after a truncation). True if it moved."""
        if self.is_leader:
            return False
        new = min(leader_high_watermark, self.log_end_offset)
        if new != self.high_watermark:
            self.high_watermark = new
            return True
        return False

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                          broker_epoch: int = -1) -> bool:
        """A follower fetched from ``fetch_offset``: it has everything before it. True if
        the high watermark moved."""
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            return False
        # Caught up now if it reached the log end; else, if it reached where the log
        # ended at its previous fetch, as of that fetch (Kafka's
        # ``updateFetchStateOrThrow``): under steady writes a follower keeping up is
        # never at the log end when it fetches, and stays in the ISR by the second rule.
        if fetch_offset >= self.log_end_offset:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_log_end_offset:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms,
                                             follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.last_fetch_ms = now_ms
        follower.last_fetch_leader_log_end_offset = self.log_end_offset
        follower.broker_epoch = broker_epoch
        return self._maybe_increment_high_watermark()

    def _maybe_increment_high_watermark(self) -> bool:
        """The leader's high watermark is the smallest log end offset in the ISR; it never
        moves back on a leader (a follower not yet heard from holds it where it is)."""
        if self.hw_min_isr and len(self.assignment.isr) < self.hw_min_isr:
            return False
        new = self.log_end_offset
        for replica_id in self.maximal_isr:
            if replica_id != self.local_id:
                follower = self.followers.get(replica_id)
                new = min(new, follower.log_end_offset if follower is not None
                          else UNKNOWN_OFFSET)
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR as the high watermark must see it while a change is in flight: a
        replica being added counts already, one being removed still does (Kafka's
        ``maximalIsr``), so nothing is committed that either ISR would not hold."""
        if self.pending_isr is None:
            return self.assignment.isr
        return self.assignment.isr + [r for r in self.pending_isr
                                      if r not in self.assignment.isr]

    def isr_to_expand(self, replica_id: int) -> list[int] | None:
        """The ISR with ``replica_id`` added, if it has caught up: its log reaches the
        high watermark and everything from before this leader's epoch. The caller sends
        it to the controller; until answered (``isr_answered``) no other change starts."""
        follower = self.followers.get(replica_id)
        if not self.is_leader or self.pending_isr is not None or follower is None or \
                replica_id in self.assignment.isr or self.assignment.leader_recovery_state:
            return None
        if follower.log_end_offset < max(self.high_watermark, self.leader_epoch_start_offset):
            return None
        self.pending_isr = [*self.assignment.isr, replica_id]
        return self.pending_isr

    def preferred_read_replica(self, fetch_offset: int, client_rack: str,
                               rack_of: Callable[[int], str | None]) -> int:
        """KIP-392, Kafka's RackAwareReplicaSelector: the replica a consumer in
        ``client_rack`` should read from, or -1 for this leader. Candidates are the
        replicas in the ISR that have the fetch offset; the leader wins if it is in the
        client's rack, else the same-rack follower furthest ahead (most recently caught
        up on a tie); with none in the rack, the leader."""
        if not self.is_leader or not client_rack:
            return -1
        if rack_of(self.local_id) == client_rack:
            return -1
        candidates = [f for r, f in self.followers.items()
                      if r in self.assignment.isr and f.log_end_offset >= fetch_offset
                      and rack_of(r) == client_rack]
        if not candidates:
            return -1
        best = max(candidates, key=lambda f: (f.log_end_offset, f.last_caught_up_ms))
        return best.replica_id

    def recovery_to_report(self) -> list[int] | None:
        """An unclean leader (RECOVERING) reports itself recovered, with its ISR, before
        any follower may join (there are no transactions to recover yet, so at once)."""
        if not self.is_leader or self.pending_isr is not None or \
                not self.assignment.leader_recovery_state:
            return None
        self.pending_isr = list(self.assignment.isr)
        return self.pending_isr

    def isr_to_shrink(self, now_ms: int, replica_lag_time_max_ms: int) -> list[int] | None:
        """The ISR without the followers that have not caught up with this leader's log
        end for ``replica.lag.time.max.ms``, if any."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = {r for r in self.assignment.isr if r != self.local_id and
                   now_ms - self.followers.get(r, ReplicaState(r)).last_caught_up_ms
                   > replica_lag_time_max_ms
                   and self.followers.get(r, ReplicaState(r)).log_end_offset
                   < self.log_end_offset}
        if not lagging:
            return None
        self.pending_isr = [r for r in self.assignment.isr if r not in lagging]
        return self.pending_isr

    def isr_answered(self, isr: list[int] | None, partition_epoch: int) -> bool:
        """The controller answered an AlterPartition: with the ISR it committed (or None
        for an error, after which the next fetch or check may try again). True if the
        high watermark moved."""
        self.pending_isr = None
        if isr is None or partition_epoch <= self.assignment.partition_epoch:
            return False
        self.assignment = LeaderAndIsr(self.assignment.leader, self.assignment.leader_epoch,
                                       partition_epoch, list(self.assignment.replicas),
                                       list(isr), leader_recovery_state=0)
        return self.is_leader and self._maybe_increment_high_watermark()

    def check_enough_replicas(self, required_offset: int, leader_epoch: int,
                              min_insync_replicas: int) -> tuple[bool, ErrorCode]:
        """Is an ``acks=all`` write that ended at ``required_offset`` (appended in
        ``leader_epoch``) done, and with what error (Kafka's
        ``checkEnoughReplicasReachOffset``)? Not done while the high watermark is below it;
        done with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
        ``min.insync.replicas`` meanwhile; done with NOT_LEADER_OR_FOLLOWER once this
        replica lost the leadership it appended under, since the new leader may have
        truncated the write away."""
        if not self.is_leader or self.assignment.leader_epoch != leader_epoch:
            return True, ErrorCode.not_leader_or_follower
        if self.high_watermark < required_offset:
            return False, ErrorCode.none
        if len(self.assignment.isr) < min_insync_replicas:
            return True, ErrorCode.not_enough_replicas_after_append
        return True, ErrorCode.none
