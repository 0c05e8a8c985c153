"""The asyncio network layer: Kafka framing over TCP, one protocol object per connection.

Requests on a connection are handled strictly in order, one at a time, as Kafka does
(it mutes a channel until its response is sent): that is what lets clients pipeline
requests and still rely on response order. Handlers that finish synchronously (most of
them, Produce included) are answered inside ``buffer_updated`` without creating a task;
only handlers that wait (long-polling Fetch, admin operations awaiting a commit) become
tasks. A frame that cannot be parsed, an unknown API key, an unsupported version (other
than ApiVersions, which gets its v0 error response) or an oversized frame closes that
connection only.

A handler that found its client over a quota sets the request's ``throttle_ms``; the
response (which carries the throttle time) goes out at once, and then the connection is
muted for that long: no request of it is read or handled (KIP-219, as Kafka's channel
muting). A client that honours the throttle time in the response waits anyway.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import Any

from ottla.broker.deadline_timer import monotonic_ms
from ottla.broker.quota.client_quota_manager import ClientQuotaManager
from ottla.broker.quota.connection_rate_quota import ConnectionRateQuotas
from ottla.broker.quota.delay_queue import DelayQueue
from ottla.common.rate_limited_log import RateLimitedLog
from ottla.protocol.api import ApiKey
from ottla.protocol.codec import RequestHeader
from ottla.protocol.errors import ErrorCode, MalformedRequest
from ottla.protocol.requests import (
    ANONYMOUS,
    NO_RESPONSE,
    CloseConnection,
    Principal,
    RequestContext,
)
from ottla.security.sasl import SaslAnswer, SaslState
from ottla.security.ssl_principal import NoMatchingRule
from ottla.server.api_versions import SOFTWARE_PATTERN, unsupported_version_response
from ottla.server.listener_security import PLAINTEXT, ListenerSecurity
from ottla.server.memory_pool import MemoryPool
from ottla.server.metrics.request_metrics import RequestChannelMetrics
from ottla.server.request_dispatcher import (
    RequestDispatcher,
    UnsupportedApiVersions,
    client_id_of,
)
from ottla.server.request_quota import TimedAwait, exempt_from_request_quota, with_throttle_time
from ottla.storage.segment import FileSlice

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

_SIZE = struct.Struct(">i")
MAX_QUEUED_FRAMES = 64
"""Reading pauses once this many requests wait on a connection (back-pressure)."""
MAP_MIN_BYTES = 64 * 1024
"""Segment slices this large are sent from a mapping, smaller ones read (``_respond``)."""


READ_BUFFER = 256 * 1024
"""Small frames are read into this buffer and copied out; a frame that does not fit is
read straight into a buffer of its own, which grows as its bytes arrive."""
FRAME_START = 1024 * 1024
"""A large frame's buffer starts at this size (or what has arrived) and doubles as bytes
arrive, up to the frame's size: a size prefix alone allocates nothing."""


class ConnectionQuotas:
    """What all connections of a node share (Kafka's ConnectionQuotas): the request memory
    pool, the connection counts, total and per client address, and the connection
    creation rates (``ConnectionRateQuotas``)."""

    def __init__(self, pool: MemoryPool | None = None, max_connections: int = 2**31 - 1,
                 max_connections_per_ip: int = 2**31 - 1,
                 per_ip_overrides: dict[str, int] | None = None,
                 idle_ms: int = 600_000, rates: ConnectionRateQuotas | None = None,
                 rate_exempt: frozenset[str] = frozenset(),
                 clock: Callable[[], float] = time.time,
                 request_quota: ClientQuotaManager | None = None,
                 delay_queues: Mapping[str, DelayQueue] | None = None) -> None:
        self.pool = pool if pool is not None else MemoryPool(None)
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = per_ip_overrides or {}
        self.idle_ms = idle_ms
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.rates = rates
        self.rate_exempt = rate_exempt
        """Listeners the node-wide creation rate does not count (the inter-broker one,
        and the controller's, a socket server of their own in Kafka)."""
        self.clock = clock
        self.request_quota = request_quota
        self.delay_queues = delay_queues or {}
        """Each quota type's throttled connections (its ``queue-size``), by Kafka's name."""
        """``request_percentage`` (None: not enforced on these listeners)."""

    @property
    def requests_charged(self) -> bool:
        """Whether any ``request_percentage`` quota is set: off, handler time is not
        even measured for it."""
        return self.request_quota is not None and self.request_quota.enabled

    def charge_request(self, ctx: RequestContext, request: Any, result: Any, seconds: float
                       ) -> Any:
        """Kafka's ClientRequestQuotaManager: charge the client the time its request's
        handler ran, as a percentage of one thread (``seconds * 100`` per second), and
        throttle it when over its ``request_percentage`` (at most one window): the
        answer carries the longer of this and any other throttle time, and the
        connection is muted for it (by the broker, for a forwarded request). Exempt, as
        in Kafka: the inter-broker and quorum APIs (``clusterAction``), a follower's
        Fetch, and a Produce with acks=0 (no answer to carry it)."""
        if ctx.charge_request is None or result is NO_RESPONSE:
            return result  # charged by its handler already, or nothing to carry a throttle
        throttle_ms = self.request_throttle(ctx, request, seconds)
        return with_throttle_time(result, throttle_ms) if throttle_ms > 0 else result

    def request_throttle(self, ctx: RequestContext, request: Any, seconds: float) -> int:
        """Charge ``seconds`` of handler time (once per request); the throttle time."""
        ctx.charge_request = None
        quota = self.request_quota
        if quota is None:
            return 0
        if exempt_from_request_quota(ctx, request):
            quota.record_exempt(seconds * 100, int(self.clock() * 1000))
            return 0
        throttle_ms = quota.record(ctx.principal.name, ctx.client_id, seconds * 100,
                                   int(self.clock() * 1000))
        if throttle_ms > 0 and not ctx.forwarded and throttle_ms >= ctx.throttle_ms:
            ctx.throttle_ms, ctx.throttle_quota = throttle_ms, "Request"
        return throttle_ms

    def count_throttle(self, quota_type: str, throttle_ms: int) -> None:
        """A response throttles its connection for ``throttle_ms`` under ``quota_type``:
        in that type's delay queue until then."""
        queue = self.delay_queues.get(quota_type)
        if queue is not None:
            queue.add(throttle_ms, int(self.clock() * 1000))

    def accept_throttle(self, listener: str) -> int:
        """How long ``listener`` holds a connection just accepted before taking it (and
        accepts nothing more meanwhile): max.connection.creation.rate."""
        if self.rates is None:
            return 0
        return self.rates.record_accept(listener, listener in self.rate_exempt,
                                        int(self.clock() * 1000))

    def ip_throttle(self, listener: str, host: str) -> int:
        """0 to take a connection from ``host``, else after how long it is closed
        untaken: its address's ``connection_creation_rate``."""
        if self.rates is None:
            return 0
        return self.rates.record_ip(listener, listener in self.rate_exempt, host,
                                    int(self.clock() * 1000))

    def admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; why not, if it is over a limit."""
        limit = self.per_ip_overrides.get(host, self.max_connections_per_ip)
        if self.per_ip[host] >= limit:
            return f"max.connections.per.ip ({limit}) reached for {host}"
        if self.total >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        self.total += 1
        self.per_ip[host] += 1
        return None

    def leave(self, host: str) -> None:
        self.total -= 1
        self.per_ip[host] -= 1
        if self.per_ip[host] <= 0:
            del self.per_ip[host]


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.dispatcher = server.dispatcher
        self.pool = server.quotas.pool
        self.request_metrics = server.request_metrics
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray(READ_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = 0
        """Where unparsed bytes begin in ``_buffer``."""
        self._end = 0
        """Where they end (the next read lands here)."""
        self._frame: bytearray | None = None
        """A large frame being read in place, how much of it has arrived, and its size."""
        self._frame_filled = 0
        self._frame_size = 0
        self._frames: collections.deque[bytes | memoryview] = collections.deque()
        self._queued_bytes = 0
        """Bytes of the small frames queued (each at most a read buffer): at a buffer's
        worth reading pauses. Larger frames take their memory from the pool instead."""
        self._head_reserved = False
        """Whether the pool has granted the frame whose size prefix is at ``_start``."""
        self._waiting = False
        """Whether this connection waits for the pool (reading is paused meanwhile)."""
        self._held = 0
        """Bytes this connection holds in the pool: frames read or being read, and the
        request being handled."""
        self._in_flight = 0
        """The size of the request whose handler is running (a task)."""
        self._busy = False
        self._throttled = False
        """Muted for a client quota (KIP-219): nothing is read or handled until it ends."""
        self._throttled_until = 0.0
        self._write_paused = False
        self._read_paused = False
        self._closed = False
        self._taken = False
        """Whether its listener took it (creation rates allowing): until then nothing it
        sends is handled."""
        self._admitted = False
        self._task: asyncio.Task[None] | None = None
        self._pending: Awaitable[Any] | None = None
        """The awaitable ``_task`` answers (a handler's coroutine)."""
        self.peer: tuple[str, int] = ("", 0)
        self.last_active = time.monotonic()
        self._partial_since: float | None = None
        """When the bytes of a frame not yet whole began to arrive."""
        self._map_slices = False
        """Whether segment slices go out as mappings of the page cache (see ``_respond``)."""
        security = server.security
        self.authenticator = security.new_authenticator() \
            if security.new_authenticator is not None else None
        """SASL listeners: who the client is, once it has said so (``_authenticate``)."""
        self.principal: Principal = ANONYMOUS
        self.client_software = ("unknown", "unknown")
        """What the client's ApiVersions v3+ said it is (Kafka's ClientInformation)."""

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = (str(peer[0]), int(peer[1]))
        if not self.server.holds(self):
            self.taken()

    def taken(self) -> None:
        """The listener takes the connection (at once, or once its creation rate let it):
        the address's creation rate, then the connection counts."""
        transport = self.transport
        assert transport is not None
        throttle_ms = self.server.quotas.ip_throttle(self.server.listener_name, self.peer[0])
        if throttle_ms > 0:
            _limited.log(logging.INFO, ("ip rate", self.peer[0]),
                         "Closing connection from %s:%d in %d ms, unread: over the "
                         "connection_creation_rate of its address", *self.peer, throttle_ms)
            transport.pause_reading()
            asyncio.get_running_loop().call_later(throttle_ms / 1000, self.close)
            return
        self._taken = True
        refused = self.server.quotas.admit(self.peer[0])
        if refused is not None:
            _limited.log(logging.INFO, ("refused", refused),  # INFO, as Kafka's
                         "Closing connection from %s:%d: %s", *self.peer, refused)
            self.close()
            return
        self._admitted = True
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and self.authenticator is None:
            try:
                self.principal = self.server.security.tls_principal(ssl_object)
            except NoMatchingRule as e:
                _limited.log(logging.INFO, ("principal", self.peer[0]),
                             "Closing connection from %s:%d: %s", *self.peer, e)
                self.close()
                return
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
        self._map_slices = sock is not None and \
            transport.get_extra_info("sslcontext") is None and \
            type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        self.server.connections.add(self)
        self.server.connections_created += 1
        if self._end > self._start:
            self.buffer_updated(0)  # what arrived while it waited to be taken

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()
        if self in self.server.connections:
            self.server.connections.remove(self)
            self.server.connections_closed += 1
        if self._admitted:
            self._admitted = False
            self.server.quotas.leave(self.peer[0])
            self.server.dispatcher.disconnected(self.server.listener_name, *self.peer)
        if self._task is not None and not self._task.done():
            self._task.cancel()
            pending = self._pending
            if inspect.iscoroutine(pending) and \
                    inspect.getcoroutinestate(pending) == inspect.CORO_CREATED:
                # Its task is cancelled before it ran: the request goes with the
                # connection, and its handler is closed rather than left unawaited.
                pending.close()
        self._pending = None

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._pump()

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._frame_filled == len(frame):
                grown = bytearray(min(self._frame_size, 2 * len(frame)))
                grown[:self._frame_filled] = frame
                self._frame = frame = grown
            return memoryview(frame)[self._frame_filled:]
        if self._end == len(self._buffer):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if not self._taken:
            # Not yet taken by its listener (a creation rate): kept, unread, until it is.
            # (uvloop may read once even when connection_made paused reading.)
            self._end += nbytes
            if self.transport is not None:
                self.transport.pause_reading()
            return
        self.last_active = now = time.monotonic()
        queued = len(self._frames)
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == self._frame_size:
                # kio reads only read-only buffers: a read-only view, no copy.
                self._frames.append(memoryview(self._frame).toreadonly())
                self._frame = None
        else:
            self._end += nbytes
            if not self._cut_frames():
                return
        if self._frame is None and self._start == self._end:
            self._partial_since = None
        elif self._partial_since is None or len(self._frames) > queued:
            self._partial_since = now  # a frame began, or one completed and the next began
        self._pump()

    def _cut_frames(self) -> bool:
        """Queue the whole frames in the read buffer (up to a buffer's worth), or start
        reading a large frame into a buffer of its own once the pool has granted its
        size. False if the connection was closed for a bad frame size."""
        buf, view = self._buffer, self._view
        max_size = self.server.max_request_size
        pos, end = self._start, self._end
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > max_size:
                _limited.log(logging.WARNING, ("frame-size", self.peer[0]),
                             "Closing connection from %s:%d: frame size %d is outside "
                             "[0, socket.request.max.bytes=%d]", *self.peer, size, max_size)
                self.close()
                return False
            if size + 4 <= len(buf):
                if end - pos - 4 < size or self._queued_bytes >= len(buf):
                    break  # the rest is still to come, or enough waits to be handled
                self._frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                self._queued_bytes += size
                pos += 4 + size
                continue
            if not self._head_reserved:
                if not self.pool.reserve(size, self._on_granted):
                    self._waiting = True
                    break
                self._held += size
                self._head_reserved = True
            # Too big for the read buffer: it is read into a buffer of its own, grown as
            # its bytes arrive (``get_buffer``).
            have = end - pos - 4
            frame = bytearray(min(size, max(have, FRAME_START)))
            frame[:have] = view[pos + 4 : end]
            self._frame, self._frame_filled, self._frame_size = frame, have, size
            self._head_reserved = False
            pos = end
            break
        self._start = pos
        if pos == end:
            self._start = self._end = 0
        self._flow()
        return True

    def _on_granted(self) -> None:
        """The pool reserved the waiting frame's size (from within a release: act on the
        loop's next turn, not inside whoever released)."""
        asyncio.get_running_loop().call_soon(self._granted)

    def _granted(self) -> None:
        size = _SIZE.unpack_from(self._buffer, self._start)[0]
        if self._closed:
            self.pool.release(size)
            return
        self._held += size
        self._head_reserved = True
        self._waiting = False
        if self._cut_frames():
            self._pump()

    def _release(self, size: int) -> None:
        if self._closed or size == 0:
            return  # close() gave back everything held
        self._held -= size
        self.pool.release(size)

    def _flow(self) -> None:
        """Pause reading while the pool is spent for us or too many requests wait;
        resume when neither holds."""
        if self.transport is None or self._closed:
            return
        if self._waiting or self._throttled or len(self._frames) >= MAX_QUEUED_FRAMES or \
                self._queued_bytes >= READ_BUFFER:
            if not self._read_paused:
                self._read_paused = True
                self.transport.pause_reading()
        elif self._read_paused and len(self._frames) < MAX_QUEUED_FRAMES // 2 and \
                self._queued_bytes < READ_BUFFER // 2:
            self._read_paused = False
            self.transport.resume_reading()

    def _compact(self) -> None:
        """Move a partial frame to the front of the read buffer."""
        remaining = self._end - self._start
        self._buffer[:remaining] = bytes(self._view[self._start : self._end])  # may overlap
        self._start, self._end = 0, remaining

    # --- request processing -----------------------------------------------------------

    def _pump(self) -> None:
        while not self._closed:
            while self._frames and not self._busy and not self._write_paused and \
                    not self._throttled and not self._closed:
                frame = self._frames.popleft()
                charge = 0
                if len(frame) + 4 <= READ_BUFFER:
                    self._queued_bytes -= len(frame)
                else:
                    charge = len(frame)  # a pooled frame: its bytes go back once handled
                self._process(frame)
                if self._busy:
                    self._in_flight = charge
                else:
                    self._release(charge)
            # Frames left in the read buffer while the queue was full.
            if self._frames or self._start == self._end or self._frame is not None or \
                    self._waiting or not self._cut_frames() or not self._frames:
                break
        self._flow()

    def _process(self, frame: bytes | memoryview) -> None:
        dispatcher = self.dispatcher
        auth = self.authenticator
        if auth is not None and auth.state == SaslState.RAW_AUTHENTICATE:
            self._authenticate_raw(bytes(frame))
            return
        metrics = self.request_metrics
        charged = self.server.quotas.requests_charged
        start = perf_counter() if metrics is not None or charged else 0.0
        try:
            header, spec, request = dispatcher.decode(frame)
        except UnsupportedApiVersions as e:
            # Kafka answers this without a log line of its own (its request log, at DEBUG,
            # has it): a newer client negotiating down is not a fault.
            _limited.log(logging.DEBUG, ("api-versions", self.peer[0]),
                         "Answering UNSUPPORTED_VERSION to ApiVersions from %s:%d (client id "
                         "%r)", *self.peer, client_id_of(frame))
            self._send_unsupported_api_versions(e.correlation_id)
            return
        except MalformedRequest as e:
            # Kafka's SocketServer logs these at ERROR ("Closing socket for ... because of
            # error"); once a minute per address here, so a bad client cannot flood the log.
            # %r: the client id is the client's bytes, kept from forging log lines.
            _limited.log(logging.ERROR, ("malformed", self.peer[0], type(e)),
                         "Closing connection from %s:%d (client id %r): %s", *self.peer,
                         client_id_of(frame), e)
            self.close()
            return
        if auth is not None and self._authenticate(header, request):
            return
        if header.api_key == ApiKey.API_VERSIONS and header.api_version >= 3:
            software = (request.client_software_name, request.client_software_version)
            if all(software) and all(SOFTWARE_PATTERN.match(part) for part in software):
                self.client_software = software
        ctx = dispatcher.context(header, self.server.listener_name, *self.peer,
                                 self.principal, len(frame), self.client_software,
                                 security_protocol=self.server.security.protocol)
        timed: TimedAwait | None = None
        if charged:
            quotas = self.server.quotas
            ctx.charge_request = lambda: quotas.request_throttle(
                ctx, request, timed.elapsed() if timed is not None else perf_counter() - start)
        try:
            result = dispatcher.call(spec, ctx, request)
        except CloseConnection as e:
            self._closing(header, e)
            if metrics is not None:
                now = perf_counter()
                metrics.record(header.api_key, header.api_version, request, start, now, now,
                               now, closed=e, request_bytes=len(frame) - header.body_offset)
            return
        except Exception as e:
            result = dispatcher.failure(header, request, e)
        if inspect.isawaitable(result):
            self._busy = True
            self._pending = result
            awaited = result
            if charged:
                awaited = timed = TimedAwait(result, perf_counter() - start)
            self._task = asyncio.ensure_future(self._finish(
                ctx, request, awaited, start, perf_counter() if metrics is not None else 0.0))
            return
        if charged:
            result = self.server.quotas.charge_request(ctx, request, result,
                                                       perf_counter() - start)
        if metrics is None:
            self._respond(header, result)
        else:
            local_end = perf_counter()
            self._respond(header, result)
            metrics.record(header.api_key, header.api_version, request, start, local_end,
                           local_end, perf_counter(), response=result,
                           request_bytes=len(frame) - header.body_offset)
        if ctx.throttle_ms > 0:
            self.server.quotas.count_throttle(ctx.throttle_quota, ctx.throttle_ms)
            self._throttle(ctx.throttle_ms)

    def _authenticate(self, header: RequestHeader, request: Any) -> bool:
        """SASL before (and, with connections.max.reauth.ms, again during) a session:
        whether the authenticator answered the request. ApiVersions goes to the table."""
        auth = self.authenticator
        assert auth is not None
        api_key = header.api_key
        now_ms = int(self.dispatcher.clock() * 1000)
        session_ms = monotonic_ms()
        if not auth.intercepts(api_key):
            if auth.expired(session_ms) and api_key != ApiKey.API_VERSIONS:
                _limited.log(logging.INFO, ("reauth", self.peer[0]),
                             "Closing connection from %s:%d (%s): its SASL session expired "
                             "(connections.max.reauth.ms)", *self.peer, self.principal)
                self.close()
                return True
            return False
        if api_key == ApiKey.API_VERSIONS:
            return False
        answer: SaslAnswer | None
        try:
            if api_key == ApiKey.SASL_HANDSHAKE:
                answer = auth.handshake(request.mechanism, header.api_version)
            elif api_key == ApiKey.SASL_AUTHENTICATE:
                answer = auth.authenticate(bytes(request.auth_bytes), now_ms, session_ms)
            else:
                answer = None
        except Exception:
            # A mechanism's own failure is a refusal, never a node down.
            _limited.log(logging.ERROR, ("sasl-error", self.peer[0]),
                         "Closing connection from %s:%d: SASL %s failed", *self.peer,
                         auth.mechanism or "handshake", exc_info=True)
            self.close()
            return True
        if answer is None:
            # Kafka's IllegalSaslStateException: closed, no response.
            _limited.log(logging.INFO, ("sasl-state", self.peer[0]),
                         "Closing connection from %s:%d: unexpected Kafka request of type "
                         "%s during SASL handshake", *self.peer, ApiKey(api_key).name)
            self.close()
            return True
        self._respond(header, answer.body)
        if answer.close:
            _limited.log(logging.INFO, ("sasl-failed", self.peer[0]),
                         "Failed authentication with %s:%d (%s)", *self.peer,
                         answer.body.get("error_message") or ErrorCode(
                             answer.body["error_code"]).name)  # type: ignore[arg-type]
            self.close()
        elif auth.authenticated and auth.principal is not None:
            self.principal = auth.principal
        return True

    def _authenticate_raw(self, token: bytes) -> None:
        """A bare SASL token after a v0 SaslHandshake: answered bare, size-prefixed."""
        auth = self.authenticator
        assert auth is not None and self.transport is not None
        try:
            reply = auth.authenticate_raw(token, int(self.dispatcher.clock() * 1000),
                                          monotonic_ms())
        except Exception:
            _limited.log(logging.ERROR, ("sasl-error", self.peer[0]),
                         "Closing connection from %s:%d: SASL %s failed", *self.peer,
                         auth.mechanism, exc_info=True)
            reply = None
        if reply is None:
            _limited.log(logging.INFO, ("sasl-failed", self.peer[0]),
                         "Failed authentication with %s:%d (invalid credentials with SASL "
                         "mechanism %s)", *self.peer, auth.mechanism)
            self.close()
            return
        self.transport.write(_SIZE.pack(len(reply)) + reply)
        if auth.authenticated and auth.principal is not None:
            self.principal = auth.principal

    async def _finish(self, ctx: RequestContext, request: Any, pending: Any,
                      start: float = 0.0, local_end: float = 0.0) -> None:
        """Answer a handler that waited (``start`` and ``local_end``: ``perf_counter``
        when the request was taken and when its handler returned, for its metrics)."""
        header = ctx.header
        try:
            result = await pending
        except asyncio.CancelledError:
            return
        except CloseConnection as e:
            self._closing(header, e)
            metrics = self.request_metrics
            if metrics is not None:
                now = perf_counter()
                metrics.record(header.api_key, header.api_version, request, start, local_end,
                               now, now, closed=e,
                               request_bytes=ctx.request_size - header.body_offset)
            return
        except Exception as e:
            result = self.dispatcher.failure(header, request, e)
        if isinstance(pending, TimedAwait):
            result = self.server.quotas.charge_request(ctx, request, result, pending.elapsed())
        metrics = self.request_metrics
        if metrics is None:
            self._respond(header, result)
        else:
            complete = perf_counter()
            self._respond(header, result)
            metrics.record(header.api_key, header.api_version, request, start, local_end,
                           complete, perf_counter(), response=result,
                           request_bytes=ctx.request_size - header.body_offset)
        self._busy = False
        self._task = None
        self._pending = None
        self._release(self._in_flight)
        self._in_flight = 0
        if ctx.throttle_ms > 0:
            self.server.quotas.count_throttle(ctx.throttle_quota, ctx.throttle_ms)
            self._throttle(ctx.throttle_ms)
        self._pump()

    def _throttle(self, throttle_ms: int) -> None:
        """Mute the connection for ``throttle_ms`` after a response (KIP-219): stop
        reading it and handling what it sent; a longer throttle while muted extends it."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if self._throttled and until <= self._throttled_until:
            return
        self._throttled = True
        self._throttled_until = until
        self._flow()
        loop.call_at(until, self._unthrottle, until)

    def _unthrottle(self, until: float) -> None:
        if not self._throttled or until != self._throttled_until:
            return  # a later throttle took its place
        self._throttled = False
        self._flow()
        self._pump()

    def _closing(self, header: RequestHeader, reason: Exception) -> None:
        """A handler closes the connection (a failed acks=0 produce): INFO, as Kafka's
        KafkaApis logs it, once a minute per address and API."""
        _limited.log(logging.INFO, ("close", self.peer[0], header.api_key),
                     "Closing connection from %s:%d (client id %r) after %s v%d: %s",
                     *self.peer, header.client_id, ApiKey(header.api_key).name,
                     header.api_version, reason)
        self.close()

    def _respond(self, header: RequestHeader, response: Any) -> None:
        if response is NO_RESPONSE or self._closed or self.transport is None:
            return
        if response is None:
            self.close()
            return
        self.last_active = time.monotonic()
        try:
            prefix, chunks, size = self.dispatcher.encode(header, response)
        except Exception:
            _limited.log(logging.ERROR, ("encode", header.api_key),
                         "Cannot encode the %s v%d response; closing the connection",
                         ApiKey(header.api_key).name, header.api_version, exc_info=True)
            self.close()
            return
        if not any(type(c) is FileSlice for c in chunks):
            if len(chunks) == 1 and size < 65536:
                self.transport.write(prefix + chunks[0])  # one send for a small response
            else:
                self.transport.writelines([prefix, *chunks])
            return
        parts = self._slices_in_memory(chunks)
        if parts is None:
            # A segment was closed or truncated after the read: the size is already
            # promised, so the client must retry on a new connection.
            log.info("Closing connection from %s:%d: a fetched segment went away", *self.peer)
            self.close()
            return
        self.transport.writelines([prefix, *parts])

    def _slices_in_memory(self, chunks: list[Any]) -> list[Any] | None:
        """The response's segment slices as buffers the transport can write.

        A large slice becomes a read-only mapping of the page cache: uvloop hands buffers
        to the kernel (``writev``) without reading or copying them, so the bytes go from
        the page cache to the socket in one copy, by the kernel, with no Python per byte
        and nothing held but the mapping until the socket drains. On this machine's
        loopback a server sending 2 GiB of batches this way reached 2.8-3 GB/s to
        librdkafka where ``sendfile`` reached 1.7-1.9 (its page-by-page splice costs
        both ends more than one copy does). Small slices are read
        (``pread``: one copy, no mapping to set up and tear down), and so is everything
        on TLS connections, whose encryption reads the bytes in user space, and on
        asyncio's own loop, whose transport copies what the socket does not take."""
        parts: list[Any] = []
        for chunk in chunks:
            if type(chunk) is not FileSlice:
                parts.append(chunk)
                continue
            if not chunk.valid:
                return None
            if self._map_slices and chunk.length >= MAP_MIN_BYTES:
                view = chunk.map()
                if view is None:
                    return None
                parts.append(view)
                continue
            data = chunk.read()
            if len(data) != chunk.length:
                return None
            parts.append(data)
        return parts

    def _send_unsupported_api_versions(self, correlation_id: int) -> None:
        header = RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None, 0)
        self._respond(header, unsupported_version_response(self.dispatcher.table))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._frames.clear()
            self._frame = None
            if self._waiting:
                self.pool.cancel(self._on_granted)
            held, self._held = self._held, 0
            if held:
                self.pool.release(held)
        if self.transport is not None:
            self.transport.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def idle_for(self, now: float) -> float:
        """Seconds since bytes last arrived or left, or since a frame that has not yet
        arrived whole began (a client trickling a frame is as good as idle); 0 while a
        request is being handled or the connection waits for the pool."""
        if self._busy or self._waiting:
            return 0.0
        idle = now - self.last_active
        if self._partial_since is not None:
            idle = max(idle, now - self._partial_since)
        return idle


class KafkaServer:
    """One listener: accepts connections and serves the Kafka protocol on them."""

    def __init__(self, dispatcher: RequestDispatcher[Any], listener_name: str,
                 host: str, port: int, max_request_size: int,
                 socket_options: dict[str, int] | None = None,
                 quotas: ConnectionQuotas | None = None,
                 security: ListenerSecurity = PLAINTEXT,
                 request_metrics: RequestChannelMetrics | None = None) -> None:
        self.dispatcher = dispatcher
        self.request_metrics = request_metrics
        """Where the connections record each request (None: the node serves no metrics)."""
        self.security = security
        self.listener_name = listener_name
        self.listener_kind = dispatcher.kind
        self.host = host
        self.port = port
        self.max_request_size = max_request_size
        self.socket_options = socket_options or {}
        self.quotas = quotas if quotas is not None else ConnectionQuotas()
        self.connections: set[KafkaConnection] = set()
        self.connections_created = 0
        """Connections the listener took (Kafka's ``connection-creation-total``)."""
        self.connections_closed = 0
        """Of those, the ones closed since (``connection-close-total``)."""
        self._server: asyncio.base_events.Server | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._held: collections.deque[tuple[KafkaConnection, bool]] = collections.deque()
        """Connections accepted but not yet taken (max.connection.creation.rate), in
        order, each with whether its acceptance was counted already."""
        self._held_until = 0.0
        """Event-loop time until which the listener takes no connection."""
        self._take_timer: asyncio.TimerHandle | None = None

    def holds(self, conn: KafkaConnection) -> bool:
        """Whether ``conn`` must wait, unread, before the listener takes it: Kafka's
        acceptor blocked by the node's or the listener's connection creation rate,
        which makes every connection behind it wait too."""
        rates = self.quotas.rates
        if rates is None or not rates.accept_limited:
            return False
        loop = asyncio.get_running_loop()
        recorded = False
        if not self._held and loop.time() >= self._held_until:
            throttle_ms = self.quotas.accept_throttle(self.listener_name)
            if throttle_ms == 0:
                return False
            self._held_until = loop.time() + throttle_ms / 1000
            recorded = True
        assert conn.transport is not None
        conn.transport.pause_reading()
        self._held.append((conn, recorded))
        if self._take_timer is None:
            self._take_timer = loop.call_at(self._held_until, self._take_held)
        return True

    def _take_held(self) -> None:
        self._take_timer = None
        loop = asyncio.get_running_loop()
        while self._held:
            if loop.time() < self._held_until:
                self._take_timer = loop.call_at(self._held_until, self._take_held)
                return
            conn, recorded = self._held.popleft()
            if conn.closed:
                continue
            if not recorded:
                throttle_ms = self.quotas.accept_throttle(self.listener_name)
                if throttle_ms > 0:
                    self._held_until = loop.time() + throttle_ms / 1000
                    self._held.appendleft((conn, True))
                    continue
            assert conn.transport is not None
            conn.transport.resume_reading()
            conn.taken()

    async def start(self, serve: bool = True) -> None:
        """Bind the port; accept connections now, or (``serve=False``) only from
        ``start_serving`` (until then they wait in the backlog)."""
        loop = asyncio.get_running_loop()
        factory: Callable[[], KafkaConnection] = lambda: KafkaConnection(self)  # noqa: E731
        self._server = await loop.create_server(factory, self.host or None, self.port,
                                                reuse_address=True, backlog=1024,
                                                start_serving=serve,
                                                ssl=self.security.ssl_context,
                                                ssl_handshake_timeout=self._handshake_s())
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]
        if self.quotas.idle_ms >= 0:
            self._reaper = asyncio.ensure_future(self._close_idle())

    def _handshake_s(self) -> float | None:
        """How long a TLS handshake may take: connections.max.idle.ms (a client that
        stalls before its connection is made is cut as an idle one would be), at most
        asyncio's own 60 s; None on clear-text listeners."""
        if self.security.ssl_context is None:
            return None
        idle_ms = self.quotas.idle_ms
        return min(60.0, idle_ms / 1000) if idle_ms > 0 else 60.0

    async def _close_idle(self) -> None:
        """connections.max.idle.ms: close connections on which no byte moved for that
        long (an idle client, or one that stopped halfway through a frame)."""
        limit = self.quotas.idle_ms / 1000
        while True:
            await asyncio.sleep(min(max(limit / 4, 0.01), 30.0))
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.idle_for(now) > limit:
                    _limited.log(logging.INFO, ("idle", self.listener_name),
                                 "Closing connection from %s:%d: idle for more than "
                                 "connections.max.idle.ms=%d", *conn.peer, self.quotas.idle_ms)
                    conn.close()

    async def start_serving(self) -> None:
        assert self._server is not None
        await self._server.start_serving()

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if self._take_timer is not None:
            self._take_timer.cancel()
        while self._held:
            self._held.popleft()[0].close()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
