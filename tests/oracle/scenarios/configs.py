"""DescribeConfigs for a topic and for the broker, with synonyms and documentation: each
key's value, source, synonyms, type, read-only and sensitive flags, where both clusters
know the key; and, one difference per key, the keys only one side describes."""

from __future__ import annotations

import re
from typing import Any

from ottla.protocol.api import ApiKey
from tests.oracle.model import MISSING, Expect, Json, Normalise, bug, scenario
from tests.oracle.scenarios.common import keyed
from tests.oracle.target import Target

TOPIC, BROKER, GROUP = 2, 4, 32

PORTS = re.compile(r"127\.0\.0\.1:\d+")


def without_ports(value: Json) -> Json:
    return PORTS.sub("127.0.0.1:<port>", value) if isinstance(value, str) else value


def documented(value: Json) -> Json:
    return "<documentation>" if value else value


NORMALISE = (
    Normalise("*value", without_ports, "listeners name the free ports of each run"),
    Normalise("broker/configs/log.dir*/*value", lambda v: "<log.dirs>" if v else v,
              "each node's data directory"),
    Normalise("*/documentation", documented,
              "Kafka's prose is not the contract: Ottla writes its own text; whether a "
              "key is documented (include_documentation) is compared"),
)


def describe(t: Target, resources: list[tuple[int, str, list[str] | None]],
             synonyms: bool = True, documentation: bool = True) -> list[dict[str, Any]]:
    response = t.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": kind, "resource_name": name,
                       "configuration_keys": keys} for kind, name, keys in resources],
        "include_synonyms": synonyms, "include_documentation": documentation})
    return [{**r, "configs": keyed(r["configs"], "name")} for r in response["results"]]


def topic_only(names: list[str], reason: str, is_bug: bool = False) -> list[Expect]:
    make = bug if is_bug else Expect
    return [make(f"topic/configs/{n}", reason, ottla=MISSING) for n in names]


def only(listener_path: str, side: str, names: list[str], reason: str,
         is_bug: bool = False) -> list[Expect]:
    make = bug if is_bug else Expect
    pin = {"ottla": MISSING} if side == "kafka" else {"kafka": MISSING}
    return [make(f"{listener_path}/{n}", reason, **pin) for n in names]


TIERED = "tiered storage is not served (docs/compatibility.md)"

TOPIC_EXPECT = [
    *topic_only(["remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable",
                 "remote.log.delete.on.disable"], TIERED),
]

STREAMS = ["group.streams.assignment.interval.ms", "group.streams.assignors",
           "group.streams.heartbeat.interval.ms", "group.streams.initial.rebalance.delay.ms",
           "group.streams.max.assignment.interval.ms", "group.streams.max.heartbeat.interval.ms",
           "group.streams.max.session.timeout.ms", "group.streams.max.size",
           "group.streams.max.standby.replicas", "group.streams.min.assignment.interval.ms",
           "group.streams.min.heartbeat.interval.ms", "group.streams.min.session.timeout.ms",
           "group.streams.num.standby.replicas", "group.streams.rack.aware.assignment.tags",
           "group.streams.session.timeout.ms",
           "group.streams.topology.description.plugin.class"]
OAUTH = ["sasl.oauthbearer.allow.unverified.audience", "sasl.oauthbearer.allow.unverified.issuer",
         "sasl.oauthbearer.assertion.algorithm", "sasl.oauthbearer.assertion.claim.aud",
         "sasl.oauthbearer.assertion.claim.exp.seconds", "sasl.oauthbearer.assertion.claim.iss",
         "sasl.oauthbearer.assertion.claim.jti.include",
         "sasl.oauthbearer.assertion.claim.nbf.seconds", "sasl.oauthbearer.assertion.claim.sub",
         "sasl.oauthbearer.assertion.file", "sasl.oauthbearer.assertion.private.key.file",
         "sasl.oauthbearer.assertion.private.key.passphrase",
         "sasl.oauthbearer.assertion.template.file",
         "sasl.oauthbearer.client.credentials.client.id",
         "sasl.oauthbearer.client.credentials.client.secret",
         "sasl.oauthbearer.jwt.retriever.class", "sasl.oauthbearer.jwt.validator.class",
         "sasl.oauthbearer.scope"]
BROKER_KEYS = "broker/configs"

BROKER_EXPECT = [
    *only(BROKER_KEYS, "ottla", ["log.page.cache.window.bytes",
                                 "max.decompressed.batch.bytes", "prometheus.listener"],
          "Ottla's own keys (docs/configuration.md)"),
    *only(BROKER_KEYS, "kafka", STREAMS, "streams groups (KIP-1071) are not served"),
    *only(BROKER_KEYS, "kafka", OAUTH, "Security: no SASL (docs/compatibility.md)"),
    *only(BROKER_KEYS, "kafka", ["log.remote.copy.lag.bytes", "log.remote.copy.lag.ms",
                                 "remote.log.manager.follower.thread.pool.size",
                                 "follower.fetch.last.tiered.offset.enable"], TIERED),
    *only(BROKER_KEYS, "kafka", ["controller.quorum.auto.join.enable"], "Dynamic KRaft "
          "quorum (KIP-853): voters are static"),
    *only(BROKER_KEYS, "kafka", ["transaction.two.phase.commit.enable"], "two-phase commit "
          "(KIP-939, InitProducerId v6) is not served"),
    Expect(f"{BROKER_KEYS}/controller.quorum.*", "the quorum is configured differently: "
           "Kafka's dynamic (controller.quorum.bootstrap.servers), Ottla's static "
           "(controller.quorum.voters): voters are static in Ottla"),
    Expect(f"{BROKER_KEYS}/group.coordinator.rebalance.protocols/*", "streams groups are "
           "not served, so the default lists classic,consumer", kafka="classic,consumer,streams",
           ottla="classic,consumer"),
    Expect(f"{BROKER_KEYS}/queued.max.request.bytes/*", "a different default on purpose: "
           "104857600 bounds unhandled large requests (docs/configuration.md)"),
]


GROUP_KEYS = "group/configs"

GROUP_EXPECT = [
    *only(GROUP_KEYS, "kafka", [
        "streams.assignor.name", "streams.assignment.interval.ms",
        "streams.heartbeat.interval.ms", "streams.initial.rebalance.delay.ms",
        "streams.num.standby.replicas", "streams.rack.aware.assignment.tags",
        "streams.session.timeout.ms"], "streams groups (KIP-1071) are not served"),
    *only(GROUP_KEYS, "kafka", ["share.renew.acknowledge.enable"],
          "the RENEW acknowledgement (KIP-1222) is not served"),
]


@scenario("DescribeConfigs", ci=True, normalise=NORMALISE,
          expect=(*TOPIC_EXPECT, *BROKER_EXPECT, *GROUP_EXPECT))
def describe_configs(t: Target) -> Json:
    """DescribeConfigs v4 with include_synonyms and include_documentation for a topic with
    three overrides, for the broker (node 1) and for a group with two overrides: every key's
    value, source, synonyms, type, read-only and sensitive flags."""
    name, group = t.topic("a"), t.group("g")
    t.create_topic(name, 1, {"retention.ms": "123456", "cleanup.policy": "compact",
                             "max.decompressed.message.bytes": "1048576"})
    altered = t.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": "consumer.heartbeat.interval.ms", "config_operation": 0,
             "value": "6000"},
            {"name": "share.assignment.interval.ms", "config_operation": 0,
             "value": "3000"}]}], "validate_only": False})
    assert altered["responses"][0]["error_code"] == "NONE", altered
    topic, broker, group_configs = describe(t, [(TOPIC, name, None), (BROKER, "1", None),
                                               (GROUP, group, None)])
    return {"topic": topic, "broker": broker, "group": group_configs}


@scenario("DescribeConfigs", normalise=NORMALISE)
def describe_configs_errors(t: Target) -> Json:
    """DescribeConfigs v4 for named keys (one unknown), without synonyms and documentation,
    for an unknown topic, an invalid topic name, another broker id, a bad broker id, and
    an unknown resource type."""
    name = t.topic("a")
    t.create_topic(name, 1, {"retention.ms": "123456"})
    (named,) = describe(t, [(TOPIC, name, ["retention.ms", "no.such.key", "segment.ms"])],
                        synonyms=False, documentation=False)
    errors = describe(t, [(TOPIC, t.topic("nope"), None), (TOPIC, "bad$name", None),
                          (BROKER, "2", None), (BROKER, "one", None), (TOPIC, "", None)])
    unknown_type = t.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 42, "resource_name": "x", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    return {"named_keys": named,
            "errors": [{k: v for k, v in r.items() if k != "configs"} | {
                "configs": len(r["configs"])} for r in errors],
            "unknown_resource_type": unknown_type}
