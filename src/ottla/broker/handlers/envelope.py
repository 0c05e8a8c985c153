"""Envelope (KIP-590): a request forwarded by a broker, run on the active controller.

The envelope carries the whole inner request, header included; the controller runs it
through the controller listener's handler for that API, exactly as if it had arrived
directly, and returns the inner response, header included. A controller that is not the
active one answers NOT_CONTROLLER in the envelope itself, whatever the inner API, which
is how the forwarding broker knows to look for the active controller and retry; so does
an inner response whose own top-level error is NOT_CONTROLLER.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from ottla.broker.context import RequestContext
from ottla.broker.handlers import REGISTRY, handles
from ottla.common.rate_limited_log import RateLimitedLog
from ottla.controller.quorum_controller import NotControllerError
from ottla.protocol.api import ApiKey, is_flexible, response_schema
from ottla.protocol.codec import (
    decode_request,
    encode_body_chunks,
    parse_request_header,
    peek_api,
    response_header_bytes,
)
from ottla.protocol.error_response import error_response
from ottla.protocol.errors import ErrorCode, KafkaError, MalformedRequest
from ottla.protocol.messages import build

_limited = RateLimitedLog(logging.getLogger(__name__))


def _envelope(error: ErrorCode, data: bytes | None = None) -> dict[str, Any]:
    return {"response_data": data, "error_code": error}


@handles(ApiKey.ENVELOPE, 0, 0, listeners=("controller",))
async def handle_envelope(broker: Any, ctx: Any, req: Any) -> dict[str, Any]:
    frame = req.request_data
    try:
        api_key, version, _ = peek_api(frame)
        spec = REGISTRY["controller"].get(api_key)
        if spec is None or api_key == ApiKey.ENVELOPE or \
                not spec.min_version <= version <= spec.max_version:
            return _envelope(ErrorCode.invalid_request)
        header = parse_request_header(frame, is_flexible(api_key, version))
        inner = decode_request(header, frame)
    except MalformedRequest:
        return _envelope(ErrorCode.invalid_request)
    if not broker.controller.is_active:
        return _envelope(ErrorCode.not_controller)
    inner_ctx = RequestContext(header, ctx.listener_name, "controller", ctx.client_host,
                               ctx.client_port)
    try:
        response = spec.handler(broker, inner_ctx, inner)
        if inspect.isawaitable(response):
            response = await response
    except NotControllerError:
        return _envelope(ErrorCode.not_controller)
    except KafkaError as e:
        response = error_response(inner, e.code, e.message)
    except Exception:
        # Answered, not raised: the forwarding broker would take a closed connection
        # for an unreachable controller and send the request again and again.
        _limited.log(logging.ERROR, (api_key, "envelope"), "Forwarded %s v%d failed; "
                     "answering UNKNOWN_SERVER_ERROR", ApiKey(api_key).name, version,
                     exc_info=True)
        response = error_response(inner, ErrorCode.unknown_server_error)
    if isinstance(response, dict) and response.get("error_code") == ErrorCode.not_controller:
        # The handler answered NOT_CONTROLLER itself (leadership went while it waited).
        return _envelope(ErrorCode.not_controller)
    if isinstance(response, dict):
        response = build(response_schema(api_key, version), response)
    chunks, size = encode_body_chunks(response)
    prefix = response_header_bytes(api_key, version, header.correlation_id, size)
    return _envelope(ErrorCode.none, prefix[4:] + b"".join(bytes(c) for c in chunks))
