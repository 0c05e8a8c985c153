"""Envelope (KIP-590): a request forwarded by a broker, run on the active controller.

The envelope carries the whole inner request, header included; the controller runs it
through the controller listener's own dispatcher, exactly as if it had arrived directly,
and returns the inner response, header included. A controller that is not the active one
answers NOT_CONTROLLER in the envelope itself, whatever the inner API, which is how the
forwarding broker knows to look for the active controller and retry; so does an inner
response whose own top-level error is NOT_CONTROLLER. An inner request of a version the
controller does not serve is UNSUPPORTED_VERSION in the envelope (the forwarding broker
closes its client's connection, as Kafka's does, so the client asks ApiVersions again);
one that cannot be parsed is INVALID_REQUEST, which the client gets as the error of its
request; an inner handler that fails is answered, not dropped, so the forwarding broker
does not send it again.
"""

from __future__ import annotations

import inspect
from typing import Any

from ottla.controller.results import NotControllerError
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, MalformedRequest
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.server.controller_apis.services import ControllerServices
from ottla.server.request_dispatcher import UnsupportedVersion


def _envelope(error: ErrorCode, data: bytes | None = None) -> dict[str, Any]:
    return {"response_data": data, "error_code": error}


async def handle_envelope(controller: ControllerServices, ctx: RequestContext, req: Any
                          ) -> dict[str, Any]:
    dispatcher = controller.dispatcher
    assert dispatcher is not None, "the controller listener's dispatcher is set at start"
    try:
        header, spec, inner = dispatcher.decode(req.request_data)
    except UnsupportedVersion:
        return _envelope(ErrorCode.unsupported_version)
    except MalformedRequest:
        return _envelope(ErrorCode.invalid_request)
    if header.api_key == ApiKey.ENVELOPE:
        return _envelope(ErrorCode.invalid_request)
    if not controller.channel.is_active:
        return _envelope(ErrorCode.not_controller)
    inner_ctx = dispatcher.context(header, ctx.listener_name, ctx.client_host,
                                   ctx.client_port)
    try:
        response = dispatcher.call(spec, inner_ctx, inner)
        if inspect.isawaitable(response):
            response = await response
    except NotControllerError:
        return _envelope(ErrorCode.not_controller)
    except Exception as e:
        response = dispatcher.failure(header, inner, e)
        if response is None:
            return _envelope(ErrorCode.unknown_server_error)
    if isinstance(response, dict) and response.get("error_code") == ErrorCode.not_controller:
        # The handler answered NOT_CONTROLLER itself (leadership went while it waited).
        return _envelope(ErrorCode.not_controller)
    prefix, chunks, _size = dispatcher.encode(header, response)
    return _envelope(ErrorCode.none, prefix[4:] + b"".join(bytes(c) for c in chunks))


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.ENVELOPE, 0, 0, handle_envelope),
]
