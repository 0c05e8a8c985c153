"""DescribeCluster on a controller listener: the controllers as they registered (KIP-919),
each at its endpoint on the listener the request came in on. Unlike a broker's, it needs
ALTER on the cluster (Kafka's ControllerApis)."""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.metadata import CONTROLLERS, unsupported_endpoint_type
from ottla.common.features import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    controller_registration_supported,
)
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    ALTER,
    AUTHORIZED_OPERATIONS_OMITTED,
    cluster_authorized_operations,
    deny_cluster,
)
from ottla.server.controller_apis.services import ControllerServices


def registered_controllers(image: MetadataImage, listener_name: str) -> list[dict[str, Any]]:
    """Kafka's ``ControllerRegistrationsPublisher.describeClusterControllers``: every
    registered controller with an endpoint named ``listener_name``, at that endpoint; a
    controller not registered (or without that listener) is left out."""
    found = []
    for controller_id, registration in sorted(image.controllers.items()):
        endpoint = registration.endpoints.get(listener_name)
        if endpoint is not None:
            found.append({"broker_id": controller_id, "host": endpoint.host,
                          "port": endpoint.port, "rack": None, "is_fenced": False})
    return found


def handle_describe_cluster(controller: ControllerServices, ctx: RequestContext, req: Any
                            ) -> dict[str, Any]:
    level = controller.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)
    if not controller_registration_supported(level):
        # Checked before authorization, as Kafka's handleDescribeCluster does.
        return {"throttle_time": 0, "error_code": ErrorCode.unsupported_version,
                "error_message": "Direct-to-controller communication is not supported "
                                 "with the current MetadataVersion.",
                "endpoint_type": getattr(req, "endpoint_type", 1),
                "cluster_id": controller.cluster_id, "controller_id": -1, "brokers": [],
                "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    denied = deny_cluster(ctx, req, ALTER)
    if denied is not None:
        return denied
    endpoint_type = getattr(req, "endpoint_type", 1)
    if endpoint_type != CONTROLLERS:
        return unsupported_endpoint_type(controller.cluster_id, endpoint_type, CONTROLLERS)
    leader = controller.channel.describe_quorum().leader_id
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "endpoint_type": CONTROLLERS, "cluster_id": controller.cluster_id,
            "controller_id": leader,
            "brokers": registered_controllers(controller.image, ctx.listener_name),
            "cluster_authorized_operations": cluster_authorized_operations(
                ctx, req.include_cluster_authorized_operations)}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 2, handle_describe_cluster),
]
