"""Kafka API keys and the ``kio`` schema classes for each (api key, version)."""

from __future__ import annotations

import functools
from enum import IntEnum

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map
from kio.static.constants import EntityType

from ottla.protocol import newer_apis

# One member per Kafka API, named as Kafka names it (PRODUCE, FETCH, ...), values the
# api keys of the wire protocol.
ApiKey = IntEnum("ApiKey", {name.upper(): key for key, name in  # type: ignore[misc]
                           {**api_key_map, **newer_apis.API_NAMES}.items()})


def request_name(api_key: ApiKey) -> str:
    """Kafka's ``ApiKeys.name``: the message name without ``Request`` (Produce,
    OffsetCommit, DescribeTopicPartitions...), which the member's name spells in capitals
    and underscores."""
    return "".join(part.capitalize() for part in api_key.name.split("_"))


REQUEST_NAMES: dict[int, str] = {int(key): request_name(key) for key in ApiKey}
"""Kafka's ``ApiKeys.forId(key).name`` by api key."""


@functools.cache
def request_schema(api_key: int, version: int) -> type:
    """The ``kio`` request class of an API version (raises ``KioIndexError`` if unknown)."""
    if api_key in newer_apis.API_NAMES:
        return newer_apis.schema(api_key, version, EntityType.request)
    return load_request_schema(api_key, version)


@functools.cache
def response_schema(api_key: int, version: int) -> type:
    if api_key in newer_apis.API_NAMES:
        return newer_apis.schema(api_key, version, EntityType.response)
    return load_response_schema(api_key, version)


@functools.cache
def is_flexible(api_key: int, version: int) -> bool:
    """Whether this API version uses compact encodings and tagged fields (KIP-482)."""
    return bool(request_schema(api_key, version).__flexible__)
