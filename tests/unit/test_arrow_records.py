"""The columnar reader's decoder (ottla._records.decode_arrow behind
ottla.spark.arrow_records) against the pure-Python reference, decode_records: same
records, same offsets, timestamps, keys, values and headers, for any batches."""

from __future__ import annotations

import datetime
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ottla.protocol.compression import CompressionType
from ottla.protocol.records import (
    LOG_APPEND_TIME,
    CorruptRecord,
    build_batch,
    build_marker,
    decode_records,
    read_header,
    scan_batches,
)
from ottla.spark import arrow_records
from ottla.spark.arrow_records import (
    AbortedTransactions,
    decode_columns,
    select_batches,
    to_arrow,
)
from tests.batches import mutate_bytes, raw_batch, record


@pytest.fixture(scope="module", autouse=True)
def compiled_decoder() -> None:
    """Every install compiles ``ottla._records`` (pyproject's ext-modules): without it
    these tests fail rather than skip, as a broken install must."""
    if not arrow_records.available():
        pytest.fail("ottla._records is not compiled: reinstall (pip install -e '.[test]') "
                    "with a C compiler and the Python headers", pytrace=False)

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
Row = tuple[int, int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def reference(buf: bytes, start: int, end: int, fetch_offset: int = 0) -> list[Row]:
    """(offset, timestamp ms, type, key, value, headers) of the non-control records in
    ``[start, end)``, by decode_records."""
    rows = []
    for pos, header in scan_batches(buf):
        if header.is_control or header.next_offset <= fetch_offset:
            continue
        for r in decode_records(buf, pos, header):
            if start <= r.offset < end:
                rows.append((r.offset, r.timestamp, header.timestamp_type, r.key, r.value,
                             r.headers))
    return rows


def decoded(buf: bytes, start: int, end: int, include_headers: bool = True) -> list[Row]:
    selection = select_batches(buf, 0, None)
    batch = to_arrow(selection.segments, "topic", 7, include_headers, start, end)
    batch.validate(full=True)
    assert set(batch.column("topic").to_pylist()) <= {"topic"}
    assert set(batch.column("partition").to_pylist()) <= {7}
    rows = []
    for r in batch.to_pylist():
        ts = r["timestamp"] - EPOCH
        ms = (ts.days * 86_400_000_000 + ts.seconds * 1_000_000 + ts.microseconds) // 1000
        rows.append((r["offset"], ms, r["timestampType"], r["key"], r["value"],
                     [(h["key"], h["value"]) for h in r["headers"]] if include_headers
                     else []))
    return rows


header_keys = st.text(max_size=6)
headers = st.lists(st.tuples(header_keys, st.none() | st.binary(max_size=8)), max_size=3)
records = st.lists(st.tuples(st.none() | st.binary(max_size=40),
                             st.none() | st.binary(max_size=300), headers),
                   min_size=1, max_size=30)


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    """Several batches: any codec, CreateTime or LogAppendTime, gaps between offsets
    (compaction) and between batches, timestamps before 1970 too."""
    out = bytearray()
    offset = draw(st.integers(0, 1 << 40))
    for _ in range(draw(st.integers(1, 4))):
        recs = draw(records)
        gaps = draw(st.lists(st.integers(0, 3), min_size=len(recs), max_size=len(recs)))
        deltas, delta = [], 0
        for gap in gaps:
            deltas.append(delta)
            delta += 1 + gap
        first_ts = draw(st.integers(-(1 << 40), 1 << 42))
        timestamps = [first_ts + draw(st.integers(-1000, 100_000)) for _ in recs]
        out += build_batch(recs, base_offset=offset, timestamp=timestamps,
                           compression=draw(st.sampled_from(list(CompressionType))),
                           timestamp_type=draw(st.sampled_from([0, LOG_APPEND_TIME])),
                           offset_deltas=deltas)
        offset += deltas[-1] + 1 + draw(st.integers(0, 5))
    return bytes(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.integers(0, 40), st.integers(0, 80), st.booleans())
def test_decoder_matches_decode_records(buf: bytes, skip: int, take: int,
                                        include_headers: bool) -> None:
    base = read_header(buf).base_offset
    start, end = base + skip, base + skip + take
    expected = reference(buf, start, end)
    if not include_headers:
        expected = [(*row[:5], []) for row in expected]
    assert decoded(buf, start, end, include_headers) == expected


def test_every_codec_and_nulls() -> None:
    recs = [(None, b"v"), (b"k", None), (None, None), (b"", b""),
            (b"k2", b"x" * 100_000, [("a", b"1"), ("b", None), ("", b"")])]
    for codec in CompressionType:
        buf = build_batch(recs, base_offset=10, timestamp=[5, 6, 7, 8, 9], compression=codec)
        assert decoded(buf, 0, 100) == reference(buf, 0, 100)


def test_empty_selection_is_an_empty_batch() -> None:
    buf = build_batch([(b"k", b"v")], base_offset=3)
    batch = to_arrow(select_batches(buf, 0, None).segments, "t", 0, True, 10, 20)
    assert batch.num_rows == 0
    batch.validate(full=True)
    assert batch.schema == arrow_records.arrow_schema(True)


class RawKey(str):
    """A header key whose bytes are not UTF-8 (encode_record writes ``key.encode()``)."""

    def __new__(cls, raw: bytes) -> RawKey:
        obj = super().__new__(cls, "?")
        obj.raw = raw  # type: ignore[attr-defined]
        return obj

    def encode(self, *args: object) -> bytes:  # type: ignore[override]
        return self.raw  # type: ignore[attr-defined,no-any-return]


def test_header_keys_that_are_not_utf8_are_replaced_as_kafka_clients_do() -> None:
    bad = [b"\xff", b"ab\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\xe2\x82"]
    buf = build_batch([(b"k", b"v", [(RawKey(raw), b"x") for raw in bad])])
    assert decoded(buf, 0, 1) == reference(buf, 0, 1)
    assert [k for k, _ in decoded(buf, 0, 1)[0][5]] == [
        raw.decode("utf-8", "replace") for raw in bad]


def test_control_batches_are_never_rows() -> None:
    buf = (build_batch([(b"a", b"1")], base_offset=0, producer_id=9, producer_epoch=0,
                       transactional=True)
           + build_marker(producer_id=9, producer_epoch=0, commit=True, coordinator_epoch=0,
                          timestamp=1, base_offset=1)
           + build_batch([(b"b", b"2")], base_offset=2))
    assert [row[0] for row in decoded(buf, 0, 10)] == [0, 2]


def transactional(pid: int, offset: int, value: bytes) -> bytes:
    return build_batch([(None, value)], base_offset=offset, producer_id=pid,
                       producer_epoch=0, transactional=True)


def marker(pid: int, offset: int, commit: bool) -> bytes:
    return build_marker(producer_id=pid, producer_epoch=0, commit=commit,
                        coordinator_epoch=0, timestamp=1, base_offset=offset)


def values(buf: bytes, aborted: list[tuple[int, int]] | None, fetch_offset: int = 0
           ) -> list[bytes]:
    filt = None if aborted is None else AbortedTransactions.of(aborted)
    selection = select_batches(buf, fetch_offset, filt)
    batch = to_arrow(selection.segments, "t", 0, False, fetch_offset, 1 << 60)
    return batch.column("value").to_pylist()


def test_aborted_transactions_are_dropped_as_kafkas_consumer_drops_them() -> None:
    # Producer 1 aborts, commits, then aborts again; producer 2 interleaves a commit;
    # a plain batch has no producer id.
    buf = (transactional(1, 0, b"a1") + transactional(2, 1, b"c1") + transactional(1, 2, b"a2")
           + marker(1, 3, commit=False) + build_batch([(None, b"plain")], base_offset=4)
           + transactional(1, 5, b"c2") + marker(2, 6, commit=True) + marker(1, 7, commit=True)
           + transactional(1, 8, b"a3") + marker(1, 9, commit=False))
    aborted = [(1, 0), (1, 8)]
    assert values(buf, aborted) == [b"c1", b"plain", b"c2"]
    # read_uncommitted sees every data batch, never a marker.
    assert values(buf, None) == [b"a1", b"c1", b"a2", b"plain", b"c2", b"a3"]
    # A fetch from the middle of an aborted transaction: the broker still lists it.
    assert values(buf, aborted, fetch_offset=2) == [b"plain", b"c2"]


def test_a_producer_aborting_in_one_fetch_is_read_again_after_its_marker() -> None:
    buf = transactional(5, 10, b"x") + marker(5, 11, commit=False) + \
        transactional(5, 12, b"y") + marker(5, 13, commit=True)
    assert values(buf, [(5, 10)]) == [b"y"]


def test_next_offset_skips_markers_and_stops_at_a_cut_batch() -> None:
    whole = build_batch([(b"k", b"v")] * 3, base_offset=100) + marker(3, 103, commit=True)
    cut = build_batch([(b"k", b"v")], base_offset=104)[:-3]
    selection = select_batches(whole + cut, 100, AbortedTransactions.of([]))
    assert selection.next_offset == 104
    assert selection.truncated
    assert len(selection.segments) == 1
    only_cut = select_batches(cut, 104, None)
    assert (only_cut.next_offset, only_cut.truncated, only_cut.segments) == (104, True, [])


def test_batches_before_the_fetch_offset_are_skipped() -> None:
    buf = build_batch([(b"k", b"a")] * 3, base_offset=0) + \
        build_batch([(b"k", b"b")] * 2, base_offset=3)
    selection = select_batches(buf, 3, None)
    assert [s[1] for s in selection.segments] == [3]
    assert selection.next_offset == 5


def test_legacy_message_sets_are_refused() -> None:
    legacy = struct.pack(">qiIbbqii", 0, 4 + 1 + 1 + 8 + 4 + 4, 0, 1, 0, 0, -1, -1)
    legacy += b"\x00" * (61 - len(legacy))
    with pytest.raises(CorruptRecord, match="v2 batches only"):
        select_batches(legacy, 0, None)


def test_decoder_refuses_what_the_reference_refuses() -> None:
    """Mutated record bytes: whatever the C decoder accepts, the reference decodes the
    same way; whatever the reference refuses, the C decoder refuses (it also refuses a
    negative header count, which Kafka refuses and decode_records reads as none)."""
    rng = random.Random(21)
    body = b"".join(record(key=rng.choice([None, b"key"]), value=rng.randbytes(rng.randint(0, 20)),
                           delta=i, ts_delta=i,
                           headers=tuple((f"h{j}", rng.choice([None, b"v"]))
                                         for j in range(rng.randint(0, 2))))
                    for i in range(6))
    agreed = 0
    for _ in range(3000):
        buf = raw_batch(mutate_bytes(body, rng), 6)
        try:
            expected = reference(buf, 0, 1 << 60)
        except ValueError:  # CorruptRecord, or kio's error for a varint of 6+ bytes
            expected = None
        try:
            got, error = decoded(buf, 0, 1 << 60), ""
        except ValueError as e:
            got, error = None, str(e)
        if got is not None:
            assert got == expected
            agreed += 1
        elif expected is not None:
            assert error == "negative number of record headers"
    assert agreed > 100


def test_decode_columns_counts_nulls() -> None:
    buf = build_batch([(None, b"v"), (b"k", None), (None, None)])
    columns = decode_columns(select_batches(buf, 0, None).segments, include_headers=False)
    assert columns["key"].null_count == 2
    assert columns["value"].null_count == 2
    assert columns["key"].to_pylist() == [None, b"k", None]
