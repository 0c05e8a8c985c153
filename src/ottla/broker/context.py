"""What a handler knows about the request beyond its body."""

from __future__ import annotations

from dataclasses import dataclass

from ottla.protocol.codec import RequestHeader


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    listener_name: str
    listener_kind: str
    """"broker" or "controller"."""
    client_host: str
    client_port: int

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the client's connection instead of
    answering (e.g. a failed acks=0 produce, so the client refreshes its metadata)."""


NO_RESPONSE = object()
"""Returned by a handler for requests that get no response (acks=0 produce)."""
