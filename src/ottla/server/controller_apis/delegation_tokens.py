"""CreateDelegationToken, RenewDelegationToken and ExpireDelegationToken run on the active
controller (brokers forward them; Kafka's ControllerApis over the
DelegationTokenControlManager), and DescribeDelegationToken on the controller listener,
answered from the image as a broker answers it (Kafka's controller advertises it but has
no handler).

The controller checks the channel and ownership as Kafka's ControllerApis does: a
token-authenticated principal never, a direct PLAINTEXT or anonymous SSL connection
never, a forwarded request whatever the broker's own connection.
"""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.delegation_tokens import (
    VERSIONS,
    allow_token_requests,
    created_response,
    describe_tokens,
    expiry_response,
    refuse_create,
    token_owner,
)
from ottla.common.principal import Principal
from ottla.controller.delegation_token_control import CreatedToken, TokenExpiry
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import ms
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.server.controller_apis.services import ControllerServices


async def handle_create_token(controller: ControllerServices, ctx: RequestContext, req: Any
                              ) -> dict[str, Any]:
    refused = refuse_create(ctx, req)
    if refused is not None:
        return refused
    requester = ctx.principal
    owner = token_owner(req, requester)
    renewers = [Principal(r.principal_type, r.principal_name) for r in req.renewers]
    lifetime = ms(req.max_lifetime)
    created: CreatedToken = await controller.channel.submit(
        lambda c: c.delegation_tokens.create_token(requester, owner, renewers, lifetime,
                                                   controller.now_ms()))
    return created_response(created.error, created.owner, created.requester,
                            issue=created.issue_timestamp, expiry=created.expiry_timestamp,
                            maximum=created.max_timestamp, token_id=created.token_id,
                            hmac=created.hmac)


async def handle_renew_token(controller: ControllerServices, ctx: RequestContext, req: Any
                             ) -> dict[str, Any]:
    if not allow_token_requests(ctx):
        return expiry_response(ErrorCode.delegation_token_request_not_allowed)
    principal, hmac, period = ctx.principal, bytes(req.hmac), ms(req.renew_period)
    renewed: TokenExpiry = await controller.channel.submit(
        lambda c: c.delegation_tokens.renew_token(principal, hmac, period,
                                                  controller.now_ms()))
    return expiry_response(renewed.error, renewed.expiry_timestamp)


async def handle_expire_token(controller: ControllerServices, ctx: RequestContext, req: Any
                              ) -> dict[str, Any]:
    if not allow_token_requests(ctx):
        return expiry_response(ErrorCode.delegation_token_request_not_allowed)
    principal, hmac, period = ctx.principal, bytes(req.hmac), ms(req.expiry_time_period)
    expired: TokenExpiry = await controller.channel.submit(
        lambda c: c.delegation_tokens.expire_token(principal, hmac, period,
                                                   controller.now_ms()))
    return expiry_response(expired.error, expired.expiry_timestamp)


def handle_describe_tokens(controller: ControllerServices, ctx: RequestContext, req: Any
                           ) -> dict[str, Any]:
    return describe_tokens(controller.image, controller.config["delegation.token.secret.key"],
                           ctx, req)


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.CREATE_DELEGATION_TOKEN, *VERSIONS[ApiKey.CREATE_DELEGATION_TOKEN],
            handle_create_token),
    ApiSpec(ApiKey.RENEW_DELEGATION_TOKEN, *VERSIONS[ApiKey.RENEW_DELEGATION_TOKEN],
            handle_renew_token),
    ApiSpec(ApiKey.EXPIRE_DELEGATION_TOKEN, *VERSIONS[ApiKey.EXPIRE_DELEGATION_TOKEN],
            handle_expire_token),
    ApiSpec(ApiKey.DESCRIBE_DELEGATION_TOKEN, *VERSIONS[ApiKey.DESCRIBE_DELEGATION_TOKEN],
            handle_describe_tokens),
]
