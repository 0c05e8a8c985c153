"""The dead-letter queue of share groups (KIP-1191, Kafka's ShareGroupDLQStateManager):
produce records a share group gave up on to the group's
``errors.deadletterqueue.topic.name``.

Each record is written to partition ``source partition % DLQ partitions`` with acks=all
and headers saying where it came from (``__dlq.errors.topic``, ``.partition``,
``.offset``, ``.group``, ``.delivery.count``, ``.message``); with
``errors.deadletterqueue.copy.record.enable`` its key, value and headers are copied from
the source log, otherwise the record carries the headers alone. As Kafka checks it, the
topic's name starts with ``errors.deadletterqueue.topic.name.prefix`` (``dlq.``) and the
topic has ``errors.deadletterqueue.group.enable=true``; a missing one is created so when
``errors.deadletterqueue.auto.create.topics.enable`` allows. The caller
archives the records only once ``send`` returned, so a failure (or a crash before the
archive is written) sends them again: at least once, never dropped.
"""

from __future__ import annotations

import logging

from ottla.broker.context import BrokerContext
from ottla.broker.controller_client import create_topics
from ottla.broker.inter_broker import InterBrokerClients
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import build_batch, decode_records, scan_batches

log = logging.getLogger(__name__)

Original = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
"""A source record's key, value and headers."""
PRODUCE_VERSION = 9
HEADER = "__dlq.errors."
GROUP_ENABLE = "errors.deadletterqueue.group.enable"
"""The topic config that lets share groups write dead letters to a topic (KIP-1191)."""
READ_BYTES = 1 << 20


class DeadLetterQueue:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self._peers = InterBrokerClients(broker, "share-dlq")

    async def send(self, dlq_topic: str, group_id: str, topic: str, partition: int,
                   first: int, last: int, delivery_count: int, cause: str, copy: bool
                   ) -> None:
        """Produce offsets ``first``..``last`` of ``topic``-``partition`` to the queue;
        raises KafkaError if they are not all acknowledged."""
        prefix = self.broker.dynamic_config("errors.deadletterqueue.topic.name.prefix")
        if dlq_topic.startswith("__") or not dlq_topic.startswith(prefix):
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"The dead-letter queue topic {dlq_topic} must start with "
                             f"'{prefix}' (errors.deadletterqueue.topic.name.prefix) and "
                             "not with '__'")
        registration = self.broker.image.topics_by_name.get(dlq_topic)
        if registration is None:
            await self._create(dlq_topic)
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"The dead-letter queue topic {dlq_topic} is being created")
        if str(self.broker.image.topic_configs(dlq_topic).get(
                GROUP_ENABLE, "false")).lower() != "true":
            raise KafkaError(ErrorCode.invalid_config,
                             f"The topic {dlq_topic} does not take dead-letter records: "
                             f"set {GROUP_ENABLE}=true on it")
        target = partition % len(registration.partitions)
        leader = registration.partitions[target].leader
        if leader < 0:
            raise KafkaError(ErrorCode.leader_not_available,
                             f"{dlq_topic}-{target} has no leader")
        originals = self._read(topic, partition, first, last) if copy else {}
        now = self.broker.now_ms()
        records = []
        for offset in range(first, last + 1):
            key, value, headers = originals.get(offset, (None, None, ()))
            context = [(HEADER + "topic", topic.encode()),
                       (HEADER + "partition", str(partition).encode()),
                       (HEADER + "offset", str(offset).encode()),
                       (HEADER + "group", group_id.encode()),
                       (HEADER + "delivery.count", str(delivery_count).encode()),
                       (HEADER + "message", cause.encode())]
            records.append((key, value, [*headers, *context]))
        response = await self._peers.request(leader, ApiKey.PRODUCE, PRODUCE_VERSION, {
            "transactional_id": None, "acks": -1, "timeout": 30_000,
            "topic_data": [{"name": dlq_topic, "partition_data": [
                {"index": target, "records": build_batch(records, timestamp=now)}]}]})
        error = ErrorCode(response.responses[0].partition_responses[0].error_code)
        if error != ErrorCode.none:
            raise KafkaError(error, f"Producing to {dlq_topic}-{target}")
        log.info("Share group %s: %d record(s) of %s-%d (offsets %d-%d) to the dead-letter "
                 "queue %s: %s", group_id, last - first + 1, topic, partition, first, last,
                 dlq_topic, cause)

    def _read(self, topic: str, partition: int, first: int, last: int
              ) -> dict[int, Original]:
        """Key, value and headers of each offset still in the source log (this broker
        leads it)."""
        found: dict[int, Original] = {}
        source = self.broker.replica_manager.partitions.get((topic, partition))
        offset = first
        while source is not None and offset <= last:
            read = source.read(offset, READ_BYTES, 0, -1, True)
            if read.records is None:
                break
            data = read.records.read()
            moved = False
            for pos, header in scan_batches(data):
                if header.is_control:
                    continue
                for record in decode_records(data, pos, header):
                    if offset <= record.offset <= last:
                        found[record.offset] = (record.key, record.value,
                                                tuple(record.headers))
                offset = max(offset, header.last_offset + 1)
                moved = True
            if not moved:
                break
        return found

    async def _create(self, name: str) -> None:
        if not self.broker.dynamic_config("errors.deadletterqueue.auto.create.topics.enable"):
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"The dead-letter queue topic {name} does not exist and "
                             "errors.deadletterqueue.auto.create.topics.enable is false")
        errors = await create_topics(self.broker.controller, [
            self.broker.auto_created(name, {GROUP_ENABLE: "true"})])
        if errors.get(name) not in (ErrorCode.none, ErrorCode.topic_already_exists):
            raise KafkaError(errors.get(name, ErrorCode.unknown_server_error),
                             f"Creating the dead-letter queue topic {name}")

    async def close(self) -> None:
        await self._peers.close()
