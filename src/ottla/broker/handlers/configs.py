"""DescribeConfigs for topics, brokers, groups and client-metrics subscriptions, and
ListConfigResources (AlterConfigs and IncrementalAlterConfigs run on the controller:
``server.controller_apis.configs``).

Describing a config reports where its value comes from, with Kafka's precedence: a topic
override, then the broker synonyms (dynamic per-broker, dynamic cluster-wide, static
``server.properties``), then the built-in default.

Authorization (Kafka's ConfigHelper): DESCRIBE_CONFIGS on the cluster for BROKER,
BROKER_LOGGER and CLIENT_METRICS resources, on the topic for a TOPIC, on the group for a
GROUP; a denied resource is answered with the authorization error, after the others. A
resource of any other type fails the whole request (INVALID_REQUEST). ListConfigResources
needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED for it all).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from ottla.broker.broker import Broker
from ottla.common import client_metrics_configs
from ottla.common.config import ConfigKey, ConfigType
from ottla.common.group_configs import GROUP_CONFIGS, describe_group_config
from ottla.common.server_config import INTERNAL_BROKER_KEYS, KafkaConfig
from ottla.common.topic_configs import TOPIC_CONFIGS
from ottla.common.topics import topic_name_problem
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    DESCRIBE_CONFIGS,
    GROUP,
    MSG_CLUSTER,
    MSG_GROUP,
    MSG_TOPIC,
    TOPIC,
    authorize,
    authorize_cluster,
)


class ConfigView(Protocol):
    """What describing configs reads, on a broker or on the controller side of a node."""

    node_id: int
    config: KafkaConfig

    @property
    def image(self) -> MetadataImage: ...


# ConfigSource ids of DescribeConfigs.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
CLIENT_METRICS_CONFIG = 7
GROUP_CONFIG = 8


def _broker_sources(node: ConfigView, name: str) -> list[tuple[str, str | None, int]]:
    """(name, value, source) of every level at which broker key ``name`` is set, most
    specific first, ending with its default if it has one."""
    definitions = node.config.definitions
    key: ConfigKey | None = definitions.keys.get(name)
    found = []
    per_broker = node.image.broker_configs(node.node_id)
    cluster = node.image.broker_configs(None)
    if name in per_broker:
        found.append((name, per_broker[name], DYNAMIC_BROKER_CONFIG))
    if name in cluster:
        found.append((name, cluster[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
    if name in node.config.explicit and key is not None:
        found.append((name, key.render(node.config.explicit[name]), STATIC_BROKER_CONFIG))
    if key is not None and key.default is not None and not key.no_default:
        found.append((name, key.render(key.default), DEFAULT_CONFIG))
    return found


def _synonym_to_topic_value(synonym: str, value: str | None) -> str | None:
    if value is None:
        return None
    if synonym.endswith(".hours"):
        return str(int(value) * 3600000) if int(value) >= 0 else value
    if synonym.endswith(".minutes"):
        return str(int(value) * 60000) if int(value) >= 0 else value
    return value


def describe_topic_configs(node: ConfigView, topic: str, keys: Sequence[str] | None = None,
                           include_synonyms: bool = False, include_docs: bool = False
                           ) -> list[dict[str, Any]]:
    overrides = node.image.topic_configs(topic)
    result = []
    for name, key in TOPIC_CONFIGS.keys.items():
        if keys is not None and name not in keys:
            continue
        # Every level of every broker synonym, level by level (Kafka's configSynonyms).
        found = sorted((entry for synonym in key.synonyms
                        for entry in _broker_sources(node, synonym)), key=lambda e: e[2])
        set_at = [entry for entry in found if entry[2] != DEFAULT_CONFIG]
        if name in overrides:
            value = overrides[name]
        elif set_at:
            value = _synonym_to_topic_value(set_at[0][0], set_at[0][1])
        elif found:  # the broker default of a synonym (log.retention.hours=168) decides
            value = _synonym_to_topic_value(found[0][0], found[0][1])
        else:
            value = key.render(key.default)
        # Kafka lists them from the first synonym's own name on (log.retention.ms for
        # retention.ms): one never set and without a default (null) takes the others
        # with it; a key without a broker synonym lists only the topic's override.
        primary = key.synonyms[0] if key.synonyms else None
        synonyms = found[next((i for i, e in enumerate(found) if e[0] == primary),
                              len(found)):]
        if name in overrides:
            synonyms.insert(0, (name, overrides[name], DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        result.append({
            "name": name, "value": value, "read_only": False, "config_source": source,
            "is_sensitive": key.sensitive,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in synonyms]
            if include_synonyms else [],
            "config_type": int(key.type),
            "documentation": key.doc if include_docs else None,
        })
    return result


def _base_key(node: ConfigView, name: str) -> ConfigKey | None:
    """The definition of a broker key, or of the base of a listener-prefixed one
    (``listener.name.<listener>.<key>``); None for custom keys."""
    keys = node.config.definitions.keys
    if name in keys:
        return keys[name]
    if name.startswith("listener.name."):
        base = name.split(".", 3)[3] if name.count(".") >= 3 else ""
        return keys.get(base) or next(
            (keys[k] for k in keys if base.endswith("." + k)), None)  # <mechanism>.<key>
    return None


def describe_broker_configs(node: ConfigView, keys: Sequence[str] | None, include_synonyms: bool,
                            include_docs: bool) -> list[dict[str, Any]]:
    """Every broker key Kafka defines (internal ones only when set), then the dynamic keys
    it does not name itself (listener-prefixed and custom configs), with their source."""
    from_dynamic_keys = node.config.dynamic_keys
    dynamic = {**node.image.broker_configs(None), **node.image.broker_configs(node.node_id)}
    result = []
    for name, key in node.config.definitions.keys.items():
        if keys is not None and name not in keys:
            continue
        if name in INTERNAL_BROKER_KEYS and name not in dynamic and \
                name not in node.config.explicit:
            continue
        sources = _broker_sources(node, name)
        value, source = (sources[0][1], sources[0][2]) if sources else (None, DEFAULT_CONFIG)
        result.append({
            "name": name, "value": None if key.sensitive else value,
            "read_only": name not in from_dynamic_keys, "config_source": source,
            "is_sensitive": key.sensitive,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in sources]
            if include_synonyms else [],
            "config_type": int(key.described_type),
            "documentation": key.doc if include_docs else None,
        })
    for name in sorted(set(dynamic) - set(node.config.definitions.keys)):
        if keys is not None and name not in keys:
            continue
        base = _base_key(node, name)
        sensitive = base is not None and base.sensitive
        sources = _broker_sources(node, name)
        result.append({
            "name": name, "value": None if sensitive else sources[0][1], "read_only": False,
            "config_source": sources[0][2], "is_sensitive": sensitive,
            "synonyms": [{"name": n, "value": None if sensitive else v, "source": s}
                         for n, v, s in sources] if include_synonyms else [],
            "config_type": int(base.type) if base is not None else 0,
            "documentation": None,
        })
    return result


def describe_group_configs(node: ConfigView, group: str, keys: Sequence[str] | None,
                           include_synonyms: bool, include_docs: bool) -> list[dict[str, Any]]:
    """A group's configs: its override (GROUP_CONFIG) or the broker's default for it,
    as Kafka's ConfigHelper describes a GROUP resource. The synonyms of a key the broker
    supplies the default of are the override then every level of that broker key
    (``group.consumer.heartbeat.interval.ms``), and the first of them is the source;
    a key of the group's own lists itself."""
    overrides = node.image.configs.get((ConfigResourceType.GROUP, group), {})
    result = []
    for name, group_key in GROUP_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        value, overridden = describe_group_config(name, overrides, node.config.get)
        own = (name, value, GROUP_CONFIG if overridden else DEFAULT_CONFIG)
        if group_key.default_from is None:
            synonyms = [own]
        else:
            synonyms = [own] if overridden else []
            synonyms += _broker_sources(node, group_key.default_from)
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        result.append({
            "name": name, "value": value, "read_only": False, "config_source": source,
            "is_sensitive": False,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in synonyms]
            if include_synonyms else [],
            "config_type": int(group_key.key.type),
            "documentation": group_key.key.doc if include_docs else None,
        })
    return result


def describe_cluster_defaults(node: ConfigView, keys: Sequence[str] | None,
                              include_synonyms: bool, include_docs: bool
                              ) -> list[dict[str, Any]]:
    """The broker resource named "": only the cluster-wide dynamic defaults, as Kafka
    describes it (``kafka-configs --entity-type brokers --entity-default``)."""
    result = []
    for name, value in sorted(node.image.broker_configs(None).items()):
        if keys is not None and name not in keys:
            continue
        key = node.config.definitions.keys.get(name)
        sensitive = key is not None and key.sensitive
        shown = None if sensitive else value
        result.append({
            "name": name, "value": shown, "read_only": False,
            "config_source": DYNAMIC_DEFAULT_BROKER_CONFIG, "is_sensitive": sensitive,
            "synonyms": [{"name": name, "value": shown,
                          "source": DYNAMIC_DEFAULT_BROKER_CONFIG}]
            if include_synonyms else [],
            "config_type": int(key.type) if key is not None else 0,
            "documentation": key.doc if include_docs and key is not None else None,
        })
    return result


def describe_client_metrics_configs(node: ConfigView, name: str, keys: Sequence[str] | None,
                                    include_synonyms: bool, include_docs: bool
                                    ) -> list[dict[str, Any]]:
    """A subscription's three keys, as Kafka's ConfigHelper describes a CLIENT_METRICS
    resource: its value (CLIENT_METRICS_CONFIG) or the default (DEFAULT_CONFIG), lists
    rendered as Kafka renders a parsed list; a subscription that does not exist shows the
    defaults."""
    overrides = node.image.configs.get((ConfigResourceType.CLIENT_METRICS, name), {})
    result = []
    for key, definition in client_metrics_configs.KEYS.items():
        if keys is not None and key not in keys:
            continue
        if key in overrides:
            raw = overrides[key]
            value = ",".join(client_metrics_configs.parse_list(raw)) \
                if definition.type == ConfigType.LIST else raw.strip()
            source = CLIENT_METRICS_CONFIG
        else:
            value, source = definition.default, DEFAULT_CONFIG
        result.append({
            "name": key, "value": value, "read_only": False, "config_source": source,
            "is_sensitive": False,
            "synonyms": [{"name": key, "value": value, "source": source}]
            if include_synonyms and source == CLIENT_METRICS_CONFIG else [],
            "config_type": int(definition.type),
            "documentation": definition.doc if include_docs else None,
        })
    return result


_CLUSTER_RESOURCES = (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER,
                      ConfigResourceType.CLIENT_METRICS)


def describe_denial(ctx: RequestContext, resource_type: int, name: str
                    ) -> tuple[ErrorCode, str] | None:
    """The authorization error of describing one resource's configs, or None;
    INVALID_REQUEST (for the whole request) for a resource type Kafka does not know."""
    if resource_type in _CLUSTER_RESOURCES:
        allowed = authorize_cluster(ctx, DESCRIBE_CONFIGS)
        denial = ErrorCode.cluster_authorization_failed, MSG_CLUSTER
    elif resource_type == ConfigResourceType.TOPIC:
        allowed = authorize(ctx, DESCRIBE_CONFIGS, TOPIC, name)
        denial = ErrorCode.topic_authorization_failed, MSG_TOPIC
    elif resource_type == ConfigResourceType.GROUP:
        allowed = authorize(ctx, DESCRIBE_CONFIGS, GROUP, name)
        denial = ErrorCode.group_authorization_failed, MSG_GROUP
    else:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected resource type {resource_type} for resource {name}")
    return None if allowed else denial


JAVA_INT = re.compile(r"[+-]?[0-9]+")
"""What Java's Integer.parseInt takes (within the int range, checked apart)."""


def java_int(text: str) -> int | None:
    """``text`` as Java's Integer.parseInt reads it, or None where it throws."""
    if not JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -2**31 <= value < 2**31 else None


def broker_id_problem(name: str, node_id: int) -> str | None:
    """Why a DescribeConfigs BROKER resource named ``name`` is not this broker's
    (Kafka's ConfigHelper), or None if it is."""
    broker_id = java_int(name)
    if broker_id is None:
        return f"Broker id must be an integer, but it is: {name}"
    if broker_id != node_id:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    return None


def handle_describe_configs(node: ConfigView, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """DescribeConfigs, on a broker and on the controller listener alike (Kafka's
    ConfigHelper serves both), from the node's own config and metadata image."""
    results = []
    refused = []
    include_synonyms = bool(getattr(req, "include_synonyms", False))
    include_docs = bool(getattr(req, "include_documentation", False))
    for res in req.resources:
        denial = describe_denial(ctx, res.resource_type, res.resource_name)
        if denial is not None:
            refused.append({"error_code": denial[0], "error_message": denial[1],
                            "resource_type": res.resource_type,
                            "resource_name": res.resource_name, "configs": []})
            continue
        entry: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None,
                                 "resource_type": res.resource_type,
                                 "resource_name": res.resource_name, "configs": []}
        keys = res.configuration_keys
        if res.resource_type == ConfigResourceType.TOPIC:
            problem = topic_name_problem(res.resource_name)
            if problem is not None:  # as Kafka's ConfigHelper: Topic.validate first
                entry["error_code"] = ErrorCode.invalid_topic_exception
                entry["error_message"] = problem
            elif res.resource_name not in node.image.topics_by_name:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
                entry["error_message"] = f"Topic {res.resource_name} does not exist."
            else:
                entry["configs"] = describe_topic_configs(node, res.resource_name, keys,
                                                          include_synonyms, include_docs)
        elif res.resource_type == ConfigResourceType.BROKER:
            if res.resource_name == "":
                entry["configs"] = describe_cluster_defaults(node, keys, include_synonyms,
                                                             include_docs)
            elif (problem := broker_id_problem(res.resource_name, node.node_id)) is not None:
                entry["error_code"] = ErrorCode.invalid_request
                entry["error_message"] = problem
            else:
                entry["configs"] = describe_broker_configs(node, keys, include_synonyms,
                                                           include_docs)
        elif res.resource_type == ConfigResourceType.BROKER_LOGGER:
            entry["configs"] = []
        elif res.resource_type == ConfigResourceType.CLIENT_METRICS:
            if not res.resource_name:
                entry["error_code"] = ErrorCode.invalid_request
                entry["error_message"] = "Client metrics subscription name must not be empty"
            else:
                entry["configs"] = describe_client_metrics_configs(
                    node, res.resource_name, keys, include_synonyms, include_docs)
        elif res.resource_type == ConfigResourceType.GROUP:
            if not res.resource_name:
                entry["error_code"] = ErrorCode.invalid_request
                entry["error_message"] = "Group name must not be empty"
            else:
                entry["configs"] = describe_group_configs(node, res.resource_name, keys,
                                                          include_synonyms, include_docs)
        else:
            entry["error_code"] = ErrorCode.invalid_request
            entry["error_message"] = f"Unsupported resource type {res.resource_type}"
        results.append(entry)
    return {"throttle_time": 0, "results": results + refused}


LISTED_TYPES = {0: (ConfigResourceType.CLIENT_METRICS,),
                1: (ConfigResourceType.GROUP, ConfigResourceType.CLIENT_METRICS,
                    ConfigResourceType.BROKER_LOGGER, ConfigResourceType.BROKER,
                    ConfigResourceType.TOPIC)}
"""The types each ListConfigResources version lists (v0 was ListClientMetricsResources),
in the order Kafka's handleListConfigResources lists them."""


def handle_list_config_resources(broker: Broker, ctx: RequestContext, req: Any
                                 ) -> dict[str, Any]:
    """ListConfigResources (KIP-1142; KIP-714's ListClientMetricsResources at v0): the
    groups with configs, the client-metrics subscriptions, the unfenced brokers with an
    endpoint on this listener (as loggers and as brokers), the topics; only the types asked
    for (all by default), a type Kafka does not list failing the request with
    UNSUPPORTED_VERSION."""
    if not authorize_cluster(ctx, DESCRIBE_CONFIGS):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "config_resources": []}
    supported = LISTED_TYPES[min(ctx.api_version, 1)]
    asked = set(getattr(req, "resource_types", ()) or supported)
    if not asked <= set(supported):
        return {"throttle_time": 0, "error_code": ErrorCode.unsupported_version,
                "config_resources": []}
    image = broker.image
    brokers = sorted(b.broker_id for b in image.brokers.values()
                     if not b.fenced and ctx.listener_name in b.endpoints)
    names = {
        ConfigResourceType.GROUP: sorted(n for t, n in image.configs
                                         if t == ConfigResourceType.GROUP),
        ConfigResourceType.CLIENT_METRICS: sorted(n for t, n in image.configs
                                                  if t == ConfigResourceType.CLIENT_METRICS),
        ConfigResourceType.BROKER_LOGGER: [str(b) for b in brokers],
        ConfigResourceType.BROKER: [str(b) for b in brokers],
        ConfigResourceType.TOPIC: sorted(image.topics_by_name),
    }
    typed = ctx.api_version >= 1
    return {"throttle_time": 0, "error_code": ErrorCode.none, "config_resources": [
        {"resource_name": name, **({"resource_type": int(kind)} if typed else {})}
        for kind in supported if kind in asked for name in names[kind]]}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, handle_describe_configs),
    ApiSpec(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, handle_list_config_resources),
]
