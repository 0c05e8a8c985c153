"""A coordinator service on a broker (Kafka's GroupCoordinatorService and the transaction
coordinator's partition handling, one driver for both).

It hashes keys (group ids, transactional ids) to the partitions of an internal topic,
creates that topic on first use, loads a shard for every partition this broker leads
(a slice of records per turn of the event loop) and unloads the rest, drives the
runtime's timers from the event loop, and turns the runtime's reply callbacks into
awaitables for the request handlers. Subclasses say which topic, which shard and how its
records are encoded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from ottla.broker.context import BrokerContext
from ottla.broker.controller_client import create_topics
from ottla.broker.deadline_timer import DeadlineTimer, monotonic_ms
from ottla.broker.replication.partition import Partition
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.common.topics import NewTopic, TopicPartition
from ottla.coordinator.record_codec import UnknownRecordType
from ottla.coordinator.runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorState,
    Loading,
    ShardContext,
    TransactionalRecord,
    TransactionMarker,
)
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    build_batch,
    control_record_type,
    decode_records,
    read_header,
    scan_batches,
)

log = logging.getLogger(__name__)

S = TypeVar("S")

LOAD_SLICE_RECORDS = 5000
"""Records a loading coordinator partition replays per turn of the event loop (a few
milliseconds): other partitions and clients are served in between."""
LOAD_READ_BYTES = 1 << 20
"""What one read of a loading partition's log asks for (a larger batch comes whole)."""


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's Utils.abs(key.hashCode()) % partitions."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


Encode = Callable[[Any], tuple[bytes, bytes | None]]
Decode = Callable[[bytes, bytes | None], Any]


class LogPartitionWriter:
    """The runtime's view of an internal topic through the replica manager."""

    def __init__(self, replica_manager: ReplicaManager, image: Callable[[], MetadataImage],
                 encode: Encode,
                 decode: Decode) -> None:
        self.replica_manager = replica_manager
        self.image = image
        self.encode = encode
        self.decode = decode
        self.topic_stats: BrokerTopicStats | None = None
        """Counts the appends as TotalProduceRequests, MessagesIn and BytesIn (a failed
        one as TotalProduceRequests and, for an unexpected error, FailedProduceRequests),
        as Kafka's appendToLocalLog counts a coordinator's as any other (set with the
        broker's)."""

    def _partition(self, tp: TopicPartition) -> Partition:
        return self.replica_manager.require(tp[0], tp[1], self.image())

    def append(self, tp: TopicPartition, records: list[Any], now_ms: int) -> int:
        """One batch; transactional (with that producer id and epoch) when the records
        are a producer's ``TransactionalRecord``s."""
        try:
            partition = self._partition(tp)
        except KafkaError as e:  # Kafka's append counts it (NOT_LEADER_OR_FOLLOWER...)
            if self.topic_stats is not None:
                self.topic_stats.produced(tp[0], e.code, 0, 0)
            raise
        producer: dict[str, Any] = {}
        if records and isinstance(records[0], TransactionalRecord):
            first = records[0]
            producer = {"producer_id": first.producer_id,
                        "producer_epoch": first.producer_epoch, "transactional": True}
            records = [r.record for r in records]
        batch = bytearray(build_batch([self.encode(r) for r in records], timestamp=now_ms,
                                      **producer))
        try:
            self.replica_manager.append_internal(partition, batch, read_header(batch), now_ms)
        except KafkaError as e:
            if self.topic_stats is not None:
                self.topic_stats.produced(tp[0], e.code, 0, 0)
            raise
        if self.topic_stats is not None:
            self.topic_stats.appended(tp[0], len(records), len(batch))
        return partition.log.log_end_offset

    def high_watermark(self, tp: TopicPartition) -> int:
        return self._partition(tp).high_watermark

    def read(self, tp: TopicPartition) -> Iterator[tuple[int, Any]]:
        log_ = self._partition(tp).log
        offset = log_.log_start_offset
        while offset < log_.log_end_offset:
            read = log_.read(offset, LOAD_READ_BYTES, min_one_batch=True)
            if read.records is None:
                break
            data = read.records.read()
            if not data:
                break
            for position, header in scan_batches(data):
                if header.is_control:
                    records = decode_records(data, position, header)
                    kind = control_record_type(records[0].key) if records else None
                    if header.is_transactional and kind in (CONTROL_ABORT, CONTROL_COMMIT) \
                            and header.base_offset >= offset:
                        yield header.base_offset, TransactionMarker(
                            header.producer_id, header.producer_epoch, kind == CONTROL_COMMIT)
                    offset = header.next_offset
                    continue
                for record in decode_records(data, position, header):
                    if record.key is not None and record.offset >= offset:
                        try:
                            decoded = self.decode(record.key, record.value)
                        except UnknownRecordType as e:
                            # As Kafka's loader: a newer version's record, left alone.
                            log.warning("Unknown record type %d while loading %s-%d at "
                                        "offset %d. Ignoring it. It could be a left over "
                                        "from an aborted upgrade.", e.record_type, *tp,
                                        record.offset)
                            continue
                        if header.is_transactional:
                            decoded = TransactionalRecord(header.producer_id,
                                                          header.producer_epoch, decoded)
                        yield record.offset, decoded
                offset = header.next_offset


class CoordinatorService(Generic[S]):
    topic_name: str
    """The internal topic (``__consumer_offsets``, ``__transaction_state``)."""
    kind: str
    """For log lines: "group coordinator", "transaction coordinator"."""

    def __init__(self, broker: BrokerContext, num_partitions: int, replication_factor: int,
                 topic_configs: dict[str, str], shard_factory: Callable[[ShardContext], S],
                 encode: Encode, decode: Decode, write_timeout_ms: int | None = None) -> None:
        self.broker = broker
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.topic_configs = topic_configs
        self.writer = LogPartitionWriter(broker.replica_manager, lambda: broker.image,
                                         encode, decode)
        self.runtime: CoordinatorRuntime[Any] = CoordinatorRuntime(
            self.writer, shard_factory, timer_ms=monotonic_ms,
            write_timeout_ms=write_timeout_ms)
        self._timer = DeadlineTimer(self.kind, monotonic_ms, self._poll)
        self.runtime.on_timer_change = self._timer.deadline_changed
        broker.replica_manager.high_watermark_listeners.append(self._on_high_watermark)
        self._creating: asyncio.Future[Any] | None = None
        self._loading: dict[TopicPartition, asyncio.Future[None]] = {}
        """Partitions whose records are being replayed in slices."""

    # --- where keys live -----------------------------------------------------------------

    def partition_for(self, key: str) -> TopicPartition:
        return self.topic_name, partition_for(key, self.num_partitions)

    def coordinator_for(self, key: str) -> int:
        """The node leading the key's partition, creating the topic if needed; raises
        KafkaError(COORDINATOR_NOT_AVAILABLE) while it is not ready."""
        topic = self.broker.image.topics_by_name.get(self.topic_name)
        if topic is None:
            self._create_topic()
            raise KafkaError(ErrorCode.coordinator_not_available,
                             "The coordinator is not available")
        _, index = self.partition_for(key)
        registration = topic.partitions.get(index)
        if registration is None or registration.leader < 0:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             "The coordinator is not available")
        return registration.leader

    def _create_topic(self) -> None:
        if self._creating is not None and not self._creating.done():
            return
        brokers = len(self.broker.image.live_brokers())
        if brokers < self.replication_factor:
            log.warning("Cannot create %s: its replication factor is %d but only %d brokers "
                        "are alive", self.topic_name, self.replication_factor, brokers)
            return
        topic = NewTopic(self.topic_name, self.num_partitions, self.replication_factor,
                         configs=dict(self.topic_configs))
        self._creating = asyncio.ensure_future(self._create(topic))

    async def _create(self, topic: NewTopic) -> None:
        try:
            errors = await create_topics(self.broker.controller, [topic])
        except Exception as e:
            log.warning("Cannot create %s: %s", self.topic_name, e)
            return
        if errors.get(self.topic_name) not in (ErrorCode.none, ErrorCode.topic_already_exists):
            log.warning("Cannot create %s: %s", self.topic_name, errors.get(self.topic_name))

    # --- following leadership ------------------------------------------------------------

    def on_metadata(self, now_ms: int) -> None:
        """Load shards for the topic's partitions this broker now leads; unload the rest.
        It looks at this topic's partitions alone, so a commit costs the same however
        many other partitions the broker hosts, and a partition whose log the replica
        manager opened after the commit (a budgeted pass) is found next time."""
        topic = self.broker.image.topics_by_name.get(self.topic_name)
        hosted = self.broker.replica_manager.partitions
        led = set()
        for index in topic.partitions if topic is not None else ():
            partition = hosted.get((self.topic_name, index))
            if partition is not None and partition.is_leader:
                led.add((self.topic_name, index))
        for tp in list(self.runtime.contexts):
            if tp not in led:
                self.runtime.unload(tp)
        for tp in sorted(led):
            if tp not in self.runtime.contexts:
                job = self.runtime.begin_load(tp, now_ms)
                if job.step(LOAD_SLICE_RECORDS, now_ms):
                    self.on_loaded(tp)
                else:
                    # A large partition: the rest loads over later turns of the loop,
                    # its keys answering COORDINATOR_LOAD_IN_PROGRESS meanwhile.
                    self._loading[tp] = asyncio.ensure_future(self._load(job))

    def on_loaded(self, tp: TopicPartition) -> None:
        """A partition's shard became active (subclasses resume its work)."""

    async def _load(self, job: Loading) -> None:
        tp = job.context.tp
        started = time.monotonic()
        try:
            while True:
                await asyncio.sleep(0)
                if job.step(LOAD_SLICE_RECORDS, self.broker.now_ms()):
                    break
        finally:
            if self._loading.get(tp) is asyncio.current_task():
                del self._loading[tp]
        if job.context.state is CoordinatorState.ACTIVE:
            log.info("Loaded %s partition %s-%d (%d records) in %.0f ms", self.kind, *tp,
                     job.count, (time.monotonic() - started) * 1000)
            self.on_loaded(tp)

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        """A partition's high watermark moved: release the responses it covers."""
        if tp[0] == self.topic_name:
            self.runtime.on_high_watermark(tp)

    def shutdown(self) -> None:
        for task in self._loading.values():
            task.cancel()
        self._loading.clear()
        for tp in list(self.runtime.contexts):
            self.runtime.unload(tp)
        self._timer.cancel()

    # --- operations ------------------------------------------------------------------------

    @staticmethod
    def _future() -> tuple[asyncio.Future[Any], Callable[[Any], None]]:
        """A future and the reply callback that settles it (a KafkaError raises)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply(response: Any) -> None:
            if future.done():
                return
            if isinstance(response, KafkaError):
                future.set_exception(response)
            else:
                future.set_result(response)

        return future, reply

    def write(self, key: str, operation: Callable[..., CoordinatorResult], *,
              reply_with_callback: bool = False) -> asyncio.Future[Any]:
        """Run a write on the key's shard; the future resolves to the response once its
        records are committed, or raises the KafkaError the operation failed with."""
        future, reply = self._future()
        tp = self.partition_for(key)
        self.coordinator_for(key)
        if reply_with_callback:
            self.runtime.write(tp, lambda shard, now: operation(shard, now, reply), reply,
                               self.broker.now_ms())
        else:
            self.runtime.write(tp, operation, reply, self.broker.now_ms())
        return future

    def write_to(self, tp: TopicPartition, operation: Callable[..., CoordinatorResult]
                 ) -> asyncio.Future[Any]:
        """``write`` on a partition this service leads rather than on a key's."""
        future, reply = self._future()
        self.runtime.write(tp, operation, reply, self.broker.now_ms())
        return future

    def read(self, key: str, operation: Callable[[S], Any]) -> Any:
        self.coordinator_for(key)
        return self.runtime.read(self.partition_for(key), operation)

    def read_committed(self, key: str, operation: Callable[[S], Any]) -> asyncio.Future[Any]:
        """Read the key's shard; the future resolves once the high watermark covers
        what the read saw (or raises the KafkaError of a shard that is not active)."""
        self.coordinator_for(key)
        return self._read_committed(self.partition_for(key), operation)

    def _read_committed(self, tp: TopicPartition, operation: Callable[[S], Any]
                        ) -> asyncio.Future[Any]:
        future, reply = self._future()
        try:
            self.runtime.read_committed(tp, operation, reply)
        except KafkaError as e:
            reply(e)
        return future

    async def read_every_shard(self, operation: Callable[[S], list[Any]]) -> list[Any]:
        """``operation`` on every active shard, each answer released at its shard's
        high watermark; shards that are loading or moved away are left out."""
        futures = [self._read_committed(tp, operation) for tp in list(self.runtime.contexts)]
        found: list[Any] = []
        for outcome in await asyncio.gather(*futures, return_exceptions=True):
            if isinstance(outcome, KafkaError):
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            found.extend(outcome)
        return found

    # --- timers ---------------------------------------------------------------------------

    def _poll(self, timer_ms: int) -> int | None:
        """A timer is due on the monotonic clock: it runs at the wall clock's now."""
        self.runtime.poll(self.broker.now_ms())
        return self.runtime.next_deadline()
