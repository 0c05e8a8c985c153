"""ApiVersions on both listeners a node has: the API ranges, supported features and
finalized levels a client or a tool reads before anything else."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from tests.kafka_versions import NARROWER_BROKER, NARROWER_CONTROLLER
from tests.oracle.model import MISSING, Expect, Json, bug, scenario
from tests.oracle.target import Target

EXTRA_NAMES = {93: "STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE"}
"""APIs newer than the kio schemas Ottla uses."""


def api_name(key: int) -> str:
    """``18 API_VERSIONS``: the key, for order, and Kafka's name, for the reader."""
    known = key in ApiKey._value2member_map_
    return f"{key} {ApiKey(key).name if known else EXTRA_NAMES.get(key, '?')}"


UNSERVED: dict[int, str] = {
    88: "streams groups (KIP-1071) are not served (tests/kafka_versions.py)",
    89: "streams groups (KIP-1071) are not served", 93: "streams groups (KIP-1071) are not served",
}
UNDOCUMENTED_GAPS: dict[int, str] = {}
CONTROLLER_GAPS: dict[int, str] = {}


def unserved(listener: str, keys: dict[int, str], is_bug: bool = False) -> list[Expect]:
    make = bug if is_bug else Expect
    return [make(f"{listener}/api_keys/{api_name(k)}", reason, ottla=MISSING)
            for k, reason in keys.items()]


def narrower(listener: str, table: dict[int, tuple[tuple[int, int], str]]) -> list[Expect]:
    return [Expect(f"{listener}/api_keys/{api_name(k)}/1", reason, ottla=hi)
            if lo == _KAFKA_LOW.get((listener, k), lo) else
            Expect(f"{listener}/api_keys/{api_name(k)}/*", reason)
            for k, ((lo, hi), reason) in table.items()]


_KAFKA_LOW = {("controller", 1): 4}
"""Where Ottla's narrower range also starts higher (Fetch on the controller listener)."""

FEATURES = [
    Expect("*/supported_features/streams.version", "streams groups (KIP-1071) are "
           "not served: Ottla supports level 0 only, and a node leaves out a feature whose "
           "newest level is 0, as Kafka's BrokerFeatures does", ottla=MISSING),
    Expect("*/finalized_features/kraft.version", "the Ottla node's voters are static "
           "(controller.quorum.voters): kraft.version 0, which is not listed; Kafka's "
           "quickstart formats a dynamic quorum, level 1", ottla=MISSING),
    Expect("*/finalized_features/streams.version", "streams groups are not served",
           ottla=MISSING),
]


def describe(t: Target, controller: bool, version: int = 4) -> dict[str, Json]:
    response: dict[str, Any] = t.request(ApiKey.API_VERSIONS, version, {
        "client_software_name": "ottla-oracle", "client_software_version": "1.0"},
        controller=controller)
    return {
        "error_code": response["error_code"],
        "api_keys": {api_name(a["api_key"]): [a["min_version"], a["max_version"]]
                     for a in sorted(response["api_keys"], key=lambda a: a["api_key"])},
        "supported_features": {f["name"]: [f["min_version"], f["max_version"]]
                               for f in response["supported_features"]},
        "finalized_features": {f["name"]: [f["min_version_level"], f["max_version_level"]]
                               for f in response["finalized_features"]},
        "finalized_features_epoch": response["finalized_features_epoch"],
        "zk_migration_ready": response["zk_migration_ready"],
    }


@scenario("ApiVersions", ci=True, expect=(
    *narrower("broker", NARROWER_BROKER), *narrower("controller", NARROWER_CONTROLLER),
    *unserved("*", UNSERVED), *unserved("*", UNDOCUMENTED_GAPS, is_bug=True),
    *unserved("controller", CONTROLLER_GAPS, is_bug=True), *FEATURES))
def api_versions(t: Target) -> Json:
    """ApiVersions v4 on the broker and the controller listener: every API's range, the
    supported features and the finalized levels; and the supported features in v3, which
    older clients send."""
    return {listener: {**describe(t, controller=listener == "controller"),
                       "v3_supported_features": describe(
                           t, controller=listener == "controller",
                           version=3)["supported_features"]}
            for listener in ("broker", "controller")}
