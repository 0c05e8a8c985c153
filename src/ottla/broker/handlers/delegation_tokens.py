"""Delegation tokens on a broker (KIP-48; Kafka's KafkaApis ``handle*TokenRequest``).

CreateDelegationToken, RenewDelegationToken and ExpireDelegationToken change metadata:
the broker refuses what Kafka's broker refuses before forwarding, and forwards the rest
to the controller (``controller_apis.delegation_tokens``, over
``controller.delegation_token_control``). DescribeDelegationToken is answered here from
the metadata image, each token's HMAC derived again from ``delegation.token.secret.key``.

No token request is taken from a connection that cannot prove who it is (PLAINTEXT, or
SSL without a client certificate) nor from one that authenticated with a token:
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. Creating a token for another owner needs
CREATE_TOKENS on that user; a token is described to its owner and renewers, and to
others with DESCRIBE on the token or DESCRIBE_TOKENS on its owner.
"""

from __future__ import annotations

from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.handlers.forwarding import forward
from ottla.common.principal import ANONYMOUS, Principal
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.acl import AclOperation, ResourceType
from ottla.security.auth_helper import authorize
from ottla.security.delegation_token import (
    ERROR_TIMESTAMP,
    TokenInformation,
    describable,
    token_hmac,
)

VERSIONS = {ApiKey.CREATE_DELEGATION_TOKEN: (1, 3), ApiKey.RENEW_DELEGATION_TOKEN: (1, 2),
            ApiKey.EXPIRE_DELEGATION_TOKEN: (1, 2), ApiKey.DESCRIBE_DELEGATION_TOKEN: (1, 3)}
"""The versions served: Kafka 4.x's, less the v0s it removed (KIP-896)."""


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's ``allowTokenRequests``: not a token-authenticated principal, not a
    PLAINTEXT connection, not SSL without a client certificate. The controller lets
    forwarded requests through whatever the broker's connection to it is, as Kafka's
    ControllerApis does (the principal is the client's; the hop is the broker's)."""
    protocol = ctx.security_protocol
    if ctx.principal.token_authenticated:
        return False
    if ctx.forwarded:
        return True
    return not (protocol == "PLAINTEXT" or (protocol == "SSL" and ctx.principal == ANONYMOUS))


def token_owner(req: Any, requester: Principal) -> Principal:
    """The owner a CreateDelegationToken asks for (v3+), the requester without one."""
    name = getattr(req, "owner_principal_name", None)
    if not name:
        return requester
    return Principal(getattr(req, "owner_principal_type", None) or "", name)


def created_response(error: ErrorCode, owner: Principal, requester: Principal, *,
                     issue: int = ERROR_TIMESTAMP, expiry: int = ERROR_TIMESTAMP,
                     maximum: int = ERROR_TIMESTAMP, token_id: str = "", hmac: bytes = b""
                     ) -> dict[str, Any]:
    """Kafka's ``CreateDelegationTokenResponse.prepareResponse``."""
    return {"throttle_time": 0, "error_code": error, "principal_type": owner.type,
            "principal_name": owner.name, "token_requester_principal_type": requester.type,
            "token_requester_principal_name": requester.name, "issue_timestamp": issue,
            "expiry_timestamp": expiry, "max_timestamp": maximum, "token_id": token_id,
            "hmac": hmac}


def refuse_create(ctx: RequestContext, req: Any) -> dict[str, Any] | None:
    """What a broker and the controller check before creating: the channel, then
    CREATE_TOKENS on another owner (the error response, or None to go on)."""
    requester = ctx.principal
    owner = token_owner(req, requester)
    if not allow_token_requests(ctx):
        return created_response(ErrorCode.delegation_token_request_not_allowed, owner,
                                requester)
    if owner != requester and not authorize(ctx, AclOperation.CREATE_TOKENS,
                                            ResourceType.USER, str(owner)):
        return created_response(ErrorCode.delegation_token_authorization_failed, owner,
                                requester)
    return None


def expiry_response(error: ErrorCode, expiry: int = ERROR_TIMESTAMP) -> dict[str, Any]:
    """RenewDelegationToken's and ExpireDelegationToken's response."""
    return {"throttle_time": 0, "error_code": error, "expiry_timestamp": expiry}


async def handle_create_token(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    refused = refuse_create(ctx, req)
    if refused is not None:
        return refused
    if any(r.principal_type != "User" for r in req.renewers):
        return created_response(ErrorCode.invalid_principal_type,
                                token_owner(req, ctx.principal), ctx.principal)
    return await forward(broker, ctx, req)


async def handle_renew_or_expire_token(broker: Broker, ctx: RequestContext, req: Any
                                       ) -> Any:
    if not allow_token_requests(ctx):
        return expiry_response(ErrorCode.delegation_token_request_not_allowed)
    return await forward(broker, ctx, req)


def _described(token: TokenInformation, hmac: bytes) -> dict[str, Any]:
    return {"principal_type": token.owner.type, "principal_name": token.owner.name,
            "token_requester_principal_type": token.requester.type,
            "token_requester_principal_name": token.requester.name,
            "issue_timestamp": token.issue_timestamp,
            "expiry_timestamp": token.expiry_timestamp,
            "max_timestamp": token.max_timestamp, "token_id": token.token_id, "hmac": hmac,
            "renewers": [{"principal_type": p.type, "principal_name": p.name}
                         for p in token.renewers]}


def describe_tokens(image: MetadataImage, secret_key: str | None, ctx: RequestContext,
                    req: Any) -> dict[str, Any]:
    """DescribeDelegationToken (Kafka's ``handleDescribeTokensRequest``): the tokens the
    requester may see among those of the owners asked for (None: every owner; an empty
    list: none), oldest first."""
    def answer(error: ErrorCode, tokens: list[dict[str, Any]]) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": error, "tokens": tokens}

    if not allow_token_requests(ctx):
        return answer(ErrorCode.delegation_token_request_not_allowed, [])
    if not secret_key:
        return answer(ErrorCode.delegation_token_auth_disabled, [])
    if req.owners is not None and not req.owners:
        return answer(ErrorCode.none, [])
    owners = None if req.owners is None else \
        [Principal(o.principal_type, o.principal_name) for o in req.owners]
    requester = ctx.principal
    tokens = sorted(image.delegation_tokens.values(),
                    key=lambda t: (t.issue_timestamp, t.token_id))
    return answer(ErrorCode.none, [
        _described(t, token_hmac(t.token_id, secret_key)) for t in tokens
        if describable(requester, owners, t,
                       lambda token_id: authorize(ctx, AclOperation.DESCRIBE,
                                                  ResourceType.DELEGATION_TOKEN, token_id),
                       lambda owner: authorize(ctx, AclOperation.DESCRIBE_TOKENS,
                                               ResourceType.USER, str(owner)))])


def handle_describe_tokens(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return describe_tokens(broker.image, broker.config["delegation.token.secret.key"], ctx,
                           req)


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.CREATE_DELEGATION_TOKEN, *VERSIONS[ApiKey.CREATE_DELEGATION_TOKEN],
            handle_create_token),
    ApiSpec(ApiKey.RENEW_DELEGATION_TOKEN, *VERSIONS[ApiKey.RENEW_DELEGATION_TOKEN],
            handle_renew_or_expire_token),
    ApiSpec(ApiKey.EXPIRE_DELEGATION_TOKEN, *VERSIONS[ApiKey.EXPIRE_DELEGATION_TOKEN],
            handle_renew_or_expire_token),
    ApiSpec(ApiKey.DESCRIBE_DELEGATION_TOKEN, *VERSIONS[ApiKey.DESCRIBE_DELEGATION_TOKEN],
            handle_describe_tokens),
]
