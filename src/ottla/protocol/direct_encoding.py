"""Pieces for responses encoded straight from a handler's dict, without kio objects.

The hot responses (Fetch, Produce) are written field by field into byte arrays; kio's
schema stays the reference and each encoder has a test comparing it with kio for every
version it serves. These are the field encodings they share.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body already encoded: the dispatcher sends its chunks as they are."""

    chunks: list[Any]
    """bytes / bytearray, and record sets (``FileSlice``) that stay parts of their own."""
    size: int
    errors: dict[int, int] = field(default_factory=dict)
    """The error codes the response carries (ints or ErrorCode members, as the handler
    gave them), each with how often, counted as Kafka's ``errorCounts`` counts them (for
    ErrorsPerSec): the encoder saw every one."""
    throttle_ms: int = 0
    """The response's throttle_time_ms (for the ThrottleTimeMs histogram)."""


I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
NULL_I32 = I32.pack(-1)
_VARINTS = [bytes((n,)) for n in range(128)]


def uvarint(n: int) -> bytes:
    if n < 128:
        return _VARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def array_length(items: Sequence[Any] | None, flexible: bool) -> bytes:
    """An array's (or a nullable array's) length prefix."""
    if items is None:
        return b"\x00" if flexible else NULL_I32
    return uvarint(len(items) + 1) if flexible else I32.pack(len(items))


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string."""
    if value is None:
        return b"\x00" if flexible else I16.pack(-1)
    raw = value.encode()
    return (uvarint(len(raw) + 1) if flexible else I16.pack(len(raw))) + raw


def node_endpoints(endpoints: Sequence[Mapping[str, Any]] | None) -> bytes:
    """A top level's tagged fields when its only one is node_endpoints (tag 0, KIP-951):
    written when not empty."""
    if not endpoints:
        return b"\x00"
    value = bytearray(array_length(endpoints, True))
    for node in endpoints:
        value += I32.pack(node["node_id"])
        value += string(node["host"], True)
        value += I32.pack(node["port"])
        value += string(node.get("rack"), True)
        value.append(0)
    return b"\x01\x00" + uvarint(len(value)) + value
