"""The produce-side validator walks every record as Kafka's LogValidator does: what it
accepts every reader can read; what it refuses gets Kafka's code, with the record's index."""

from __future__ import annotations

import random
import re
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from ottla.broker import log_validator
from ottla.broker.log_validator import (
    PendingBatch,
    RecordValidationError,
    validate_batch,
)
from ottla.common.config import ConfigError
from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.common.topic_configs import validate_topic_configs
from ottla.protocol.compression import CompressionType, OutputTooLarge
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import (
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    build_batch,
    decode_records,
    read_header,
)
from ottla.storage.log_config import LogConfig
from tests.batches import NOW, mutate_bytes, raw_batch, record, zstd_bomb


def config(**overrides: object) -> LogConfig:
    return LogConfig.resolve({k: str(v) for k, v in overrides.items()}, {})


def refused(batch: bytes, cfg: LogConfig | None = None) -> KafkaError:
    with pytest.raises(KafkaError) as e:
        result = validate_batch(batch, cfg or config(), NOW, "t-0")
        if isinstance(result, PendingBatch):
            result.finish()
    return e.value


@pytest.mark.parametrize("codec", list(CompressionType))
def test_valid_batches_pass_with_their_records_intact(codec: CompressionType) -> None:
    records = [(b"k%d" % i, b"v" * i, [("h", b"x")]) for i in range(50)]
    batch = build_batch(records, timestamp=NOW, compression=codec)
    out, _ = validate_batch(batch, config(), NOW, "t-0")  # type: ignore[misc]
    assert bytes(out) == batch
    assert [(r.key, r.value) for r in decode_records(out)] == [(k, v) for k, v, _ in records]


def test_the_max_timestamp_is_what_the_records_say() -> None:
    body = record(delta=0, ts_delta=0) + record(delta=1, ts_delta=50)
    out, header = validate_batch(raw_batch(body, 2, max_ts=NOW - 999), config(), NOW)  # type: ignore[misc]
    assert header.max_timestamp == NOW + 50
    assert read_header(out).max_timestamp == NOW + 50
    decode_records(out)  # the CRC was written again


@pytest.mark.parametrize("body,count,message", [
    pytest.param(record()[:-1], 1, "premature EOF|Invalid record size", id="record-cut-short"),
    pytest.param(b"\x7e" + record()[1:], 1, "Invalid record size", id="length-too-large"),
    pytest.param(record() + b"\x00\x00", 1, "records still remaining", id="trailing-bytes"),
    pytest.param(record(), 2, "premature EOF", id="fewer-records-than-count"),
    pytest.param(record(delta=1), 1, "offset delta", id="offset-delta-out-of-order"),
    pytest.param(bytes([0x0e, 0, 0, 0, 0x20, ord("k"), 0x02, ord("v"), 0x00, 0, 0, 0, 0, 0,
                        0]), 1, "invalid record structure", id="key-length-past-the-record"),
    pytest.param(bytes([0x10, 0, 0, 0, 0x02, ord("k"), 0x02, ord("v"), 0x7e]), 1,
                 "number of record headers", id="header-count-too-large"),
    pytest.param(bytes([0x10, 0, 0, 0, 0x02, ord("k"), 0x02, ord("v"), 0x01]), 1,
                 "invalid number of record headers -1", id="negative-header-count"),
    pytest.param(bytes([0x14, 0, 0, 0, 0x02, ord("k"), 0x02, ord("v"), 0x02, 0x03, 0x00]),
                 1, "negative header key size", id="negative-header-key"),
    pytest.param(bytes([0x0e, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                        0x01, 0]), 1, "invalid record structure", id="varlong-too-long"),
])
def test_records_that_contradict_their_batch_are_invalid(body: bytes, count: int,
                                                          message: str) -> None:
    error = refused(raw_batch(body, count))
    assert error.code == ErrorCode.invalid_record
    assert isinstance(error, RecordValidationError)
    assert error.record_errors and error.record_errors[0][0] in range(count + 1)
    assert error.message is not None
    assert re.search(message, error.message, re.IGNORECASE), error.message


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY,
                                   CompressionType.LZ4, CompressionType.ZSTD])
def test_garbage_compressed_payloads_are_invalid(codec: CompressionType) -> None:
    batch = bytearray(raw_batch(record(), 1, codec=codec))
    for i in range(HEADER_SIZE + 2, len(batch)):
        batch[i] ^= 0x5A
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[21:]))
    assert refused(bytes(batch)).code == ErrorCode.invalid_record


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_undefined_codec_ids_are_invalid(codec_id: int) -> None:
    error = refused(raw_batch(record(), 1, attributes=codec_id))
    assert error.code == ErrorCode.invalid_record
    assert f"compression type id: {codec_id}" in (error.message or "")


def test_per_record_errors_carry_their_index() -> None:
    body = record(key=b"a", delta=0) + record(key=None, delta=1) + record(key=None, delta=2)
    error = refused(raw_batch(body, 3), config(**{"cleanup.policy": "compact"}))
    assert error.code == ErrorCode.invalid_record
    assert isinstance(error, RecordValidationError)
    assert [i for i, _ in error.record_errors] == [1, 2]
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    assert error.record_errors == [(1, message), (2, message)]  # Kafka's words exactly
    assert error.message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message="
        f"'{message}'), RecordError(batchIndex=2, message='{message}')]")
    body = record(delta=0) + record(delta=1, ts_delta=86_400_000) + record(delta=2)
    error = refused(raw_batch(body, 3), config(**{"message.timestamp.after.max.ms": 3600000}))
    assert error.code == ErrorCode.invalid_timestamp
    assert isinstance(error, RecordValidationError)
    assert [i for i, _ in error.record_errors] == [1]
    assert f"Timestamp {NOW + 86_400_000} of message with offset 1 is out of range" in \
        error.record_errors[0][1]


def test_log_append_time_from_a_producer_is_refused_on_a_create_time_topic() -> None:
    error = refused(raw_batch(record(), 1, attributes=0x08))
    assert error.code == ErrorCode.invalid_timestamp


def test_a_compression_bomb_is_refused_without_blocking_or_allocating_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """40 KiB of zstd that expands to 1.25 GiB: on the event loop only the header and one
    attempt into the 1 MiB inline buffer; the rest, on a worker, into no more room than
    max.decompressed.batch.bytes, where it stops. What is checked is the room each
    decompression was given (the decompressor never writes past it), not a time or an
    RSS, which the machine's load would blur."""
    count = 1250
    payload = zstd_bomb(count, 1024 * 1024)
    assert len(payload) < 200 * 1024
    batch = bytearray(HEADER.pack(0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2, 0,
                                  CompressionType.ZSTD, count - 1, NOW, NOW, -1, -1, -1,
                                  count))
    batch += payload
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[21:]))
    rooms: list[tuple[int, str]] = []
    """(bytes of room, how it ended) of each decompression attempt, in order."""
    real = log_validator.decompress_into

    def watched(codec: int, data: bytes | memoryview, out: bytearray | memoryview) -> int:
        try:
            written = real(codec, data, out)
        except OutputTooLarge:
            rooms.append((len(out), "too large"))
            raise
        rooms.append((len(out), f"{written} bytes"))
        return written
    monkeypatch.setattr(log_validator, "decompress_into", watched)
    max_decompressed = 64 * 1024 * 1024
    pending = validate_batch(bytes(batch), config(**{"max.message.bytes": 10_000_000}), NOW,
                             "t-0", max_decompressed=max_decompressed)
    assert isinstance(pending, PendingBatch)  # handed off, not walked on the loop
    [(inline, ended)] = rooms
    assert inline <= 1024 * 1024 and ended == "too large"
    with pytest.raises(RecordValidationError, match=r"more than max\.decompressed\.batch\.bytes"):
        pending.finish()
    assert rooms[1:] == [(max_decompressed, "too large")]


@settings(max_examples=300, deadline=None)
@given(records=st.lists(st.tuples(st.none() | st.binary(max_size=20),
                                  st.none() | st.binary(max_size=20),
                                  st.lists(st.tuples(st.text(max_size=5),
                                                     st.none() | st.binary(max_size=5)),
                                           max_size=2)),
                        min_size=1, max_size=8),
       codec=st.sampled_from([0, 1, 3, 4]), seed=st.integers(0, 2**32))
def test_what_is_accepted_can_be_read_back(records: list, codec: int, seed: int) -> None:
    """Valid batches pass; mutated ones (CRC made right again) either are refused or
    decode to exactly their declared count of records at consecutive offsets."""
    batch = build_batch(records, timestamp=NOW, compression=codec)
    validate_batch(batch, config(), NOW)
    rng = random.Random(seed)
    mutated = raw_batch(mutate_bytes(decode_body(batch), rng), len(records), codec=codec)
    try:
        result = validate_batch(mutated, config(), NOW)
    except KafkaError as e:
        assert e.code in (ErrorCode.invalid_record, ErrorCode.invalid_timestamp)
        return
    assert not isinstance(result, PendingBatch)
    decoded = decode_records(result[0])
    assert [r.offset for r in decoded] == list(range(len(records)))


def decode_body(batch: bytes) -> bytes:
    from ottla.protocol.records import records_payload
    return records_payload(batch, 0, read_header(batch))


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_a_compressed_record_longer_than_max_decompressed_message_bytes_is_invalid(
        codec: CompressionType, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka 4.4's topic config max.decompressed.message.bytes bounds each record its
    decompressing iterator reads (DefaultRecord.readFrom's maxRecordBodySize): a longer
    one is an InvalidRecordException, which the produce answers as INVALID_RECORD with
    no message and no record errors; uncompressed batches are not bounded by it."""
    records = [(b"k", b"x" * 10, []), (b"k", b"y" * 200, []), (b"k", b"z", [])]
    # Record 1's body: attributes, timestamp delta, offset delta, key length, key, value
    # length (2 bytes), value, header count: 208 bytes.
    compressed = build_batch(records, timestamp=NOW, compression=codec)
    limit = config(**{"max.decompressed.message.bytes": 207})
    error = refused(compressed, limit)
    assert (type(error), error.code, error.message) == (KafkaError, ErrorCode.invalid_record,
                                                        None)
    assert "Invalid record size: 208 exceeds the configured maximum record size of 207." \
        in caplog.text
    out, _ = validate_batch(compressed, config(**{"max.decompressed.message.bytes": 208}),
                            NOW, "t-0")  # type: ignore[misc]
    assert bytes(out) == compressed
    plain = build_batch(records, timestamp=NOW)
    out, _ = validate_batch(plain, limit, NOW, "t-0")  # type: ignore[misc]
    assert bytes(out) == plain


def test_max_decompressed_message_bytes_is_a_topic_config_between_1_and_its_default() -> None:
    """Kafka 4.4's LogConfig: INT, default 2147483639 (the broker's
    max.decompressed.message.bytes), Range.between(1, 2147483639)."""
    assert config().max_decompressed_message_bytes == 2147483639
    broker = KafkaConfig({**dev_defaults(), "max.decompressed.message.bytes": "4096"})
    assert LogConfig.resolve({}, broker.topic_defaults()).max_decompressed_message_bytes \
        == 4096  # the broker's key of the same name is its synonym
    assert validate_topic_configs({"max.decompressed.message.bytes": "1"}) == \
        {"max.decompressed.message.bytes": 1}
    for bad, bound in (("0", "at least 1"), ("2147483640", "no more than 2147483639")):
        with pytest.raises(ConfigError) as e:
            validate_topic_configs({"max.decompressed.message.bytes": bad})
        assert str(e.value) == (f"Invalid value {bad} for configuration "
                                f"max.decompressed.message.bytes: Value must be {bound}")
