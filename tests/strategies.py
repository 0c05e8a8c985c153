"""Hypothesis strategies over Kafka's message schemas (the ``kio`` classes): a valid
message of any API version, with every field drawn from its type, for the schema guard's
tests and for the fuzzing of a real node."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
import uuid
from typing import Any

from hypothesis import strategies as st

from ottla.protocol.messages import build

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _strip_none(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def _primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        bits = _INTS[kafka_type]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if kafka_type == "uint16":
        return st.integers(0, 65535)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "uuid":
        return st.uuids() | st.just(uuid.UUID(int=0))
    if kafka_type == "string":
        return st.text(max_size=12)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=40)
    if kafka_type == "timedelta_i32":
        return st.integers(0, 2**31 - 1)
    if kafka_type == "timedelta_i64":
        return st.integers(0, 2**40)
    if kafka_type == "datetime_i64":
        return st.integers(0, 2**41).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))
    if kafka_type == "error_code":
        return st.just(0)
    raise TypeError(f"no strategy for {kafka_type}")


def _field(field: dataclasses.Field[Any], max_items: int) -> st.SearchStrategy[Any]:
    tp, nullable = _strip_none(field.type)
    array = typing.get_origin(tp) is tuple
    element_nullable = False
    if array:
        tp, element_nullable = _strip_none(typing.get_args(tp)[0])
    if dataclasses.is_dataclass(tp):
        value: st.SearchStrategy[Any] = st.deferred(lambda: entity_values(tp, max_items))
    else:
        value = _primitive(field.metadata["kafka_type"])
    if element_nullable:
        value = st.none() | value
    if array:
        value = st.lists(value, max_size=max_items)
    if nullable:
        value = st.none() | value
    return value


@functools.cache
def entity_values(cls: type, max_items: int = 3) -> st.SearchStrategy[dict[str, Any]]:
    """Field values for an entity class, as ``messages.build`` takes them; tagged fields
    with a default are sometimes left out."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in dataclasses.fields(cls):
        strategy = _field(field, max_items)
        has_default = field.default is not dataclasses.MISSING or \
            field.default_factory is not dataclasses.MISSING
        (optional if has_default else required)[field.name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def messages(cls: type, max_items: int = 3) -> st.SearchStrategy[Any]:
    """Valid instances of a message class (a request or response of one version)."""
    return entity_values(cls, max_items).map(lambda values: build(cls, values))
