"""A compacted topic in a running node drops a tombstone as Kafka does (KIP-534): the
first clean keeps it and stamps a delete horizon into its batch, a consumer still sees
it with its own timestamp, and once the horizon has passed the next clean removes it."""

from __future__ import annotations

import os
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from ottla.protocol.records import CorruptRecord, decode_records, scan_batches
from tests.helpers import WireClient, wait_until

RETENTION_MS = 10_000


def tombstone_horizons(part: str, key: bytes) -> list[int | None]:
    """The delete horizon of each batch on disk holding a tombstone for ``key`` (a segment
    the cleaner swaps away meanwhile is skipped)."""
    found: list[int | None] = []
    for name in sorted(os.listdir(part)):
        if not name.endswith(".log"):
            continue
        try:
            with open(os.path.join(part, name), "rb") as f:
                data = f.read()
            for pos, header in scan_batches(data):
                if any(r.key == key and r.value is None
                       for r in decode_records(data, pos, header)):
                    found.append(header.delete_horizon_ms)
        except (FileNotFoundError, CorruptRecord):
            continue
    return found


def consume_all(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, timestamp) of every record from the start to the end of partition 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "horizon",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "no end of partition within 10 s"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return seen
            seen.append((msg.key(), msg.value(), msg.timestamp()[1]))
    finally:
        consumer.close()


def test_a_tombstone_stays_until_its_delete_horizon_then_goes(make_ottla) -> None:
    node = make_ottla(**{"log.retention.check.interval.ms": "200",
                         "log.cleaner.backoff.ms": "200"})
    topic = "horizon"
    with WireClient(node.bootstrap) as client:
        client.create_topic(topic, configs={"cleanup.policy": "compact",
                                            "segment.bytes": "1024",
                                            "min.cleanable.dirty.ratio": "0.01",
                                            "delete.retention.ms": str(RETENTION_MS)})
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})

    def send(key: bytes, value: bytes | None, timestamp: int) -> None:
        producer.produce(topic, value, key=key, partition=0, timestamp=timestamp)
        assert producer.flush(10) == 0

    def fill(count: int, timestamp: int) -> None:
        for i in range(count):  # one batch each, about five to a 1 KiB segment
            send(b"filler", b"f" * 150, timestamp + i)

    # An hour old: timestamp + delete.retention.ms passed long ago, yet it must stay.
    started_ms = time.time() * 1000
    old = int(started_ms) - 3_600_000
    send(b"gone", b"value", old)
    send(b"gone", None, old + 1)
    send(b"kept", b"value", old + 2)
    fill(12, old + 3)
    part = os.path.join(node.data_dir, f"{topic}-0")
    [horizon] = wait_until(
        lambda: [h for h in tombstone_horizons(part, b"gone") if h is not None] or None, 20,
        message=lambda: f"a delete horizon on the tombstone: {tombstone_horizons(part, b'gone')}")
    assert horizon is not None
    # Set by a clean that ran between the first send and now: delete.retention.ms after
    # that clean's time, not after the record's hour-old timestamp.
    assert started_ms + RETENTION_MS <= horizon <= time.time() * 1000 + RETENTION_MS
    seen = consume_all(node.bootstrap, topic)
    assert (b"gone", None, old + 1) in seen  # the timestamp the producer gave it
    assert (b"gone", b"value", old) not in seen

    # Past the horizon the next clean (it needs dirty data, as in Kafka) removes it.
    wait_until(lambda: time.time() * 1000 > horizon + 100, RETENTION_MS / 1000 + 5,
               message="the delete horizon to pass")
    fill(12, old + 100)
    wait_until(lambda: not tombstone_horizons(part, b"gone"), 20,
               message=lambda: f"the tombstone to go: {tombstone_horizons(part, b'gone')}")
    seen = consume_all(node.bootstrap, topic)
    assert not [r for r in seen if r[0] == b"gone"]
    assert (b"kept", b"value", old + 2) in seen
