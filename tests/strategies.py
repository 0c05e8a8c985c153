"""Valid Kafka messages of any API version, every field drawn from its type in the ``kio``
schema: as Hypothesis strategies for unit tests, and from a seeded generator for the
fuzzing of a real node (which must replay from a seed)."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import random
import uuid
from typing import Any

from hypothesis import strategies as st

from ottla.protocol.messages import build, field_shape

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


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
    shape = field_shape(field)
    entity = shape.entity
    if entity is not None:
        value: st.SearchStrategy[Any] = st.deferred(lambda: entity_values(entity, max_items))
    else:
        value = _primitive(field.metadata["kafka_type"])
    if shape.element_nullable:
        value = st.none() | value
    if shape.array:
        value = st.lists(value, max_size=max_items)
    if shape.nullable:
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


class RandomMessages:
    """Valid messages drawn from a seeded ``random.Random``, for the fuzzing of a real
    node, where a run must replay from its seed alone. Names come from a small vocabulary
    so that requests reach real topics and groups, not only "unknown" paths."""

    def __init__(self, rng: random.Random, names: tuple[str, ...], max_items: int = 3) -> None:
        self.rng = rng
        self.names = names
        self.max_items = max_items

    def message(self, cls: type) -> Any:
        return build(cls, self.values(cls))

    def values(self, cls: type) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            optional = field.default is not dataclasses.MISSING or \
                field.default_factory is not dataclasses.MISSING
            if optional and self.rng.random() < 0.5:
                continue
            out[field.name] = self.field(field)
        return out

    def field(self, field: dataclasses.Field[Any]) -> Any:
        shape = field_shape(field)
        if shape.nullable and self.rng.random() < 0.1:
            return None
        if shape.array:
            return [None if shape.element_nullable and self.rng.random() < 0.1
                    else self.value(shape.entity, field)
                    for _ in range(self.rng.randint(0, self.max_items))]
        return self.value(shape.entity, field)

    def value(self, entity: type | None, field: dataclasses.Field[Any]) -> Any:
        if entity is not None:
            return self.values(entity)
        kafka_type = field.metadata["kafka_type"]
        rng = self.rng
        if kafka_type in _INTS:
            bits = _INTS[kafka_type]
            return rng.choice([0, 1, -1, rng.randint(0, 10),
                               rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)])
        if kafka_type == "uint16":
            return rng.randint(0, 65535)
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "float64":
            return rng.random()
        if kafka_type == "uuid":
            return uuid.UUID(int=rng.getrandbits(128)) if rng.random() < 0.5 else \
                uuid.UUID(int=0)
        if kafka_type == "string":
            if rng.random() < 0.7:
                return rng.choice(self.names)
            return "".join(rng.choice("abc.-_xyz\u00e9") for _ in range(rng.randint(0, 12)))
        if kafka_type in ("bytes", "records"):
            return rng.randbytes(rng.randint(0, 40))
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            return rng.choice([0, 1, 100, rng.randint(0, 2**31 - 1)])
        if kafka_type == "datetime_i64":
            return datetime.datetime.fromtimestamp(rng.randint(0, 2**41) / 1000, datetime.UTC)
        return 0
