"""The hand-written Fetch response encoder writes exactly what kio writes, every version."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ottla.protocol.api import ApiKey, response_schema
from ottla.protocol.codec import (
    RequestHeader,
    decode_response,
    encode_body_chunks,
    response_header_bytes,
)
from ottla.protocol.errors import ErrorCode
from ottla.protocol.fetch_response import EncodedBody, encode_fetch_response
from ottla.protocol.messages import build
from ottla.protocol.records import build_batch, read_header
from ottla.server.network import RequestDispatcher
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig
from ottla.storage.segment import FileSlice

VERSIONS = range(4, 19)  # every version Kafka 4.4 serves (FetchRequest.json 4-18)
BIG = bytes(range(256)) * 80  # 20 KiB: a chunk of its own on both paths


@pytest.fixture(scope="module")
def slices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FileSlice, FileSlice]]:
    """A one-batch and a many-batch slice of a real segment."""
    log = Log(str(tmp_path_factory.mktemp("fetch") / "t-0"), "t", 0, LogConfig.resolve({}),
              now_ms=1000, clean_shutdown=False)
    for i in range(20):
        batch = bytearray(build_batch([(b"k%d" % i, b"v" * 1000)] * 3, timestamp=1000))
        log.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
    one = log.read(0, 1).records
    many = log.read(0, 1 << 20).records
    assert isinstance(one, FileSlice) and isinstance(many, FileSlice)
    assert len(one) < len(many)
    yield one, many
    log.close()


def joined(chunks: list[Any]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileSlice) else bytes(c) for c in chunks)


def materialized(value: Any) -> Any:
    """The response as a client reads it: slices as their bytes, the zero UUID as null."""
    if isinstance(value, FileSlice):
        return value.read()
    if isinstance(value, uuid.UUID) and value.int == 0:
        return None
    if isinstance(value, dict):
        return {k: materialized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [materialized(v) for v in value]
    return value


def check(version: int, response: dict[str, Any]) -> None:
    """Same bytes as build + kio, slices passed through untouched, and kio reads back the
    values it was given."""
    schema = response_schema(ApiKey.FETCH, version)
    kio_chunks, kio_size = encode_body_chunks(build(schema, response))
    expected = joined(kio_chunks)
    body = encode_fetch_response(version, response)
    assert isinstance(body, EncodedBody)
    got = joined(body.chunks)
    assert got == expected, f"v{version}"
    assert body.size == kio_size == len(got)
    sent_slices = [c for c in body.chunks if type(c) is FileSlice]
    kio_slices = [c for c in kio_chunks if type(c) is FileSlice]
    assert len(sent_slices) == len(kio_slices)
    assert all(a is b for a, b in zip(sent_slices, kio_slices, strict=True))
    frame = response_header_bytes(ApiKey.FETCH, version, 7, body.size)[4:] + got
    correlation_id, decoded = decode_response(ApiKey.FETCH, version, frame)
    assert correlation_id == 7
    assert decoded == build(schema, materialized(response))


def partition(index: int, **fields: Any) -> dict[str, Any]:
    """A partition as the handler builds it."""
    data = {"partition_index": index, "error_code": ErrorCode.none, "high_watermark": 100,
            "last_stable_offset": 90, "log_start_offset": 3, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}
    data.update(fields)
    return data


def response(*topics: dict[str, Any], **fields: Any) -> dict[str, Any]:
    data = {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
            "responses": list(topics), "node_endpoints": []}
    data.update(fields)
    return data


def topic(name: str, *partitions: dict[str, Any], topic_id: uuid.UUID | None = None
          ) -> dict[str, Any]:
    return {"topic": name, "topic_id": topic_id or uuid.uuid4(), "partitions": list(partitions)}


def examples(one: FileSlice, many: FileSlice) -> dict[str, dict[str, Any]]:
    small = bytes(one.read())
    return {
        "consumer": response(topic("orders", partition(0, records=many)), session_id=12),
        "no topics": response(),
        "session error": response(error_code=ErrorCode.fetch_session_id_not_found,
                                  session_id=0),
        "throttled": response(topic("t", partition(0)), throttle_time=1500),
        "several topics": response(
            topic("a", partition(0, records=many), partition(1, records=None),
                  partition(2, records=b""), partition(3, records=small),
                  partition(4, records=BIG), partition(5, records=one)),
            topic("b", partition(7, error_code=ErrorCode.offset_out_of_range,
                                 high_watermark=-1, last_stable_offset=-1,
                                 log_start_offset=-1)),
            topic("", partition(0, error_code=ErrorCode.unknown_topic_or_partition),
                  topic_id=uuid.UUID(int=0)),
            topic("ünïcode-τopic", partition(2 ** 31 - 1, high_watermark=2 ** 63 - 1,
                                              records=many)),
            session_id=2 ** 31 - 1),
        "aborted transactions": response(topic(
            "tx", partition(0, aborted_transactions=[]),
            partition(1, aborted_transactions=[{"producer_id": 5, "first_offset": 10},
                                               {"producer_id": 2 ** 62, "first_offset": 0}],
                      records=small),
            partition(2, aborted_transactions=None, records=many))),
        "tagged fields": response(topic(
            "t",
            partition(0, diverging_epoch={"epoch": 4, "end_offset": 77}),
            partition(1, error_code=ErrorCode.not_leader_or_follower,
                      current_leader={"leader_id": 3, "leader_epoch": 9}),
            partition(2, snapshot_id={"end_offset": 500, "epoch": 2}, records=many),
            partition(3, diverging_epoch={"epoch": 1}, current_leader={"leader_epoch": 2},
                      snapshot_id={"end_offset": 8}, records=BIG),
            partition(6, diverging_epoch={"end_offset": 5}, current_leader={"leader_id": 0},
                      snapshot_id={"epoch": 0}),
            # The handler's NOT_LEADER partition: all defaults, so no tag is written.
            partition(4, error_code=ErrorCode.not_leader_or_follower,
                      current_leader={"leader_id": -1, "leader_epoch": -1},
                      diverging_epoch={"epoch": -1, "end_offset": -1}, snapshot_id={}),
            partition(5, preferred_read_replica=2))),
        "node endpoints": response(
            topic("t", partition(0, error_code=ErrorCode.not_leader_or_follower,
                                 current_leader={"leader_id": 2, "leader_epoch": 5})),
            node_endpoints=[{"node_id": 2, "host": "broker-2.example", "port": 9092,
                             "rack": None},
                            {"node_id": 3, "host": "b3", "port": 19092, "rack": "rack-ä"}]),
        "defaults left out": {"throttle_time": 0, "error_code": ErrorCode.none,
                              "responses": [topic("t", {
                                  "partition_index": 0, "error_code": ErrorCode.none,
                                  "high_watermark": 5, "aborted_transactions": None,
                                  "records": None})]},
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["consumer", "no topics", "session error", "throttled",
                                  "several topics", "aborted transactions", "tagged fields",
                                  "node endpoints", "defaults left out"])
def test_matches_kio(slices: tuple[FileSlice, FileSlice], version: int, name: str) -> None:
    check(version, examples(*slices)[name])


def test_record_sets_stay_chunks_of_their_own(slices: tuple[FileSlice, FileSlice]) -> None:
    one, many = slices
    body = encode_fetch_response(16, response(topic("t", partition(0, records=many),
                                                    partition(1, records=b"tiny"),
                                                    partition(2, records=BIG),
                                                    partition(3, records=one))))
    assert [c for c in body.chunks if not isinstance(c, bytes | bytearray)] == [many, one]
    assert any(c is BIG for c in body.chunks)
    assert not any(c == b"tiny" for c in body.chunks)


def test_decoded_values(slices: tuple[FileSlice, FileSlice]) -> None:
    _one, many = slices
    topic_id = uuid.uuid4()
    body = encode_fetch_response(17, response(
        topic("t", partition(3, records=many, aborted_transactions=[],
                             current_leader={"leader_id": 1, "leader_epoch": 4}),
              topic_id=topic_id), session_id=99))
    frame = response_header_bytes(ApiKey.FETCH, 17, 1, body.size)[4:] + joined(body.chunks)
    _, decoded = decode_response(ApiKey.FETCH, 17, frame)
    assert decoded.session_id == 99 and decoded.error_code == ErrorCode.none
    (t,) = decoded.responses
    assert t.topic_id == topic_id
    (p,) = t.partitions
    assert (p.partition_index, p.high_watermark, p.last_stable_offset, p.log_start_offset) \
        == (3, 100, 90, 3)
    assert p.aborted_transactions == ()
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 4)
    assert p.diverging_epoch.epoch == -1 and p.snapshot_id.end_offset == -1
    assert p.records == many.read()


def test_other_versions_are_refused() -> None:
    for version in (3, 19):
        with pytest.raises(ValueError):
            encode_fetch_response(version, response())


def test_the_dispatcher_sends_an_encoded_body_as_it_is(slices: tuple[FileSlice, FileSlice]
                                                       ) -> None:
    body = encode_fetch_response(13, response(topic("t", partition(0, records=slices[1]))))
    header = RequestHeader(ApiKey.FETCH, 13, 42, None, 0)
    prefix, chunks, size = RequestDispatcher(None, {}).encode(header, body)
    assert chunks is body.chunks and size == body.size
    assert prefix == response_header_bytes(ApiKey.FETCH, 13, 42, body.size)


INT32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
MINUS_ONE_OR = st.one_of(st.just(-1), INT32)
MINUS_ONE_OR_64 = st.one_of(st.just(-1), INT64)


def responses(records: list[Any]) -> st.SearchStrategy[dict[str, Any]]:
    error = st.sampled_from(list(ErrorCode))
    # A tagged struct is absent, or a dict of some of its fields (kio takes no None).
    tag = st.fixed_dictionaries({}, optional={"epoch": MINUS_ONE_OR,
                                              "end_offset": MINUS_ONE_OR_64})
    snapshot = st.fixed_dictionaries({}, optional={"end_offset": MINUS_ONE_OR_64,
                                                   "epoch": MINUS_ONE_OR})
    leader = st.fixed_dictionaries({}, optional={"leader_id": MINUS_ONE_OR,
                                                 "leader_epoch": MINUS_ONE_OR})
    aborted = st.one_of(st.none(), st.lists(st.fixed_dictionaries(
        {"producer_id": INT64, "first_offset": INT64}), max_size=3))
    part = st.fixed_dictionaries(
        {"partition_index": INT32, "error_code": error, "high_watermark": INT64,
         "aborted_transactions": aborted, "records": st.sampled_from(records)},
        optional={"last_stable_offset": INT64, "log_start_offset": INT64,
                  "preferred_read_replica": INT32, "diverging_epoch": tag,
                  "current_leader": leader, "snapshot_id": snapshot})
    top = st.fixed_dictionaries(
        {"topic": st.text(max_size=12), "topic_id": st.one_of(st.none(), st.uuids()),
         "partitions": st.lists(part, max_size=4)})
    node = st.fixed_dictionaries({"node_id": INT32, "host": st.text(max_size=8),
                                  "port": INT32, "rack": st.one_of(st.none(), st.text())})
    return st.fixed_dictionaries(
        {"throttle_time": st.integers(0, 2 ** 31 - 1), "error_code": error,
         "responses": st.lists(top, max_size=3)},
        optional={"session_id": INT32, "node_endpoints": st.lists(node, max_size=2)})


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_random_responses_match_kio(slices: tuple[FileSlice, FileSlice], data: st.DataObject,
                                    version: int) -> None:
    one, many = slices
    check(version, data.draw(responses([None, b"", b"abc", BIG, one, many])))
