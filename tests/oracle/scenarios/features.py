"""UpdateFeatures refusals (KIP-584): metadata.version downgrades, which Kafka allows only
across versions that changed no metadata, and a feature level whose dependency the same
request would break. Every request is validate-only, so the nodes stay as they were."""

from __future__ import annotations

import re
from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import MISSING, Expect, Json, Normalise, scenario
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


def apply_update(t: Target, name: str, level: int, kind: int) -> Json:
    """UpdateFeatures v1 for real (as kafka-features upgrade/downgrade sends it), then
    until the broker's ApiVersions shows the level (a level of 0 is not finalized)."""
    response: dict[str, Any] = t.request(ApiKey.UPDATE_FEATURES, 1, {
        "timeout_ms": 15000, "validate_only": False, "feature_updates": [
            {"feature": name, "max_version_level": level, "upgrade_type": kind}]})

    def shown() -> bool:
        return finalized(t).get(name, 0) == level
    wait_until(shown, 15, 0.1, f"{t.side}'s broker at {name} {level}")
    return {"error_code": response["error_code"], "error_message": response["error_message"],
            "results": {r["feature"]: [r["error_code"], r["error_message"]]
                        for r in response["results"]}}


def finalized(t: Target) -> dict[str, int]:
    response: dict[str, Any] = t.request(ApiKey.API_VERSIONS, 4, {
        "client_software_name": "ottla-oracle", "client_software_version": "1.0"})
    return {f["name"]: f["max_version_level"] for f in response["finalized_features"]}


def group_features(t: Target) -> Json:
    """What kafka-features describe prints, from the broker's ApiVersions v4 (its source:
    Admin.describeFeatures): each supported feature with its finalized level (0 when not
    finalized); and the ranges of the two KIP-848 APIs."""
    response: dict[str, Any] = t.request(ApiKey.API_VERSIONS, 4, {
        "client_software_name": "ottla-oracle", "client_software_version": "1.0"})
    levels = {f["name"]: f["max_version_level"] for f in response["finalized_features"]}
    return {
        "features": {f["name"]: [f["min_version"], f["max_version"],
                                 levels.get(f["name"], 0)]
                     for f in response["supported_features"]},
        "kip848_apis": {a["api_key"]: [a["min_version"], a["max_version"]]
                        for a in response["api_keys"]
                        if a["api_key"] in (ApiKey.CONSUMER_GROUP_HEARTBEAT,
                                            ApiKey.CONSUMER_GROUP_DESCRIBE)},
    }


def kip848(t: Target, group: str, member: str, epoch: int, topic: str) -> Json:
    """A member's ConsumerGroupHeartbeat v1 (its error, and whether it was given an
    epoch: the epochs themselves are opaque, tests/oracle's consumer-group scenario) and
    ConsumerGroupDescribe v1 of its group."""
    beat: dict[str, Any] = t.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": [topic],
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else None})
    described: dict[str, Any] = t.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": [group], "include_authorized_operations": False})
    (group_entry,) = described["groups"]
    return {"heartbeat": [beat["error_code"], beat["error_message"],
                          beat["member_epoch"] > 0],
            "describe": [group_entry["error_code"], group_entry["error_message"],
                         group_entry["group_state"], len(group_entry["members"])],
            "epoch": beat["member_epoch"]}


STREAMS = (
    Expect("*/features/streams.version", "no streams groups (KIP-1071): Ottla supports "
           "streams.version 0 only, and a node leaves out a feature whose newest level is "
           "0, as Kafka's BrokerFeatures does (docs/compatibility.md, Features)",
           ottla=MISSING),
    Expect("*/features/kraft.version/2", "the Ottla node's voters are static "
           "(controller.quorum.voters): kraft.version 0; Kafka's quickstart formats a "
           "dynamic quorum, level 1", kafka=1, ottla=0),
    Expect("*/epoch", "member epochs are opaque counters a client echoes (the "
           "consumer-group-heartbeat-errors scenario)"),
    Expect("streams_version_1/*", "Kafka 4.4 serves streams groups and accepts the level; "
           "Ottla refuses it as a node that does not list the feature (QuorumFeatures)"),
)


@scenario("Features", ci=True, compare_messages=True, expect=STREAMS)
def group_version(t: Target) -> Json:
    """group.version at 1 (a new cluster's), downgraded to 0 and upgraded back, as
    kafka-features does: at each level the features kafka-features describe prints and
    the KIP-848 APIs' ranges (advertised at 0 too), a member's ConsumerGroupHeartbeat and
    ConsumerGroupDescribe (UNSUPPORTED_VERSION at 0; the member joined at 1 heartbeats
    again at 1); and streams.version 1, validate only. group.version ends at 1."""
    topic = t.topic("gv")
    t.create_topic(topic, 1)
    group = t.group("gv")
    t.find_coordinator(group)
    member = "oracle-gv-member-01"
    r: dict[str, Json] = {"at_1": group_features(t)}
    joined = kip848(t, group, member, 0, topic)
    r["joined_at_1"] = joined
    epoch = joined["epoch"]  # type: ignore[index]
    try:
        r["downgrade"] = apply_update(t, "group.version", 0, SAFE_DOWNGRADE)
        r["at_0"] = group_features(t)
        r["member_at_0"] = kip848(t, group, member, epoch, topic)  # type: ignore[arg-type]
        r["new_member_at_0"] = kip848(t, group, "oracle-gv-member-02", 0, topic)
    finally:
        r["upgrade"] = apply_update(t, "group.version", 1, UPGRADE)
    r["back_at_1"] = group_features(t)
    r["member_back_at_1"] = kip848(t, group, member, epoch, topic)  # type: ignore[arg-type]
    r["streams_version_1"] = update(t, ("streams.version", 1, UPGRADE))
    return r
