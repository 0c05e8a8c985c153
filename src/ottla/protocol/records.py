"""Kafka's record formats: the v2 RecordBatch, and legacy v0/v1 message sets (read only).

The broker's data path touches only the 61-byte batch header: it validates the CRC-32C
and rewrites the base offset and partition leader epoch, both of which lie before the
CRC-covered region, so appending never re-checksums. Records are decoded only where the
semantics demand it (tools, compaction, timestamp and key checks, internal topics).

Layout of a v2 batch (big-endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (=2)
    crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16
    baseSequence int32 | recordCount int32 | records...
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c
from kio._kio_native import read_signed_varint, read_signed_varlong
from kio.serial.errors import BufferUnderflow

from ottla.protocol.compression import CompressionError, CompressionType, compress, decompress

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_ATTRS_AND_MAX_TS = struct.Struct(">h")


class CorruptRecord(ValueError):
    """Bytes that are not a valid batch: Kafka answers CORRUPT_MESSAGE or INVALID_RECORD."""


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log or a request."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones and transaction markers
        (KIP-534): with the flag set the base timestamp holds it, and record timestamps
        stay base timestamp + delta."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at ``pos``; raises ``CorruptRecord`` if it is cut short."""
    if pos + HEADER_SIZE > len(buf):
        raise CorruptRecord("batch header is truncated")
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def check_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Validate the v2 batch at ``pos`` (structure and CRC-32C) and return its header."""
    if pos + HEADER_SIZE > len(buf):
        if pos + MAGIC_OFFSET < len(buf) and buf[pos + MAGIC_OFFSET] < 2:
            raise CorruptRecord("message format v0/v1 is not accepted; use a v2 batch")
        raise CorruptRecord("batch header is truncated")
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecord(f"unsupported batch magic {header.magic}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecord(f"batch length {header.batch_length} is too small")
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecord("batch is truncated")
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecord("negative record count or offset delta")
    if crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]) != header.crc:
        raise CorruptRecord("CRC-32C mismatch")
    return header


def scan_batches(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None,
                 verify: bool = False) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch; stops at a truncated tail.

    With ``verify`` every batch is checked (CRC and structure) and the first bad one raises
    ``CorruptRecord``; that is what recovery uses to find where a log must be truncated.
    """
    end = len(buf) if end is None else end
    view = memoryview(buf)[:end]
    while pos + LOG_OVERHEAD <= end:
        if verify:
            header = check_batch(view, pos)
        else:
            if pos + HEADER_SIZE > end:
                return
            header = BatchHeader._make(HEADER.unpack_from(view, pos))
            if header.batch_length < MIN_BATCH_LENGTH:
                raise CorruptRecord(f"batch length {header.batch_length} is too small")
            if pos + header.size > end:
                return
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Stamp a batch with LogAppendTime: set the flag and maxTimestamp, then re-checksum."""
    (attributes,) = _ATTRS_AND_MAX_TS.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _ATTRS_AND_MAX_TS.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    (length,) = _INT32.unpack_from(buf, pos + 8)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + length])
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Set a CreateTime batch's maxTimestamp (what its records say), then re-checksum."""
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    (length,) = _INT32.unpack_from(buf, pos + 8)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + length])
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc)


@dataclass(slots=True)
class Record:
    """One record as a user sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0


def _read_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    length, size = read_signed_varint(buf, pos)
    pos += size
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise CorruptRecord("record field runs past the end of the batch")
    return bytes(buf[pos : pos + length]), pos + length


def records_payload(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes:
    """The uncompressed record bytes of a batch."""
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression == CompressionType.NONE:
        return bytes(body)
    try:
        return decompress(header.compression, body)
    except CompressionError as e:
        raise CorruptRecord(str(e)) from e


def decode_records(buf: bytes | bytearray | memoryview, pos: int = 0,
                   header: BatchHeader | None = None) -> list[Record]:
    """Decode every record of the v2 batch at ``pos`` (decompressing as needed)."""
    header = header or read_header(buf, pos)
    return decode_record_payload(records_payload(buf, pos, header), header)


def decode_record_payload(data: bytes | memoryview, header: BatchHeader) -> list[Record]:
    """Decode the records of a batch from its (decompressed) record bytes."""
    records = []
    p = 0
    try:
        for _ in range(header.record_count):
            length, size = read_signed_varint(data, p)
            p += size
            end = p + length
            if length < 0 or end > len(data):
                raise CorruptRecord("record length runs past the end of the batch")
            attributes = data[p]
            p += 1
            ts_delta, size = read_signed_varlong(data, p)
            p += size
            offset_delta, size = read_signed_varint(data, p)
            p += size
            key, p = _read_bytes(data, p)
            value, p = _read_bytes(data, p)
            count, size = read_signed_varint(data, p)
            p += size
            headers = []
            for _ in range(count):
                hkey, p = _read_bytes(data, p)
                hvalue, p = _read_bytes(data, p)
                if hkey is None:
                    raise CorruptRecord("record header with a null key")
                headers.append((hkey.decode("utf-8", "replace"), hvalue))
            if p != end:
                raise CorruptRecord("record length does not match its fields")
            records.append(Record(header.base_offset + offset_delta,
                                  header.base_timestamp + ts_delta, key, value, headers,
                                  attributes))
    except (BufferUnderflow, IndexError) as e:
        raise CorruptRecord("record runs past the end of the batch") from e
    if p != len(data):
        raise CorruptRecord("bytes left over after the last record")
    if header.timestamp_type == LOG_APPEND_TIME:
        for record in records:
            record.timestamp = header.max_timestamp
    return records


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)  # zigzag(-1)
    else:
        _write_varint(out, len(value))
        out += value


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()) -> None:
    body = bytearray(b"\x00")
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    _write_varint(body, len(headers))
    for hkey, hvalue in headers:
        _write_bytes(body, hkey.encode())
        _write_bytes(body, hvalue)
    _write_varint(out, len(body))
    out += body


def build_batch(records: Sequence[tuple[bytes | None, bytes | None]]
                | Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
                *, base_offset: int = 0, timestamp: int | Sequence[int] = 0,
                compression: int = CompressionType.NONE, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                transactional: bool = False, control: bool = False,
                timestamp_type: int = CREATE_TIME, offset_deltas: Sequence[int] | None = None,
                compression_level: int | None = None,
                delete_horizon_ms: int | None = None) -> bytes:
    """Encode records (key, value[, headers]) as one v2 batch.

    With ``delete_horizon_ms`` the batch carries the delete-horizon flag and the base
    timestamp is the horizon, record deltas counted from it, as Kafka's cleaner writes it.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    timestamps = [timestamp] * len(records) if isinstance(timestamp, int) else list(timestamp)
    base_ts = timestamps[0] if delete_horizon_ms is None else delete_horizon_ms
    deltas = list(range(len(records))) if offset_deltas is None else list(offset_deltas)
    body = bytearray()
    for i, rec in enumerate(records):
        headers = rec[2] if len(rec) > 2 else ()  # type: ignore[misc]
        encode_record(body, deltas[i], timestamps[i] - base_ts, rec[0], rec[1], headers)
    if compression != CompressionType.NONE:
        body = bytearray(compress(compression, bytes(body), compression_level))
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
    batch = bytearray(HEADER.pack(base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
                                  partition_leader_epoch, 2, 0, attributes, deltas[-1], base_ts,
                                  max(timestamps), producer_id, producer_epoch, base_sequence,
                                  len(records)))
    batch += body
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


# Control records (transaction markers) carry a key of (version int16, type int16).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def control_record_type(key: bytes | None) -> int | None:
    if key is None or len(key) < 4:
        return None
    return struct.unpack_from(">hh", key)[1]


def marker_coordinator_epoch(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker's value (version int16,
    coordinator epoch int32); -1 if it has none."""
    if value is None or len(value) < 6:
        return -1
    return struct.unpack_from(">hi", value)[1]


def build_marker(*, producer_id: int, producer_epoch: int, commit: bool,
                 coordinator_epoch: int, timestamp: int, base_offset: int = 0,
                 partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A COMMIT or ABORT marker as Kafka writes it: a transactional control batch of one
    record, key (version 0, type), value (version 0, coordinator epoch)."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch([(key, value)], base_offset=base_offset, timestamp=timestamp,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       partition_leader_epoch=partition_leader_epoch, transactional=True,
                       control=True)


# --- legacy message sets (magic 0 and 1), readable for tools and old segment files ------

_LEGACY_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes


def _legacy_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    (length,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise CorruptRecord("legacy message field runs past its end")
    return bytes(buf[pos : pos + length]), pos + length


def decode_legacy_message_set(buf: bytes | bytearray | memoryview) -> list[Record]:
    """Decode a v0/v1 message set, unwrapping compressed wrapper messages."""
    view = memoryview(buf)
    records: list[Record] = []
    pos = 0
    while pos + _LEGACY_ENTRY.size <= len(view):
        offset, size, crc, magic, attributes = _LEGACY_ENTRY.unpack_from(view, pos)
        end = pos + LOG_OVERHEAD + size
        if end > len(view):
            break
        if zlib.crc32(view[pos + 16 : end]) != crc:
            raise CorruptRecord(f"legacy message at offset {offset} fails its CRC-32")
        p = pos + _LEGACY_ENTRY.size
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(view, p)
            p += 8
        elif magic != 0:
            raise CorruptRecord(f"legacy message with magic {magic}")
        key, p = _legacy_bytes(view, p)
        value, p = _legacy_bytes(view, p)
        codec = attributes & COMPRESSION_MASK
        if codec == CompressionType.NONE:
            records.append(Record(offset, timestamp, key, value, [], attributes))
        else:
            try:
                inner = decode_legacy_message_set(decompress(codec, value or b""))
            except CompressionError as e:
                raise CorruptRecord(str(e)) from e
            if magic == 1 and inner:
                # v1 inner offsets are relative; the wrapper carries the last one.
                shift = offset - inner[-1].offset
                for record in inner:
                    record.offset += shift
            records.extend(inner)
        pos = end
    return records


def decode_any(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, list[Record]]]:
    """Yield (magic, records) for each batch or legacy message set in ``buf``."""
    view = memoryview(buf)
    pos = 0
    while pos + MAGIC_OFFSET < len(view):
        magic = view[pos + MAGIC_OFFSET]
        (size,) = _INT32.unpack_from(view, pos + 8)
        end = pos + LOG_OVERHEAD + size
        if end > len(view):
            return
        if magic >= 2:
            yield magic, decode_records(view, pos)
        else:
            yield magic, decode_legacy_message_set(view[pos:end])
        pos = end
