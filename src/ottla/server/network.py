"""The asyncio network layer: Kafka framing over TCP, one protocol object per connection.

Requests on a connection are handled strictly in order, one at a time, as Kafka does
(it mutes a channel until its response is sent): that is what lets clients pipeline
requests and still rely on response order. Handlers that finish synchronously (most of
them, Produce included) are answered inside ``buffer_updated`` without creating a task;
only handlers that wait (long-polling Fetch, admin operations awaiting a commit) become
tasks. A frame that cannot be parsed, an unknown API key, an unsupported version (other
than ApiVersions, which gets its v0 error response) or an oversized frame closes that
connection only.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import os
import socket
import struct
from collections.abc import Callable
from typing import Any

from ottla.broker.context import NO_RESPONSE, CloseConnection, RequestContext
from ottla.broker.handlers import ApiSpec
from ottla.broker.handlers.api_versions import unsupported_version_response
from ottla.protocol.api import ApiKey, is_flexible, response_schema
from ottla.protocol.codec import (
    RequestHeader,
    decode_request,
    encode_body_chunks,
    parse_request_header,
    peek_api,
    response_header_bytes,
)
from ottla.protocol.errors import MalformedRequest
from ottla.protocol.fetch_response import EncodedBody
from ottla.protocol.messages import build
from ottla.storage.segment import FileSlice

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_QUEUED_FRAMES = 64
"""Reading pauses once this many requests wait on a connection (back-pressure)."""


class RequestDispatcher:
    """Decodes requests, runs their handler, encodes responses."""

    def __init__(self, broker: Any, registry: dict[str, dict[int, ApiSpec]]) -> None:
        self.broker = broker
        self.registry = registry

    def encode(self, header: RequestHeader, response: Any
               ) -> tuple[bytes, list[bytes | bytearray | memoryview], int]:
        """The response's frame prefix and header, and its body as chunks: record sets
        (Fetch) go to the socket as the objects the log read, without being copied into
        one buffer. A body the handler encoded itself (Fetch) passes through."""
        if type(response) is EncodedBody:
            chunks, size = response.chunks, response.size
        else:
            if isinstance(response, dict):
                response = build(response_schema(header.api_key, header.api_version), response)
            chunks, size = encode_body_chunks(response)
        return response_header_bytes(header.api_key, header.api_version,
                                     header.correlation_id, size), chunks, size


READ_BUFFER = 256 * 1024
"""Small frames are read into this buffer and copied out; a frame that does not fit is
read straight into a buffer of its own size."""


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.dispatcher = server.dispatcher
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray(READ_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = 0
        """Where unparsed bytes begin in ``_buffer``."""
        self._end = 0
        """Where they end (the next read lands here)."""
        self._frame: bytearray | None = None
        """A large frame being read in place, and how much of it has arrived."""
        self._frame_filled = 0
        self._frames: collections.deque[bytes | memoryview] = collections.deque()
        self._busy = False
        self._write_paused = False
        self._read_paused = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.peer: tuple[str, int] = ("", 0)
        self._sendfile_fd = -1
        """The socket for ``os.sendfile``; -1 where the transport must see every byte."""
        self._outgoing: collections.deque[Any] = collections.deque()
        """What is left of a response with segment slices, in order."""
        self._sending = False
        self._writer_fd = -1
        """A duplicate of the socket, watched for writability while a slice waits."""

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            for option, key in ((socket.SO_SNDBUF, "socket.send.buffer.bytes"),
                                (socket.SO_RCVBUF, "socket.receive.buffer.bytes")):
                size = self.server.socket_options.get(key, -1)
                if size is not None and size > 0:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, option, size)
                    except OSError:
                        pass
        if sock is not None and hasattr(os, "sendfile") and \
                transport.get_extra_info("sslcontext") is None:
            self._sendfile_fd = sock.fileno()
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = (str(peer[0]), int(peer[1]))
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._stop_sending()
        self.server.connections.discard(self)
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._pump()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled:]
        if self._end == len(self._buffer):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == len(self._frame):
                # kio reads only read-only buffers: a read-only view, no copy.
                self._frames.append(memoryview(self._frame).toreadonly())
                self._frame = None
        else:
            self._end += nbytes
            if not self._cut_frames():
                return
        if len(self._frames) >= MAX_QUEUED_FRAMES and not self._read_paused:
            self._read_paused = True
            if self.transport is not None:
                self.transport.pause_reading()
        self._pump()

    def _cut_frames(self) -> bool:
        """Queue every whole frame in the read buffer; start reading a large one in place.
        False if the connection was closed for a bad frame size."""
        buf, view = self._buffer, self._view
        max_size = self.server.max_request_size
        pos, end = self._start, self._end
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > max_size:
                log.warning("Closing connection from %s:%d: frame size %d is outside "
                            "[0, socket.request.max.bytes=%d]", *self.peer, size, max_size)
                self.close()
                return False
            if end - pos - 4 >= size:
                self._frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
                continue
            if size + 4 > len(buf):
                # Too big for the read buffer: the rest of it is read straight into place.
                frame = bytearray(size)
                have = end - pos - 4
                frame[:have] = view[pos + 4 : end]
                self._frame, self._frame_filled = frame, have
                pos = end
            break
        self._start = pos
        if pos == end:
            self._start = self._end = 0
        return True

    def _compact(self) -> None:
        """Move a partial frame to the front of the read buffer."""
        remaining = self._end - self._start
        self._buffer[:remaining] = bytes(self._view[self._start : self._end])  # may overlap
        self._start, self._end = 0, remaining

    # --- request processing -----------------------------------------------------------

    def _pump(self) -> None:
        while self._frames and not self._busy and not self._write_paused and \
                not self._sending and not self._closed:
            frame = self._frames.popleft()
            self._process(frame)
        if self._read_paused and len(self._frames) < MAX_QUEUED_FRAMES // 2 and not self._closed:
            self._read_paused = False
            if self.transport is not None:
                self.transport.resume_reading()

    def _process(self, frame: bytes | memoryview) -> None:
        try:
            api_key, version, correlation_id = peek_api(frame)
            spec = self.dispatcher.registry[self.server.listener_kind].get(api_key)
            if spec is None:
                raise MalformedRequest(f"unknown or unserved api key {api_key}")
            if not spec.min_version <= version <= spec.max_version:
                if api_key == ApiKey.API_VERSIONS:
                    self._send_unsupported_api_versions(correlation_id)
                    return
                raise MalformedRequest(f"unsupported version {version} of "
                                       f"{ApiKey(api_key).name}")
            header = parse_request_header(frame, is_flexible(api_key, version))
            request = decode_request(header, frame)
        except MalformedRequest as e:
            log.info("Closing connection from %s:%d: %s", *self.peer, e)
            self.close()
            return
        ctx = RequestContext(header, self.server.listener_name, self.server.listener_kind,
                             *self.peer)
        try:
            result = spec.handler(self.server.broker, ctx, request)
        except CloseConnection as e:
            log.info("Closing connection from %s:%d: %s", *self.peer, e)
            self.close()
            return
        except Exception:
            log.exception("Handler of %s v%d failed; closing the connection",
                          ApiKey(api_key).name, version)
            self.close()
            return
        if inspect.isawaitable(result):
            self._busy = True
            self._task = asyncio.ensure_future(self._finish(header, result))
        else:
            self._respond(header, result)

    async def _finish(self, header: RequestHeader, pending: Any) -> None:
        try:
            result = await pending
        except asyncio.CancelledError:
            return
        except CloseConnection as e:
            log.info("Closing connection from %s:%d: %s", *self.peer, e)
            self.close()
            return
        except Exception:
            log.exception("Handler of %s v%d failed; closing the connection",
                          ApiKey(header.api_key).name, header.api_version)
            self.close()
            return
        self._respond(header, result)
        self._busy = False
        self._task = None
        self._pump()

    def _respond(self, header: RequestHeader, response: Any) -> None:
        if response is NO_RESPONSE or self._closed or self.transport is None:
            return
        try:
            prefix, chunks, size = self.dispatcher.encode(header, response)
        except Exception:
            log.exception("Cannot encode the %s v%d response; closing the connection",
                          ApiKey(header.api_key).name, header.api_version)
            self.close()
            return
        if not any(type(c) is FileSlice for c in chunks):
            if len(chunks) == 1 and size < 65536:
                self.transport.write(prefix + chunks[0])  # one send for a small response
            else:
                self.transport.writelines([prefix, *chunks])
            return
        self._send_with_slices([prefix, *chunks])

    def _send_with_slices(self, parts: list[Any]) -> None:
        """Write a response holding segment slices. Each slice goes out with
        ``sendfile``, straight from the page cache, once everything before it has reached
        the socket; when the socket is full, the rest waits until it drains (a writer on
        a duplicate of the socket's descriptor, leaving the transport alone) and the
        connection answers nothing else until the response is out. Where ``sendfile``
        cannot be used (TLS) the slices are read and queued on the transport."""
        assert self.transport is not None
        if self._sendfile_fd < 0:
            self._send_read(parts)
            return
        self._outgoing.extend(parts)
        self._sending = True
        self._continue_sending()

    def _continue_sending(self) -> None:
        transport = self.transport
        while self._outgoing:
            if self._closed or transport is None or transport.is_closing():
                self._stop_sending()
                return
            part = self._outgoing[0]
            if type(part) is not FileSlice:
                transport.write(part)
                self._outgoing.popleft()
                continue
            if not part.valid:
                # Its segment was closed after the read (cleaner swap): the size is
                # already promised, so the client must retry on a new connection.
                log.info("Closing connection from %s:%d: a fetched segment went away",
                         *self.peer)
                self.close()
                return
            if transport.get_write_buffer_size():
                self._wait_writable()  # the bytes before it are still leaving
                return
            try:
                sent = self._sendfile(part)
            except OSError:
                self.close()  # a broken connection
                return
            if sent == part.length:
                self._outgoing.popleft()
                continue
            if sent == 0 and part.position + part.length > os.fstat(part.fd).st_size:
                log.info("Closing connection from %s:%d: a fetched segment shrank",
                         *self.peer)
                self.close()
                return
            self._outgoing[0] = FileSlice(part.fd, part.position + sent, part.length - sent,
                                          part.segment)
            self._wait_writable()
            return
        self._stop_sending()

    def _on_writable(self) -> None:
        self._continue_sending()
        if not self._sending:
            self._pump()  # the response is out: the next request may run

    def _wait_writable(self) -> None:
        if self._writer_fd < 0:
            self._writer_fd = os.dup(self._sendfile_fd)
            asyncio.get_running_loop().add_writer(self._writer_fd, self._on_writable)

    def _stop_sending(self) -> None:
        self._sending = False
        if self._writer_fd >= 0:
            asyncio.get_running_loop().remove_writer(self._writer_fd)
            os.close(self._writer_fd)
            self._writer_fd = -1
        if self._closed:
            self._outgoing.clear()

    def _send_read(self, parts: list[Any]) -> None:
        """The slices read into memory and queued, in order (no ``sendfile``)."""
        assert self.transport is not None
        pending: list[Any] = []
        for part in parts:
            if type(part) is not FileSlice:
                pending.append(part)
                continue
            rest = os.pread(part.fd, part.length, part.position) if part.valid else b""
            if len(rest) != part.length:  # closed or truncated under us
                log.info("Closing connection from %s:%d: a fetched segment went away",
                         *self.peer)
                self.close()
                return
            pending.append(rest)
        self.transport.writelines(pending)

    def _sendfile(self, part: FileSlice) -> int:
        """Send what the socket takes now, straight from the page cache (raises OSError
        for a broken connection)."""
        sent = 0
        while sent < part.length:
            try:
                n = os.sendfile(self._sendfile_fd, part.fd, part.position + sent,
                                part.length - sent)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                break
            sent += n
        return sent

    def _send_unsupported_api_versions(self, correlation_id: int) -> None:
        header = RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None, 0)
        self._respond(header, unsupported_version_response(self.server.listener_kind))

    def close(self) -> None:
        self._closed = True
        self._frames.clear()
        if self.transport is not None:
            self.transport.close()


class KafkaServer:
    """One listener: accepts connections and serves the Kafka protocol on them."""

    def __init__(self, broker: Any, dispatcher: RequestDispatcher, listener_name: str,
                 listener_kind: str, host: str, port: int, max_request_size: int,
                 socket_options: dict[str, int] | None = None) -> None:
        self.broker = broker
        self.dispatcher = dispatcher
        self.listener_name = listener_name
        self.listener_kind = listener_kind
        self.host = host
        self.port = port
        self.max_request_size = max_request_size
        self.socket_options = socket_options or {}
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.base_events.Server | None = None

    async def start(self, serve: bool = True) -> None:
        """Bind the port; accept connections now, or (``serve=False``) only from
        ``start_serving`` (until then they wait in the backlog)."""
        loop = asyncio.get_running_loop()
        factory: Callable[[], KafkaConnection] = lambda: KafkaConnection(self)  # noqa: E731
        self._server = await loop.create_server(factory, self.host or None, self.port,
                                                reuse_address=True, backlog=1024,
                                                start_serving=serve)
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]

    async def start_serving(self) -> None:
        assert self._server is not None
        await self._server.start_serving()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
