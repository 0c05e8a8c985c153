"""ApiVersions: the APIs and version ranges this node serves, and its features."""

from __future__ import annotations

import re
from typing import Any

from ottla.broker.handlers import REGISTRY, handles
from ottla.common.features import SUPPORTED_FEATURES
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

# Features this node can run at (KIP-584): name -> (min level, max level).


def api_keys_for(listener_kind: str) -> list[dict[str, int]]:
    return [{"api_key": spec.api_key, "min_version": spec.min_version,
             "max_version": spec.max_version}
            for spec in sorted(REGISTRY[listener_kind].values(), key=lambda s: s.api_key)]


def unsupported_version_response(listener_kind: str) -> dict[str, Any]:
    """What a client that sent a too-new ApiVersions gets (in the v0 schema)."""
    return {"error_code": ErrorCode.unsupported_version, "api_keys": api_keys_for(listener_kind),
            "throttle_time": 0}


@handles(ApiKey.API_VERSIONS, 0, 4, listeners=("broker", "controller"))
def handle_api_versions(broker: Any, ctx: Any, req: Any) -> dict[str, Any]:
    error = ErrorCode.none
    if ctx.api_version >= 3 and not (_SOFTWARE.match(req.client_software_name or "")
                                     and _SOFTWARE.match(req.client_software_version or "")):
        error = ErrorCode.invalid_request
    features = broker.image.features
    return {
        "error_code": error,
        "api_keys": api_keys_for(ctx.listener_kind),
        "throttle_time": 0,
        "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                               for n, (lo, hi) in SUPPORTED_FEATURES.items()],
        "finalized_features_epoch": broker.image.offset,
        "finalized_features": [{"name": n, "min_version_level": level,
                                "max_version_level": level}
                               for n, level in sorted(features.items())],
        "zk_migration_ready": False,
    }
