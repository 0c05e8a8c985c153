"""Per-group dynamic configs (Kafka's GroupConfig, config resource type GROUP).

A group's override of ``consumer.session.timeout.ms`` and the other integer keys below
beats the broker's ``group.consumer.*`` / ``group.share.*`` default and must lie within the
broker's bounds; the session timeout must exceed the heartbeat interval. The share keys
without a broker synonym (``share.auto.offset.reset``, ``share.isolation.level`` and the
KIP-1191 dead-letter queue) have GroupConfig's own defaults. ``validate_group_configs``
checks a new set as Kafka's ``GroupConfig.validate`` does (the overrides laid over the
broker's defaults, parsed in definition order, then ``validateValues``: same order, same
messages), and ``share_group_settings`` gives a share-partition leader a group's effective
values.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

from ottla.common.config import INT_MAX, ConfigError, ConfigKey, ConfigType, at_least, one_of
from ottla.common.iso_duration import DurationParseError, parse_duration

log = logging.getLogger(__name__)

BrokerConfig = Callable[[str], Any]
"""Reads a broker config by name (typed), e.g. ``Broker.dynamic_config``."""

SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    key: ConfigKey
    """Type, GroupConfig's own default (used when there is no ``default_from``), validator."""
    default_from: str | None = None
    """The broker config whose value is the group's default."""
    min_key: str | None = None
    max_key: str | None = None
    """The broker configs bounding an override (integer keys)."""


def _int(name: str, minimum: int, default_from: str, min_key: str, max_key: str,
         doc: str) -> GroupConfigKey:
    return GroupConfigKey(ConfigKey(name, ConfigType.INT, None, doc, at_least(minimum)),
                          default_from, min_key, max_key)


class ResetStrategy(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"
    BY_DURATION = "by_duration"


EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
"""ListOffsets' special timestamps (Kafka's ListOffsetsRequest)."""


@dataclass(frozen=True, slots=True)
class ShareAutoOffsetReset:
    """Where a share-partition with no stored state starts (Kafka's
    ShareGroupAutoOffsetResetStrategy)."""

    strategy: ResetStrategy
    duration_ms: int = 0
    """For BY_DURATION: how far before now (never negative)."""

    def timestamp(self, now_ms: int) -> int:
        """The ListOffsets timestamp to start from, as the strategy's ``timestamp()``:
        EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, or ``now_ms`` minus the duration (never
        below 0, so a duration longer than the epoch cannot read as -1 or -2)."""
        if self.strategy is ResetStrategy.EARLIEST:
            return EARLIEST_TIMESTAMP
        if self.strategy is ResetStrategy.LATEST:
            return LATEST_TIMESTAMP
        return max(0, now_ms - self.duration_ms)


_RESET_MESSAGE = ("Invalid value `{value}` for configuration {name}. The value must be either "
                  "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def parse_share_auto_offset_reset(value: str, name: str = SHARE_AUTO_OFFSET_RESET
                                  ) -> ShareAutoOffsetReset:
    """``value`` (already trimmed) as Kafka's ShareGroupAutoOffsetResetStrategy.fromString:
    ``earliest``, ``latest`` or ``by_duration:<ISO-8601 duration>`` (lower case; a negative
    duration is refused); ConfigError with its Validator's message otherwise."""
    if value in (ResetStrategy.EARLIEST, ResetStrategy.LATEST):
        return ShareAutoOffsetReset(ResetStrategy(value))
    prefix = ResetStrategy.BY_DURATION + ":"
    if value.startswith(prefix):
        try:
            duration = parse_duration(value[len(prefix):])
        except DurationParseError:
            duration = None
        if duration is not None and not duration.is_negative:
            return ShareAutoOffsetReset(ResetStrategy.BY_DURATION, duration.to_millis())
    raise ConfigError(f"Invalid value {value} for configuration {name}: " +
                      _RESET_MESSAGE.format(value=value, name=name))


def _validate_reset(name: str, value: Any) -> None:
    if value is not None:
        parse_share_auto_offset_reset(value, name)


class IsolationLevel(IntEnum):
    """Kafka's IsolationLevel: its wire id (as in Fetch) and its config name."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    def __str__(self) -> str:
        return self.name.lower()


GROUP_CONFIGS: dict[str, GroupConfigKey] = {k.key.name: k for k in (
    _int("consumer.session.timeout.ms", 1, "group.consumer.session.timeout.ms",
         "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
         "The timeout to detect client failures when using the consumer group protocol."),
    _int("consumer.heartbeat.interval.ms", 1, "group.consumer.heartbeat.interval.ms",
         "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
         "The heartbeat interval given to the members of a consumer group."),
    _int("consumer.assignment.interval.ms", 0, "group.consumer.assignment.interval.ms",
         "group.consumer.min.assignment.interval.ms",
         "group.consumer.max.assignment.interval.ms",
         "The least time between two target-assignment computations of a consumer group."),
    _int("share.session.timeout.ms", 1, "group.share.session.timeout.ms",
         "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
         "The timeout to detect client failures when using the share group protocol."),
    _int("share.heartbeat.interval.ms", 1, "group.share.heartbeat.interval.ms",
         "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
         "The heartbeat interval given to the members of a share group."),
    _int("share.record.lock.duration.ms", 1000, "group.share.record.lock.duration.ms",
         "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
         "The record acquisition lock duration in milliseconds for share groups."),
    _int("share.delivery.count.limit", 2, "group.share.delivery.count.limit",
         "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit",
         "The maximum number of delivery attempts for a record delivered to a share group."),
    _int("share.partition.max.record.locks", 100, "group.share.partition.max.record.locks",
         "group.share.min.partition.max.record.locks",
         "group.share.max.partition.max.record.locks",
         "Share-group record lock limit per share-partition."),
    GroupConfigKey(ConfigKey(
        SHARE_AUTO_OFFSET_RESET, ConfigType.STRING, ResetStrategy.LATEST.value,
        "The strategy to initialize the share-partition start offset: earliest, latest, or "
        "by_duration:<duration> (a duration from now in ISO8601 format, PnDTnHnMn.nS; "
        "negative durations are not allowed).", _validate_reset)),
    GroupConfigKey(ConfigKey(
        SHARE_ISOLATION_LEVEL, ConfigType.STRING, str(IsolationLevel.READ_UNCOMMITTED),
        "Controls how to read records written transactionally. If set to \"read_committed\", "
        "the share group will only deliver transactional records which have been committed. "
        "If set to \"read_uncommitted\", the share group will return all messages, even "
        "transactional messages which have been aborted. Non-transactional records will be "
        "returned unconditionally in either mode.",
        one_of(str(IsolationLevel.READ_COMMITTED), str(IsolationLevel.READ_UNCOMMITTED)))),
    _int("share.assignment.interval.ms", 0, "group.share.assignment.interval.ms",
         "group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms",
         "The least time between two target-assignment computations of a share group."),
    GroupConfigKey(ConfigKey(
        DLQ_TOPIC_NAME, ConfigType.STRING, "",
        "The name of the topic to be used as the dead-letter queue (DLQ) topic for this "
        "share group. If blank (the default), the group does not have a DLQ topic.")),
    GroupConfigKey(ConfigKey(
        DLQ_COPY_RECORD_ENABLE, ConfigType.BOOLEAN, False,
        "When writing onto the dead-letter queue topic, whether to copy the original record "
        "onto the DLQ topic, or just write a record containing the context information "
        "headers.")),
)}
"""In GroupConfig's definition order, which is the order values are parsed in."""

# Kafka's validateValues order: the bounds, then session timeout above heartbeat interval.
_BOUND_ORDER = ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
                "consumer.assignment.interval.ms", "share.heartbeat.interval.ms",
                "share.session.timeout.ms",
                "share.record.lock.duration.ms", "share.delivery.count.limit",
                "share.partition.max.record.locks", "share.assignment.interval.ms")

_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def parse_group_config(name: str, raw: Any) -> Any:
    """A value of group config ``name`` as Kafka's ``ConfigDef.parseType`` and the key's
    validator take it: trimmed, then typed (Kafka's messages), then validated."""
    key = GROUP_CONFIGS[name].key
    if not isinstance(raw, str):
        value = raw
    elif key.type == ConfigType.INT:
        text = raw.strip()
        if not _JAVA_INT.fullmatch(text) or not -INT_MAX - 1 <= int(text) <= INT_MAX:
            raise ConfigError(f"Invalid value {raw} for configuration {name}: "
                              "Not a number of type INT")
        value = int(text)
    elif key.type == ConfigType.BOOLEAN:
        text = raw.strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(f"Invalid value {raw} for configuration {name}: "
                              "Expected value to be either true or false")
        value = text == "true"
    else:
        value = raw.strip()
    if key.validator is not None:
        key.validator(name, value)
    return value


def _default(name: str, broker: BrokerConfig) -> Any:
    """The group's value of ``name`` when it has no override."""
    key = GROUP_CONFIGS[name]
    if key.default_from is not None:
        return int(broker(key.default_from))
    return key.key.default


def validate_group_configs(configs: Mapping[str, str], broker: BrokerConfig) -> None:
    """Raise ConfigError (Kafka's InvalidConfigurationException) unless ``configs``, laid
    over the broker's defaults (``broker(name)`` reads a broker config), are valid."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}")
    values = {name: parse_group_config(name, configs[name]) if name in configs
              else _default(name, broker) for name in GROUP_CONFIGS}
    for name in _BOUND_ORDER:
        k = GROUP_CONFIGS[name]
        assert k.min_key is not None and k.max_key is not None
        if values[name] < int(broker(k.min_key)):
            raise ConfigError(f"{name} must be greater than or equal to {k.min_key}")
        if values[name] > int(broker(k.max_key)):
            raise ConfigError(f"{name} must be less than or equal to {k.max_key}")
    for kind in ("consumer", "share"):
        if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
            raise ConfigError(f"{kind}.session.timeout.ms must be greater than "
                              f"{kind}.heartbeat.interval.ms")
    # KIP-1191: names starting with "__" are Kafka's internal topics.
    if values[DLQ_TOPIC_NAME].startswith("__"):
        raise ConfigError(f"{DLQ_TOPIC_NAME}: DLQ topic name must not start with '__'")


def describe_group_config(name: str, overrides: Mapping[str, str], broker: BrokerConfig
                          ) -> tuple[str, bool]:
    """What DescribeConfigs shows for group config ``name``: the group's override, else
    the default (the broker synonym's value, or GroupConfig's own), as Kafka renders it;
    and whether it is an override (GROUP_CONFIG) rather than a default (DEFAULT_CONFIG)."""
    if name in overrides:
        return overrides[name], True
    key = GROUP_CONFIGS[name].key
    rendered = key.render(_default(name, broker))
    return ("" if rendered is None else rendered), False


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """A share group's effective configs, as a share-partition leader uses them."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    auto_offset_reset: ShareAutoOffsetReset
    isolation_level: IsolationLevel
    dlq_topic: str | None
    """``errors.deadletterqueue.topic.name``, None when blank. Whether the DLQ is used at
    all also depends on share.version (``features.share_dlq_enabled``)."""
    dlq_copy_record: bool


def effective_group_config(group_id: str, name: str, overrides: Mapping[str, str],
                           broker: BrokerConfig) -> Any:
    """The override if it parses, clamped to the broker's current bounds as Kafka's
    ``GroupConfig.evaluate`` clamps (the bounds may have moved since it was set); else the
    default."""
    default = _default(name, broker)
    raw = overrides.get(name)
    if raw is None:
        return default
    try:
        value = parse_group_config(name, raw)
    except ConfigError as e:
        log.warning("Ignoring group config %s of group %s: %s", name, group_id, e)
        return default
    key = GROUP_CONFIGS[name]
    if key.min_key is not None and key.max_key is not None:
        low, high = int(broker(key.min_key)), int(broker(key.max_key))
        if not low <= value <= high:
            capped = min(max(value, low), high)
            log.warning("The group config '%s' for group '%s' has value %s outside the "
                        "broker's allowed range %s to %s. The effective value will be "
                        "capped to %s.", name, group_id, value, low, high, capped)
            value = capped
    return value


def share_group_settings(group_configs: Mapping[str, str], broker: BrokerConfig,
                         group_id: str = "") -> ShareGroupSettings:
    """The effective share settings of a group whose dynamic configs (the image's
    ``configs[(GROUP, group_id)]``) are ``group_configs``: each override, else the broker
    default (``broker`` reads broker configs, e.g. ``Broker.dynamic_config``)."""
    def get(name: str) -> Any:
        return effective_group_config(group_id, name, group_configs, broker)

    return ShareGroupSettings(
        record_lock_duration_ms=get("share.record.lock.duration.ms"),
        delivery_count_limit=get("share.delivery.count.limit"),
        partition_max_record_locks=get("share.partition.max.record.locks"),
        auto_offset_reset=parse_share_auto_offset_reset(get(SHARE_AUTO_OFFSET_RESET)),
        isolation_level=IsolationLevel[get(SHARE_ISOLATION_LEVEL).upper()],
        dlq_topic=get(DLQ_TOPIC_NAME) or None,
        dlq_copy_record=get(DLQ_COPY_RECORD_ENABLE))
