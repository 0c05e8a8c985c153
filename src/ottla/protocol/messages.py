"""Build ``kio`` message entities of any version from version-agnostic values.

Handlers describe a response once, as plain dicts and lists, with the union of the fields
every version knows. ``build`` keeps the fields the requested version has, drops the rest,
recurses into nested structs and converts plain ints to the types ``kio`` writes
(error codes, millisecond durations and timestamps). Adding a version is then a matter of
advertising it, not of rewriting the handler.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

# How a field's value is converted: (field name, conversion kind, nested class or None).
_Plan = tuple[tuple[str, str, type | None, bool], ...]


def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """A field type without ``| None``, and whether it had it (the field is nullable)."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def _nested_class(tp: Any) -> tuple[str, type | None]:
    """Classify a field type: a nested entity, a tuple of them, or a primitive."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        inner, nullable = unwrap_optional(tp)
        return _nested_class(inner) if nullable else ("plain", None)
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        if dataclasses.is_dataclass(inner):
            return "entities", inner
        return "plain", None
    if dataclasses.is_dataclass(tp):
        return "entity", tp
    return "plain", None


@functools.cache
def _plan(cls: type) -> _Plan:
    plan = []
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if kafka_type == "error_code":
            plan.append((f.name, "error", None, required))
        elif kafka_type in ("timedelta_i32", "timedelta_i64"):
            plan.append((f.name, "duration", None, required))
        elif kafka_type == "datetime_i64":
            plan.append((f.name, "timestamp", None, required))
        else:
            kind, nested = _nested_class(f.type)
            plan.append((f.name, kind, nested, required))
    return tuple(plan)


def timestamp_from_ms(ms: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(milliseconds=ms)


def ms(value: datetime.timedelta | datetime.datetime | int) -> int:
    """Milliseconds of a ``kio`` duration or timestamp field."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


def build(cls: type, value: Mapping[str, Any] | Any) -> Any:
    """Instantiate ``cls`` (a kio entity) from a mapping, converting nested values."""
    if not isinstance(value, Mapping):
        return value
    kwargs: dict[str, Any] = {}
    for name, kind, nested, required in _plan(cls):
        if name not in value:
            if required:
                raise KeyError(f"{cls.__module__}.{cls.__qualname__} needs field {name!r}")
            continue
        v = value[name]
        if v is None:
            kwargs[name] = None
        elif kind == "plain":
            kwargs[name] = tuple(v) if isinstance(v, list) else v
        elif kind == "entities":
            kwargs[name] = tuple(build(nested, item) for item in v)  # type: ignore[arg-type]
        elif kind == "entity":
            kwargs[name] = build(nested, v)  # type: ignore[arg-type]
        elif kind == "error":
            kwargs[name] = v if isinstance(v, ErrorCode) else ErrorCode(v)
        elif kind == "duration":
            kwargs[name] = v if isinstance(v, datetime.timedelta) else datetime.timedelta(
                milliseconds=v
            )
        else:  # timestamp
            kwargs[name] = v if isinstance(v, datetime.datetime) else timestamp_from_ms(v)
    return cls(**kwargs)


def has_field(cls: type, name: str) -> bool:
    return any(entry[0] == name for entry in _plan(cls))


@dataclasses.dataclass(frozen=True, slots=True)
class FieldShape:
    """What a schema field holds: a primitive or an entity, one or an array of them, and
    where null is allowed."""

    kafka_type: str | None
    """The primitive type, or None for a nested entity."""
    entity: type | None
    array: bool
    nullable: bool
    element_nullable: bool


def field_shape(field: dataclasses.Field[Any]) -> FieldShape:
    tp, nullable = unwrap_optional(field.type)
    array = typing.get_origin(tp) is tuple
    element_nullable = False
    if array:
        tp, element_nullable = unwrap_optional(typing.get_args(tp)[0])
    if dataclasses.is_dataclass(tp):
        return FieldShape(None, tp, array, nullable, element_nullable)  # type: ignore[arg-type]
    return FieldShape(field.metadata["kafka_type"], None, array, nullable, element_nullable)
