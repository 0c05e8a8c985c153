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

Authorization (Kafka's ``ControllerApis.handleEnvelopeRequest`` and ``EnvelopeUtils``):
the forwarding node's own principal (the connection's) needs CLUSTER_ACTION on the
cluster, asked before anything else (CLUSTER_AUTHORIZATION_FAILED in the envelope). The
inner request then runs as the client it came from: the principal in
``request_principal`` (Kafka's serialized DefaultPrincipalData; one that cannot be read is
PRINCIPAL_DESERIALIZATION_FAILURE) from the address in ``client_host_address`` (4 or 16
bytes, else INVALID_REQUEST), and it must be one of the APIs a broker forwards
(``FORWARDABLE``, else INVALID_REQUEST). An envelope without a principal is the
forwarding node's own request (its registration, heartbeats, topic creation): it runs as
that node's connection, whatever its API.
"""

from __future__ import annotations

import inspect
import ipaddress
from typing import Any

from ottla.common.principal import PrincipalDeserializationError, deserialize_principal
from ottla.controller.results import NotControllerError
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, MalformedRequest
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import CLUSTER_ACTION, authorize_cluster
from ottla.server.controller_apis.services import ControllerServices
from ottla.server.request_dispatcher import UnsupportedVersion

FORWARDABLE = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.ALTER_CONFIGS, ApiKey.CREATE_PARTITIONS, ApiKey.CREATE_DELEGATION_TOKEN,
    ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.ELECT_LEADERS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_QUORUM, ApiKey.UPDATE_FEATURES,
    ApiKey.UNREGISTER_BROKER, ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.ADD_RAFT_VOTER,
    ApiKey.REMOVE_RAFT_VOTER, ApiKey.UNREGISTER_CONTROLLER,
})
"""``ApiKeys.forwardable`` (Kafka 4.4): what an Envelope may carry for a client."""


def _envelope(error: ErrorCode, data: bytes | None = None) -> dict[str, Any]:
    return {"response_data": data, "error_code": error}


async def handle_envelope(controller: ControllerServices, ctx: RequestContext, req: Any
                          ) -> dict[str, Any]:
    dispatcher = controller.dispatcher
    assert dispatcher is not None, "the controller listener's dispatcher is set at start"
    if not authorize_cluster(ctx, CLUSTER_ACTION):
        return _envelope(ErrorCode.cluster_authorization_failed)
    principal, host = ctx.principal, ctx.client_host
    if req.request_principal is not None:
        try:
            principal = deserialize_principal(bytes(req.request_principal))
        except PrincipalDeserializationError:
            return _envelope(ErrorCode.principal_deserialization_failure)
        try:
            host = str(ipaddress.ip_address(bytes(req.client_host_address)))
        except ValueError:
            return _envelope(ErrorCode.invalid_request)
    try:
        header, spec, inner = dispatcher.decode(req.request_data)
    except UnsupportedVersion:
        return _envelope(ErrorCode.unsupported_version)
    except MalformedRequest:
        return _envelope(ErrorCode.invalid_request)
    if header.api_key == ApiKey.ENVELOPE or (
            req.request_principal is not None and header.api_key not in FORWARDABLE):
        return _envelope(ErrorCode.invalid_request)
    if not controller.channel.is_active:
        return _envelope(ErrorCode.not_controller)
    inner_ctx = dispatcher.context(header, ctx.listener_name, host, ctx.client_port,
                                   principal, security_protocol=ctx.security_protocol,
                                   forwarded=req.request_principal is not None)
    inner_ctx.authorizer = ctx.authorizer
    inner_ctx.authorizer_metrics = ctx.authorizer_metrics
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
