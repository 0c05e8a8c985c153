"""AlterConfigs, IncrementalAlterConfigs and UpdateFeatures: run on the active controller,
to which brokers forward them."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.server.controller_apis.services import ControllerServices


def _alter_response(results: list[tuple[int, str, ErrorCode, str | None]]) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [
        {"error_code": code, "error_message": msg, "resource_type": rtype,
         "resource_name": rname} for rtype, rname, code, msg in results]}


async def handle_alter_configs(controller: ControllerServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    resources = [(res.resource_type, res.resource_name,
                  {c.name: c.value for c in res.configs}) for res in req.resources]
    results = await controller.channel.submit(
        lambda c: c.configuration.alter_configs(resources, req.validate_only))
    return _alter_response(results)


async def handle_incremental_alter_configs(controller: ControllerServices, ctx: RequestContext,
                                           req: Any) -> dict[str, Any]:
    resources = [(res.resource_type, res.resource_name,
                  [(c.name, c.config_operation, c.value) for c in res.configs])
                 for res in req.resources]
    results = await controller.channel.submit(
        lambda c: c.configuration.incremental_alter_configs(resources, req.validate_only))
    return _alter_response(results)


async def handle_update_features(controller: ControllerServices, ctx: RequestContext,
                                 req: Any) -> dict[str, Any]:
    """Finalize feature levels (metadata.version), all or nothing."""
    # v0 had allow_downgrade; v1 an upgrade type (1 upgrade, 2 safe, 3 unsafe downgrade).
    updates = [(u.feature, u.max_version_level,
                (2 if u.allow_downgrade else 1) if ctx.api_version == 0 else u.upgrade_type)
               for u in req.feature_updates]
    validate_only = bool(getattr(req, "validate_only", False))
    results = await controller.channel.submit(
        lambda c: c.features.update_features(updates, validate_only))
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "results": [{"feature": name, "error_code": error, "error_message": message}
                        for name, (error, message) in results.items()]}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, handle_alter_configs),
    ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle_incremental_alter_configs),
    ApiSpec(ApiKey.UPDATE_FEATURES, 0, 1, handle_update_features),
]
