"""The leader's side of share groups (Kafka's SharePartitionManager): one
``SharePartition`` per (share group, partition) this broker leads, the share sessions of
the members fetching from it, and the timer that ends acquisition locks.

A ShareFetch acquires records for its member from each partition of its session (reading
the log from the share-partition's next fetch offset up to the high watermark) and
answers the batches read with the ranges the member now holds; acknowledgements ride on
it or on ShareAcknowledge. A fetch that acquired nothing waits, up to its ``max_wait``,
for a partition's high watermark to move. A session closed by its member (epoch -1)
gives its records back at once; a member that just goes silent loses them when its
locks expire.

Durability (seed 001): a share-partition starts from the state the share coordinator
holds for it (``StatePersister.read_state``; a partition with none is initialized where
``share.auto.offset.reset`` says). An acknowledgement is answered only once its new
state is written (persist before commit); a failed write leaves the records leased and
answers the member's acknowledgement with the error. Leases that end (a lock expiring,
a member leaving) are written after the fact: a crash before that only delivers those
records again with the count they had. Writes for one share-partition go one at a time,
in order. A state or leader epoch the coordinator fences drops the cached partition,
and the next fetch reads it again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from ottla.broker.context import BrokerContext
from ottla.broker.deadline_timer import DeadlineTimer
from ottla.broker.replication.partition import Partition
from ottla.broker.share.dead_letter_queue import DeadLetterQueue
from ottla.broker.share.persister import NO_STATE, StatePersister
from ottla.broker.share.share_partition import AcquiredRecords, PendingUpdate, SharePartition
from ottla.common.features import share_dlq_enabled
from ottla.common.group_configs import (
    IsolationLevel,
    ResetStrategy,
    ShareGroupSettings,
    share_group_settings,
)
from ottla.common.tasks import wait_event
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import scan_batches

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
SharePartitionKey = tuple[str, str, int]
"""(group id, topic, partition)."""

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
WRITE_RETRY_S = 1.0
"""How soon a failed write of ended leases is tried again."""
DLQ_BACKOFF_S = 0.1
DLQ_BACKOFF_MAX_S = 30.0
"""Retries of the dead-letter queue back off exponentially up to this."""


@dataclass(slots=True)
class ShareSession:
    """What a member fetches from this broker: its partitions, and the epoch its next
    request must carry."""

    group_id: str
    member_id: str
    epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    connection: tuple[str, str, int] | None = None
    """(listener, host, port) the member last fetched on: its records go back when that
    connection closes (Kafka 4.1+'s share session disconnect listener)."""


@dataclass(slots=True)
class ShareFetchResult:
    """One partition's answer: the batches read (bytes) and what the member holds."""

    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    error: ErrorCode = ErrorCode.none


@dataclass(slots=True)
class HeldPartition:
    """A share-partition this broker leads, with what its writes must carry."""

    sp: SharePartition
    topic_id: uuid.UUID
    state_epoch: int
    leader_epoch: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while a write is in flight: writes go one at a time, in order."""
    dirty: bool = False
    """Leases ended since the last write (written by ``_write_later``)."""
    dead_lettering: asyncio.Task[None] | None = None
    """Sending its ARCHIVING records to the dead-letter queue."""


_FENCED = (ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch)
_NOT_YET = (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
            ErrorCode.not_coordinator)
_RETRIABLE = {ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
              ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available}


class SharePartitionManager:
    def __init__(self, broker: BrokerContext, persister: StatePersister,
                 dead_letters: DeadLetterQueue | None = None) -> None:
        self.broker = broker
        self.persister = persister
        self.dead_letters = dead_letters
        self.held: dict[SharePartitionKey, HeldPartition] = {}
        self._loading: dict[SharePartitionKey, asyncio.Future[HeldPartition]] = {}
        self._writers: set[asyncio.Task[None]] = set()
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._moved = asyncio.Event()
        """Set when a high watermark moved: a waiting share fetch looks again."""
        self._timer = DeadlineTimer("share locks", broker.now_ms, self._expire)
        broker.replica_manager.high_watermark_listeners.append(self._on_high_watermark)

    # --- configuration ------------------------------------------------------------------

    def settings(self, group_id: str) -> ShareGroupSettings:
        """The group's share configs: its overrides, else the broker's defaults."""
        return share_group_settings(
            self.broker.image.configs.get((ConfigResourceType.GROUP, group_id), {}),
            self.broker.dynamic_config, group_id)

    @property
    def partitions(self) -> dict[SharePartitionKey, SharePartition]:
        return {key: held.sp for key, held in self.held.items()}

    def _dead_letter_topic(self, settings: ShareGroupSettings) -> str | None:
        """The group's dead-letter queue: ``errors.deadletterqueue.topic.name`` once the
        cluster runs share.version 2 (KIP-1191)."""
        if self.dead_letters is None or not share_dlq_enabled(self.broker.image.features):
            return None
        return settings.dlq_topic

    def _apply(self, sp: SharePartition, settings: ShareGroupSettings) -> None:
        """Take the group's configs as they are now (they change dynamically)."""
        sp.max_delivery_count = settings.delivery_count_limit
        sp.lock_duration_ms = settings.record_lock_duration_ms
        sp.max_record_locks = settings.partition_max_record_locks
        sp.dead_letter = self._dead_letter_topic(settings) is not None

    async def share_partition(self, group_id: str, topic: str, index: int, partition: Partition
                              ) -> HeldPartition:
        """The group's in-flight state of a partition this broker leads: as the share
        coordinator holds it, read once per leadership (a new leader epoch reads again)."""
        key = (group_id, topic, index)
        held = self.held.get(key)
        if held is not None and held.leader_epoch == partition.leader_epoch:
            return held
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.ensure_future(
                self._load(key, partition))
            loading.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(loading)

    async def _load(self, key: SharePartitionKey, partition: Partition) -> HeldPartition:
        group_id, topic, index = key
        registration = self.broker.image.topics_by_name.get(topic)
        if registration is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Unknown topic {topic}")
        topic_id = registration.topic_id
        leader_epoch = partition.leader_epoch
        state = await self.persister.read_state(group_id, topic_id, index, leader_epoch)
        if state.error == ErrorCode.invalid_request:
            # Never initialized (Kafka's "read operation on uninitialized share
            # partition"): start where share.auto.offset.reset says, then read as leader.
            error = await self.persister.initialize_state(
                group_id, topic_id, index, 0, self._reset_offset(group_id, partition))
            if error != ErrorCode.none:
                raise KafkaError(_RETRIABLE.get(error, error),
                                 f"Initializing the state of {group_id} on {topic}-{index}")
            state = await self.persister.read_state(group_id, topic_id, index, leader_epoch)
        if state.error != ErrorCode.none:
            raise KafkaError(_RETRIABLE.get(state.error, state.error),
                             f"Reading the state of {group_id} on {topic}-{index}")
        start, state_epoch = state.start_offset, state.state_epoch
        if start == NO_STATE:  # initialized without an offset (by the group coordinator)
            start = self._reset_offset(group_id, partition)
        sp = SharePartition.from_state(start, state.batches)
        self._apply(sp, self.settings(group_id))
        held = self.held[key] = HeldPartition(sp, topic_id, state_epoch, leader_epoch)
        self._dead_letter_later(key, held)  # archiving a former leader left unfinished
        log.debug("Share-partition %s of %s-%d starts at %d (state epoch %d, %d batches)",
                  group_id, topic, index, sp.start_offset, state_epoch, len(state.batches))
        return held

    def _reset_offset(self, group_id: str, partition: Partition) -> int:
        """Where a share-partition with no stored state starts (``share.auto.offset.reset``:
        ``latest``, the default, ``earliest``, or ``by_duration:`` the first record at or
        after that long ago, the end if none)."""
        reset = self.settings(group_id).auto_offset_reset
        if reset.strategy is ResetStrategy.EARLIEST:
            return int(partition.log.log_start_offset)
        if reset.strategy is ResetStrategy.BY_DURATION:
            found = partition.log.offset_for_timestamp(reset.timestamp(self.broker.now_ms()))
            if found is not None:
                return min(int(found[0]), int(partition.high_watermark))
        return int(partition.high_watermark)

    # --- sessions -----------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The member's session for this request: a new one at epoch 0, else the one
        whose epoch matches (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            old = self.sessions.pop(key, None)
            if old is not None:
                self.release(old)
            session = self.sessions[key] = ShareSession(group_id, member_id, 1)
            return session
        session = self.sessions.get(key)
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found,
                             f"No share session for member {member_id}")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise KafkaError(ErrorCode.invalid_share_session_epoch,
                             f"Expected share session epoch {session.epoch}, got {epoch}")
        if epoch != FINAL_EPOCH:
            session.epoch += 1
        return session

    def close(self, session: ShareSession) -> None:
        self.sessions.pop((session.group_id, session.member_id), None)
        self.release(session)
        self._forget_if_empty(session.group_id)

    def on_disconnect(self, listener: str, host: str, port: int) -> None:
        """A client connection closed: the share sessions last used on it end, and their
        records are available to the other members at once."""
        for session in [s for s in self.sessions.values()
                        if s.connection == (listener, host, port)]:
            log.debug("Share session of %s in %s ends with its connection",
                      session.member_id, session.group_id)
            self.close(session)

    def _forget_if_empty(self, group_id: str) -> None:
        """No member of the group fetches here any more: drop its share-partitions whose
        state is all written, so the next member reads them again from the share
        coordinator (and sees an offset reset or delete made meanwhile; Kafka's
        ShareGroupListener.onGroupEmpty)."""
        if any(s.group_id == group_id for s in self.sessions.values()):
            return
        for key, held in list(self.held.items()):
            if key[0] == group_id and self._idle(held):
                del self.held[key]

    @staticmethod
    def _idle(held: HeldPartition) -> bool:
        busy = held.dead_lettering is not None and not held.dead_lettering.done()
        return not (held.dirty or held.lock.locked() or busy or held.sp.acquired_count()
                    or held.sp.pending is not None)

    def release(self, session: ShareSession) -> None:
        """A member's records go back: available to the others at once."""
        for topic, index in session.partitions:
            key = (session.group_id, topic, index)
            held = self.held.get(key)
            if held is not None and held.sp.release_member(session.member_id):
                self._moved.set()
                self._write_later(key, held)
                self._dead_letter_later(key, held)

    # --- fetching and acknowledging -------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                          batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        """Apply the member's acknowledgements once their state is written (RENEW ones
        extend the member's locks)."""
        key = (group_id, *tp)
        held = self.held.get(key)
        if held is None:
            return ErrorCode.invalid_record_state
        async with held.lock:
            if self.held.get(key) is not held:
                return ErrorCode.invalid_record_state  # dropped while waiting
            update = held.sp.begin_acknowledge(member_id, batches, self.broker.now_ms())
            if isinstance(update, ErrorCode):
                return update
            error = await self._write(key, held, update)
        self._moved.set()  # released records may be fetched again
        self._dead_letter_later(key, held)
        return error

    async def _write(self, key: SharePartitionKey, held: HeldPartition,
                     update: PendingUpdate | None) -> ErrorCode:
        """Write an acknowledgement's update (then commit or roll it back), or with
        ``None`` the whole in-flight state after leases ended; under ``held.lock``."""
        sp = held.sp
        if update is not None:
            batches, start, complete = (update.batches, update.start_offset,
                                        update.delivery_complete_count)
        else:
            held.dirty = False
            batches, start, complete = (sp.state_batches(), sp.start_offset,
                                        sp.delivery_complete_count())
        try:
            error = await self.persister.write_state(
                key[0], held.topic_id, key[2], held.state_epoch, held.leader_epoch, start,
                complete, batches)
        except Exception:
            log.exception("Writing the state of share-partition %s failed", key)
            error = ErrorCode.coordinator_not_available
        if update is not None:
            if error == ErrorCode.none:
                sp.commit(update)
            else:
                sp.rollback(update)
                self._timer.deadline_changed(self.broker.now_ms())  # leases that ran out
        if error in _FENCED:
            log.info("Share-partition %s was fenced (%s): it is read again", key, error.name)
            if self.held.get(key) is held:
                del self.held[key]
        elif error != ErrorCode.none and update is None:
            asyncio.get_running_loop().call_later(  # try again; a crash meanwhile only
                WRITE_RETRY_S, self._write_later, key, held)  # redelivers those records
        return _RETRIABLE.get(error, error)

    def _write_later(self, key: SharePartitionKey, held: HeldPartition) -> None:
        """Leases ended: write the partition's state when no other write is in flight."""
        if held.dirty:
            return
        held.dirty = True

        async def write() -> None:
            async with held.lock:
                if held.dirty and self.held.get(key) is held:
                    await self._write(key, held, None)
            self._forget_if_empty(key[0])
        task = asyncio.ensure_future(write())
        self._writers.add(task)
        task.add_done_callback(self._writers.discard)

    def _dead_letter_later(self, key: SharePartitionKey, held: HeldPartition) -> None:
        """Send the partition's ARCHIVING records to the dead-letter queue (one task per
        share-partition), archiving each run once the queue has it."""
        if not held.sp.archiving() or \
                (held.dead_lettering is not None and not held.dead_lettering.done()):
            return
        held.dead_lettering = asyncio.ensure_future(self._dead_letter(key, held))
        self._writers.add(held.dead_lettering)
        held.dead_lettering.add_done_callback(self._writers.discard)

    async def _dead_letter(self, key: SharePartitionKey, held: HeldPartition) -> None:
        group_id, topic, index = key
        attempt = 0
        while self.held.get(key) is held:
            runs = held.sp.archiving()
            if not runs:
                return
            settings = self.settings(group_id)
            dlq_topic = self._dead_letter_topic(settings)
            copy = settings.dlq_copy_record
            first, last, count, cause = runs[0]
            try:
                if dlq_topic is not None and self.dead_letters is not None:
                    await self.dead_letters.send(dlq_topic, group_id, topic, index, first,
                                                 last, count, cause, copy)
            except KafkaError as e:
                attempt += 1
                delay = min(DLQ_BACKOFF_MAX_S, DLQ_BACKOFF_S * 2 ** min(attempt, 10))
                log.log(logging.WARNING if attempt % 10 == 1 else logging.DEBUG,
                        "Share group %s: records %d-%d of %s-%d wait for the dead-letter "
                        "queue (attempt %d): %s", group_id, first, last, topic, index,
                        attempt, e)
                await asyncio.sleep(delay)
                continue
            attempt = 0
            async with held.lock:
                if held.sp.archived(first, last):
                    await self._write(key, held, None)
            self._moved.set()

    async def acquire(self, group_id: str, member_id: str, tp: TopicPartition,
                      max_bytes: int, max_records: int, record_limit: bool
                      ) -> ShareFetchResult:
        replica_manager = self.broker.replica_manager
        partition = replica_manager.require(tp[0], tp[1], self.broker.image)
        partition.check_leader_epoch(-1)
        try:
            held = await self.share_partition(group_id, tp[0], tp[1], partition)
        except KafkaError as e:
            if e.code not in _NOT_YET:
                raise
            # As Kafka: the share coordinator is not there yet (its topic being created,
            # a partition loading); the member's next fetch tries again.
            log.debug("Share-partition %s of %s-%d not ready: %s", group_id, *tp, e)
            return ShareFetchResult()
        sp = held.sp
        settings = self.settings(group_id)
        self._apply(sp, settings)
        offset = sp.next_fetch_offset()
        committed = settings.isolation_level == IsolationLevel.READ_COMMITTED
        bound = partition.last_stable_offset if committed else partition.high_watermark
        if offset >= bound:
            return ShareFetchResult()
        read = partition.read(offset, max_bytes, 1 if committed else 0, -1, True)
        if read.records is None:
            return ShareFetchResult()
        data = read.records.read()
        aborted = partition.log.collect_aborted(offset, bound) if committed else []
        fetched: list[tuple[int, int]] = []
        skipped: list[tuple[int, int]] = []
        for _, h in scan_batches(data):
            if h.base_offset >= bound:
                break
            run = (h.base_offset, min(h.last_offset, bound - 1))
            # Markers, and with share.isolation.level=read_committed the batches of
            # aborted transactions, are archived rather than delivered.
            if h.is_control or (h.is_transactional and any(
                    t.producer_id == h.producer_id and
                    t.first_offset <= h.base_offset <= t.last_offset for t in aborted)):
                skipped.append(run)
            else:
                fetched.append(run)
        now = self.broker.now_ms()
        acquired = sp.acquire(member_id, fetched, max_records, now, record_limit, skipped)
        if acquired:
            self._timer.deadline_changed(now + sp.lock_duration_ms)
            return ShareFetchResult(records=data, acquired=acquired)
        return ShareFetchResult()

    async def changed(self, timeout_s: float) -> None:
        """Wait for a high watermark to move or records to be given back (or time out)."""
        self._moved.clear()
        await wait_event(self._moved, timeout_s)

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        self._moved.set()

    def _expire(self, now_ms: int) -> int | None:
        deadlines = []
        for key, held in list(self.held.items()):
            before = held.sp.acquired_count()
            deadline = held.sp.expire_locks(now_ms)
            if held.sp.acquired_count() != before:
                self._moved.set()
                self._write_later(key, held)
                self._dead_letter_later(key, held)
            if deadline is not None:
                deadlines.append(deadline)
        return min(deadlines, default=None)

    def shutdown(self) -> None:
        self._timer.cancel()
        for task in list(self._writers):
            task.cancel()
