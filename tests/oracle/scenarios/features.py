"""UpdateFeatures refusals (KIP-584): metadata.version downgrades, which Kafka allows only
across versions that changed no metadata, and a feature level whose dependency the same
request would break. Every request is validate-only, so the nodes stay as they were."""

from __future__ import annotations

import re
from typing import Any

from ottla.protocol.api import ApiKey
from tests.oracle.model import Json, Normalise, scenario
from tests.oracle.target import Target

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def newest_levels(value: Json) -> Json:
    """A message with the node's own metadata.version (the one it runs at, the newest it
    supports) blanked."""
    if not isinstance(value, str):
        return value
    value = re.sub(r"downgrade from \d+ to", "downgrade from <current> to", value)
    return re.sub(r"only supports versions 7-\d+", "only supports versions 7-<newest>", value)


NEWEST = (Normalise("*", newest_levels, "each node runs at the newest metadata.version it "
                    "supports: Kafka 4.4-IV2 (33), Ottla 4.0-IV3 (25)"),)


def update(t: Target, *updates: tuple[str, int, int]) -> Json:
    """UpdateFeatures v1, validate only: its error and message, and each result's."""
    response: dict[str, Any] = t.request(ApiKey.UPDATE_FEATURES, 1, {
        "timeout_ms": 15000, "validate_only": True, "feature_updates": [
            {"feature": name, "max_version_level": level, "upgrade_type": kind}
            for name, level, kind in updates]}, controller=True)
    return {"error_code": response["error_code"], "error_message": response["error_message"],
            "results": {r["feature"]: [r["error_code"], r["error_message"]]
                        for r in response["results"]}}


@scenario("Features", ci=True, compare_messages=True, normalise=NEWEST)
def metadata_version_downgrades(t: Target) -> Json:
    """metadata.version safe and unsafe downgrades to 3.3-IV3 (across versions that
    changed metadata), a downgrade to a newer version, and a level nobody supports."""
    return {
        "safe": update(t, ("metadata.version", 7, SAFE_DOWNGRADE)),
        "unsafe": update(t, ("metadata.version", 7, UNSAFE_DOWNGRADE)),
        "upgrade_as_downgrade": update(t, ("metadata.version", 7, UPGRADE)),
        "unsupported": update(t, ("metadata.version", 999, UPGRADE)),
    }


@scenario("Features", ci=True, compare_messages=True, normalise=NEWEST)
def feature_dependencies(t: Target) -> Json:
    """eligible.leader.replicas.version 1 with metadata.version 4.0-IV0 in one request: the
    controller meets the updates in its HashMap's order, metadata.version first, whose
    downgrade it refuses (the dependency's own words are in tests/unit); alone, the
    level is accepted (a dry run)."""
    return {
        "elr_with_old_metadata": update(t, ("eligible.leader.replicas.version", 1, UPGRADE),
                                        ("metadata.version", 22, SAFE_DOWNGRADE)),
        "elr_alone": update(t, ("eligible.leader.replicas.version", 1, UPGRADE)),
    }
