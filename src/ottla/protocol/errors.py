"""Kafka error codes, and the exception that carries one out of a request handler.

The codes themselves come from ``kio`` (generated from Kafka's ``Errors`` class), so the
numbers and retriable flags are Kafka's own.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["CONTROLLER_ID_NOT_REGISTERED", "ErrorCode", "KafkaError", "MalformedRequest"]

CONTROLLER_ID_NOT_REGISTERED = 137
"""Kafka 4.4's code for UnregisterController of a controller with no registration
(KIP-1220): newer than ``kio``'s table, so carried as a plain int."""


class KafkaError(Exception):
    """A failure that maps to one Kafka error code (and an optional message for the client)."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        super().__init__(message or getattr(code, "name", str(code)))
        self.code = code
        self.message = message


class MalformedRequest(Exception):
    """A frame that cannot be parsed: Kafka closes the connection it came on."""
