"""The cleaner looks for work every ``log.cleaner.backoff.ms`` (15 s, Kafka's default), not
on the retention schedule (``log.retention.check.interval.ms``, 300 s): a compacted topic
that asks for quick compaction gets it with no broker setting changed."""

from __future__ import annotations

import os

from confluent_kafka import Producer

from tests.helpers import WireClient, wait_until

BACKOFF_S = 15.0  # Kafka's log.cleaner.backoff.ms default
RETENTION_CHECK_S = 300.0  # Kafka's log.retention.check.interval.ms default
WAIT_S = 60.0
"""Four backoffs: room for the cleaner's worst phase and a busy machine, and still far
short of the retention check, so compaction seen within it cannot be that schedule's."""


def log_bytes(part: str) -> tuple[int, int]:
    """(segment count, bytes of the segment files) of a partition directory."""
    sizes = []
    for name in os.listdir(part):
        if name.endswith(".log"):
            try:
                sizes.append(os.path.getsize(os.path.join(part, name)))
            except FileNotFoundError:
                pass
    return len(sizes), sum(sizes)


def test_a_compacted_topic_is_cleaned_within_the_backoff_on_defaults(make_ottla) -> None:
    node = make_ottla()  # no broker setting changed
    topic = "quick-table"
    with WireClient(node.bootstrap) as client:
        client.create_topic(topic, configs={
            "cleanup.policy": "compact", "segment.ms": "500",
            "min.cleanable.dirty.ratio": "0.01", "max.compaction.lag.ms": "100"})
    part = os.path.join(node.data_dir, f"{topic}-0")
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})

    def roll() -> None:
        """Append one small record until segment.ms rolls the active segment, so that
        what came before is no longer in the active segment (eligible for cleaning)."""
        before = log_bytes(part)[0]

        def rolled() -> bool:
            producer.produce(topic, b"x", key=b"roll", partition=0)
            producer.flush(10)
            return log_bytes(part)[0] > before
        wait_until(rolled, 10, interval=0.1, message="segment.ms to roll the segment")

    value = b"v" * 1000
    written = 0
    for i in range(4000):  # 4 MB, 50 keys
        producer.produce(topic, value, key=b"k%02d" % (i % 50), partition=0)
        written += len(value)
        if i % 1000 == 999:
            assert producer.flush(30) == 0
    # Whenever the cleaner last looked (and found the data in the active segment), the
    # roll makes it eligible; the next look, at most a backoff later, compacts it.
    roll()

    def compacted() -> bool:
        return log_bytes(part)[1] < written / 10
    wait_until(compacted, WAIT_S, interval=0.2,
               message=lambda: f"the cleaner to compact {written} bytes, well before the "
                               f"{RETENTION_CHECK_S:g} s retention check "
                               f"(segments, bytes: {log_bytes(part)})")
