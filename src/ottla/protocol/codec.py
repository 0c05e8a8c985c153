"""Request and response framing: headers v1/v2 and v0/v1, bodies through ``kio``.

Every Kafka message travels as a 4-byte big-endian size followed by a header and a body.
A request header v1 is (api_key, api_version, correlation_id, client_id); v2, used by
flexible API versions, appends tagged fields. Response headers carry the correlation id
and, when flexible, tagged fields, except ApiVersions, whose response header is always v0
so a client can read it before it knows which versions the broker speaks.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import BufferUnderflow

from ottla.protocol.api import ApiKey, is_flexible, request_schema, response_schema
from ottla.protocol.errors import MalformedRequest
from ottla.protocol.schema_guard import check_body
from ottla.protocol.varint import read_unsigned_varint

_HEADER_FIXED = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_SIZE = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")


@dataclass(slots=True, frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int
    """Where the request body starts in the frame."""

    @property
    def flexible(self) -> bool:
        return is_flexible(self.api_key, self.api_version)


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_unsigned_varint(buf, pos)
    for _ in range(count):
        _tag, pos = read_unsigned_varint(buf, pos)
        size, pos = read_unsigned_varint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedRequest("tagged field runs past the end of the frame")
    return pos


def peek_api(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame, without the rest."""
    if len(frame) < _HEADER_FIXED.size:
        raise MalformedRequest("frame is shorter than a request header")
    return _HEADER_FIXED.unpack_from(frame, 0)


def parse_request_header(frame: bytes | memoryview, flexible: bool) -> RequestHeader:
    """Parse a request header; ``flexible`` selects header v2 (tagged fields)."""
    api_key, api_version, correlation_id = peek_api(frame)
    pos = _HEADER_FIXED.size
    if pos + 2 > len(frame):
        raise MalformedRequest("frame ends inside the client id")
    (length,) = _INT16.unpack_from(frame, pos)
    pos += 2
    client_id = None
    if length >= 0:
        if pos + length > len(frame):
            raise MalformedRequest("frame ends inside the client id")
        try:
            client_id = bytes(frame[pos : pos + length]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedRequest("client id is not UTF-8") from e
        pos += length
    elif length != -1:
        raise MalformedRequest("negative client id length")
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_request(header: RequestHeader, frame: bytes | memoryview) -> Any:
    """Decode a request body with the ``kio`` schema of its version, after a bounds pass
    (``schema_guard``) that the native decoder needs to be safe."""
    try:
        schema = request_schema(header.api_key, header.api_version)
    except KioIndexError as e:
        raise MalformedRequest(str(e)) from e
    frame = check_body(schema, frame, header.body_offset)
    try:
        body, _size = _reader(schema)(frame, header.body_offset)
    except (BufferUnderflow, ValueError, TypeError, IndexError, OverflowError) as e:
        raise MalformedRequest(f"cannot decode {ApiKey(header.api_key).name} v"
                               f"{header.api_version}: {e}") from e
    except Exception as e:  # the native reader raises its own errors on garbage
        raise MalformedRequest(f"cannot decode request: {e!r}") from e
    return body


_readers: dict[type, Any] = {}
_writers: dict[type, Any] = {}


def _reader(schema: type) -> Any:
    reader = _readers.get(schema)
    if reader is None:
        reader = _readers[schema] = entity_reader(schema)
    return reader


def _writer(schema: type) -> Any:
    writer = _writers.get(schema)
    if writer is None:
        writer = _writers[schema] = entity_writer(schema)
    return writer


def encode_body(entity: Any) -> bytes:
    buf = io.BytesIO()
    _writer(type(entity))(buf, entity)
    return buf.getvalue()


class ChunkWriter:
    """A write target for kio that keeps large values (record sets) as the objects they
    are instead of copying them into one buffer; small writes are merged. Objects that
    are not bytes (a segment's ``FileSlice``) always stay parts of their own: kio only
    takes their ``len()``."""

    __slots__ = ("parts", "size", "small")
    LARGE = 16384

    def __init__(self) -> None:
        self.parts: list[bytes | bytearray | memoryview] = []
        self.small = bytearray()
        self.size = 0

    def write(self, data: Any) -> int:
        n = len(data)
        self.size += n
        if n >= self.LARGE or not isinstance(data, bytes | bytearray | memoryview):
            if self.small:
                self.parts.append(bytes(self.small))
                self.small.clear()
            self.parts.append(data)
        else:
            self.small += data
        return n

    def finish(self) -> list[bytes | bytearray | memoryview]:
        if self.small:
            self.parts.append(bytes(self.small))
            self.small = bytearray()
        return self.parts


def encode_body_chunks(entity: Any) -> tuple[list[bytes | bytearray | memoryview], int]:
    """The body as chunks (record sets not copied) and its total size."""
    out = ChunkWriter()
    _writer(type(entity))(out, entity)
    return out.finish(), out.size


def response_header_bytes(api_key: int, api_version: int, correlation_id: int,
                          body_size: int) -> bytes:
    """Size prefix and response header for a body of ``body_size`` bytes."""
    if is_flexible(api_key, api_version) and api_key != ApiKey.API_VERSIONS:
        return _SIZE_AND_CORRELATION.pack(body_size + 5, correlation_id) + b"\x00"
    return _SIZE_AND_CORRELATION.pack(body_size + 4, correlation_id)


def encode_response(header: RequestHeader, entity: Any) -> bytes:
    """A whole response frame (size prefix, header, body) for ``header``'s request."""
    body = encode_body(entity)
    return response_header_bytes(header.api_key, header.api_version, header.correlation_id,
                                 len(body)) + body


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   entity: Any) -> bytes:
    """A whole request frame; the nodes' own client and the tests use it."""
    buf = io.BytesIO()
    buf.write(_HEADER_FIXED.pack(api_key, api_version, correlation_id))
    if client_id is None:
        buf.write(_INT16.pack(-1))
    else:
        raw = client_id.encode()
        buf.write(_INT16.pack(len(raw)) + raw)
    if is_flexible(api_key, api_version):
        buf.write(b"\x00")
    _writer(type(entity))(buf, entity)
    payload = buf.getvalue()
    return _SIZE.pack(len(payload)) + payload


def decode_response(api_key: int, api_version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """(correlation_id, body) of a response frame without its size prefix; a peer's
    response gets the same bounds pass as a request."""
    (correlation_id,) = _SIZE.unpack_from(frame, 0)
    pos = 4
    if is_flexible(api_key, api_version) and api_key != ApiKey.API_VERSIONS:
        pos = skip_tagged_fields(frame, pos)
    schema = response_schema(api_key, api_version)
    frame = check_body(schema, frame, pos)
    body, _ = _reader(schema)(frame, pos)
    return correlation_id, body
