"""Retention and compaction in a running node: old segments go, the log start moves,
consumers that keep up never notice, compacted topics keep the latest value per key, and
no file handle leaks."""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from ottla.protocol.errors import ErrorCode
from tests.helpers import WireClient, wait_until
from tests.integration.test_fetch import list_offset, partition_data

FAST = {"log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200"}


def dir_bytes(path: str) -> int:
    """Bytes of the files in a partition directory (files may vanish while we look)."""
    total = 0
    for name in os.listdir(path):
        try:
            total += os.path.getsize(os.path.join(path, name))
        except FileNotFoundError:
            pass
    return total


def test_time_retention_moves_the_log_start(make_ottla) -> None:
    """Once every record has expired, Kafka's log rolls a new empty segment and deletes
    all the others, the active one included (UnifiedLog.deleteSegments): log start =
    log end, and a consumer from the beginning reads what comes next."""
    node = make_ottla(**FAST)
    with WireClient(node.bootstrap) as client:
        client.create_topic("short", configs={"segment.bytes": "2048", "retention.ms": "1500",
                                              "file.delete.delay.ms": "0"})
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    for i in range(60):
        producer.produce("short", b"%05d" % i + b"." * 490, partition=0)
        assert producer.flush(10) == 0  # one batch each, four to a segment
    part = os.path.join(node.data_dir, "short-0")

    def all_expired() -> bool:
        # Segments may expire over several retention passes on a slow machine. With
        # file.delete.delay.ms=0 a pass unlinks what it renamed.
        names = os.listdir(part)
        return [f for f in names if f.endswith(".log")] == [f"{60:020d}.log"] and \
            not [f for f in names if f.endswith(".deleted")]
    wait_until(all_expired, 30, message=lambda: f"retention to delete every segment "
                                                f"(files: {sorted(os.listdir(part))})")
    with WireClient(node.bootstrap) as client:
        assert list_offset(client, "short", -2)[1] == 60  # earliest
        assert list_offset(client, "short", -1)[1] == 60  # latest
        data = partition_data(client.fetch("short", 0, 0))
        assert data.error_code == ErrorCode.offset_out_of_range
        assert data.log_start_offset == -1  # as Kafka: no watermarks with an error
    producer.produce("short", b"after", partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "after-retention",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("short", 0, OFFSET_BEGINNING)])
        msg = wait_until(lambda: consumer.poll(0.5), 30, message="the record after retention")
        assert (msg.error(), msg.offset(), msg.value()) == (None, 60, b"after")
    finally:
        consumer.close()


def test_a_consumer_that_keeps_up_never_falls_off_a_size_bounded_log(make_ottla) -> None:
    node = make_ottla(**FAST)
    topic = "stream"
    with WireClient(node.bootstrap) as client:
        # About 2.5 s of the producer's output is retained: a consumer that keeps up
        # within that never needs a deleted offset.
        client.create_topic(topic, configs={"segment.bytes": "65536",
                                            "retention.bytes": "1048576", "retention.ms": "-1",
                                            "file.delete.delay.ms": "500"})
    server = psutil.Process(node.proc.pid)
    part = os.path.join(node.data_dir, f"{topic}-0")
    stop = threading.Event()
    produced = [0]

    failures: list[object] = []

    def delivered(error: object, _msg: object) -> None:
        if error is not None:
            failures.append(error)

    def produce() -> None:
        # Batches stay below segment.bytes, as Kafka requires (RECORD_BATCH_TOO_LARGE).
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5,
                             "batch.size": 16384})
        while not stop.is_set():  # about 2000 records (420 kB) a second
            for _ in range(50):
                producer.produce(topic, b"%08d" % produced[0] + b"-" * 200, partition=0,
                                 on_delivery=delivered)
                produced[0] += 1
            producer.poll(0)
            time.sleep(0.025)  # the writer's pace (the load's shape, not a wait)
        producer.flush(10)

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "keeps-up",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    writer = threading.Thread(target=produce)
    writer.start()
    consumed = 0
    peaks = [0, 0]  # the largest directory size in the first and the second half
    fds_early = None
    started = time.monotonic()
    try:
        while time.monotonic() - started < 25:
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    assert msg.error().code() not in (KafkaError.OFFSET_OUT_OF_RANGE,
                                                      KafkaError._AUTO_OFFSET_RESET), \
                        f"a consumer keeping up fell off the log: {msg.error()}"
                    continue
                assert int(msg.value()[:8]) == msg.offset()
                consumed += 1
            half = int(time.monotonic() - started > 12.5)
            peaks[half] = max(peaks[half], dir_bytes(part))
            if fds_early is None and time.monotonic() - started > 8:
                fds_early = server.num_fds()
    finally:
        stop.set()
        writer.join(30)
    consumer.close()
    assert not failures
    assert produced[0] > 5000 and consumed > 5000
    # Bounded: far below what was written, and not growing over time (what is above
    # retention.bytes is what arrives between two retention checks plus the segments
    # waiting out file.delete.delay.ms).
    written = produced[0] * 210
    assert max(peaks) < written / 3, (peaks, written)
    assert peaks[1] < 2 * peaks[0] + 65536, peaks
    with WireClient(node.bootstrap) as client:
        assert list_offset(client, topic, -2)[1] > 0
    assert fds_early is not None
    wait_until(lambda: server.num_fds() <= fds_early + 6, 10,
               message=f"open files to settle (early {fds_early}, now {server.num_fds()})")


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_a_compacted_topic_keeps_the_latest_value_per_key(make_ottla, codec) -> None:
    node = make_ottla(**FAST)
    topic = f"table-{codec}"
    with WireClient(node.bootstrap) as client:
        client.create_topic(topic, configs={"cleanup.policy": "compact", "segment.bytes": "8192",
                                            "min.cleanable.dirty.ratio": "0.01"})
    producer = Producer({"bootstrap.servers": node.bootstrap, "compression.type": codec,
                         "batch.size": 2048})
    expected = {}
    for i in range(3000):
        key = b"k%02d" % (i % 40)
        expected[key] = b"v%d" % i
        producer.produce(topic, expected[key], key=key, partition=0)
        if i % 500 == 0:
            producer.flush(10)
    assert producer.flush(10) == 0
    refused: list[object] = []
    producer.produce(topic, b"no key", partition=0,
                     on_delivery=lambda error, msg: refused.append(error))
    producer.flush(10)
    assert refused[0] is not None and refused[0].code() == KafkaError.INVALID_RECORD
    part = os.path.join(node.data_dir, f"{topic}-0")
    full = dir_bytes(part)
    wait_until(lambda: dir_bytes(part) < full / 2, 20, message="the cleaner to compact")

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "table",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = {}
    count = 0
    while True:
        msg = consumer.poll(10)
        assert msg is not None
        if msg.error():
            break
        seen[msg.key()] = msg.value()
        count += 1
    consumer.close()
    assert seen == expected
    assert count < 3000
