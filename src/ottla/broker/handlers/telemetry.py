"""GetTelemetrySubscriptions and PushTelemetry (KIP-714), as Kafka's KafkaApis hands them
to its ClientMetricsManager: no authorization, the decisions in
``broker.telemetry.client_metrics_manager``. A node advertises both in ApiVersions only
when it has a receiver for the pushes (``prometheus.listener``), as Kafka advertises them
only with a telemetry plugin configured."""

from __future__ import annotations

from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.telemetry.client_metrics_manager import ClientInfo
from ottla.protocol.api import ApiKey
from ottla.protocol.requests import ApiSpec, RequestContext

TELEMETRY_APIS = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})


def client_info(ctx: RequestContext) -> ClientInfo:
    """The client as subscriptions match it: header client id, the software its
    ApiVersions named, its address and port, and its connection."""
    return ClientInfo(ctx.client_id or "", *ctx.client_software, ctx.client_host,
                      ctx.client_port, (ctx.listener_name, ctx.client_host, ctx.client_port))


def handle_get_telemetry_subscriptions(broker: Broker, ctx: RequestContext, req: Any
                                       ) -> dict[str, Any]:
    return broker.client_metrics.get_subscriptions(ctx.now_ms(), req.client_instance_id,
                                                   client_info(ctx))


def handle_push_telemetry(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    error, _ = broker.client_metrics.push(
        ctx.now_ms(), req.client_instance_id, req.subscription_id, req.terminating,
        req.compression_type, req.metrics, client_info(ctx))
    return {"throttle_time": 0, "error_code": error}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, handle_get_telemetry_subscriptions),
    ApiSpec(ApiKey.PUSH_TELEMETRY, 0, 0, handle_push_telemetry),
]
