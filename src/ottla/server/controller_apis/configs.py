"""AlterConfigs, IncrementalAlterConfigs and UpdateFeatures: run on the active controller,
to which brokers forward them. DescribeConfigs is answered by any controller from its own
image, as a broker answers it (kafka-configs --bootstrap-controller, KIP-919).

Authorization (Kafka's ``ControllerApis.authorizeAlterResource``), per resource: ALTER_CONFIGS
on the cluster for BROKER and CLIENT_METRICS resources, on the topic for a TOPIC, on the
group for a GROUP; a BROKER_LOGGER change (IncrementalAlterConfigs) needs CLUSTER_ACTION.
A denied resource is answered with the authorization error and left out of the change;
a resource named twice is INVALID_REQUEST "Duplicate resource." (before any check).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from ottla.broker.handlers.configs import handle_describe_configs
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER_ACTION,
    GROUP,
    MSG_CLUSTER,
    MSG_GROUP,
    MSG_TOPIC,
    TOPIC,
    authorize,
    authorize_cluster,
    deny_cluster,
)
from ottla.server.controller_apis.services import ControllerServices

Result = tuple[int, str, ErrorCode, str | None]


def alter_denial(ctx: RequestContext, resource_type: int, name: str, incremental: bool
                 ) -> tuple[ErrorCode, str] | None:
    """The authorization error of changing one resource's configs, or None."""
    if resource_type in (ConfigResourceType.BROKER, ConfigResourceType.CLIENT_METRICS):
        allowed = authorize_cluster(ctx, ALTER_CONFIGS)
        denial = ErrorCode.cluster_authorization_failed, MSG_CLUSTER
    elif resource_type == ConfigResourceType.BROKER_LOGGER and incremental:
        allowed = authorize_cluster(ctx, CLUSTER_ACTION)
        denial = ErrorCode.cluster_authorization_failed, MSG_CLUSTER
    elif resource_type == ConfigResourceType.TOPIC:
        allowed = authorize(ctx, ALTER_CONFIGS, TOPIC, name)
        denial = ErrorCode.topic_authorization_failed, MSG_TOPIC
    elif resource_type == ConfigResourceType.GROUP:
        allowed = authorize(ctx, ALTER_CONFIGS, GROUP, name)
        denial = ErrorCode.group_authorization_failed, MSG_GROUP
    else:
        return None  # refused by the controller, whoever asks
    return None if allowed else denial


async def _authorized_alter(ctx: RequestContext, req: Any, incremental: bool,
                            alter: Callable[[list[Any]], Awaitable[list[Result]]]
                            ) -> dict[str, Any]:
    """Run ``alter`` on the resources that are neither named twice nor denied; every
    resource's answer in the request's order."""
    keys = [(res.resource_type, res.resource_name) for res in req.resources]
    named = Counter(keys)
    answers: dict[int, Result] = {}
    kept: list[int] = []
    for i, res in enumerate(req.resources):
        if named[keys[i]] > 1:
            answers[i] = (*keys[i], ErrorCode.invalid_request, "Duplicate resource.")
            continue
        denial = alter_denial(ctx, res.resource_type, res.resource_name, incremental)
        if denial is not None:
            answers[i] = (*keys[i], *denial)
        else:
            kept.append(i)
    if kept:
        answers.update(zip(kept, await alter([req.resources[i] for i in kept])))
    return _alter_response([answers[i] for i in range(len(keys))])


def _alter_response(results: list[Result]) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [
        {"error_code": code, "error_message": msg, "resource_type": rtype,
         "resource_name": rname} for rtype, rname, code, msg in results]}


async def handle_alter_configs(controller: ControllerServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    async def alter(kept: list[Any]) -> list[Result]:
        resources = [(res.resource_type, res.resource_name,
                      {c.name: c.value for c in res.configs}) for res in kept]
        results: list[Result] = await controller.channel.submit(
            lambda c: c.configuration.alter_configs(resources, req.validate_only,
                                                    ctx.forwarded))
        return results
    return await _authorized_alter(ctx, req, False, alter)


async def handle_incremental_alter_configs(controller: ControllerServices, ctx: RequestContext,
                                           req: Any) -> dict[str, Any]:
    async def alter(kept: list[Any]) -> list[Result]:
        resources = [(res.resource_type, res.resource_name,
                      [(c.name, c.config_operation, c.value) for c in res.configs])
                     for res in kept]
        results: list[Result] = await controller.channel.submit(
            lambda c: c.configuration.incremental_alter_configs(resources, req.validate_only,
                                                                ctx.forwarded))
        return results
    return await _authorized_alter(ctx, req, True, alter)


async def handle_update_features(controller: ControllerServices, ctx: RequestContext,
                                 req: Any) -> dict[str, Any]:
    """Finalize feature levels (metadata.version), all or nothing (ALTER on the
    cluster)."""
    denied = deny_cluster(ctx, req, ALTER)
    if denied is not None:
        return denied
    # v0 had allow_downgrade; v1 an upgrade type (1 upgrade, 2 safe, 3 unsafe downgrade).
    updates = [(u.feature, u.max_version_level,
                (2 if u.allow_downgrade else 1) if ctx.api_version == 0 else u.upgrade_type)
               for u in req.feature_updates]
    validate_only = bool(getattr(req, "validate_only", False))
    error, message = await controller.channel.submit(
        lambda c: c.features.update_features(updates, validate_only))
    if error != ErrorCode.none:  # Kafka's QuorumController.updateFeatures: no results
        return {"throttle_time": 0, "error_code": error, "results": [],
                "error_message": "The update failed for all features since the following "
                                 f"feature had an error: {message}"}
    # Kafka lists each feature (v0-1) with the message of Errors.NONE, its name.
    return {"throttle_time": 0, "error_code": error, "error_message": None,
            "results": [{"feature": u.feature, "error_code": error, "error_message": "NONE"}
                        for u in req.feature_updates]}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, handle_describe_configs),
    ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, handle_alter_configs),
    ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle_incremental_alter_configs),
    ApiSpec(ApiKey.UPDATE_FEATURES, 0, 1, handle_update_features),
]
