"""Unsigned varints (protobuf style), as the flexible versions of the protocol (KIP-482)
and the metadata log's record values use them."""

from __future__ import annotations

from ottla.protocol.errors import MalformedRequest


def read_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int,
                         end: int | None = None) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos`` (before ``end``); return (value, new position).
    At most five bytes, as for Kafka's 32-bit varints."""
    if end is None:
        end = len(buf)
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise MalformedRequest("varint runs past the end of the frame")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint is too long")


def encode_unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
