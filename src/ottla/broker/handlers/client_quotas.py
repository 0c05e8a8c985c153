"""DescribeClientQuotas (KIP-546), answered from the metadata image (Kafka's
``ClientQuotasImage.describe``) to principals with DESCRIBE_CONFIGS on the cluster.
AlterClientQuotas changes metadata: brokers forward it to the controller
(``forwarding``), which runs ``controller.client_quota_control``.
"""

from __future__ import annotations

from typing import Any

from ottla.broker.broker import Broker
from ottla.metadata.client_quotas import QuotaEntity, QuotaFilterError, describe
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import DESCRIBE_CONFIGS, MSG_CLUSTER, authorize_cluster


def entity_data(entity: QuotaEntity) -> list[dict[str, str | None]]:
    """An entity as the responses' EntityData lists carry it."""
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


def _failed(code: ErrorCode, message: str) -> dict[str, Any]:
    """Kafka's ``DescribeClientQuotasRequest.getErrorResponse``: no entries at all."""
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "entries": None}


def handle_describe_client_quotas(broker: Broker, ctx: RequestContext, req: Any
                                  ) -> dict[str, Any]:
    if not authorize_cluster(ctx, DESCRIBE_CONFIGS):
        return _failed(ErrorCode.cluster_authorization_failed, MSG_CLUSTER)
    try:
        found = describe(broker.image.client_quotas,
                         [(c.entity_type, c.match_type, c.match) for c in req.components],
                         req.strict)
    except QuotaFilterError as e:
        return _failed(e.code, e.message)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "entries": [{"entity": entity_data(entity),
                         "values": [{"key": key, "value": value}
                                    for key, value in values.items()]}
                        for entity, values in found]}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, handle_describe_client_quotas),
]
