"""Every request of every served API version can be answered with an error: the response
encodes, names what the request named, and carries the error wherever it has a code."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import encode_body
from ottla.protocol.error_response import error_response
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from tests.strategies import messages
from tests.unit.test_schema_guard import SERVED


def error_codes(entity: Any) -> list[int]:
    codes = []
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if field.name == "error_code":
            codes.append(value)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if dataclasses.is_dataclass(item):
                codes += error_codes(item)
    return codes


@pytest.mark.parametrize(("api_key", "version"), SERVED,
                         ids=[f"{ApiKey(k).name}-v{v}" for k, v in SERVED])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_request_has_an_error_response(api_key: int, version: int,
                                             data: st.DataObject) -> None:
    request = data.draw(messages(request_schema(api_key, version)))
    response = build(response_schema(api_key, version),
                     error_response(request, ErrorCode.unknown_server_error, "boom"))
    encode_body(response)
    assert set(error_codes(response)) <= {ErrorCode.unknown_server_error}


def test_items_keep_what_identifies_them() -> None:
    request = build(request_schema(ApiKey.PRODUCE, 9), {
        "transactional_id": None, "acks": 1, "timeout": 1000,
        "topic_data": [{"name": "orders", "partition_data": [
            {"index": 3, "records": b""}, {"index": 5, "records": b""}]}]})
    response = build(response_schema(ApiKey.PRODUCE, 9),
                     error_response(request, ErrorCode.invalid_request))
    [topic] = response.responses
    assert topic.name == "orders"
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
        (3, ErrorCode.invalid_request, -1), (5, ErrorCode.invalid_request, -1)]
    groups = build(request_schema(ApiKey.DESCRIBE_GROUPS, 5), {
        "groups": ["a", "b"], "include_authorized_operations": False})
    described = build(response_schema(ApiKey.DESCRIBE_GROUPS, 5),
                      error_response(groups, ErrorCode.coordinator_not_available))
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("a", ErrorCode.coordinator_not_available), ("b", ErrorCode.coordinator_not_available)]
