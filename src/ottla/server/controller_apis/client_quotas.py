"""AlterClientQuotas, run on the active controller (brokers forward it; KIP-546). The
controller listener does not serve DescribeClientQuotas, as Kafka's does not."""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.client_quotas import entity_data
from ottla.controller.client_quota_control import QuotaAlteration
from ottla.metadata.client_quotas import quota_entity
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import ALTER_CONFIGS, MSG_CLUSTER, authorize_cluster
from ottla.server.controller_apis.services import ControllerServices


async def handle_alter_client_quotas(controller: ControllerServices, ctx: RequestContext,
                                     req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, ALTER_CONFIGS):
        # AlterClientQuotasRequest.getErrorResponse: every entry, as the request named
        # its entity, with the error's own message.
        return {"throttle_time": 0, "entries": [
            {"error_code": ErrorCode.cluster_authorization_failed,
             "error_message": MSG_CLUSTER,
             "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                        for e in entry.entity]} for entry in req.entries]}
    alterations = [QuotaAlteration(
        quota_entity((e.entity_type, e.entity_name) for e in entry.entity),
        tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops))
        for entry in req.entries]
    if not alterations:
        return {"throttle_time": 0, "entries": []}
    validate_only = req.validate_only
    results = await controller.channel.submit(
        lambda c: c.client_quotas.alter_client_quotas(alterations, validate_only))
    return {"throttle_time": 0, "entries": [
        {"error_code": code, "error_message": message, "entity": entity_data(entity)}
        for entity, code, message in results]}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, handle_alter_client_quotas),
]
