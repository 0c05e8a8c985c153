"""RecordBatch v2 encoding, validation, compression, and legacy message sets."""

from __future__ import annotations

import struct
import zlib

import pytest

from ottla.protocol.compression import CompressionType, compress, decompress
from ottla.protocol.records import (
    CorruptRecord,
    build_batch,
    check_batch,
    decode_any,
    decode_records,
    read_header,
    scan_batches,
    set_base_offset,
    set_log_append_time,
)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_batch_round_trip_with_every_codec(codec: CompressionType) -> None:
    records = [(f"k{i}".encode(), f"value-{i}".encode() * 10, [("h", b"v"), ("n", None)])
               for i in range(50)]
    records.append((None, None, []))
    batch = build_batch(records, base_offset=100, timestamp=[1000 + i for i in range(51)],
                        compression=codec, producer_id=7, producer_epoch=2, base_sequence=9)
    header = check_batch(batch)
    assert header.compression == codec
    assert (header.base_offset, header.last_offset, header.record_count) == (100, 150, 51)
    assert header.max_timestamp == 1050
    assert header.last_sequence == 9 + 50
    decoded = decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (100 + i, 1000 + i, key, value, list(headers))
        for i, (key, value, headers) in enumerate(records)]


def test_crc_detects_a_flipped_byte() -> None:
    batch = bytearray(build_batch([(b"k", b"v" * 100)]))
    check_batch(batch)
    batch[-5] ^= 0xFF
    with pytest.raises(CorruptRecord, match="CRC"):
        check_batch(batch)


def test_base_offset_rewrite_keeps_crc_valid() -> None:
    batch = bytearray(build_batch([(b"k", b"v")] * 3))
    set_base_offset(batch, 0, 12345)
    header = check_batch(batch)
    assert header.base_offset == 12345
    assert [r.offset for r in decode_records(batch)] == [12345, 12346, 12347]


def test_log_append_time_stamps_every_record_and_rechecksums() -> None:
    batch = bytearray(build_batch([(b"a", b"1"), (b"b", b"2")], timestamp=[5, 6]))
    set_log_append_time(batch, 0, 99999)
    header = check_batch(batch)
    assert header.timestamp_type == 1
    assert [r.timestamp for r in decode_records(batch)] == [99999, 99999]


def test_truncated_and_wrong_magic_batches_are_rejected() -> None:
    batch = build_batch([(b"k", b"v")])
    with pytest.raises(CorruptRecord):
        check_batch(batch[:-1])
    bad = bytearray(batch)
    bad[16] = 1
    with pytest.raises(CorruptRecord, match="magic"):
        check_batch(bad)


def test_scan_stops_at_a_torn_tail_and_verify_raises_on_garbage() -> None:
    a = build_batch([(b"k", b"a")], base_offset=0)
    b = build_batch([(b"k", b"b")], base_offset=1)
    data = a + b + b[:20]
    assert [h.base_offset for _, h in scan_batches(data)] == [0, 1]
    garbage = a + b"\x00" * 8 + struct.pack(">i", 100) + b"\xff" * 100
    with pytest.raises(CorruptRecord):
        list(scan_batches(garbage, verify=True))


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY,
                                   CompressionType.LZ4, CompressionType.ZSTD])
def test_codecs_round_trip_large_inputs(codec: CompressionType) -> None:
    data = bytes(range(256)) * 1000
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_reads_raw_and_xerial_framing() -> None:
    import cramjam

    data = b"hello snappy " * 10000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw) == data
    framed = compress(CompressionType.SNAPPY, data)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(CompressionType.SNAPPY, framed) == data


def _legacy_message(offset: int, magic: int, key: bytes | None, value: bytes | None,
                    timestamp: int = 0, attributes: int = 0) -> bytes:
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    message = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_legacy_v0_and_v1_message_sets_are_readable() -> None:
    v0 = _legacy_message(0, 0, b"k0", b"v0")
    v1 = _legacy_message(1, 1, None, b"v1", timestamp=1234)
    decoded = [r for _, batch in decode_any(v0 + v1) for r in batch]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decoded] == [
        (0, b"k0", b"v0", -1), (1, None, b"v1", 1234)]


def test_legacy_compressed_wrapper_with_relative_offsets() -> None:
    inner = _legacy_message(0, 1, None, b"a", 10) + _legacy_message(1, 1, None, b"b", 11)
    wrapper = _legacy_message(41, 1, None, compress(CompressionType.GZIP, inner), 11,
                              attributes=CompressionType.GZIP)
    decoded = [r for _, batch in decode_any(wrapper) for r in batch]
    assert [(r.offset, r.value) for r in decoded] == [(40, b"a"), (41, b"b")]


def test_header_fields_are_read_without_decoding_records() -> None:
    batch = build_batch([(b"k", b"v")] * 4, base_offset=10, producer_id=3, producer_epoch=1,
                        base_sequence=0, transactional=True, partition_leader_epoch=5)
    header = read_header(batch)
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.partition_leader_epoch) == (3, 1, 5)
    assert header.next_offset == 14
