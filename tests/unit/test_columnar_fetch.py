"""The columnar reader's own Fetch v12 response parser reads what kio reads, leaving the
records a view of the frame."""

from __future__ import annotations

import pytest

from ottla.protocol.api import ApiKey
from ottla.protocol.codec import decode_response, response_header_bytes
from ottla.protocol.errors import ErrorCode
from ottla.protocol.fetch_response import encode_fetch_response
from ottla.protocol.records import build_batch
from ottla.spark import fetch_reader
from ottla.spark.fetch_reader import (
    FetchedPartition,
    RetriableError,
    _RangeRead,
    parse_fetch_response,
)
from ottla.spark.offset_reader import DataLossError, OffsetRange


def frame(response: dict, correlation_id: int = 42) -> memoryview:
    body = encode_fetch_response(12, response)
    data = response_header_bytes(ApiKey.FETCH, 12, correlation_id, body.size) + b"".join(
        bytes(chunk) for chunk in body.chunks)
    return memoryview(data)[4:]  # without the size, as the connection hands it over


def partition(index: int, records: bytes | None, aborted: list | None = None,
              **tags: dict) -> dict:
    return {"partition_index": index, "error_code": 0, "high_watermark": 100 + index,
            "last_stable_offset": 90 + index, "log_start_offset": index,
            "aborted_transactions": aborted, "preferred_read_replica": -1,
            "records": records, **tags}


RECORDS = build_batch([(b"k", b"v" * 20_000)], base_offset=7)
RESPONSE = {
    "throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "other", "partitions": [partition(0, b"x" * 30)]},
        {"topic": "orders", "partitions": [
            partition(0, None, current_leader={"leader_id": 3, "leader_epoch": 9}),
            partition(1, RECORDS, [{"producer_id": 5, "first_offset": 2},
                                   {"producer_id": 6, "first_offset": 4}],
                      diverging_epoch={"epoch": 1, "end_offset": 2},
                      snapshot_id={"end_offset": 3, "epoch": 4}),
            partition(2, b"")]}]}


@pytest.mark.parametrize("topic, index", [("orders", 0), ("orders", 1), ("orders", 2),
                                          ("other", 0)])
def test_parser_agrees_with_kio(topic: str, index: int) -> None:
    data = frame(RESPONSE)
    correlation_id, error, found = parse_fetch_response(data, topic, index)
    _, expected = decode_response(ApiKey.FETCH, 12, bytes(data))
    want = next(p for t in expected.responses if t.topic == topic for p in t.partitions
                if p.partition_index == index)
    assert (correlation_id, error) == (42, ErrorCode.none)
    assert found is not None
    assert (found.error_code, found.high_watermark, found.last_stable_offset,
            found.log_start_offset) == (want.error_code, want.high_watermark,
                                        want.last_stable_offset, want.log_start_offset)
    assert found.aborted_transactions == [(t.producer_id, t.first_offset)
                                          for t in want.aborted_transactions or ()]
    assert bytes(found.records) == (want.records or b"")


def test_records_are_a_view_of_the_frame() -> None:
    data = frame(RESPONSE)
    _, _, found = parse_fetch_response(data, "orders", 1)
    assert found is not None and found.records.obj is data.obj


def test_missing_partition_and_errors() -> None:
    response = {**RESPONSE, "error_code": ErrorCode.not_leader_or_follower.value}
    _, error, found = parse_fetch_response(frame(response), "orders", 9)
    assert error == ErrorCode.not_leader_or_follower
    assert found is None


def test_a_cut_frame_is_refused() -> None:
    data = frame(RESPONSE)
    with pytest.raises(Exception):  # noqa: B017 - struct.error or MalformedRequest
        parse_fetch_response(data[:len(data) - 15_000], "orders", 1)


class FakeFetcher:
    """A leader that answers each Fetch from a script: a FetchedPartition, or an
    exception to raise (a lost connection, a leader move)."""

    def __init__(self, script: list, earliest: int = 0, latest: int = 100) -> None:
        self.script = script
        self.fetched: list[int] = []
        self.sent: dict[int, int] = {}
        self.isolation = 0
        self.max_bytes = 1024
        self.closed = 0
        self.offsets = {-2: earliest, -1: latest}

    def send_fetch(self, offset: int) -> int:
        self.fetched.append(offset)
        return len(self.fetched)

    def receive_fetch(self, correlation_id: int) -> FetchedPartition:
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def list_offset(self, timestamp: int) -> int:
        return self.offsets[timestamp]

    def close(self) -> None:
        self.closed += 1


def answer(records: bytes = b"", error: ErrorCode = ErrorCode.none, high: int = 100
           ) -> FetchedPartition:
    return FetchedPartition(error, high, high, 0, [], memoryview(records))


def batch(base: int, n: int = 1) -> bytes:
    return build_batch([(None, b"%d" % (base + i)) for i in range(n)], base_offset=base)


def run(fetcher: FakeFetcher, start: int, end: int, fail: bool = True,
        timeout_ms: int = 5000) -> list[int]:
    reader = _RangeRead(fetcher, OffsetRange("t", 0, start, end), False, fail,  # type: ignore[arg-type]
                        timeout_ms)
    return [o for b in reader.batches() for o in b.column("offset").to_pylist()]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch) -> None:
    monkeypatch.setattr(fetch_reader, "RETRY_BACKOFF_S", 0.0)


def test_leader_moves_and_lost_connections_are_retried() -> None:
    fetcher = FakeFetcher([answer(batch(0, 2)), ConnectionError("lost"),
                           RetriableError("NOT_LEADER_OR_FOLLOWER"),
                           answer(error=ErrorCode.not_leader_or_follower),
                           answer(batch(2, 3))])
    assert run(fetcher, 0, 5) == [0, 1, 2, 3, 4]
    assert fetcher.closed == 3  # each failure looks the leader up again
    assert fetcher.fetched == [0, 2, 2, 2, 2]


def test_out_of_range_below_the_log_start() -> None:
    with pytest.raises(DataLossError, match="Cannot fetch offset 0 of t-0: the earliest "
                                            "available offset is 3"):
        run(FakeFetcher([answer(error=ErrorCode.offset_out_of_range)], earliest=3), 0, 5)
    fetcher = FakeFetcher([answer(error=ErrorCode.offset_out_of_range), answer(batch(3, 2))],
                          earliest=3)
    assert run(fetcher, 0, 5, fail=False) == [3, 4]


def test_out_of_range_past_the_log_end() -> None:
    past = [answer(error=ErrorCode.offset_out_of_range)]
    with pytest.raises(DataLossError, match="past the end of the log"):
        run(FakeFetcher(list(past), latest=2), 4, 8)
    assert run(FakeFetcher(list(past), latest=2), 4, 8, fail=False) == []
    # In range again by the time ListOffsets answers: fetched again.
    fetcher = FakeFetcher([*past, answer(batch(4, 4))], latest=10)
    assert run(fetcher, 4, 8) == [4, 5, 6, 7]


def test_a_range_ends_where_nothing_is_left_before_its_end() -> None:
    # A compacted tail: nothing from offset 2 on, the high watermark past the range.
    assert run(FakeFetcher([answer(batch(0, 2)), answer(high=10)]), 0, 5) == [0, 1]


def test_no_progress_times_out_with_the_reason() -> None:
    fetcher = FakeFetcher([answer(high=3) for _ in range(1000)])
    with pytest.raises(TimeoutError, match=r"reading offsets 3 to 5 \(at 3\): the log "
                                           r"ends at 3"):
        run(fetcher, 3, 5, timeout_ms=1)


def test_a_batch_larger_than_a_fetch_doubles_the_fetch() -> None:
    whole = batch(0, 3)
    fetcher = FakeFetcher([answer(whole[:40]), answer(whole)])
    assert run(fetcher, 0, 3) == [0, 1, 2]
    assert fetcher.max_bytes == 2048


def test_earliest_is_looked_up_for_a_new_partition() -> None:
    fetcher = FakeFetcher([answer(batch(7, 2))], earliest=7)
    assert run(fetcher, -2, 9) == [7, 8]
    assert fetcher.fetched == [7]
