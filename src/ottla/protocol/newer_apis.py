"""APIs of Kafka 4.4 newer than the ``kio`` schemas Ottla reads the wire with, written as
``kio`` would generate them from Kafka's message files, so the codec, the dispatcher and
the clients treat them like any other.

- UnregisterController (94, KIP-1220): ``UnregisterControllerRequest.json`` and
  ``UnregisterControllerResponse.json`` of Kafka 4.4 (version 0, flexible).
"""

# No ``from __future__ import annotations``: kio reads the fields' types at run time.

from dataclasses import dataclass, field
from typing import ClassVar

from kio.index import UnknownEntity
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata={"kafka_type": "int32"})
    """The controller ID to unregister."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """A plain int16: CONTROLLER_ID_NOT_REGISTERED (137) is not in ``kio``'s ErrorCode."""
    error_message: str | None = field(metadata={"kafka_type": "string"})


API_NAMES: dict[int, str] = {94: "unregister_controller"}
"""Their api keys, named as ``kio``'s index names the others."""

_SCHEMAS: dict[tuple[int, int, EntityType], type] = {
    (94, 0, EntityType.request): UnregisterControllerRequest,
    (94, 0, EntityType.response): UnregisterControllerResponse,
}


def schema(api_key: int, version: int, kind: EntityType) -> type:
    """The class of a request or response here; ``kio``'s UnknownEntity for a version
    that does not exist, as ``kio`` raises for its own."""
    found = _SCHEMAS.get((api_key, version, kind))
    if found is None:
        raise UnknownEntity(f"no {kind.name} schema for api key {api_key} v{version}")
    return found
