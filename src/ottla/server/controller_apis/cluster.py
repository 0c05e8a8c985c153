"""DescribeCluster on a controller listener: the controllers, that is the voters of the
metadata quorum (KIP-919). Unlike a broker's, it needs ALTER on the cluster (Kafka's
ControllerApis)."""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.metadata import CONTROLLERS, unsupported_endpoint_type
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import ALTER, cluster_authorized_operations, deny_cluster
from ottla.server.controller_apis.services import ControllerServices


def handle_describe_cluster(controller: ControllerServices, ctx: RequestContext, req: Any
                            ) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, ALTER)
    if denied is not None:
        return denied
    endpoint_type = getattr(req, "endpoint_type", 1)
    if endpoint_type != CONTROLLERS:
        return unsupported_endpoint_type(controller.cluster_id, endpoint_type, CONTROLLERS)
    quorum = controller.channel.describe_quorum()
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "endpoint_type": CONTROLLERS, "cluster_id": controller.cluster_id,
            "controller_id": quorum.leader_id,
            "brokers": [{"broker_id": node, "host": host, "port": port, "rack": None,
                         "is_fenced": False}
                        for node, listeners in sorted(quorum.endpoints.items())
                        for _name, host, port in listeners[:1]],
            "cluster_authorized_operations": cluster_authorized_operations(
                ctx, req.include_cluster_authorized_operations)}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 2, handle_describe_cluster),
]
