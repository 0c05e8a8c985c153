"""Validation of a client's batch before it is appended, as Kafka's LogValidator does it.

The header is checked first (structure, CRC-32C, counts, producer fields). Then every
record is walked (``ottla._records``, native code: about 10 ns a record): its framing
against its batch, its offset delta, and, reported per record as KIP-467 asks, its
timestamp against ``message.timestamp.*`` and its key on a compacted topic. A record
that cannot be read would stop every consumer at its offset, so a batch holding one is
refused whole. The batch's max timestamp is set to what its records say, as Kafka does.

A compressed batch is decompressed for that walk, never into more room than
``max.decompressed.batch.bytes``: a 40 KiB zstd batch can expand to GiBs. Each of its
records must be no longer than the topic's ``max.decompressed.message.bytes`` (Kafka
4.4: INVALID_RECORD, without a message for the client, as Kafka's InvalidRecordException
from the decompressing iterator). Output up to
``INLINE_BYTES`` is decompressed right away into a buffer kept for it; a batch that
needs more comes back as a ``PendingBatch``, whose ``finish`` the caller runs on a worker
thread. Records are decoded into objects only to recompress a batch for a topic whose
``compression.type`` differs from the producer's.
"""

from __future__ import annotations

import logging
import mmap
from dataclasses import dataclass

from ottla._records import scan
from ottla.protocol.compression import (
    CompressionError,
    CompressionType,
    OutputTooLarge,
    decompress_into,
)
from ottla.protocol.errors import ErrorCode, KafkaError, MalformedRequest
from ottla.protocol.records import (
    COMPRESSION_MASK,
    CREATE_TIME,
    HEADER_SIZE,
    MAGIC_OFFSET,
    BatchHeader,
    CorruptRecord,
    build_batch,
    check_batch,
    decode_record_payload,
    read_header,
    set_max_timestamp,
)
from ottla.protocol.varint import read_unsigned_varint
from ottla.storage.log_config import LogConfig

log = logging.getLogger(__name__)

INLINE_BYTES = 1024 * 1024
"""Decompressed output up to this size is validated on the event loop."""
DEFAULT_MAX_DECOMPRESSED_BATCH = 64 * 1024 * 1024
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NO_LIMIT = 2**62
_KNOWN_CODECS = {c.value for c in CompressionType}

_inline = bytearray(INLINE_BYTES)
"""Where small compressed batches are decompressed (the event loop's thread only)."""


class RecordValidationError(KafkaError):
    """A batch refused for what some of its records hold: the error for the partition,
    and (KIP-467) the index and reason of each record at fault."""

    def __init__(self, code: ErrorCode, message: str,
                 record_errors: list[tuple[int, str]]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


@dataclass(slots=True)
class PendingBatch:
    """A compressed batch whose records decompress to more than ``INLINE_BYTES``: its
    header is valid, its records are still to be walked, off the event loop."""

    batch: bytearray
    header: BatchHeader
    config: LogConfig
    now_ms: int
    topic_partition: str
    max_decompressed: int

    def finish(self) -> tuple[bytearray, BatchHeader]:
        room = mmap.mmap(-1, self.max_decompressed)  # pages are used only as written
        try:
            body = memoryview(self.batch)[HEADER_SIZE:]
            try:
                size = decompress_into(self.header.compression, body, room)
            except OutputTooLarge:
                raise _invalid(f"The records of the batch decompress to more than "
                               f"max.decompressed.batch.bytes ({self.max_decompressed})",
                               0) from None
            except CompressionError as e:
                raise _invalid(f"The compressed records cannot be decompressed: {e}",
                               0) from None
            view = memoryview(room)[:size]
            try:
                return _check_records(self.batch, self.header, view, self.config,
                                      self.now_ms, self.topic_partition)
            finally:
                view.release()
        finally:
            room.close()


def validate_batch(records: bytes | memoryview | None, config: LogConfig, now_ms: int,
                   topic_partition: str = "",
                   max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BATCH,
                   ) -> tuple[bytearray, BatchHeader] | PendingBatch:
    """Check one produced batch; return it (possibly recompressed) with its header, or a
    ``PendingBatch`` to finish off the event loop."""
    batch, header = _check_header(records, config, now_ms)
    if header.compression == CompressionType.NONE:
        return _check_records(batch, header, memoryview(batch)[HEADER_SIZE:], config, now_ms,
                              topic_partition)
    body = memoryview(batch)[HEADER_SIZE:]
    try:
        size = decompress_into(header.compression, body, _inline)
    except OutputTooLarge:
        return PendingBatch(batch, header, config, now_ms, topic_partition,
                            max_decompressed)
    except CompressionError as e:
        raise _invalid(f"The compressed records cannot be decompressed: {e}", 0) from None
    return _check_records(batch, header, memoryview(_inline)[:size], config, now_ms,
                          topic_partition)


def _check_header(records: bytes | memoryview | None, config: LogConfig, now_ms: int
                  ) -> tuple[bytearray, BatchHeader]:
    if not records:
        raise KafkaError(ErrorCode.invalid_record, "Produce request carries no record batch")
    if len(records) > config.max_message_bytes:
        raise KafkaError(ErrorCode.message_too_large,
                         f"The record batch of {len(records)} bytes is larger than the "
                         f"maximum allowed ({config.max_message_bytes}).")
    batch = bytearray(records)
    if len(batch) > MAGIC_OFFSET and batch[MAGIC_OFFSET] != 2:
        raise KafkaError(ErrorCode.invalid_record,
                         "Produce requests with version 3+ may only contain record batches "
                         "with magic version 2")
    try:
        header = check_batch(batch, 0)
    except CorruptRecord as e:
        raise KafkaError(ErrorCode.corrupt_message, f"Invalid record batch: {e}") from e
    if header.size != len(batch):
        raise KafkaError(ErrorCode.invalid_record,
                         "Produce requests with version 3+ must contain exactly one record "
                         "batch")
    if header.is_control:
        raise KafkaError(ErrorCode.invalid_record, "Clients may not write control records")
    if header.record_count < 1 or header.last_offset_delta != header.record_count - 1:
        raise KafkaError(ErrorCode.invalid_record,
                         f"Inconsistent batch: {header.record_count} records with last offset "
                         f"delta {header.last_offset_delta}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise KafkaError(ErrorCode.invalid_record,
                         f"Invalid sequence number {header.base_sequence} for producer "
                         f"{header.producer_id}")
    if header.is_transactional and header.producer_id < 0:
        raise KafkaError(ErrorCode.invalid_record, "A transactional batch needs a producer id")
    if (header.attributes & COMPRESSION_MASK) not in _KNOWN_CODECS:
        raise KafkaError(ErrorCode.invalid_record,
                         f"Unknown compression type id: {header.attributes & COMPRESSION_MASK}")
    if len(batch) > config.segment_bytes:
        raise KafkaError(ErrorCode.record_list_too_large,
                         f"The record batch of {len(batch)} bytes exceeds segment.bytes "
                         f"({config.segment_bytes})")
    if not config.log_append_time and header.timestamp_type != CREATE_TIME:
        messages = [(i, "Invalid timestamp type in message: Producer should not set "
                        "timestamp type to LogAppendTime.")
                    for i in range(header.record_count)]
        raise RecordValidationError(
            ErrorCode.invalid_timestamp,
            "One or more records have been rejected due to invalid timestamp", messages)
    return batch, header


def _invalid(message: str, index: int) -> RecordValidationError:
    return RecordValidationError(ErrorCode.invalid_record, message, [(index, message)])


def _check_records(batch: bytearray, header: BatchHeader, payload: memoryview,
                   config: LogConfig, now_ms: int, topic_partition: str
                   ) -> tuple[bytearray, BatchHeader]:
    """Walk the (decompressed) records; set the batch's max timestamp from them."""
    if config.log_append_time:
        low, high = _INT64_MIN, _INT64_MAX
    else:
        low = max(_INT64_MIN, now_ms - config["message.timestamp.before.max.ms"])
        high = min(_INT64_MAX, now_ms + config["message.timestamp.after.max.ms"])
    # As Kafka, only records decompressed from a compressed batch are bounded.
    compressed = header.compression != CompressionType.NONE
    limit = config.max_decompressed_message_bytes if compressed else _NO_LIMIT
    error, index, max_timestamp, faults = scan(
        payload, header.record_count, header.base_timestamp, low, high, config.compact,
        limit)
    if error is not None:
        length = _record_length(payload, index) if compressed else None
        if length is not None and length > limit:
            log.error("Error processing append operation on partition %s: "
                      "InvalidRecordException: Invalid record size: %d exceeds the "
                      "configured maximum record size of %d.", topic_partition, length,
                      limit)
            raise KafkaError(ErrorCode.invalid_record)
        raise _invalid(f"{error} (record {index} of the batch)", index)
    if faults:
        _raise_record_errors(faults, header, low, high, topic_partition)
    target = config["compression.type"]
    if target != "producer" and CompressionType.from_name(target) != header.compression:
        batch = _recompress(batch, header, payload, config, target)
        header = read_header(batch)
    elif not config.log_append_time and max_timestamp != header.max_timestamp:
        set_max_timestamp(batch, 0, max_timestamp)
        header = read_header(batch)
    return batch, header


def _record_length(payload: memoryview, index: int) -> int | None:
    """The length record ``index`` of ``payload`` declares (the records before it are
    whole: the scan got past them), None if it cannot be read."""
    pos = 0
    try:
        for i in range(index + 1):
            raw, pos = read_unsigned_varint(payload, pos)
            length = (raw >> 1) ^ -(raw & 1)  # zigzag
            if i < index:
                pos += length
    except MalformedRequest:
        return None
    return length


def _raise_record_errors(faults: list[tuple[int, int, int]], header: BatchHeader, low: int,
                         high: int, topic_partition: str) -> None:
    errors: list[tuple[int, str]] = []
    timestamps = False
    for index, kind, timestamp in faults:
        if kind == 2:
            errors.append((index, "Compacted topic cannot accept message without key in "
                                  f"topic partition {topic_partition}"))
        else:
            timestamps = True
            errors.append((index, f"Timestamp {timestamp} of message with offset "
                                  f"{header.base_offset + index} is out of range. The "
                                  f"timestamp should be within [{low}, {high}]"))
    if timestamps:
        raise RecordValidationError(
            ErrorCode.invalid_timestamp,
            "One or more records have been rejected due to invalid timestamp", errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]", errors)


def _recompress(batch: bytearray, header: BatchHeader, payload: memoryview,
                config: LogConfig, target: str) -> bytearray:
    """The batch rebuilt with the topic's compression.type."""
    records_list = decode_record_payload(payload, header)
    codec = CompressionType.from_name(target)
    level = config[f"compression.{target}.level"] if codec != CompressionType.NONE else None
    return bytearray(build_batch(
        [(rec.key, rec.value, rec.headers) for rec in records_list],
        timestamp=[rec.timestamp for rec in records_list], compression=codec,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, transactional=header.is_transactional,
        offset_deltas=[rec.offset - header.base_offset for rec in records_list],
        compression_level=None if level == -1 else level))
