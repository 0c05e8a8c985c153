"""Per-group dynamic configs (Kafka's GroupConfig, config resource type GROUP).

A group's override of ``consumer.session.timeout.ms`` and the other keys below beats the
broker's ``group.consumer.*`` default; each value must lie within the broker's bounds, and
the session timeout must exceed the heartbeat interval, checked as Kafka's
``GroupConfig.validateValues`` checks them (same order, same messages).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ottla.common.config import ConfigError, ConfigKey, ConfigType, at_least


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    key: ConfigKey
    default_from: str
    """The broker config whose value is the group's default."""
    min_key: str
    max_key: str


def _key(name: str, minimum: int, default_from: str, min_key: str, max_key: str,
         doc: str) -> GroupConfigKey:
    return GroupConfigKey(ConfigKey(name, ConfigType.INT, None, doc, at_least(minimum)),
                          default_from, min_key, max_key)


GROUP_CONFIGS: dict[str, GroupConfigKey] = {k.key.name: k for k in (
    _key("consumer.session.timeout.ms", 1, "group.consumer.session.timeout.ms",
         "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
         "The timeout to detect client failures when using the consumer group protocol."),
    _key("consumer.heartbeat.interval.ms", 1, "group.consumer.heartbeat.interval.ms",
         "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
         "The heartbeat interval given to the members of a consumer group."),
    _key("share.session.timeout.ms", 1, "group.share.session.timeout.ms",
         "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
         "The timeout to detect client failures when using the share group protocol."),
    _key("share.heartbeat.interval.ms", 1, "group.share.heartbeat.interval.ms",
         "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
         "The heartbeat interval given to the members of a share group."),
    _key("share.record.lock.duration.ms", 1000, "group.share.record.lock.duration.ms",
         "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
         "The record acquisition lock duration in milliseconds for share groups."),
)}

# Kafka's validateValues order: the bounds, then session timeout above heartbeat interval.
_BOUND_ORDER = ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
                "share.heartbeat.interval.ms", "share.session.timeout.ms",
                "share.record.lock.duration.ms")


def validate_group_configs(configs: Mapping[str, str], broker: Callable[[str], Any]) -> None:
    """Raise ConfigError (Kafka's InvalidConfigurationException) unless ``configs``, laid
    over the broker's defaults (``broker(name)`` reads a broker config), are valid."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}")
    values = {name: int(broker(k.default_from)) for name, k in GROUP_CONFIGS.items()}
    for name, raw in configs.items():
        values[name] = GROUP_CONFIGS[name].key.parse(raw)
    for name in _BOUND_ORDER:
        k = GROUP_CONFIGS[name]
        if values[name] < int(broker(k.min_key)):
            raise ConfigError(f"{name} must be greater than or equal to {k.min_key}")
        if values[name] > int(broker(k.max_key)):
            raise ConfigError(f"{name} must be less than or equal to {k.max_key}")
    for kind in ("consumer", "share"):
        if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
            raise ConfigError(f"{kind}.session.timeout.ms must be greater than "
                              f"{kind}.heartbeat.interval.ms")
