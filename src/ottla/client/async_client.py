"""The asyncio Kafka protocol client nodes use to talk to each other.

One connection to one node, opened on first use and again after a failure. Requests are
pipelined; responses are matched to them by correlation id. A failed connection fails
every request in flight with ``NodeUnavailable``; a request that times out is forgotten
(its late response is dropped) and the connection is closed, since the server answers in
order and everything behind it is late too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import Any

from ottla.client.security import AuthenticationFailed, ClientSecurity, authenticate
from ottla.common.rate_limited_log import RateLimitedLog
from ottla.common.tasks import within
from ottla.protocol.api import request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.messages import build

_SIZE = struct.Struct(">i")
_limited = RateLimitedLog(logging.getLogger(__name__))


class NodeUnavailable(ConnectionError):
    """The node could not be reached, or the connection broke or timed out."""


class AsyncClient:
    def __init__(self, host: str, port: int, client_id: str = "ottla",
                 connect_timeout: float = 5.0, security: ClientSecurity | None = None
                 ) -> None:
        self.host = host
        self.port = port
        self.security = security
        """TLS and SASL towards a secured listener (None: PLAINTEXT)."""
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._correlation_id = 0
        self._closed = False

    async def request(self, api_key: int, version: int, body: dict[str, Any] | Any,
                      timeout: float = 30.0) -> Any:
        """Send a request (a dict of fields, or a kio entity) and return the decoded
        response; raises ``NodeUnavailable`` or ``TimeoutError``."""
        entity = build(request_schema(api_key, version), body) if isinstance(body, dict) \
            else body
        await self._connect()
        if self._writer is None:  # lost again before this request got to use it
            raise NodeUnavailable(f"connection to {self.host}:{self.port} closed")
        self._correlation_id += 1
        correlation_id = self._correlation_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, version, future)
        self._writer.write(encode_request(api_key, version, correlation_id, self.client_id,
                                          entity))
        try:
            return await within(future, timeout)
        except TimeoutError:
            self._disconnect(NodeUnavailable(f"request to {self.host}:{self.port} timed out"))
            raise
        finally:
            self._pending.pop(correlation_id, None)

    async def _connect(self) -> None:
        if self._closed:
            raise NodeUnavailable("client closed")
        if self._writer is not None:
            return
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
            # Whoever waited may have given up; the failure is still looked at.
            self._connecting.add_done_callback(lambda f: f.cancelled() or f.exception())
        connecting = self._connecting
        try:
            await asyncio.shield(connecting)
        finally:
            if connecting.done():
                self._connecting = None

    async def _open(self) -> None:
        security = self.security
        context = security.ssl_context if security is not None else None
        try:
            reader, writer = await within(
                asyncio.open_connection(self.host, self.port, ssl=context,
                                        server_hostname=self.host if context else None),
                self.connect_timeout)
        except (OSError, TimeoutError) as e:
            raise NodeUnavailable(f"cannot connect to {self.host}:{self.port}: {e}") from e
        if security is not None and security.sasl_mechanism is not None:
            try:
                await within(authenticate(reader, writer, security, self.client_id),
                             self.connect_timeout)
            except (OSError, TimeoutError, asyncio.IncompleteReadError,
                    AuthenticationFailed) as e:
                writer.close()
                _limited.log(logging.WARNING, ("authenticate", self.host, self.port),
                             "Cannot authenticate to %s:%d as %s: %s", self.host, self.port,
                             security.username, e)
                raise NodeUnavailable(f"cannot authenticate to {self.host}:{self.port}: "
                                      f"{e}") from e
        self._writer = writer
        self._reader_task = asyncio.ensure_future(self._read(reader, writer))

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: Exception = NodeUnavailable(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                (correlation_id,) = _SIZE.unpack_from(frame, 0)
                pending = self._pending.get(correlation_id)
                if pending is None:
                    continue  # a request that timed out
                api_key, version, future = pending
                if not future.done():
                    try:
                        future.set_result(decode_response(api_key, version, frame)[1])
                    except Exception as e:  # a response we cannot decode
                        future.set_exception(NodeUnavailable(f"bad response: {e}"))
        except (OSError, asyncio.IncompleteReadError) as e:
            error = NodeUnavailable(f"connection to {self.host}:{self.port} lost: {e}")
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is writer:
                self._disconnect(error)

    def _disconnect(self, error: Exception) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        for _, _, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def close(self) -> None:
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._connecting
        task = self._reader_task
        self._disconnect(NodeUnavailable("client closed"))
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
