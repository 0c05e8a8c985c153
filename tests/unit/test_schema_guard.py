"""The bounds pass before the native decoder: valid messages of every served API version
pass untouched; lengths that lie, null where no null is allowed and unknown tagged fields
are handled before ``kio`` reserves anything."""

from __future__ import annotations

import random
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ottla.broker.handlers import broker_apis
from ottla.protocol.api import ApiKey, is_flexible, request_schema, response_schema
from ottla.protocol.codec import (
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    parse_request_header,
)
from ottla.protocol.errors import MalformedRequest
from ottla.protocol.messages import build
from ottla.protocol.requests import ApiSpec
from ottla.protocol.schema_guard import MAX_ELEMENTS, check_body
from ottla.server.controller_apis import controller_apis
from tests.strategies import messages


def served_versions() -> list[tuple[int, int]]:
    """Every (api key, version) some listener of a node serves."""
    specs = [*broker_apis(), *controller_apis(),
             ApiSpec(ApiKey.API_VERSIONS, 0, 4, lambda *_: None)]
    return sorted({(spec.api_key, v) for spec in specs
                   for v in range(spec.min_version, spec.max_version + 1)})


SERVED = served_versions()


def frame_of(api_key: int, version: int, body: object) -> bytes:
    return encode_request(api_key, version, 7, "guard-test", body)[4:]


def decode(frame: bytes) -> object:
    api_key, version = struct.unpack_from(">hh", frame)
    header = parse_request_header(frame, is_flexible(api_key, version))
    return decode_request(header, frame)


@pytest.mark.parametrize(("api_key", "version"), SERVED,
                         ids=[f"{ApiKey(k).name}-v{v}" for k, v in SERVED])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_valid_requests_pass_untouched(api_key: int, version: int, data: st.DataObject
                                       ) -> None:
    schema = request_schema(api_key, version)
    body = data.draw(messages(schema))
    frame = frame_of(api_key, version, body)
    header = parse_request_header(frame, is_flexible(api_key, version))
    assert check_body(schema, frame, header.body_offset) is frame
    assert type(decode_request(header, frame)) is schema


@pytest.mark.parametrize(("api_key", "version"), SERVED,
                         ids=[f"{ApiKey(k).name}-v{v}" for k, v in SERVED])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_valid_responses_pass_untouched(api_key: int, version: int, data: st.DataObject
                                        ) -> None:
    """Peers' responses get the same pass (nullable structs, KIP-893, among them)."""
    schema = response_schema(api_key, version)
    body = encode_body(data.draw(messages(schema)))
    assert check_body(schema, body, 0) is body
    header = b"\x00\x00\x00\x07" + (b"\x00" if is_flexible(api_key, version) and
                                  api_key != ApiKey.API_VERSIONS else b"")
    assert type(decode_response(api_key, version, header + body)[1]) is schema


@pytest.mark.parametrize(("api_key", "version"), SERVED,
                         ids=[f"{ApiKey(k).name}-v{v}" for k, v in SERVED])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_mutated_requests_decode_or_are_malformed(api_key: int, version: int,
                                                  data: st.DataObject, seed: int) -> None:
    """Flipped bytes, cut frames and huge varints anywhere in the body: decoding either
    works or says MalformedRequest (a native abort would kill this test run)."""
    body = data.draw(messages(request_schema(api_key, version)))
    frame = bytearray(frame_of(api_key, version, body))
    header = parse_request_header(bytes(frame), is_flexible(api_key, version))
    rng = random.Random(seed)
    start = header.body_offset
    for _ in range(rng.randint(1, 4)):
        if len(frame) <= start:
            break
        pos = rng.randrange(start, len(frame))
        match rng.randrange(4):
            case 0:
                frame[pos] = rng.randrange(256)
            case 1:
                frame[pos:pos] = b"\xff\xff\xff\xff\x0f"  # 2^32-1 as a varint
            case 2:
                frame[pos:pos] = b"\x7f\xff\xff\xff"  # 2^31-1 as an int32
            case _:
                del frame[pos:]
    try:
        decode(bytes(frame))
    except MalformedRequest:
        pass


def test_a_20_byte_metadata_request_declaring_4_billion_topics_is_refused() -> None:
    frame = struct.pack(">hhih", ApiKey.METADATA, 12, 1, -1) + b"\x00" + \
        b"\xff\xff\xff\xff\x0f"
    assert len(frame) + 4 == 20
    with pytest.raises(MalformedRequest, match="4294967294 elements"):
        decode(frame)


def test_legacy_array_and_string_lengths_are_checked() -> None:
    header = struct.pack(">hhih", ApiKey.METADATA, 1, 1, -1)
    with pytest.raises(MalformedRequest, match="elements"):
        decode(header + struct.pack(">i", 2**31 - 1))
    with pytest.raises(MalformedRequest, match="more than the frame holds"):
        decode(header + struct.pack(">ih", 1, 32767) + b"abc")


def test_element_count_is_bounded_in_all() -> None:
    # Metadata v1: an array of strings, each at least two bytes.
    header = struct.pack(">hhih", ApiKey.METADATA, 1, 1, -1)
    many = MAX_ELEMENTS + 1
    body = struct.pack(">i", many) + b"\x00\x00" * many
    with pytest.raises(MalformedRequest, match="array elements"):
        decode(header + body)


def test_null_where_the_schema_allows_none_is_malformed() -> None:
    # DeleteTopics v1: topic_names is a non-nullable array.
    frame = struct.pack(">hhih", ApiKey.DELETE_TOPICS, 1, 1, -1) + struct.pack(">ii", -1, 1000)
    with pytest.raises(MalformedRequest, match="topic_names is null"):
        decode(frame)
    # Metadata v9: null topics means all topics, and stays allowed.
    frame = struct.pack(">hhih", ApiKey.METADATA, 9, 1, -1) + b"\x00" + b"\x00\x00\x00\x00\x00"
    assert decode(frame).topics is None


def tagged(*fields: tuple[int, bytes]) -> bytes:
    out = bytes([len(fields)])
    for tag, value in fields:
        out += bytes([tag, len(value)]) + value
    return out


def test_unknown_tagged_fields_are_skipped_in_the_body() -> None:
    schema = request_schema(ApiKey.API_VERSIONS, 3)
    plain = frame_of(ApiKey.API_VERSIONS, 3, build(schema, {
        "client_software_name": "x", "client_software_version": "1"}))
    assert plain.endswith(b"\x00")
    with_unknown = plain[:-1] + tagged((5, b"ab"), (9, b""))
    assert decode(with_unknown) == decode(plain)


def test_unknown_tagged_fields_are_skipped_in_nested_structs_and_known_ones_kept() -> None:
    topic_id = uuid.uuid4()
    header = struct.pack(">hhih", ApiKey.METADATA, 12, 1, -1) + b"\x00"
    topic = topic_id.bytes + b"\x02a"  # topic id, compact name "a"
    tail = b"\x01\x00\x00"  # allow auto creation, include authorized ops, no body tags
    plain = header + b"\x02" + topic + b"\x00" + tail
    nested = header + b"\x02" + topic + tagged((3, b"xyz")) + tail
    assert decode(nested) == decode(plain)
    # Fetch v15: the known replica_state (tag 1) keeps its value; an unknown tag inside
    # it and another beside it go.
    fetch = request_schema(ApiKey.FETCH, 15)
    body = build(fetch, {"replica_state": {"replica_id": 3, "replica_epoch": 9},
                         "max_wait": 500, "min_bytes": 1, "max_bytes": 1024,
                         "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                         "topics": [], "forgotten_topics_data": [], "rack_id": ""})
    frame = frame_of(ApiKey.FETCH, 15, body)
    replica_state = struct.pack(">iq", 3, 9) + b"\x00"
    section = tagged((1, replica_state))
    assert frame.endswith(section)
    inner = struct.pack(">iq", 3, 9) + tagged((7, b"zz"))
    changed = frame[:-len(section)] + tagged((1, inner), (4, b"?"))
    assert decode(changed) == body


def test_tagged_field_that_lies_about_its_size_is_malformed() -> None:
    schema = request_schema(ApiKey.API_VERSIONS, 3)
    plain = frame_of(ApiKey.API_VERSIONS, 3, build(schema, {
        "client_software_name": "x", "client_software_version": "1"}))
    with pytest.raises(MalformedRequest, match="tagged field"):
        decode(plain[:-1] + b"\x01\x05\x7fab")
