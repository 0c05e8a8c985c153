"""Helpers shared by the client tools."""

from __future__ import annotations

import sys
import uuid
from typing import TYPE_CHECKING, Any

from ottla.common.uuids import kafka_uuid_text

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient


def parse_properties(items: list[str] | None, flag: str) -> dict[str, str]:
    """``key=value`` items of a repeatable flag."""
    props = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"error: {flag} expects key=value, got {item!r}")
        props[key.strip()] = value
    return props


def client_uuid_text(value: Any) -> str:
    """A confluent-kafka ``Uuid`` as Kafka prints ids (``Uuid.toString()``: URL-safe
    base64 without padding); confluent-kafka's own ``str`` uses the standard alphabet."""
    if value is None:
        return ""
    bits = (value.get_most_significant_bits() % (1 << 64)) << 64 | \
        value.get_least_significant_bits() % (1 << 64)
    return kafka_uuid_text(uuid.UUID(int=bits))


def fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def client_config(bootstrap: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    conf.update(extra or {})
    return conf


def connect(bootstrap: str, client_id: str) -> BlockingClient:
    """A protocol client to the first broker of a comma-separated bootstrap list that
    answers (Kafka's tools take a list)."""
    from ottla.client.blocking import BlockingClient

    last: OSError | None = None
    for address in bootstrap.split(","):
        try:
            return BlockingClient(address.strip(), client_id=client_id)
        except OSError as e:
            last = e
    raise ConnectionError(f"no broker of {bootstrap} answered: {last}")
