"""AlterUserScramCredentials, run on the active controller (brokers forward it), and
DescribeUserScramCredentials on the controller listener, answered from the image as a
broker answers it (KIP-554)."""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.scram import handle_describe_user_scram_credentials
from ottla.controller.scram_control import ScramDeletion, ScramUpsertion
from ottla.protocol.api import ApiKey
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import ALTER, deny_cluster
from ottla.server.controller_apis.services import ControllerServices


async def handle_alter_user_scram_credentials(controller: ControllerServices,
                                              ctx: RequestContext, req: Any) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, ALTER, every_entry=True)
    if denied is not None:
        return denied
    deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt),
                                 bytes(u.salted_password)) for u in req.upsertions]
    results = await controller.channel.submit(
        lambda c: c.scram.alter_credentials(deletions, upsertions))
    return {"throttle_time": 0, "results": [
        {"user": user, "error_code": code, "error_message": message}
        for user, code, message in results]}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0,
            handle_describe_user_scram_credentials),
    ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, handle_alter_user_scram_credentials),
]
