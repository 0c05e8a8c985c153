"""Requests a broker forwards whole to the active controller (KIP-590): every client
request that changes metadata, and DescribeQuorum, which only the quorum's leader can
answer. The controller's answer goes back to the client as it came; an error the
controller gave the envelope itself becomes the error of everything the request named.

The controller authorizes them, as the client (its principal travels in the Envelope).
The broker checks only what Kafka 4.4's broker checks before forwarding: changing a
BROKER resource's configs (AlterConfigs, IncrementalAlterConfigs) needs ALTER_CONFIGS on
the cluster, and a refused resource is answered here and not forwarded; a BROKER_LOGGER
resource (IncrementalAlterConfigs) is the broker's own, never forwarded: ALTER_CONFIGS on
the cluster, then refused, as Ottla has no runtime loggers to change. The broker's own
BROKER resource is validated here first, as Kafka's ConfigAdminManager does: a named
one must be this broker's id (a BROKER resource goes to the broker it names), and a TLS
listener's new keystore or truststore must load and keep its certificate's names, else
INVALID_REQUEST with Kafka's message.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import timedelta
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.handlers.configs import java_int
from ottla.common.config import ConfigError
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import ALTER_CONFIGS, MSG_CLUSTER, authorize_cluster

OP_SET, OP_DELETE = 0, 1
"""IncrementalAlterConfigs operations."""


async def forward(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """The controller's answer; a throttle time it carries (the controller mutation
    quota) mutes the client's connection here, as Kafka's ``sendForwardedResponse``."""
    response = await broker.controller.forward(ctx, req)
    throttle = response.get("throttle_time") if isinstance(response, dict) \
        else getattr(response, "throttle_time", None)
    if isinstance(throttle, timedelta):
        throttle = round(throttle.total_seconds() * 1000)
    if isinstance(throttle, int) and throttle > 0:  # the request quota's delay queue
        ctx.throttle_ms, ctx.throttle_quota = max(ctx.throttle_ms, throttle), "Request"
    return response


def _answered_here(broker: Broker, ctx: RequestContext, resource: Any, incremental: bool
                   ) -> tuple[ErrorCode, str] | None:
    """The answer the broker gives a config resource itself, or None to forward it."""
    kind = resource.resource_type
    if kind == ConfigResourceType.BROKER or (
            incremental and kind == ConfigResourceType.BROKER_LOGGER):
        if not authorize_cluster(ctx, ALTER_CONFIGS):
            return ErrorCode.cluster_authorization_failed, MSG_CLUSTER
        if kind == ConfigResourceType.BROKER_LOGGER:
            return ErrorCode.invalid_request, f"Unsupported resource type {kind}"
        if resource.resource_name:  # Kafka's validateResourceNameIsCurrentNodeId
            broker_id = java_int(resource.resource_name)
            if broker_id is None:
                return (ErrorCode.invalid_request,
                        f"Node id must be an integer, but it is: {resource.resource_name}")
            if broker_id != broker.node_id:
                return ErrorCode.invalid_request, (
                    f"Unexpected broker id, expected {broker.node_id}, but received "
                    f"{resource.resource_name}")
        if resource.resource_name == str(broker.node_id):
            try:
                broker.validate_dynamic_config(_proposed(broker, resource, incremental))
            except ConfigError as e:
                return ErrorCode.invalid_request, str(e)
    return None


def _proposed(broker: Broker, resource: Any, incremental: bool) -> dict[str, str | None]:
    """This broker's dynamic configs as the request would leave them: AlterConfigs
    replaces them, IncrementalAlterConfigs sets and deletes keys (lists are the
    controller's to append to and subtract from; no TLS key is one)."""
    if not incremental:
        return {c.name: c.value for c in resource.configs}
    proposed: dict[str, str | None] = dict(broker.image.broker_configs(broker.node_id))
    for config in resource.configs:
        if config.config_operation == OP_SET:
            proposed[config.name] = config.value
        elif config.config_operation == OP_DELETE:
            proposed.pop(config.name, None)
    return proposed


async def forward_alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """AlterConfigs and IncrementalAlterConfigs: the resources the broker answers itself
    (a resource named twice is always the controller's to refuse), the rest forwarded;
    the answers in the request's order."""
    incremental = ctx.header.api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
    named = Counter((r.resource_type, r.resource_name) for r in req.resources)
    here = {}
    for i, resource in enumerate(req.resources):
        if named[(resource.resource_type, resource.resource_name)] == 1:
            answer = _answered_here(broker, ctx, resource, incremental)
            if answer is not None:
                here[i] = {"error_code": answer[0], "error_message": answer[1],
                           "resource_type": resource.resource_type,
                           "resource_name": resource.resource_name}
    if not here:
        return await forward(broker, ctx, req)
    rest = [r for i, r in enumerate(req.resources) if i not in here]
    forwarded: list[Any] = []
    if rest:
        response = await forward(broker, ctx, dataclasses.replace(req, resources=tuple(rest)))
        forwarded = list(response["responses"] if isinstance(response, dict)
                         else response.responses)
    answers = iter(forwarded)
    return {"throttle_time": 0, "responses": [
        here[i] if i in here else next(answers) for i in range(len(req.resources))]}


FORWARDED = [(ApiKey.CREATE_TOPICS, 2, 7), (ApiKey.DELETE_TOPICS, 1, 6),
             (ApiKey.CREATE_PARTITIONS, 0, 3), (ApiKey.ELECT_LEADERS, 0, 2),
             (ApiKey.UPDATE_FEATURES, 0, 1), (ApiKey.DESCRIBE_QUORUM, 0, 2),
             (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1),
             (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0),
             (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0), (ApiKey.ALTER_CLIENT_QUOTAS, 0, 1),
             (ApiKey.CREATE_ACLS, 1, 3), (ApiKey.DELETE_ACLS, 1, 3),
             (ApiKey.ADD_RAFT_VOTER, 0, 1), (ApiKey.REMOVE_RAFT_VOTER, 0, 0),
             (ApiKey.UNREGISTER_BROKER, 0, 0), (ApiKey.UNREGISTER_CONTROLLER, 0, 0)]
"""(api key, min version, max version): the controller serves the same versions."""

APIS: list[ApiSpec[Broker]] = [
    *(ApiSpec(key, low, high, forward) for key, low, high in FORWARDED),
    ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, forward_alter_configs),
    ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, forward_alter_configs),
]
