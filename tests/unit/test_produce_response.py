"""The hand-written Produce response encoder writes exactly what kio writes, every version."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ottla.protocol.api import ApiKey, response_schema
from ottla.protocol.codec import encode_body_chunks
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.protocol.produce_response import encode_produce_response

VERSIONS = range(3, 14)
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def kio_bytes(version: int, response: dict[str, Any]) -> bytes:
    chunks, size = encode_body_chunks(build(response_schema(ApiKey.PRODUCE, version), response))
    body = b"".join(bytes(c) for c in chunks)
    assert len(body) == size
    return body


def ours(version: int, response: dict[str, Any]) -> bytes:
    encoded = encode_produce_response(version, response)
    body = b"".join(bytes(c) for c in encoded.chunks)
    assert len(body) == encoded.size
    return body


def partition(index: int = 0, **fields: Any) -> dict[str, Any]:
    """As the Produce handler builds a partition's answer."""
    return {"index": index, "error_code": ErrorCode.none, "base_offset": 42,
            "log_append_time": None, "log_start_offset": 0, "record_errors": [],
            "error_message": None, **fields}


def response(*partitions: dict[str, Any], name: str = "orders", **fields: Any
             ) -> dict[str, Any]:
    return {"responses": [{"name": name, "topic_id": TOPIC_ID,
                           "partition_responses": list(partitions)}],
            "throttle_time": 0, "node_endpoints": [], **fields}


CASES = {
    "acknowledged": response(partition()),
    "log append time": response(partition(log_append_time=1_700_000_000_123)),
    "not leader, leader unknown": response(partition(
        error_code=ErrorCode.not_leader_or_follower, base_offset=-1, log_start_offset=-1,
        error_message="not the leader", current_leader={"leader_id": -1,
                                                          "leader_epoch": -1})),
    "not leader, new leader known": response(
        partition(error_code=ErrorCode.not_leader_or_follower,
                  current_leader={"leader_id": 3, "leader_epoch": 7}),
        node_endpoints=[{"node_id": 3, "host": "127.0.0.1", "port": 9093, "rack": None},
                        {"node_id": 4, "host": "b4", "port": 9094, "rack": "r1"}]),
    "record errors": response(partition(
        error_code=ErrorCode.invalid_record, error_message="bad records",
        record_errors=[{"batch_index": 2, "batch_index_error_message": "key required"},
                       {"batch_index": 5, "batch_index_error_message": None}])),
    "many partitions, throttled": response(*(partition(i, base_offset=i * 1000)
                                             for i in range(40)), name="tópico",
                                           throttle_time=250),
    "no topics": {"responses": [], "throttle_time": 0, "node_endpoints": []},
    "several topics": {"responses": [
        {"name": "a", "topic_id": TOPIC_ID, "partition_responses": [partition(0)]},
        {"name": "b" * 200, "topic_id": uuid.UUID(int=7),
         "partition_responses": [partition(1), partition(2)]}],
        "throttle_time": 0, "node_endpoints": []},
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_produce_response_is_the_bytes_kio_writes(version: int, case: str) -> None:
    assert ours(version, CASES[case]) == kio_bytes(version, CASES[case])


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), partitions=st.lists(st.fixed_dictionaries({
    "index": st.integers(0, 2**31 - 1),
    "error_code": st.sampled_from([ErrorCode.none, ErrorCode.not_leader_or_follower,
                                   ErrorCode.corrupt_message, ErrorCode.record_list_too_large]),
    "base_offset": st.integers(-1, 2**63 - 1),
    "log_append_time": st.none() | st.integers(0, 2**41),
    "log_start_offset": st.integers(-1, 2**63 - 1),
    "record_errors": st.lists(st.fixed_dictionaries({
        "batch_index": st.integers(0, 2**31 - 1),
        "batch_index_error_message": st.none() | st.text(max_size=20)}), max_size=3),
    "error_message": st.none() | st.text(max_size=30),
    "current_leader": st.fixed_dictionaries({"leader_id": st.integers(-1, 5),
                                             "leader_epoch": st.integers(-1, 5)}),
}), max_size=4))
def test_any_produce_response_is_the_bytes_kio_writes(version: int,
                                                      partitions: list[dict[str, Any]]
                                                      ) -> None:
    case = response(*partitions)
    assert ours(version, case) == kio_bytes(version, case)


def test_versions_outside_the_range_are_refused() -> None:
    for version in (2, 14):
        with pytest.raises(ValueError):
            encode_produce_response(version, CASES["acknowledged"])
