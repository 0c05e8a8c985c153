"""Produce against a topic's record limits: Kafka 4.4's max.decompressed.message.bytes
bounds each record of a compressed batch (and only of a compressed one)."""

from __future__ import annotations

from ottla.protocol.compression import CompressionType
from tests.oracle.model import Json, scenario
from tests.oracle.target import Target

LIMIT = 300
"""The topic's max.decompressed.message.bytes: a record of 1000 value bytes exceeds it."""


@scenario("Produce", ci=True)
def produce_max_decompressed_message_bytes(t: Target) -> Json:
    """Produce v9 to a topic with max.decompressed.message.bytes=300: gzip and zstd
    batches whose second record is longer than that (refused), the same records
    uncompressed (accepted), small records compressed (accepted)."""
    name = t.topic("a")
    t.create_topic(name, 1, {"max.decompressed.message.bytes": str(LIMIT)})
    long_records = [(b"k", b"small"), (b"k", b"x" * 1000), (b"k", b"tail")]
    short_records = [(b"k", b"small")] * 3
    return {
        "gzip_long": t.produce_batch(name, 0, long_records, t.now,
                                     compression=CompressionType.GZIP),
        "zstd_long": t.produce_batch(name, 0, long_records, t.now,
                                     compression=CompressionType.ZSTD),
        "uncompressed_long": t.produce_batch(name, 0, long_records, t.now),
        "gzip_short": t.produce_batch(name, 0, short_records, t.now,
                                      compression=CompressionType.GZIP),
    }
