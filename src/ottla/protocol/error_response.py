"""An error response to any request, for failures no handler answered itself.

Kafka gives every request class a ``getErrorResponse``: the same error for each topic,
partition, group or resource the request named, in the shape its response has. This is
that, derived from the schemas instead of written per API: each array of the response is
filled from the request's array of the same name (or its only other array), each item
keeps what identifies it (names, ids, partition indexes) and carries the error, and every
other required field gets Kafka's "unknown" value (-1, empty, null).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import unwrap_optional

_ALIASES: dict[str, tuple[str, ...]] = {
    "partition_index": ("index", "partition", "partition_id"),
    "partition_id": ("partition_index", "partition", "index"),
    "partition": ("partition_index", "index", "partition_id"),
    "index": ("partition_index", "partition", "partition_id"),
    "name": ("topic", "topic_name", "group_id", "resource_name"),
    "topic": ("name", "topic_name"),
    "topic_name": ("name", "topic"),
    "group_id": ("name", "group"),
}
_NAME_FIELDS = ("group_id", "name", "key", "topic", "resource_name", "topic_name")
"""Where a request's bare string (a group id, a topic name) goes in its response item."""
_INDEX_FIELDS = ("partition_index", "partition_id", "partition", "index")
"""Where a request's bare integer (a partition index) goes in its response item."""


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and \
        field.default_factory is dataclasses.MISSING


def _unknown(field: dataclasses.Field[Any]) -> Any:
    """Kafka's value for a field nothing is known about."""
    tp, nullable = unwrap_optional(field.type)
    if typing.get_origin(tp) is tuple:
        return None if nullable else []
    if dataclasses.is_dataclass(tp):
        return _mirror(tp, None, ErrorCode.none, None)  # type: ignore[arg-type]
    kafka_type = field.metadata.get("kafka_type")
    if nullable:
        return None
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type in ("uint16", "timedelta_i32", "timedelta_i64", "datetime_i64"):
        return 0
    if kafka_type == "uuid":
        return None
    if kafka_type == "error_code":
        return 0
    return -1


def _source_value(source: Any, name: str) -> Any:
    if source is None:
        return dataclasses.MISSING
    if isinstance(source, str):
        return source if name in _NAME_FIELDS else dataclasses.MISSING
    if isinstance(source, int) and not isinstance(source, bool):
        return source if name in _INDEX_FIELDS else dataclasses.MISSING
    for candidate in (name, *_ALIASES.get(name, ())):
        value = getattr(source, candidate, dataclasses.MISSING)
        if value is not dataclasses.MISSING and not isinstance(value, tuple):
            return value
    return dataclasses.MISSING


def _source_arrays(source: Any) -> dict[str, tuple[Any, ...]]:
    if source is None or isinstance(source, str) or not dataclasses.is_dataclass(source):
        return {}
    return {f.name: getattr(source, f.name) for f in dataclasses.fields(source)
            if isinstance(getattr(source, f.name), tuple)}


def _mirror(cls: type, source: Any, code: ErrorCode, message: str | None,
            entries: bool = True) -> dict[str, Any]:
    values: dict[str, Any] = {}
    fields = dataclasses.fields(cls)
    arrays = _source_arrays(source)
    unmatched = [name for name in arrays if name not in {f.name for f in fields}]
    for field in fields:
        tp, _ = unwrap_optional(field.type)
        if field.name == "error_code":
            values[field.name] = code
        elif field.name == "error_message":
            values[field.name] = message
        elif typing.get_origin(tp) is tuple and \
                dataclasses.is_dataclass(element := typing.get_args(tp)[0]):
            items = arrays.get(field.name) if entries else None
            if items is None and entries and len(unmatched) == 1:
                items = arrays[unmatched[0]]
            if items is None:
                if _required(field):
                    values[field.name] = []
                continue
            values[field.name] = [_mirror(element, item, code, message)  # type: ignore[arg-type]
                                  for item in items]
        elif not _required(field):
            continue
        else:
            value = _source_value(source, field.name)
            nullable = unwrap_optional(field.type)[1]
            if value is dataclasses.MISSING or (value is None and not nullable):
                value = _unknown(field)
            values[field.name] = value
    return values


def error_response(request: Any, code: ErrorCode, message: str | None = None
                   ) -> dict[str, Any]:
    """The response to ``request`` (a decoded kio request) that reports ``code`` for all
    it names, as a version-agnostic dict for ``messages.build`` with the response schema
    of the request's version."""
    from ottla.protocol.api import ApiKey, response_schema

    if request.__api_key__ == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        # Kafka's AlterUserScramCredentialsRequest.getErrorResponse: one result per user
        # of its deletions and upsertions together, sorted (two arrays, one result array).
        users = sorted({d.name for d in request.deletions} |
                       {u.name for u in request.upsertions})
        return {"throttle_time": 0, "results": [
            {"user": user, "error_code": code, "error_message": message} for user in users]}
    schema = response_schema(request.__api_key__, request.__version__)
    return _mirror(schema, request, code, message)


def top_level_error_response(request: Any, code: ErrorCode, message: str | None = None
                             ) -> dict[str, Any]:
    """The response to ``request`` with ``code`` (and ``message``) in its top-level
    fields only, its arrays empty (or null where they may be): what Kafka's
    ``getErrorResponse`` of the requests that have a top-level error answers (the KRaft
    RPCs, broker registration, heartbeats)."""
    from ottla.protocol.api import response_schema

    schema = response_schema(request.__api_key__, request.__version__)
    return _mirror(schema, request, code, message, entries=False)
