"""Kafka error codes, and the exception that carries one out of a request handler.

The codes themselves come from ``kio`` (generated from Kafka's ``Errors`` class), so the
numbers and retriable flags are Kafka's own.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "MalformedRequest"]


class KafkaError(Exception):
    """A failure that maps to one Kafka error code (and an optional message for the client)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class MalformedRequest(Exception):
    """A frame that cannot be parsed: Kafka closes the connection it came on."""
