"""Decoded ``kio`` responses as plain JSON, so that a scenario can return them and the
harness can diff them: error codes by Kafka's name, durations and timestamps in ms, UUIDs
as text, and record sets as the batches a client would decode from them."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from ottla.protocol.messages import field_shape, ms
from ottla.protocol.records import (
    HEADER_SIZE,
    CorruptRecord,
    control_record_type,
    decode_records,
    read_header,
)
from tests.oracle.model import Json


def text(value: bytes | None) -> str | None:
    """A key or value as text where it is UTF-8, else as hex (prefixed ``0x``)."""
    if value is None:
        return None
    try:
        return value.decode()
    except UnicodeDecodeError:
        return "0x" + value.hex()


def records_json(data: bytes | None) -> Json:
    """The batches of a fetched record set as a client decodes them, plus the bytes after
    the last whole batch (a broker may cut a set short at ``max_bytes``)."""
    if data is None:
        return None
    view = memoryview(data)
    batches: list[Json] = []
    pos = 0
    while pos + HEADER_SIZE <= len(view):
        header = read_header(view, pos)
        if pos + header.size > len(view):
            break
        batch: dict[str, Json] = {
            "base_offset": header.base_offset, "last_offset_delta": header.last_offset_delta,
            "batch_length": header.batch_length, "magic": header.magic,
            "partition_leader_epoch": header.partition_leader_epoch,
            "compression": header.compression, "timestamp_type": header.timestamp_type,
            "transactional": header.is_transactional, "control": header.is_control,
            "producer_id": header.producer_id, "producer_epoch": header.producer_epoch,
            "base_sequence": header.base_sequence, "base_timestamp": header.base_timestamp,
            "max_timestamp": header.max_timestamp, "record_count": header.record_count,
        }
        try:
            records = decode_records(view, pos, header)
        except CorruptRecord as e:
            batch["corrupt"] = str(e)
        else:
            if header.is_control:
                batch["markers"] = [_control_name(control_record_type(r.key))
                                    for r in records]
            else:
                batch["records"] = [
                    {"offset": r.offset, "timestamp": r.timestamp, "key": text(r.key),
                     "value": text(r.value),
                     "headers": [[k, text(v)] for k, v in r.headers]} for r in records]
        batches.append(batch)
        pos += header.size
    result: dict[str, Json] = {"batches": batches}
    if pos < len(view):
        result["partial_bytes"] = len(view) - pos
    return result


def _control_name(kind: int | None) -> str:
    return {0: "ABORT", 1: "COMMIT"}.get(kind if kind is not None else -1, "?")


def error_name(code: int | ErrorCode) -> str:
    """Kafka's name of an error code (``UNKNOWN_MEMBER_ID``), as its ``Errors`` enum."""
    try:
        return ErrorCode(int(code)).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{int(code)}"


def to_json(value: Any) -> Json:
    """A decoded response (a ``kio`` entity) or any nesting of them as JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Json] = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.metadata.get("kafka_type") == "records" and field_shape(f).entity is None:
                out[f.name] = records_json(v)
            else:
                out[f.name] = to_json(v)
        return out
    if isinstance(value, ErrorCode):
        return error_name(value)
    if isinstance(value, bool | str | float) or value is None:
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, datetime.timedelta | datetime.datetime):
        return ms(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(v) for v in value]
    raise TypeError(f"cannot express {type(value).__name__} as JSON: {value!r}")


def from_json(cls: type, body: Any) -> Any:
    """A request body with UUIDs as text, made ready for ``ottla.protocol.messages.build``:
    uuid fields of ``cls`` (a kio request entity) given as strings become ``uuid.UUID``."""
    if not isinstance(body, Mapping):
        return body
    out = dict(body)
    for f in dataclasses.fields(cls):
        if f.name not in out or out[f.name] is None:
            continue
        shape = field_shape(f)
        v = out[f.name]
        if shape.entity is not None:
            out[f.name] = ([from_json(shape.entity, item) for item in v] if shape.array
                           else from_json(shape.entity, v))
        elif shape.kafka_type == "uuid":
            out[f.name] = ([uuid.UUID(x) if isinstance(x, str) else x for x in v]
                           if shape.array else uuid.UUID(v) if isinstance(v, str) else v)
    return out
