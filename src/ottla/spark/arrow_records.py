"""Fetched record batches as Arrow columns, without a Python object per record.

The columnar reader (``reader=columnar``) hands the raw records of a Fetch response here.
:func:`select_batches` walks the 61-byte batch headers in Python, once per batch: it
drops control batches and, with ``read_committed``, the batches of aborted transactions
exactly as Kafka's consumer does, and decompresses the rest with the codec libraries
(one call per batch). :func:`to_arrow` then gives every kept batch to one call of the
compiled ``ottla._records.decode_arrow``, which walks the records' varints and copies
keys, values and headers into Arrow's buffer layout; pyarrow wraps those buffers as they
are. The columns are those of the confluent-kafka reader, value for value.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from ottla.protocol.compression import CompressionError, CompressionType, decompress
from ottla.protocol.records import (
    CONTROL_ABORT,
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptRecord,
    control_record_type,
    decode_records,
)

try:  # compiled with the package; absent when ottla travels as a zip of .py files
    from ottla._records import decode_arrow as _decode_arrow
except ImportError:  # pragma: no cover - depends on how ottla was installed
    _decode_arrow = None

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

# What decode_arrow takes per batch: (records, base offset, base timestamp, max
# timestamp, LogAppendTime, record count); ``records`` decompressed.
Segment = tuple[bytes | memoryview, int, int, int, bool, int]

_ALL = (-(1 << 63), (1 << 63) - 1)


def available() -> bool:
    """Whether the compiled decoder is importable here (an executor may lack it)."""
    return _decode_arrow is not None


@dataclass
class AbortedTransactions:
    """Kafka's consumer-side filter for ``read_committed`` (its ``CompletedFetch``): a
    Fetch response lists each aborted transaction touching it as (producer id, first
    offset). A producer's transactional batches are aborted from the first offset of
    one of its aborted transactions until its ABORT marker."""

    pending: list[tuple[int, int]] = field(default_factory=list)  # heap of (first, pid)
    producers: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, aborted: Iterable[tuple[int, int]] | None) -> AbortedTransactions:
        pending = [(first_offset, producer_id) for producer_id, first_offset in aborted or ()]
        heapq.heapify(pending)
        return cls(pending)

    def skips(self, buf: memoryview, pos: int, header: BatchHeader) -> bool:
        """Whether the batch at ``pos`` is aborted (only for batches with a producer id)."""
        while self.pending and self.pending[0][0] <= header.last_offset:
            self.producers.add(heapq.heappop(self.pending)[1])
        if header.is_control:
            if _is_abort_marker(buf, pos, header):
                self.producers.discard(header.producer_id)
            return False  # dropped anyway, as every control batch
        return header.is_transactional and header.producer_id in self.producers


def _is_abort_marker(buf: memoryview, pos: int, header: BatchHeader) -> bool:
    records = decode_records(buf, pos, header)
    return bool(records) and control_record_type(records[0].key) == CONTROL_ABORT


@dataclass
class Selection:
    """The batches of one response a reader keeps, and where the next fetch starts."""

    segments: list[Segment]
    next_offset: int  # after the last whole batch (== the fetch offset if there was none)
    truncated: bool  # bytes were left that do not make a whole batch


def select_batches(records: bytes | memoryview, fetch_offset: int,
                   aborted: AbortedTransactions | None) -> Selection:
    """Walk a Fetch response's record batches (``aborted`` given for ``read_committed``).

    Control batches never reach the reader, nor, with ``aborted``, the batches of aborted
    transactions. Compressed batches are decompressed here, the others stay views of
    ``records``. A batch that ends before ``fetch_offset`` is skipped (the broker sends
    whole batches, so the first may start before it).
    """
    view = memoryview(records)
    segments: list[Segment] = []
    position, size = 0, len(view)
    next_offset = fetch_offset
    while position + LOG_OVERHEAD <= size:
        if position + HEADER_SIZE > size:
            break
        magic = view[position + MAGIC_OFFSET]
        if magic != 2:
            raise CorruptRecord(f"message format v{magic} at offset "
                                f"{struct.unpack_from('>q', view, position)[0]}: the "
                                "columnar reader reads v2 batches only (use reader=consumer)")
        header = BatchHeader._make(HEADER.unpack_from(view, position))
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecord(f"batch length {header.batch_length} is too small")
        end = position + header.size
        if end > size:
            break
        start, position = position, end
        if header.next_offset <= fetch_offset:
            continue
        next_offset = header.next_offset
        if aborted is not None and header.producer_id >= 0 and \
                aborted.skips(view, start, header):
            continue
        if header.is_control or header.record_count == 0:
            continue
        body = view[start + HEADER_SIZE:end]
        if header.compression != CompressionType.NONE:
            try:
                body = decompress(header.compression, body)  # type: ignore[assignment]
            except CompressionError as e:
                raise CorruptRecord(f"batch at offset {header.base_offset}: {e}") from e
        segments.append((body, header.base_offset, header.base_timestamp,
                         header.max_timestamp, header.timestamp_type == LOG_APPEND_TIME,
                         header.record_count))
    return Selection(segments, next_offset, truncated=position < size)


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
              ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", TIMESTAMP_TYPE),
              ("timestampType", pa.int32())]
    return pa.schema(fields + ([("headers", HEADER_TYPE)] if include_headers else []))


def _buffer(data: bytes | None) -> pa.Buffer | None:
    return None if data is None else pa.py_buffer(data)


def _binary(kind: pa.DataType, rows: int, validity: bytes | None, offsets: bytes,
            data: bytes, nulls: int) -> pa.Array:
    return pa.Array.from_buffers(kind, rows, [_buffer(validity), pa.py_buffer(offsets),
                                              pa.py_buffer(data)], null_count=nulls)


def decode_columns(segments: list[Segment], include_headers: bool,
                   start: int = _ALL[0], end: int = _ALL[1]) -> dict[str, pa.Array]:
    """The records of ``segments`` with offsets in ``[start, end)``, as the record
    columns of the source's schema (every column but ``topic`` and ``partition``)."""
    if _decode_arrow is None:
        raise RuntimeError("ottla._records is not compiled here: use reader=consumer")
    (rows, offsets, timestamps, types, key_valid, key_offsets, key_data, key_nulls,
     value_valid, value_offsets, value_data, value_nulls, headers) = _decode_arrow(
        segments, start, end, include_headers)
    columns = {
        "key": _binary(pa.binary(), rows, key_valid, key_offsets, key_data, key_nulls),
        "value": _binary(pa.binary(), rows, value_valid, value_offsets, value_data,
                         value_nulls),
        "offset": pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(offsets)]),
        "timestamp": pa.Array.from_buffers(TIMESTAMP_TYPE, rows,
                                           [None, pa.py_buffer(timestamps)]),
        "timestampType": pa.Array.from_buffers(pa.int32(), rows, [None, pa.py_buffer(types)]),
    }
    if include_headers:
        columns["headers"] = _headers(rows, *headers)
    return columns


def _headers(rows: int, list_offsets: bytes, count: int, key_offsets: bytes, key_data: bytes,
             value_valid: bytes | None, value_offsets: bytes, value_data: bytes,
             value_nulls: int, bad_keys: int) -> pa.Array:
    keys = _binary(pa.string(), count, None, key_offsets, key_data, 0)
    if bad_keys:
        keys = _repair_utf8(keys)
    values = _binary(pa.binary(), count, value_valid, value_offsets, value_data, value_nulls)
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE.value_type))
    return pa.Array.from_buffers(HEADER_TYPE, rows, [None, pa.py_buffer(list_offsets)],
                                 children=[entries])


def _repair_utf8(keys: pa.Array) -> pa.Array:
    """Header keys that are not UTF-8, decoded as Kafka's clients decode them: each bad
    byte sequence becomes U+FFFD (rare, so per key in Python)."""
    raw = keys.view(pa.binary()).to_pylist()
    return pa.array([k.decode("utf-8", "replace") for k in raw], pa.string())


def to_arrow(segments: list[Segment], topic: str, partition: int, include_headers: bool,
             start: int, end: int) -> pa.RecordBatch:
    """One Arrow record batch, in the source's schema, of the records of ``segments``
    with offsets in ``[start, end)``."""
    columns = decode_columns(segments, include_headers, start, end)
    rows = len(columns["offset"])
    columns["topic"] = pa.repeat(pa.scalar(topic, pa.string()), rows)
    columns["partition"] = pa.repeat(pa.scalar(partition, pa.int32()), rows)
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)

