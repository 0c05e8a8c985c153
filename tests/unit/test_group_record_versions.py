"""``__consumer_offsets`` values of every version Kafka's loader reads, laid out byte by
byte from Kafka 4.4's ``OffsetCommitValue.json`` (versions 0-4, 4 flexible with the topic
id as tag 0), and record types Ottla does not know, which a loader skips."""

from __future__ import annotations

import struct
import uuid

import pytest

from ottla.coordinator.group import records as r
from ottla.coordinator.record_codec import UnknownRecordType

KEY = struct.pack(">hh5sh6si", 1, 5, b"group", 6, b"orders", 3)


def string(text: bytes) -> bytes:
    return struct.pack(">h", len(text)) + text


@pytest.mark.parametrize("version, value, epoch", [
    (0, struct.pack(">hq", 0, 42) + string(b"meta") + struct.pack(">q", 1700), -1),
    (1, struct.pack(">hq", 1, 42) + string(b"meta") + struct.pack(">qq", 1700, 9999), -1),
    (2, struct.pack(">hq", 2, 42) + string(b"meta") + struct.pack(">q", 1700), -1),
    (3, struct.pack(">hqi", 3, 42, 7) + string(b"meta") + struct.pack(">q", 1700), 7),
    (4, struct.pack(">hqi", 4, 42, 7) + bytes([5]) + b"meta" + struct.pack(">q", 1700)
     + bytes([1, 0, 16]) + uuid.UUID(int=77).bytes, 7),
])
def test_every_offset_commit_value_version_is_read(version: int, value: bytes,
                                                   epoch: int) -> None:
    record = r.decode(KEY, value)
    assert record.key == r.OffsetCommitKey(group="group", topic="orders", partition=3)
    assert (record.value.offset, record.value.leader_epoch, record.value.metadata,
            record.value.commit_timestamp) == (42, epoch, "meta", 1700)
    assert record.value.topic_id == (uuid.UUID(int=77) if version == 4 else uuid.UUID(int=0))


def test_ottla_writes_version_4_as_kafka_4_4_does() -> None:
    _, value = r.encode(r.CoordinatorRecord(
        r.OffsetCommitKey(group="group", topic="orders", partition=3),
        r.OffsetCommitValue(offset=42, leader_epoch=7, metadata="meta", commit_timestamp=1700)))
    # No tagged field: a commit by topic name carries no topic id.
    assert value == struct.pack(">hqi", 4, 42, 7) + bytes([5]) + b"meta" + \
        struct.pack(">q", 1700) + bytes([0])


def test_a_value_version_no_kafka_wrote_is_refused_and_an_unknown_type_told_apart() -> None:
    with pytest.raises(r.UnknownRecord):
        r.decode(KEY, struct.pack(">hq", 5, 42))
    with pytest.raises(UnknownRecordType) as unknown:
        r.decode(struct.pack(">h", 99) + b"\x00\x01g", None)
    assert unknown.value.record_type == 99
