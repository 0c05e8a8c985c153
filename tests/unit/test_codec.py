"""Request/response framing and version-agnostic message building."""

from __future__ import annotations

import struct

import pytest

from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    parse_request_header,
    response_header_bytes,
)
from ottla.protocol.errors import ErrorCode, MalformedRequest
from ottla.protocol.messages import build


@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_metadata_request_round_trips_across_versions(version: int) -> None:
    body = {"topics": [{"name": "a", "topic_id": None}], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
            "include_cluster_authorized_operations": False}
    frame = encode_request(ApiKey.METADATA, version, 42, "client-x",
                           build(request_schema(ApiKey.METADATA, version), body))
    payload = frame[4:]
    assert struct.unpack(">i", frame[:4])[0] == len(payload)
    header = parse_request_header(payload, flexible=version >= 9)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        ApiKey.METADATA, version, 42, "client-x")
    request = decode_request(header, payload)
    assert [t.name for t in request.topics] == ["a"]


def test_build_drops_fields_a_version_lacks_and_converts_values() -> None:
    response = {"throttle_time": 5, "brokers": [], "cluster_id": "c", "controller_id": 1,
                "topics": [], "error_code": 0, "cluster_authorized_operations": 0}
    v0 = build(response_schema(ApiKey.METADATA, 0), response)
    assert not hasattr(v0, "cluster_id")
    v13 = build(response_schema(ApiKey.METADATA, 13), response)
    assert v13.error_code == ErrorCode.none
    assert v13.throttle_time.total_seconds() == 0.005


def test_missing_required_field_is_reported_by_name() -> None:
    with pytest.raises(KeyError, match="brokers"):
        build(response_schema(ApiKey.METADATA, 12), {"throttle_time": 0, "topics": []})


def test_truncated_header_and_body_are_malformed() -> None:
    with pytest.raises(MalformedRequest):
        parse_request_header(b"\x00\x03\x00", flexible=False)
    frame = encode_request(ApiKey.METADATA, 9, 1, "c", build(
        request_schema(ApiKey.METADATA, 9),
        {"topics": None, "allow_auto_topic_creation": True,
         "include_topic_authorized_operations": False,
         "include_cluster_authorized_operations": False}))[4:]
    header = parse_request_header(frame, flexible=True)
    with pytest.raises(MalformedRequest):
        decode_request(header, frame[:-2])


def test_api_versions_response_header_is_always_v0() -> None:
    flexible = response_header_bytes(ApiKey.METADATA, 12, 7, 10)
    api_versions = response_header_bytes(ApiKey.API_VERSIONS, 3, 7, 10)
    assert len(flexible) == 9 and flexible.endswith(b"\x00")
    assert len(api_versions) == 8


def test_response_decodes_what_the_broker_encodes() -> None:
    entity = build(response_schema(ApiKey.API_VERSIONS, 3), {
        "error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 12}],
        "throttle_time": 0})
    from ottla.protocol.codec import encode_body
    body = encode_body(entity)
    frame = response_header_bytes(ApiKey.API_VERSIONS, 3, 9, len(body)) + body
    correlation_id, decoded = decode_response(ApiKey.API_VERSIONS, 3, frame[4:])
    assert correlation_id == 9
    assert decoded.api_keys[0].max_version == 12
