"""Tombstones and transaction markers leave a compacted log as Kafka's cleaner lets them
go (KIP-534): the first pass that keeps one stamps a delete horizon into its batch (the
attribute bit 6 and the base timestamp), a pass at or after the horizon removes it, and
a horizon Kafka wrote is honoured. Record timestamps never change."""

from __future__ import annotations

import argparse
import struct

import pytest
from crc32c import crc32c

from ottla.broker.log_validator import RecordValidationError, validate_batch
from ottla.protocol.compression import CompressionType
from ottla.protocol.errors import ErrorCode
from ottla.protocol.records import (
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    encode_record,
    read_header,
    scan_batches,
)
from ottla.storage.cleaner import LogCleaner
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig

TP = ("t", 0)
RETENTION = 60_000
COMMIT, ABORT = struct.pack(">hh", 0, 1), struct.pack(">hh", 0, 0)
MARKER_VALUE = struct.pack(">hi", 0, 3)  # EndTransactionMarker: version, coordinator epoch


def make_log(path: str) -> Log:
    return Log(path, "t", 0, LogConfig.resolve({"cleanup.policy": "compact",
                                                 "delete.retention.ms": str(RETENTION)}),
               now_ms=1000, clean_shutdown=False)


def produce(lg: Log, records: list[tuple[bytes, bytes | None]], timestamps: list[int],
            codec: int = CompressionType.NONE) -> None:
    """A client's batch, through the leader's append."""
    batch = bytearray(build_batch(records, timestamp=timestamps, compression=codec))
    lg.append_as_leader(batch, read_header(batch), 0, now_ms=timestamps[-1])
    lg.high_watermark = lg.log_end_offset


def kafka_batch(base_offset: int, records: list[tuple[int, bytes | None, bytes | None]], *,
                horizon: int | None = None, attributes: int = 0, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A v2 batch laid out by hand as Kafka's MemoryRecordsBuilder writes it: records are
    (timestamp, key, value); with a horizon the flag is set, the base timestamp is the
    horizon and each record's timestamp delta is counted from it."""
    base_ts = records[0][0] if horizon is None else horizon
    body = bytearray()
    for delta, (timestamp, key, value) in enumerate(records):
        encode_record(body, delta, timestamp - base_ts, key, value)
    flags = attributes | (DELETE_HORIZON_FLAG if horizon is not None else 0)
    batch = bytearray(HEADER.pack(
        base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), 0, 2, 0, flags, len(records) - 1,
        base_ts, max(t for t, _, _ in records), producer_id, producer_epoch, base_sequence,
        len(records)))
    batch += body
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def copy_from_kafka(lg: Log, *batches: bytes) -> None:
    """Batches kept byte for byte, as a follower appends its leader's."""
    lg.append_as_follower(b"".join(batches), now_ms=1000)
    lg.high_watermark = lg.log_end_offset


def on_disk(lg: Log) -> dict[int, tuple[BatchHeader, bytes, list[Record]]]:
    """Each batch in the segment files, by base offset: header, raw bytes, records."""
    found = {}
    for segment in lg.segments:
        with open(segment.path, "rb") as f:
            data = f.read(segment.size)
        for pos, header in scan_batches(data, verify=True):
            found[header.base_offset] = (header, data[pos:pos + header.size],
                                         decode_records(data, pos, header))
    return found


def fetched(lg: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, timestamp) of every record, as a Fetch from 0 returns them."""
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1 << 30)  # one segment at a time
        if info.records is None:
            break
        data = info.records.read()
        for pos, header in scan_batches(data):
            out += [(r.offset, r.key, r.value, r.timestamp)
                    for r in decode_records(data, pos, header) if r.offset >= offset]
            offset = header.next_offset
    return out


def clean_again(cleaner: LogCleaner, lg: Log, now_ms: int) -> None:
    """Write a little more and clean: a pass needs a dirty section, in Kafka too."""
    produce(lg, [(b"filler-%d" % now_ms, b"x")], [now_ms])
    lg.roll(now_ms)
    stats = cleaner.clean(TP, lg, now_ms)
    assert stats.first_dirty < stats.end


def horizon_bytes(raw: bytes) -> tuple[int, int, int]:
    """(attributes, base timestamp, max timestamp) read straight from a batch's bytes."""
    (attributes,) = struct.unpack_from(">h", raw, 21)
    return attributes, *struct.unpack_from(">qq", raw, 27)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_a_tombstone_survives_the_first_clean_and_goes_once_its_horizon_passes(
        tmp_path, codec) -> None:
    lg = make_log(str(tmp_path / "t-0"))
    produce(lg, [(b"k1", b"v1"), (b"k2", b"v2"), (b"k4", b"v4")], [1000, 1100, 1200], codec)
    produce(lg, [(b"k1", None), (b"k3", b"v3")], [2000, 2500], codec)  # offsets 3, 4
    produce(lg, [(b"k2", b"v2b")], [3000], codec)  # offset 5
    lg.roll(3000)
    produce(lg, [(b"active", b"x")], [3000])
    cleaner = LogCleaner(lambda: {TP: lg})

    # Long past timestamp + delete.retention.ms, yet the first clean keeps the tombstone.
    now = 1_000_000
    stats = cleaner.clean(TP, lg, now)
    assert stats.horizons_set == 1
    batches = on_disk(lg)
    header, raw, records = batches[3]
    flagged = DELETE_HORIZON_FLAG | codec
    assert horizon_bytes(raw) == (flagged, now + RETENTION, 2500)
    assert header.delete_horizon_ms == now + RETENTION
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == \
        [(3, b"k1", None, 2000), (4, b"k3", b"v3", 2500)]
    # A batch that lost records but holds no tombstone is rebuilt without a horizon.
    header, raw, _ = batches[0]
    assert horizon_bytes(raw) == (codec, 1200, 1200) and header.delete_horizon_ms is None
    seen = fetched(lg)
    assert seen[:4] == [(2, b"k4", b"v4", 1200), (3, b"k1", None, 2000),
                        (4, b"k3", b"v3", 2500), (5, b"k2", b"v2b", 3000)]

    # Before the horizon a pass keeps the tombstone and does not move the horizon.
    clean_again(cleaner, lg, now + RETENTION - 1)
    _, raw, records = on_disk(lg)[3]
    assert horizon_bytes(raw) == (flagged, now + RETENTION, 2500)
    assert [r.value for r in records] == [None, b"v3"]

    # At the horizon it goes; the rest of its batch keeps the horizon and its timestamps.
    clean_again(cleaner, lg, now + RETENTION)
    _, raw, records = on_disk(lg)[3]
    assert horizon_bytes(raw) == (flagged, now + RETENTION, 2500)
    assert [(r.offset, r.key, r.timestamp) for r in records] == [(4, b"k3", 2500)]
    assert [(o, k, v, t) for o, k, v, t in fetched(lg) if o <= 5] == \
        [(2, b"k4", b"v4", 1200), (4, b"k3", b"v3", 2500), (5, b"k2", b"v2b", 3000)]


def test_a_delete_horizon_written_by_kafka_is_honoured(tmp_path) -> None:
    lg = make_log(str(tmp_path / "t-0"))
    copy_from_kafka(
        lg,
        kafka_batch(0, [(1000, b"k1", b"v1"), (1000, b"k2", b"v2")]),
        kafka_batch(2, [(5000, b"k1", None), (5100, b"k5", b"v5")], horizon=50_000),
        kafka_batch(4, [(6000, b"k2", None)], horizon=200_000),
        kafka_batch(5, [(7000, b"k3", None)]))
    lg.roll(8000)
    produce(lg, [(b"active", b"x")], [8000])
    # Readers take base timestamp + delta, so the horizon never shows as a timestamp.
    assert [t for _, _, _, t in fetched(lg)] == [1000, 1000, 5000, 5100, 6000, 7000, 8000]

    LogCleaner(lambda: {TP: lg}).clean(TP, lg, now_ms=100_000)
    batches = on_disk(lg)
    assert [(o, k, v, t) for o, k, v, t in fetched(lg)] == [
        (3, b"k5", b"v5", 5100),  # the tombstone past its horizon went
        (4, b"k2", None, 6000),  # this horizon is still ahead
        (5, b"k3", None, 7000),  # no horizon yet: kept, and given one
        (6, b"active", b"x", 8000)]
    assert horizon_bytes(batches[2][1]) == (DELETE_HORIZON_FLAG, 50_000, 5100)
    assert horizon_bytes(batches[4][1]) == (DELETE_HORIZON_FLAG, 200_000, 6000)
    assert horizon_bytes(batches[5][1]) == (DELETE_HORIZON_FLAG, 100_000 + RETENTION, 7000)


def test_a_transaction_marker_goes_a_horizon_after_its_transaction_has_no_data(tmp_path) -> None:
    lg = make_log(str(tmp_path / "t-0"))
    txn = TRANSACTIONAL_FLAG
    marker = TRANSACTIONAL_FLAG | CONTROL_FLAG
    copy_from_kafka(
        lg,
        kafka_batch(0, [(1000, b"k", b"v1")], attributes=txn, producer_id=7,
                    producer_epoch=0, base_sequence=0),
        kafka_batch(1, [(1000, COMMIT, MARKER_VALUE)], attributes=marker, producer_id=7,
                    producer_epoch=0),
        kafka_batch(2, [(1000, b"live", b"v")], attributes=txn, producer_id=8,
                    producer_epoch=0, base_sequence=0),
        kafka_batch(3, [(1000, COMMIT, MARKER_VALUE)], attributes=marker, producer_id=8,
                    producer_epoch=0),
        # A producer the log knows only by this marker (its epoch was bumped).
        kafka_batch(4, [(1000, ABORT, MARKER_VALUE)], attributes=marker, producer_id=9,
                    producer_epoch=1),
        kafka_batch(5, [(2000, b"k", b"v2")]))
    lg.roll(2000)
    cleaner = LogCleaner(lambda: {TP: lg})

    # Pass 1 drops producer 7's superseded record; its marker still had data behind it.
    cleaner.clean(TP, lg, now_ms=10_000)
    batches = on_disk(lg)
    assert 0 not in batches and batches[1][0].delete_horizon_ms is None
    # Pass 2: nothing of that transaction is left, so the marker gets a horizon.
    clean_again(cleaner, lg, 20_000)
    batches = on_disk(lg)
    attributes, base_ts, _ = horizon_bytes(batches[1][1])
    assert (attributes, base_ts) == (marker | DELETE_HORIZON_FLAG, 20_000 + RETENTION)
    assert batches[1][2][0].key == COMMIT and batches[1][2][0].timestamp == 1000
    assert batches[3][0].delete_horizon_ms is None  # producer 8's data is still there
    # Pass 3 at the horizon removes it; the others stay.
    clean_again(cleaner, lg, 20_000 + RETENTION)
    batches = on_disk(lg)
    assert 1 not in batches
    assert batches[3][0].delete_horizon_ms is None and batches[3][2][0].key == COMMIT
    # Producer 9's marker is all that fences its old epoch: kept whole, as Kafka keeps it.
    assert batches[4][2][0].key == ABORT


def test_a_client_batch_with_a_horizon_is_taken_as_kafka_takes_it(tmp_path) -> None:
    """Kafka's LogValidator leaves bit 6 alone; record timestamps are checked as base +
    delta, so a far-off base timestamp is not mistaken for a record's."""
    now = 1_700_000_000_000
    config = LogConfig.resolve({})
    batch = kafka_batch(0, [(now - 5, b"k", b"v"), (now, b"k2", b"v")],
                        horizon=now + 86_400_000)
    validated, header = validate_batch(batch, config, now)  # type: ignore[misc]
    assert header.delete_horizon_ms == now + 86_400_000
    assert [r.timestamp for r in decode_records(validated)] == [now - 5, now]
    late = kafka_batch(0, [(now + 2 * 3_600_000, b"k", b"v")], horizon=now)
    with pytest.raises(RecordValidationError) as refused:
        validate_batch(late, config, now)
    assert refused.value.code == ErrorCode.invalid_timestamp
    assert f"Timestamp {now + 2 * 3_600_000} " in refused.value.record_errors[0][1]


def test_dump_log_shows_the_delete_horizon(tmp_path, capsys) -> None:
    from ottla.cli.dump_log import dump_segment

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(kafka_batch(0, [(1000, b"k", None)], horizon=61_000)
                     + kafka_batch(1, [(1000, b"k2", b"v")]))
    dump_segment(str(path), argparse.Namespace(
        max_bytes=1 << 20, deep_iteration=True, print_data_log=False,
        cluster_metadata_decoder=False))
    out = capsys.readouterr().out
    assert "isControl: false deleteHorizonMs: OptionalLong[61000] position: 0" in out
    assert "deleteHorizonMs: OptionalLong.empty" in out
    # Deep iteration shows the record's own timestamp, not the horizon.
    assert "| offset: 0 CreateTime: 1000 " in out


def test_the_cleaner_removes_aborted_data_and_stops_at_an_open_transaction(tmp_path) -> None:
    """An aborted transaction's records are removed (and never shadow a key's committed
    value), its marker then leaves at its horizon; nothing at or above the first offset
    of an open transaction is cleaned (Kafka's firstUncleanableOffset)."""
    lg = make_log(str(tmp_path / "t-0"))
    txn = TRANSACTIONAL_FLAG
    marker = TRANSACTIONAL_FLAG | CONTROL_FLAG
    copy_from_kafka(
        lg,
        kafka_batch(0, [(1000, b"k", b"committed")]),
        kafka_batch(1, [(1000, b"k", b"aborted"), (1000, b"other", b"aborted")],
                    attributes=txn, producer_id=7, producer_epoch=0, base_sequence=0),
        kafka_batch(3, [(1000, ABORT, MARKER_VALUE)], attributes=marker, producer_id=7,
                    producer_epoch=0))
    lg.roll(2000)
    copy_from_kafka(lg, kafka_batch(4, [(2000, b"open", b"v")], attributes=txn,
                                    producer_id=8, producer_epoch=0, base_sequence=0))
    lg.roll(3000)
    copy_from_kafka(lg, kafka_batch(5, [(3000, b"k2", b"v")]))
    lg.roll(4000)
    assert lg.first_unstable_offset() == 4
    cleaner = LogCleaner(lambda: {TP: lg})
    stats = cleaner.clean(TP, lg, now_ms=10_000)
    assert stats.end == 4  # the open transaction's segment and all after stay dirty
    batches = on_disk(lg)
    assert 1 not in batches  # the aborted data is gone
    assert [r.value for r in batches[0][2]] == [b"committed"]  # the committed value stays
    assert batches[3][0].delete_horizon_ms == 10_000 + RETENTION  # the marker's horizon
    assert 4 in batches and batches[4][2][0].key == b"open"
