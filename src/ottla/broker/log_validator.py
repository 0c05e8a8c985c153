"""Validation of a client's batch before it is appended, as Kafka's LogValidator does it.

The cheap checks read only the batch header (structure, CRC-32C, counts, producer fields,
timestamps). Records are decoded only when the topic's configs demand it: keys on a
compacted topic, or a ``compression.type`` different from the producer's, which means
recompressing the batch.
"""

from __future__ import annotations

from ottla.protocol.compression import CompressionType
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import (
    CREATE_TIME,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    BatchHeader,
    CorruptRecord,
    build_batch,
    check_batch,
    decode_records,
    read_header,
)
from ottla.storage.log_config import LogConfig


def validate_batch(records: bytes | None, config: LogConfig, now_ms: int
                   ) -> tuple[bytearray, BatchHeader]:
    """Check one produced batch; return it (possibly recompressed) with its header."""
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
    if len(batch) > config.segment_bytes:
        raise KafkaError(ErrorCode.record_list_too_large,
                         f"The record batch of {len(batch)} bytes exceeds segment.bytes "
                         f"({config.segment_bytes})")
    if not config.log_append_time and header.timestamp_type == CREATE_TIME:
        _check_timestamps(header, config, now_ms)
    target = config["compression.type"]
    needs_recompress = target != "producer" and \
        CompressionType.from_name(target) != header.compression
    if config.compact or needs_recompress:
        try:
            records_list = decode_records(batch, 0, header)
        except CorruptRecord as e:
            raise KafkaError(ErrorCode.corrupt_message, f"Invalid record batch: {e}") from e
        if config.compact and any(rec.key is None for rec in records_list):
            raise KafkaError(ErrorCode.invalid_record,
                             "Compacted topic cannot accept message without key")
        if needs_recompress:
            codec = CompressionType.from_name(target)
            level = config[f"compression.{target}.level"] if codec != CompressionType.NONE \
                else None
            batch = bytearray(build_batch(
                [(rec.key, rec.value, rec.headers) for rec in records_list],
                timestamp=[rec.timestamp for rec in records_list], compression=codec,
                producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence, transactional=header.is_transactional,
                offset_deltas=[rec.offset - header.base_offset for rec in records_list],
                compression_level=None if level == -1 else level))
            header = read_header(batch)
    return batch, header


def _check_timestamps(header: BatchHeader, config: LogConfig, now_ms: int) -> None:
    before = config["message.timestamp.before.max.ms"]
    after = config["message.timestamp.after.max.ms"]
    for ts in (header.base_timestamp, header.max_timestamp):
        if ts == NO_TIMESTAMP:
            continue
        if ts < now_ms - before or ts > now_ms + after:
            raise KafkaError(ErrorCode.invalid_timestamp,
                             f"Timestamp {ts} of the record batch is out of range: it must be "
                             f"within [{now_ms - before}, {now_ms + after}]")
