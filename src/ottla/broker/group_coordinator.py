"""The group coordinator service on a broker (Kafka's GroupCoordinatorService).

It hashes group ids to ``__consumer_offsets`` partitions, creates that topic on first use,
loads a shard for every partition this broker leads (and unloads the rest), drives the
runtime's timers from the event loop, and turns the runtime's reply callbacks into
awaitables for the request handlers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from ottla.broker.broker import create_topics
from ottla.broker.deadline_timer import DeadlineTimer
from ottla.common.topics import OFFSETS_TOPIC, NewTopic
from ottla.coordinator.group import records as rec
from ottla.coordinator.group.consumer_protocol import ConsumerGroupConfig
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard
from ottla.coordinator.runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorState,
    Loading,
)
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import build_batch, decode_records, read_header, scan_batches

log = logging.getLogger(__name__)

LOAD_SLICE_RECORDS = 5000
"""Records a loading coordinator partition replays per turn of the event loop (a few
milliseconds): other partitions and clients are served in between."""


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode()) % partitions."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class LogPartitionWriter:
    """The runtime's view of ``__consumer_offsets`` through the replica manager."""

    def __init__(self, replica_manager: Any, image: Callable[[], Any]) -> None:
        self.replica_manager = replica_manager
        self.image = image

    def _partition(self, tp: tuple[str, int]) -> Any:
        return self.replica_manager.require(tp[0], tp[1], self.image())

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        partition = self._partition(tp)
        batch = bytearray(build_batch([rec.encode(r) for r in records], timestamp=now_ms))
        self.replica_manager.append_internal(partition, batch, read_header(batch), now_ms)
        return partition.log.log_end_offset

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return self._partition(tp).high_watermark

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        log_ = self._partition(tp).log
        offset = log_.log_start_offset
        while offset < log_.log_end_offset:
            read = log_.read(offset, 1 << 20, None, True)
            if read.records is None:
                break
            data = read.records.read()
            if not data:
                break
            for position, header in scan_batches(data):
                if header.is_control:
                    offset = header.next_offset
                    continue
                for record in decode_records(data, position, header):
                    if record.key is not None and record.offset >= offset:
                        yield record.offset, rec.decode(record.key, record.value)
                offset = header.next_offset


class GroupCoordinatorService:
    def __init__(self, broker: Any, config: Any) -> None:
        self.broker = broker
        self.num_partitions: int = config["offsets.topic.num.partitions"]
        self.replication_factor: int = config["offsets.topic.replication.factor"]
        self.segment_bytes: int = config["offsets.topic.segment.bytes"]
        self.group_config = GroupConfig.from_config(config)
        self.consumer_config = ConsumerGroupConfig.from_config(config)
        self.runtime: CoordinatorRuntime[GroupCoordinatorShard] = CoordinatorRuntime(
            LogPartitionWriter(broker.replica_manager, lambda: broker.image),
            lambda ctx: GroupCoordinatorShard(ctx, self.group_config, topics=self._topics,
                                              consumer_config=self.consumer_config))
        self._timer = DeadlineTimer("group coordinator", broker.now_ms, self._poll)
        self.runtime.on_timer_change = self._timer.deadline_changed
        broker.replica_manager.high_watermark_listeners.append(self._on_high_watermark)
        self._creating: asyncio.Future[Any] | None = None
        self._loading: dict[tuple[str, int], asyncio.Future[None]] = {}
        """Partitions whose records are being replayed in slices."""

    def _topics(self) -> dict[str, tuple[Any, int]]:
        """User topics of the metadata image: name -> (topic id, partition count)."""
        return {name: (t.topic_id, len(t.partitions))
                for name, t in self.broker.image.topics_by_name.items()
                if not name.startswith("__")}

    # --- where groups live ---------------------------------------------------------------

    def partition_for(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, partition_for(group_id, self.num_partitions)

    def coordinator_for(self, group_id: str) -> int:
        """The node leading the group's partition, creating the topic if needed; raises
        KafkaError(COORDINATOR_NOT_AVAILABLE) while it is not ready."""
        topic = self.broker.image.topics_by_name.get(OFFSETS_TOPIC)
        if topic is None:
            self._create_topic()
            raise KafkaError(ErrorCode.coordinator_not_available,
                             "The coordinator is not available")
        _, index = self.partition_for(group_id)
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
            log.warning("Cannot create %s: offsets.topic.replication.factor is %d but only %d "
                        "brokers are alive", OFFSETS_TOPIC, self.replication_factor, brokers)
            return
        topic = NewTopic(OFFSETS_TOPIC, self.num_partitions, self.replication_factor,
                         configs={"cleanup.policy": "compact",
                                  "compression.type": "producer",
                                  "segment.bytes": str(self.segment_bytes)})
        self._creating = asyncio.ensure_future(self._create(topic))

    async def _create(self, topic: NewTopic) -> None:
        try:
            errors = await create_topics(self.broker.controller, [topic])
        except Exception as e:
            log.warning("Cannot create %s: %s", OFFSETS_TOPIC, e)
            return
        if errors.get(OFFSETS_TOPIC) not in (ErrorCode.none, ErrorCode.topic_already_exists):
            log.warning("Cannot create %s: %s", OFFSETS_TOPIC, errors.get(OFFSETS_TOPIC))

    # --- following leadership ------------------------------------------------------------

    def on_metadata(self, now_ms: int) -> None:
        """Load shards for the offsets partitions this broker now leads; unload the rest.
        It looks at the offsets topic's partitions alone, so a commit costs the same
        however many other partitions the broker hosts, and a partition whose log the
        replica manager opened after the commit (a budgeted pass) is found next time."""
        topic = self.broker.image.topics_by_name.get(OFFSETS_TOPIC)
        hosted = self.broker.replica_manager.partitions
        led = set()
        for index in topic.partitions if topic is not None else ():
            partition = hosted.get((OFFSETS_TOPIC, index))
            if partition is not None and partition.is_leader:
                led.add((OFFSETS_TOPIC, index))
        for tp in list(self.runtime.contexts):
            if tp not in led:
                self.runtime.unload(tp)
        for tp in sorted(led):
            if tp not in self.runtime.contexts:
                job = self.runtime.begin_load(tp, now_ms)
                if not job.step(LOAD_SLICE_RECORDS, now_ms):
                    # A large partition: the rest loads over later turns of the loop,
                    # its groups answering COORDINATOR_LOAD_IN_PROGRESS meanwhile.
                    self._loading[tp] = asyncio.ensure_future(self._load(job))

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
            log.info("Loaded coordinator partition %s-%d (%d records) in %.0f ms", *tp,
                     job.count, (time.monotonic() - started) * 1000)

    def _on_high_watermark(self, tp: tuple[str, int]) -> None:
        """An offsets partition's high watermark moved: release the responses it covers."""
        if tp[0] == OFFSETS_TOPIC:
            self.runtime.on_high_watermark(tp)

    def shutdown(self) -> None:
        for task in self._loading.values():
            task.cancel()
        self._loading.clear()
        for tp in list(self.runtime.contexts):
            self.runtime.unload(tp)
        self._timer.cancel()

    # --- operations ------------------------------------------------------------------------

    def write(self, group_id: str, operation: Callable[[GroupCoordinatorShard, int],
                                                       CoordinatorResult],
              reply_with_callback: bool = False) -> asyncio.Future[Any]:
        """Run a write on the group's shard; the future resolves to the response once its
        records are committed, or raises the KafkaError the operation failed with."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def reply(response: Any) -> None:
            if future.done():
                return
            if isinstance(response, KafkaError):
                future.set_exception(response)
            else:
                future.set_result(response)

        tp = self.partition_for(group_id)
        self.coordinator_for(group_id)
        if reply_with_callback:
            self.runtime.write(tp, lambda shard, now: operation(shard, now, reply), reply,
                               self.broker.now_ms())
        else:
            self.runtime.write(tp, operation, reply, self.broker.now_ms())
        return future

    def read(self, group_id: str, operation: Callable[[GroupCoordinatorShard], Any]) -> Any:
        self.coordinator_for(group_id)
        return self.runtime.read(self.partition_for(group_id), operation)

    def read_committed(self, group_id: str, operation: Callable[[GroupCoordinatorShard], Any]
                       ) -> asyncio.Future[Any]:
        """Read the group's shard; the future resolves once the high watermark covers
        what the read saw (or raises the KafkaError of a shard that is not active)."""
        self.coordinator_for(group_id)
        return self._read_committed(self.partition_for(group_id), operation)

    def _read_committed(self, tp: tuple[str, int],
                        operation: Callable[[GroupCoordinatorShard], Any]
                        ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply(response: Any) -> None:
            if future.done():
                return
            if isinstance(response, KafkaError):
                future.set_exception(response)
            else:
                future.set_result(response)

        try:
            self.runtime.read_committed(tp, operation, reply)
        except KafkaError as e:
            reply(e)
        return future

    async def read_every_shard(self, operation: Callable[[GroupCoordinatorShard], list[Any]]
                               ) -> list[Any]:
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

    def _poll(self, now_ms: int) -> int | None:
        self.runtime.poll(now_ms)
        return self.runtime.next_deadline()
