"""DescribeConfigs for topics, brokers and groups (AlterConfigs and IncrementalAlterConfigs run on
the controller: ``server.controller_apis.configs``).

Describing a config reports where its value comes from, with Kafka's precedence: a topic
override, then the broker synonyms (dynamic per-broker, dynamic cluster-wide, static
``server.properties``), then the built-in default.

Authorization (Kafka's ConfigHelper): DESCRIBE_CONFIGS on the cluster for BROKER,
BROKER_LOGGER and CLIENT_METRICS resources, on the topic for a TOPIC, on the group for a
GROUP; a denied resource is answered with the authorization error, after the others. A
resource of any other type fails the whole request (INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ottla.broker.broker import Broker
from ottla.common.config import ConfigKey
from ottla.common.group_configs import GROUP_CONFIGS, describe_group_config
from ottla.common.server_config import INTERNAL_BROKER_KEYS, KafkaConfig
from ottla.common.topic_configs import TOPIC_CONFIGS
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
    if key is not None and key.default is not None:
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
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
        for synonym in key.synonyms:
            for syn_name, value, source in _broker_sources(node, synonym):
                if source == DEFAULT_CONFIG:
                    continue
                synonyms.append((syn_name, value, source))
        default = key.render(key.default)
        if synonyms:
            first_name, first_value, source = synonyms[0]
            value = first_value if source == DYNAMIC_TOPIC_CONFIG \
                else _synonym_to_topic_value(first_name, first_value)
        else:
            # The broker defaults of synonyms (e.g. log.retention.hours=168) decide it.
            value, source = default, DEFAULT_CONFIG
            for synonym in key.synonyms:
                syn_key = node.config.definitions.keys.get(synonym)
                if syn_key is not None and syn_key.default is not None:
                    value = _synonym_to_topic_value(synonym, syn_key.render(syn_key.default))
                    break
        # Kafka lists the broker default that decides it (e.g. log.retention.hours=168),
        # under the broker key's name and in its unit; the topic's own only without one.
        broker_default = next(
            ((syn, syn_key.render(syn_key.default)) for syn in key.synonyms
             if (syn_key := node.config.definitions.keys.get(syn)) is not None
             and syn_key.default is not None), None)
        if broker_default is not None:
            synonyms.append((*broker_default, DEFAULT_CONFIG))
        else:
            synonyms.append((name, default, DEFAULT_CONFIG))
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
            "config_type": int(key.type),
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
    """A group's configs: its override (GROUP_CONFIG) or the broker's default for it
    (DEFAULT_CONFIG), as Kafka's ConfigHelper describes a GROUP resource."""
    overrides = node.image.configs.get((ConfigResourceType.GROUP, group), {})
    result = []
    for name, group_key in GROUP_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        value, overridden = describe_group_config(name, overrides, node.config.get)
        source = GROUP_CONFIG if overridden else DEFAULT_CONFIG
        result.append({
            "name": name, "value": value, "read_only": False, "config_source": source,
            "is_sensitive": False,
            "synonyms": [{"name": name, "value": value, "source": source}]
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


def handle_describe_configs(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
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
            if res.resource_name not in broker.image.topics_by_name:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
                entry["error_message"] = f"Topic {res.resource_name} does not exist."
            else:
                entry["configs"] = describe_topic_configs(broker, res.resource_name, keys,
                                                          include_synonyms, include_docs)
        elif res.resource_type == ConfigResourceType.BROKER:
            if res.resource_name == "":
                entry["configs"] = describe_cluster_defaults(broker, keys, include_synonyms,
                                                             include_docs)
            elif res.resource_name != str(broker.node_id):
                entry["error_code"] = ErrorCode.invalid_request
                entry["error_message"] = f"Unexpected broker id {res.resource_name}"
            else:
                entry["configs"] = describe_broker_configs(broker, keys, include_synonyms,
                                                           include_docs)
        elif res.resource_type == ConfigResourceType.BROKER_LOGGER:
            entry["configs"] = []
        elif res.resource_type == ConfigResourceType.GROUP:
            if not res.resource_name:
                entry["error_code"] = ErrorCode.invalid_request
                entry["error_message"] = "Group name must not be empty"
            else:
                entry["configs"] = describe_group_configs(broker, res.resource_name, keys,
                                                          include_synonyms, include_docs)
        else:
            entry["error_code"] = ErrorCode.invalid_request
            entry["error_message"] = f"Unsupported resource type {res.resource_type}"
        results.append(entry)
    return {"throttle_time": 0, "results": results + refused}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, handle_describe_configs),
]
