"""The leader's side of share groups (Kafka's SharePartitionManager): one
``SharePartition`` per share-partition (share group, topic id, partition) this broker
leads, the members' share sessions, and the timers that end acquisition locks and
waiting fetches.

A ShareFetch acquires records for its member from each partition of its session
(reading the log from the share-partition's next fetch offset up to the high watermark)
and answers the batches read with the ranges the member now holds; acknowledgements ride
on it or on ShareAcknowledge. A fetch that acquired nothing parks in the purgatory
(``DelayedShareFetch``) until one of its share-partitions moves or its ``max_wait``
passes. A session closed by its member (epoch -1) gives its records back at once; a
member that just goes silent loses them when its locks expire.

Acquisition locks and fetch waits run on the monotonic clock (``timer_ms``), as Kafka's
SharePartition and DelayedShareFetch time them (``hiResClockMs``): a step of the wall
clock neither ends every lease at once nor holds leases and waiting fetches for as long
as the step. Only ``share.auto.offset.reset=by_duration`` reads the wall clock (it looks
up record timestamps).

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
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

from ottla.broker.context import BrokerContext
from ottla.broker.deadline_timer import DeadlineTimer, monotonic_ms
from ottla.broker.purgatory.delayed_operation import DelayedOperationPurgatory
from ottla.broker.purgatory.delayed_share_fetch import DelayedShareFetch
from ottla.broker.replication.partition import Partition
from ottla.broker.share.dead_letter_queue import DeadLetterQueue
from ottla.broker.share.persister import NO_STATE, StatePersister
from ottla.broker.share.session import (
    Connection,
    ShareSession,
    ShareSessionCache,
    TopicIdPartition,
)
from ottla.broker.share.share_partition import AcquiredRecords, PendingUpdate, SharePartition
from ottla.common.backoff import ExponentialBackoff
from ottla.common.features import share_dlq_enabled
from ottla.common.group_configs import (
    IsolationLevel,
    ResetStrategy,
    ShareGroupSettings,
    share_group_settings,
)
from ottla.common.topics import TopicPartition
from ottla.coordinator.share.state import SharePartitionKey
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import scan_batches

log = logging.getLogger(__name__)

WRITE_RETRY_S = 1.0
"""How soon a failed write of ended leases is tried again."""
DLQ_BACKOFF_MS = 100
DLQ_BACKOFF_MAX_MS = 30_000
"""Retries of the dead-letter queue back off exponentially up to this."""
_DLQ_BACKOFF = ExponentialBackoff(DLQ_BACKOFF_MS, DLQ_BACKOFF_MAX_MS)
DEFAULT_LOCK_MS = 30_000
"""AcquisitionLockTimeoutMs of a session that holds no share-partition yet
(``group.share.record.lock.duration.ms``'s default)."""

SHARE_READ_STEP = 1 << 20
"""The first read of a share fetch (growing fourfold until it holds the record budget)."""


@dataclass(slots=True)
class ShareFetchResult:
    """One partition's answer: the batches read (bytes) and what the member holds."""

    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    error: ErrorCode = ErrorCode.none


ShareFetchResults = dict[TopicIdPartition, ShareFetchResult]


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


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """What one ShareFetch may take: ``max_records`` over all its partitions (whole
    batches, or exactly with ``record_limit``: share.acquire.mode=record_limit)."""

    max_bytes: int
    max_records: int
    record_limit: bool


_FENCED = (ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch)
_NOT_YET = (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
            ErrorCode.not_coordinator)
_RETRIABLE = {ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
              ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available}


class SharePartitionManager:
    def __init__(self, broker: BrokerContext, persister: StatePersister,
                 dead_letters: DeadLetterQueue | None = None,
                 timer_ms: Callable[[], int] = monotonic_ms) -> None:
        self.broker = broker
        self.timer_ms = timer_ms
        """The clock, in ms, that lock deadlines and fetch waits are kept on (the cores'
        ``now_ms``): monotonic, never the broker's wall clock."""
        self.persister = persister
        self.dead_letters = dead_letters
        self.held: dict[SharePartitionKey, HeldPartition] = {}
        self.sessions = ShareSessionCache()
        self._loading: dict[SharePartitionKey, asyncio.Future[HeldPartition]] = {}
        self._writers: set[asyncio.Task[None]] = set()
        self.fetch_purgatory: DelayedOperationPurgatory[SharePartitionKey] = \
            DelayedOperationPurgatory("ShareFetch")
        """ShareFetches that acquired nothing, under the share-partitions they read; its
        deadlines are on ``timer_ms``."""
        self._fetch_timer = DeadlineTimer("share fetches", timer_ms, self._expire_fetches)
        self.fetch_purgatory.on_deadline_change = self._fetch_timer.deadline_changed
        self._lock_timer = DeadlineTimer("share locks", timer_ms, self._expire_locks)
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

    def lock_duration_ms(self, session: ShareSession) -> int:
        """The acquisition lock of the session's share-partitions
        (AcquisitionLockTimeoutMs of the response)."""
        return max((held.sp.lock_duration_ms for held in
                    (self.held.get(self._key(session.group_id, tip))
                     for tip in session.partitions) if held is not None),
                   default=DEFAULT_LOCK_MS)

    @staticmethod
    def _key(group_id: str, tip: TopicIdPartition) -> SharePartitionKey:
        return SharePartitionKey(group_id, tip[0], tip[1])

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

    # --- loading ------------------------------------------------------------------------

    def _partition(self, key: SharePartitionKey) -> Partition:
        """The partition of ``key`` this broker leads (UNKNOWN_TOPIC_ID,
        NOT_LEADER_OR_FOLLOWER otherwise)."""
        topic = self.broker.image.topics_by_id.get(key.topic_id)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_id, f"Unknown topic id {key.topic_id}")
        partition = self.broker.replica_manager.require(topic.name, key.partition,
                                                        self.broker.image)
        partition.check_leader_epoch(-1)
        return partition

    async def share_partition(self, key: SharePartitionKey, partition: Partition
                              ) -> HeldPartition:
        """The group's in-flight state of a partition this broker leads: as the share
        coordinator holds it, read once per leadership (a new leader epoch reads again)."""
        held = self.held.get(key)
        if held is not None and held.leader_epoch == partition.leader_epoch:
            return held
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.ensure_future(self._load(key, partition))
            loading.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(loading)

    async def _load(self, key: SharePartitionKey, partition: Partition) -> HeldPartition:
        group_id, topic_id, index = key.group_id, key.topic_id, key.partition
        where = f"{group_id} on {partition.topic}-{index}"
        leader_epoch = partition.leader_epoch
        state = await self.persister.read_state(group_id, topic_id, index, leader_epoch)
        if state.error == ErrorCode.invalid_request:
            # Never initialized (Kafka's "read operation on uninitialized share
            # partition"): start where share.auto.offset.reset says, then read as leader.
            error = await self.persister.initialize_state(
                group_id, topic_id, index, 0, self._reset_offset(group_id, partition))
            if error != ErrorCode.none:
                raise KafkaError(_RETRIABLE.get(error, error), f"Initializing the state of {where}")
            state = await self.persister.read_state(group_id, topic_id, index, leader_epoch)
        if state.error != ErrorCode.none:
            raise KafkaError(_RETRIABLE.get(state.error, state.error),
                             f"Reading the state of {where}")
        start, state_epoch = state.start_offset, state.state_epoch
        if start == NO_STATE:  # initialized without an offset (by the group coordinator)
            start = self._reset_offset(group_id, partition)
        sp = SharePartition.from_state(start, state.batches)
        self._apply(sp, self.settings(group_id))
        held = self.held[key] = HeldPartition(sp, topic_id, state_epoch, leader_epoch)
        self._dead_letter_later(key, held)  # archiving a former leader left unfinished
        log.debug("Share-partition %s starts at %d (state epoch %d, %d batches)", where,
                  sp.start_offset, state_epoch, len(state.batches))
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
        """The member's session for this request: a new one at epoch 0 (the records of
        the one it replaces go back), else the one whose epoch matches
        (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND)."""
        session, replaced = self.sessions.get_or_open(group_id, member_id, epoch)
        if replaced is not None:
            self.release(replaced)
        return session

    def close(self, session: ShareSession) -> None:
        self.sessions.remove(session)
        self.release(session)
        self._forget_if_empty(session.group_id)

    def on_disconnect(self, listener: str, host: str, port: int) -> None:
        """A client connection closed: the share sessions last used on it end, and their
        records are available to the other members at once."""
        connection: Connection = (listener, host, port)
        for session in self.sessions.on(connection):
            log.debug("Share session of %s in %s ends with its connection",
                      session.member_id, session.group_id)
            self.close(session)

    def _forget_if_empty(self, group_id: str) -> None:
        """No member of the group fetches here any more: drop its share-partitions whose
        state is all written, so the next member reads them again from the share
        coordinator (and sees an offset reset or delete made meanwhile; Kafka's
        ShareGroupListener.onGroupEmpty)."""
        if self.sessions.has_members(group_id):
            return
        for key, held in list(self.held.items()):
            if key.group_id == group_id and self._idle(held):
                del self.held[key]

    @staticmethod
    def _idle(held: HeldPartition) -> bool:
        busy = held.dead_lettering is not None and not held.dead_lettering.done()
        return not (held.dirty or held.lock.locked() or busy or held.sp.acquired_count()
                    or held.sp.pending is not None)

    def release(self, session: ShareSession) -> None:
        """A member's records go back: available to the others at once."""
        for tip in session.partitions:
            key = self._key(session.group_id, tip)
            held = self.held.get(key)
            if held is not None and held.sp.release_member(session.member_id):
                self._write_later(key, held)
                self._dead_letter_later(key, held)
                self._moved(key)

    def on_topics_deleted(self, topic_ids: set[uuid.UUID]) -> None:
        """Topics went: their share-partitions here go with them (a topic made again
        under the same name has a new id, and starts afresh), sessions stop naming
        them, and fetches waiting on them are answered (UNKNOWN_TOPIC_ID)."""
        for session in self.sessions:
            session.partitions = {tip for tip in session.partitions if tip[0] not in topic_ids}
        for key in [k for k in self.held if k.topic_id in topic_ids]:
            held = self.held.pop(key)
            if held.dead_lettering is not None:
                held.dead_lettering.cancel()
            self._moved(key)

    # --- acknowledging ------------------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str, tip: TopicIdPartition,
                          batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        """Apply the member's acknowledgements once their state is written (RENEW ones
        extend the member's locks)."""
        key = self._key(group_id, tip)
        held = self.held.get(key)
        if held is None:
            return ErrorCode.invalid_record_state
        async with held.lock:
            if self.held.get(key) is not held:
                return ErrorCode.invalid_record_state  # dropped while waiting
            update = held.sp.begin_acknowledge(member_id, batches, self.timer_ms())
            if isinstance(update, ErrorCode):
                return update
            error = await self._write(key, held, update)
        self._dead_letter_later(key, held)
        self._moved(key)  # released records may be fetched again at once
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
                key.group_id, held.topic_id, key.partition, held.state_epoch,
                held.leader_epoch, start, complete, batches)
        except Exception:
            log.exception("Writing the state of share-partition %s failed", key)
            error = ErrorCode.coordinator_not_available
        if update is not None:
            if error == ErrorCode.none:
                sp.commit(update)
            else:
                sp.rollback(update)
                self._lock_timer.deadline_changed(self.timer_ms())  # leases that ran out
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
            self._forget_if_empty(key.group_id)
        self._spawn(write())

    def _spawn(self, work: Coroutine[object, object, None]) -> asyncio.Task[None]:
        """Run ``work`` as a task that ``shutdown`` cancels."""
        task = asyncio.ensure_future(work)
        self._writers.add(task)
        task.add_done_callback(self._writers.discard)
        return task

    def _dead_letter_later(self, key: SharePartitionKey, held: HeldPartition) -> None:
        """Send the partition's ARCHIVING records to the dead-letter queue (one task per
        share-partition), archiving each run once the queue has it."""
        if not held.sp.archiving() or \
                (held.dead_lettering is not None and not held.dead_lettering.done()):
            return
        held.dead_lettering = self._spawn(self._dead_letter(key, held))

    async def _dead_letter(self, key: SharePartitionKey, held: HeldPartition) -> None:
        attempt = 0
        while self.held.get(key) is held:
            runs = held.sp.archiving()
            if not runs:
                return
            topic = self.broker.image.topics_by_id.get(key.topic_id)
            if topic is None:
                return  # the topic went: nothing left to send or to keep
            settings = self.settings(key.group_id)
            dlq_topic = self._dead_letter_topic(settings)
            first, last, count, cause = runs[0]
            try:
                if dlq_topic is not None and self.dead_letters is not None:
                    await self.dead_letters.send(
                        dlq_topic, key.group_id, topic.name, key.partition, first, last,
                        count, cause, settings.dlq_copy_record)
            except KafkaError as e:
                attempt += 1
                delay = _DLQ_BACKOFF.backoff(attempt) / 1000
                log.log(logging.WARNING if attempt % 10 == 1 else logging.DEBUG,
                        "Share group %s: records %d-%d of %s-%d wait for the dead-letter "
                        "queue (attempt %d): %s", key.group_id, first, last, topic.name,
                        key.partition, attempt, e)
                await asyncio.sleep(delay)
                continue
            attempt = 0
            async with held.lock:
                if held.sp.archived(first, last):
                    await self._write(key, held, None)
            self._moved(key)

    # --- fetching -----------------------------------------------------------------------

    async def fetch(self, session: ShareSession, partitions: list[TopicIdPartition],
                    limits: FetchLimits, max_wait_ms: int) -> ShareFetchResults:
        """Acquire records for the session's member from ``partitions`` (in order, the
        fetch's record budget shared among them); if none could be had, wait in the
        purgatory for up to ``max_wait_ms`` for one of them to move."""
        group_id = session.group_id
        if not partitions or limits.max_records <= 0 or limits.max_bytes <= 0:
            # As Kafka's processShareFetch: a fetch that may take nothing (a client that
            # only acknowledges sends MaxBytes 0) is answered at once, empty.
            return {tip: ShareFetchResult() for tip in partitions}
        ready: dict[TopicIdPartition, HeldPartition | ShareFetchResult] = {}
        for tip in partitions:
            ready[tip] = await self._ready(self._key(group_id, tip))
        now = self.timer_ms()
        results = self._acquire_all(session, ready, limits, now)
        if max_wait_ms <= 0 or _answers(results):
            return results
        answered: asyncio.Future[ShareFetchResults] = \
            asyncio.get_running_loop().create_future()

        def acquire(now_ms: int) -> ShareFetchResults | None:
            if not self.sessions.is_open(session):
                return results  # the member left while its fetch waited: nothing for it
            found = self._acquire_all(session, self._still_held(group_id, ready), limits,
                                      now_ms)
            return found if _answers(found) else None

        def respond(found: ShareFetchResults) -> None:
            if not answered.done():
                answered.set_result(found)

        self.fetch_purgatory.try_complete_else_watch(
            DelayedShareFetch(now + max_wait_ms, acquire, lambda: results, respond),
            [self._key(group_id, tip) for tip in partitions], now)
        return await answered

    async def _ready(self, key: SharePartitionKey) -> HeldPartition | ShareFetchResult:
        """The share-partition to acquire from, or the partition's answer without it: its
        error, or nothing while the share coordinator is not there yet (its topic being
        created, a partition loading), as Kafka answers: the member fetches again."""
        try:
            partition = self._partition(key)
            return await self.share_partition(key, partition)
        except KafkaError as e:
            if e.code not in _NOT_YET:
                return ShareFetchResult(error=e.code)
            log.debug("Share-partition %s not ready: %s", key, e)
            return ShareFetchResult()

    def _still_held(self, group_id: str,
                    ready: dict[TopicIdPartition, HeldPartition | ShareFetchResult]
                    ) -> dict[TopicIdPartition, HeldPartition | ShareFetchResult]:
        """A waiting fetch's share-partitions as they are now: one dropped meanwhile (a
        fenced write, a new leader epoch) is answered empty, and read again by the
        member's next fetch."""
        return {tip: self.held.get(self._key(group_id, tip), ShareFetchResult())
                if isinstance(held, HeldPartition) else held for tip, held in ready.items()}

    def _acquire_all(self, session: ShareSession,
                     ready: dict[TopicIdPartition, HeldPartition | ShareFetchResult],
                     limits: FetchLimits, now_ms: int) -> ShareFetchResults:
        results: ShareFetchResults = {}
        budget = limits.max_records
        for tip, held in ready.items():
            if isinstance(held, ShareFetchResult) or budget <= 0:
                results[tip] = held if isinstance(held, ShareFetchResult) \
                    else ShareFetchResult()
                continue
            try:
                partition = self._partition(self._key(session.group_id, tip))
                result = self._acquire(session, held, partition, limits.max_bytes, budget,
                                       limits.record_limit, now_ms)
            except KafkaError as e:
                result = ShareFetchResult(error=e.code)
            budget -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
            results[tip] = result
        return results

    def _acquire(self, session: ShareSession, held: HeldPartition, partition: Partition,
                 max_bytes: int, max_records: int, record_limit: bool, now_ms: int
                 ) -> ShareFetchResult:
        sp = held.sp
        settings = self.settings(session.group_id)
        self._apply(sp, settings)
        offset = sp.next_fetch_offset()
        committed = settings.isolation_level == IsolationLevel.READ_COMMITTED
        bound = partition.last_stable_offset if committed else partition.high_watermark
        if offset >= bound:
            return ShareFetchResult()
        data = self._read_for(partition, offset, bound, max_bytes, max_records, committed)
        if data is None:
            return ShareFetchResult()
        aborted = partition.log.collect_aborted(offset, bound) if committed else []
        fetched: list[tuple[int, int]] = []
        skipped: list[tuple[int, int]] = []
        ends: list[tuple[int, int]] = []  # (last offset, end position) of each batch
        for position, h in scan_batches(data):
            if h.base_offset >= bound:
                break
            ends.append((h.last_offset, position + h.size))
            run = (h.base_offset, min(h.last_offset, bound - 1))
            # Markers, and with share.isolation.level=read_committed the batches of
            # aborted transactions, are archived rather than delivered.
            if h.is_control or (h.is_transactional and any(
                    t.producer_id == h.producer_id and
                    t.first_offset <= h.base_offset <= t.last_offset for t in aborted)):
                skipped.append(run)
            else:
                fetched.append(run)
        acquired = sp.acquire(session.member_id, fetched, max_records, now_ms, record_limit,
                              skipped)
        if not acquired:
            return ShareFetchResult()
        self._lock_timer.deadline_changed(now_ms + sp.lock_duration_ms)
        # Up to the batch holding the last acquired record, as Kafka slices a share
        # fetch's records: what lies beyond is not the member's to read.
        last = max(a.last_offset for a in acquired)
        end = next((e for last_offset, e in ends if last_offset >= last), len(data))
        return ShareFetchResult(records=data[:end], acquired=acquired)

    @staticmethod
    def _read_for(partition: Partition, offset: int, bound: int, max_bytes: int,
                  max_records: int, committed: bool) -> bytes | None:
        """The log from ``offset``: enough whole batches for ``max_records`` records, at
        most ``max_bytes`` (at least one batch). Read in growing steps, since a member
        takes a few hundred records while a client asks for up to 50 MiB: reading (and
        sending) all of it made every fetch cost the whole backlog."""
        step, previous = min(max_bytes, SHARE_READ_STEP), -1
        while True:
            read = partition.read(offset, step, 1 if committed else 0, -1, True)
            if read.records is None:
                return None
            data = read.records.read()
            covered = sum(min(h.last_offset, bound - 1) - max(h.base_offset, offset) + 1
                          for _, h in scan_batches(data) if h.base_offset < bound)
            # Done with enough records, at the bound, or when a larger read brought
            # nothing more (the end of the segment, as Kafka's reads stop there too).
            if covered >= max_records or step >= max_bytes or len(data) == previous or \
                    offset + covered >= bound:
                return data
            step, previous = min(max_bytes, step * 4), len(data)

    # --- what wakes waiting fetches ---------------------------------------------------------

    def _moved(self, key: SharePartitionKey) -> None:
        """Records of ``key`` may be acquirable now: try the fetches waiting on it."""
        self.fetch_purgatory.check_and_complete(key, self.timer_ms())

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        topic = self.broker.image.topics_by_name.get(tp[0])
        if topic is None:
            return
        for key in [k for k in self.held
                    if k.topic_id == topic.topic_id and k.partition == tp[1]]:
            self._moved(key)

    def _expire_fetches(self, now_ms: int) -> int | None:
        self.fetch_purgatory.expire(now_ms)
        return self.fetch_purgatory.next_deadline()

    def _expire_locks(self, now_ms: int) -> int | None:
        deadlines = []
        for key, held in list(self.held.items()):
            before = held.sp.acquired_count()
            deadline = held.sp.expire_locks(now_ms)
            if held.sp.acquired_count() != before:
                self._write_later(key, held)
                self._dead_letter_later(key, held)
                self._moved(key)
            if deadline is not None:
                deadlines.append(deadline)
        return min(deadlines, default=None)

    def shutdown(self) -> None:
        """Answer the waiting fetches, stop the timers and the writes in flight."""
        self.fetch_purgatory.complete_all()
        self._fetch_timer.cancel()
        self._lock_timer.cancel()
        for task in list(self._writers):
            task.cancel()


def _answers(results: ShareFetchResults) -> bool:
    """A fetch answers once a partition has records for it or an error."""
    return any(r.acquired or r.error != ErrorCode.none for r in results.values())
