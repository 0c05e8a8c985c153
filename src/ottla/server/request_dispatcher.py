"""From a request frame to its handler and from the handler's answer to a response frame:
the one path a listener's connections and the controller's Envelope handler share.

A dispatcher serves one ``ApiTable`` (what one kind of listener serves). ``decode`` finds
the API's spec, checks the version and decodes the body (after the bounds pass of
``protocol.schema_guard``); ``call`` runs the handler with the table's services;
``failure`` turns an exception a handler raised into Kafka's error response (or None, to
close the connection); ``encode`` writes the response.
"""

from __future__ import annotations

import logging
import struct
import time
import traceback
from collections.abc import Callable
from typing import Any, Generic

from ottla.common.rate_limited_log import RateLimitedLog
from ottla.protocol.api import ApiKey, is_flexible, response_schema
from ottla.protocol.codec import (
    RequestHeader,
    decode_request,
    encode_body_chunks,
    parse_request_header,
    peek_api,
    response_header_bytes,
)
from ottla.protocol.error_response import error_response
from ottla.protocol.errors import ErrorCode, KafkaError, MalformedRequest
from ottla.protocol.fetch_response import EncodedBody
from ottla.protocol.messages import build
from ottla.protocol.requests import (
    ANONYMOUS,
    ApiSpec,
    ApiTable,
    AuthorizationRecorder,
    Authorizer,
    Principal,
    RequestContext,
    Response,
    S,
)

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


class UnsupportedVersion(MalformedRequest):
    """A version of an API the table does not serve: Kafka closes the connection (and
    answers an Envelope carrying one UNSUPPORTED_VERSION)."""


class UnsupportedApiVersions(UnsupportedVersion):
    """An ApiVersions request newer than the table serves: answered with the v0 error
    response that lists the supported ranges, so the client can downgrade."""

    def __init__(self, correlation_id: int) -> None:
        super().__init__("unsupported ApiVersions version")
        self.correlation_id = correlation_id


def client_id_of(frame: bytes | memoryview) -> str | None:
    """The client id of a request the node refuses before parsing its header (a version
    it does not serve, a body it cannot parse), read where header v1 and later keep it,
    for the log line; None if the frame does not get that far."""
    if len(frame) < 10:
        return None
    (size,) = struct.unpack_from(">h", frame, 8)
    if size < 0 or len(frame) < 10 + size:
        return None
    return bytes(frame[10:10 + min(size, 256)]).decode("utf-8", "replace")


class RequestDispatcher(Generic[S]):
    def __init__(self, table: ApiTable[S], clock: Callable[[], float] = time.time) -> None:
        self.table = table
        self.clock = clock
        self.disconnect_listeners: list[Callable[[str, str, int], None]] = []
        """Told (listener, host, port) when a client connection closes."""
        self.authorizer: Authorizer | None = None
        """The node's authorizer, given to every request's context (None: no
        ``authorizer.class.name``, nothing is checked)."""
        self.authorizer_metrics: AuthorizationRecorder | None = None
        """Where this role's authorization decisions are counted (with the authorizer)."""

    def disconnected(self, listener_name: str, host: str, port: int) -> None:
        for listener in self.disconnect_listeners:
            try:
                listener(listener_name, host, port)
            except Exception:
                log.exception("A disconnect listener failed")

    @property
    def kind(self) -> str:
        return self.table.kind

    def decode(self, frame: bytes | memoryview) -> tuple[RequestHeader, ApiSpec[S], Any]:
        """The header, the spec and the decoded body of a request frame. Raises
        ``MalformedRequest`` for anything Kafka closes the connection for."""
        api_key, version, correlation_id = peek_api(frame)
        spec = self.table.get(api_key)
        if spec is None:
            raise MalformedRequest(f"unknown or unserved api key {api_key}")
        if not spec.min_version <= version <= spec.max_version:
            if api_key == ApiKey.API_VERSIONS:
                raise UnsupportedApiVersions(correlation_id)
            raise UnsupportedVersion(f"received request api key {ApiKey(api_key).name} with "
                                     f"version {version} which is not enabled")
        header = parse_request_header(frame, is_flexible(api_key, version))
        return header, spec, decode_request(header, frame)

    def context(self, header: RequestHeader, listener_name: str, host: str, port: int,
                principal: Principal = ANONYMOUS, size: int = 0,
                client_software: tuple[str, str] = ("unknown", "unknown"), *,
                security_protocol: str = "PLAINTEXT", forwarded: bool = False
                ) -> RequestContext:
        return RequestContext(header, listener_name, self.table.kind, host, port,
                              principal=principal, clock=self.clock,
                              authorizer=self.authorizer,
                              authorizer_metrics=self.authorizer_metrics, request_size=size,
                              client_software=client_software,
                              security_protocol=security_protocol, forwarded=forwarded)

    def call(self, spec: ApiSpec[S], ctx: RequestContext, request: Any) -> Any:
        """Run the handler: its response, or an awaitable of it."""
        return spec.handler(self.table.services, ctx, request)

    def failure(self, header: RequestHeader, request: Any, error: Exception) -> Response:
        """The answer to a request whose handler raised: the error for all it names
        (UNKNOWN_SERVER_ERROR unless the handler raised a Kafka error), or None to close
        the connection if even that cannot be built. Unexpected failures are logged once
        a minute per kind, with the traceback."""
        if isinstance(error, KafkaError):
            code, message = error.code, error.message
        else:
            where = traceback.extract_tb(error.__traceback__)[-1:]
            kind = (header.api_key, type(error), *((where[0].filename, where[0].lineno)
                                                    if where else ()))
            _limited.log(logging.ERROR, kind, "Handler of %s v%d failed (client id %r); "
                         "answering UNKNOWN_SERVER_ERROR", ApiKey(header.api_key).name,
                         header.api_version, header.client_id, exc_info=True)
            code, message = ErrorCode.unknown_server_error, None
        try:
            return error_response(request, code, message)
        except Exception:
            _limited.log(logging.ERROR, ("error-response", header.api_key),
                         "Cannot build an error response to %s v%d; closing the connection",
                         ApiKey(header.api_key).name, header.api_version, exc_info=True)
            return None

    def encode(self, header: RequestHeader, response: Response
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
