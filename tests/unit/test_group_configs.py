"""The per-group share configs (Kafka's GroupConfig with ShareGroupConfig's bounds and
KIP-1191's dead-letter queue), the ISO-8601 durations of ``by_duration``, the effective
settings a share-partition leader reads, and the share.version feature that turns share
groups on and off."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ottla.common.config import ConfigError
from ottla.common.features import (
    METADATA_VERSION_LEVEL,
    SHARE_VERSION,
    SUPPORTED_FEATURES,
    default_feature_levels,
    share_dlq_enabled,
    share_groups_enabled,
)
from ottla.common.group_configs import (
    EARLIEST_TIMESTAMP,
    GROUP_CONFIGS,
    LATEST_TIMESTAMP,
    IsolationLevel,
    ResetStrategy,
    ShareAutoOffsetReset,
    ShareGroupSettings,
    describe_group_config,
    parse_share_auto_offset_reset,
    share_group_settings,
    validate_group_configs,
)
from ottla.common.iso_duration import Duration, DurationParseError, parse_duration
from ottla.common.server_config import BROKER_CONFIGS
from ottla.metadata import records as r
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller
from tests.unit.test_broker_handlers import (  # noqa: F401 - the fixture
    ask,
    broker,
    create_topic,
    share_ack_body,
    share_fetch_body,
)

UPGRADE, SAFE_DOWNGRADE = 1, 2
LONG_MAX = 2**63 - 1


def broker_config(**overrides: Any) -> Any:
    """A broker config reader: Kafka's defaults, with ``a_b_c=v`` for ``a.b.c``."""
    given = {k.replace("_", "."): v for k, v in overrides.items()}
    return lambda name: given.get(name, BROKER_CONFIGS[name].default)


def error_of(configs: dict[str, str], **bounds: Any) -> str | None:
    try:
        validate_group_configs(configs, broker_config(**bounds))
    except ConfigError as e:
        return str(e)
    return None


# --- ISO-8601 durations (java.time.Duration.parse) ------------------------------------------
# Every case below was checked against JDK 17's Duration.parse (seconds, nanos, toMillis).

@pytest.mark.parametrize("text,seconds,nanos", [
    ("PT1H", 3600, 0), ("P2D", 172800, 0), ("PT0S", 0, 0), ("PT1M", 60, 0),
    ("pt1h", 3600, 0), ("P1DT2H3M4S", 93784, 0), ("PT1.5S", 1, 500_000_000),
    ("PT1,5S", 1, 500_000_000), ("PT0.000000001S", 0, 1), ("PT1.S", 1, 0),
    ("P1DT2H3M4.000000005S", 93784, 5), ("+PT1M", 60, 0), ("PT+1M", 60, 0),
    ("-PT-1H", 3600, 0), ("PT1H-30M", 1800, 0), ("P-1DT25H", 3600, 0),
    ("PT-1.5S", -2, 500_000_000), ("PT-0.5S", -1, 500_000_000), ("-PT1H", -3600, 0),
    (f"PT{LONG_MAX}S", LONG_MAX, 0), (f"PT-{LONG_MAX + 1}S", -LONG_MAX - 1, 0),
    (f"-PT{LONG_MAX}S", -LONG_MAX, 0),
])
def test_durations_parse_as_java_parses_them(text: str, seconds: int, nanos: int) -> None:
    assert parse_duration(text) == Duration(seconds, nanos)


@pytest.mark.parametrize("text", [
    "", "P", "PT", "pt", "1H", "PT1", "P1W", "P1Y", "P1M", "P1H", "PT1D", "PT1H2H",
    "PT1S1M", "PT 1H", " PT1H", "PT1H ", "PT1.1234567890S", "PT.5S", "PT1.5H",
    "PT\u0661H", "PT--1H", "P1DT", f"PT{LONG_MAX + 1}S", "P106751991167301D",
    f"PT{LONG_MAX}S1", f"-PT-{LONG_MAX + 1}S", f"PT{LONG_MAX}M",
])
def test_what_java_refuses_is_refused(text: str) -> None:
    with pytest.raises(DurationParseError):
        parse_duration(text)


def test_milliseconds_truncate_toward_zero_as_java() -> None:
    assert parse_duration("PT1.0019S").to_millis() == 1001
    assert parse_duration("PT-0.5009S").to_millis() == -500
    assert parse_duration("P1D").to_millis() == 86_400_000
    assert parse_duration("PT-1.5S").is_negative and not parse_duration("PT0S").is_negative


# --- share.auto.offset.reset ----------------------------------------------------------------

def reset_message(value: str) -> str:
    return (f"Invalid value {value} for configuration share.auto.offset.reset: Invalid value "
            f"`{value}` for configuration share.auto.offset.reset. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def test_share_auto_offset_reset_values() -> None:
    assert parse_share_auto_offset_reset("earliest") == ShareAutoOffsetReset(
        ResetStrategy.EARLIEST)
    assert parse_share_auto_offset_reset("latest") == ShareAutoOffsetReset(ResetStrategy.LATEST)
    assert parse_share_auto_offset_reset("by_duration:PT1H") == ShareAutoOffsetReset(
        ResetStrategy.BY_DURATION, 3_600_000)
    assert parse_share_auto_offset_reset("by_duration:p1dt0.5s").duration_ms == 86_400_500
    assert parse_share_auto_offset_reset("by_duration:PT0S").duration_ms == 0
    # ShareGroupAutoOffsetResetStrategyTest's refusals, and more of Duration.parse's.
    for bad in ["LATEST", "EARLIEST", "NONE", "none", "", "hello", "by_duration",
                "by_duration:", "by_duration:invalid", "by_duration:-PT1H",
                "by_duration:PT-1S", "by_duration:P1W", "BY_DURATION:PT1H",
                "by_duration: PT1H", "latest,earliest"]:
        with pytest.raises(ConfigError) as e:
            parse_share_auto_offset_reset(bad)
        assert str(e.value) == reset_message(bad), bad


def test_a_reset_strategy_names_the_list_offsets_timestamp() -> None:
    assert parse_share_auto_offset_reset("earliest").timestamp(10_000) == EARLIEST_TIMESTAMP
    assert parse_share_auto_offset_reset("latest").timestamp(10_000) == LATEST_TIMESTAMP
    assert parse_share_auto_offset_reset("by_duration:PT1S").timestamp(10_000) == 9_000
    assert parse_share_auto_offset_reset("by_duration:PT10.001S").timestamp(10_000) == 0


# --- validation (GroupConfig.validate) ------------------------------------------------------

def test_every_new_key_is_a_group_config_with_kafkas_type_and_default() -> None:
    b = broker_config()
    shown = {name: describe_group_config(name, {}, b) for name in GROUP_CONFIGS}
    assert shown["share.delivery.count.limit"] == ("5", False)
    assert shown["share.partition.max.record.locks"] == ("2000", False)
    assert shown["share.auto.offset.reset"] == ("latest", False)
    assert shown["share.isolation.level"] == ("read_uncommitted", False)
    assert shown["errors.deadletterqueue.topic.name"] == ("", False)
    assert shown["errors.deadletterqueue.copy.record.enable"] == ("false", False)
    assert describe_group_config("share.delivery.count.limit",
                                 {"share.delivery.count.limit": "7"}, b) == ("7", True)
    assert describe_group_config("share.delivery.count.limit", {},
                                 broker_config(group_share_delivery_count_limit=3)) == \
        ("3", False)
    assert [int(GROUP_CONFIGS[n].key.type) for n in (
        "share.delivery.count.limit", "share.auto.offset.reset",
        "errors.deadletterqueue.copy.record.enable")] == [3, 2, 1]  # INT, STRING, BOOLEAN


def test_the_broker_bounds_of_the_share_keys() -> None:
    assert error_of({"share.delivery.count.limit": "10",
                     "share.partition.max.record.locks": "4000"}) is None
    assert error_of({"share.delivery.count.limit": "11"}) == \
        "share.delivery.count.limit must be less than or equal to " \
        "group.share.max.delivery.count.limit"
    assert error_of({"share.delivery.count.limit": "2"}, group_share_min_delivery_count_limit=3,
                    group_share_delivery_count_limit=5) == \
        "share.delivery.count.limit must be greater than or equal to " \
        "group.share.min.delivery.count.limit"
    assert error_of({"share.delivery.count.limit": "20"},
                    group_share_max_delivery_count_limit=25) is None
    assert error_of({"share.partition.max.record.locks": "4001"}) == \
        "share.partition.max.record.locks must be less than or equal to " \
        "group.share.max.partition.max.record.locks"
    assert error_of({"share.partition.max.record.locks": "150"},
                    group_share_min_partition_max_record_locks=200) == \
        "share.partition.max.record.locks must be greater than or equal to " \
        "group.share.min.partition.max.record.locks"
    # The broker default is checked too (Kafka lays the overrides over it).
    assert error_of({"share.isolation.level": "read_committed"},
                    group_share_partition_max_record_locks=5000) == \
        "share.partition.max.record.locks must be less than or equal to " \
        "group.share.max.partition.max.record.locks"


def test_the_values_each_key_refuses_with_kafkas_messages() -> None:
    assert error_of({"share.delivery.count.limit": "1"}) == \
        "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"
    assert error_of({"share.partition.max.record.locks": "99"}) == \
        "Invalid value 99 for configuration share.partition.max.record.locks: " \
        "Value must be at least 100"
    assert error_of({"share.delivery.count.limit": "five"}) == \
        "Invalid value five for configuration share.delivery.count.limit: " \
        "Not a number of type INT"
    assert error_of({"share.partition.max.record.locks": "2147483648"}) == \
        "Invalid value 2147483648 for configuration share.partition.max.record.locks: " \
        "Not a number of type INT"
    assert error_of({"share.delivery.count.limit": "1_0"}) is not None
    assert error_of({"share.delivery.count.limit": " 7 "}) is None  # trimmed, as Kafka
    assert error_of({"share.auto.offset.reset": "by_duration:-PT1H"}) == \
        reset_message("by_duration:-PT1H")
    assert error_of({"share.auto.offset.reset": " earliest "}) is None
    assert error_of({"share.isolation.level": "READ_COMMITTED"}) == \
        "Invalid value READ_COMMITTED for configuration share.isolation.level: " \
        "String must be one of: read_committed, read_uncommitted"
    assert error_of({"share.isolation.level": "read_committed"}) is None
    assert error_of({"errors.deadletterqueue.topic.name": "__dlq"}) == \
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
    assert error_of({"errors.deadletterqueue.topic.name": " __dlq"}) is not None  # trimmed
    for fine in ("", "dlq.orders", "_one_underscore"):
        assert error_of({"errors.deadletterqueue.topic.name": fine}) is None
    assert error_of({"errors.deadletterqueue.copy.record.enable": "yes"}) == \
        "Invalid value yes for configuration errors.deadletterqueue.copy.record.enable: " \
        "Expected value to be either true or false"
    assert error_of({"errors.deadletterqueue.copy.record.enable": "TRUE"}) is None
    assert error_of({"share.renew": "1"}) == "Unknown group config name: share.renew"


def test_kafkas_order_names_first_then_values_in_definition_order_then_bounds() -> None:
    assert error_of({"share.isolation.level": "x", "nope": "1"}) == \
        "Unknown group config name: nope"
    # Parsing runs in GroupConfig's definition order, whatever order the request has.
    assert error_of({"errors.deadletterqueue.copy.record.enable": "x",
                     "share.isolation.level": "x"}).startswith(
        "Invalid value x for configuration share.isolation.level")
    assert error_of({"share.isolation.level": "x", "share.delivery.count.limit": "11"}) \
        .startswith("Invalid value x for configuration share.isolation.level")
    # validateValues: the bounds in its order, then session over heartbeat, then the DLQ.
    assert error_of({"share.partition.max.record.locks": "5000",
                     "share.delivery.count.limit": "11"}).startswith(
        "share.delivery.count.limit")
    assert error_of({"share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "15000",
                     "errors.deadletterqueue.topic.name": "__x",
                     "share.record.lock.duration.ms": "70000"}).startswith(
        "share.record.lock.duration.ms must be less than")
    assert error_of({"errors.deadletterqueue.topic.name": "__x",
                     "share.session.timeout.ms": "45000",
                     "share.heartbeat.interval.ms": "45000"},
                    group_share_max_heartbeat_interval_ms=60000) == \
        "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"


def test_the_controller_answers_invalid_config_and_stores_valid_sets() -> None:
    from ottla.controller.configuration_control import OP_SET
    from ottla.metadata.image import ConfigResourceType
    c = controller()
    group = ConfigResourceType.GROUP

    def alter(**configs: str) -> tuple[int, str | None]:
        ops = [(k.replace("_", "."), OP_SET, v) for k, v in configs.items()]
        result = c.configuration.incremental_alter_configs([(group, "g", ops)])
        if result.response[0][2] == ErrorCode.none:
            apply(c, result.records)
        return result.response[0][2], result.response[0][3]

    assert alter(errors_deadletterqueue_topic_name="__x") == (
        ErrorCode.invalid_config,
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    assert alter(share_auto_offset_reset="by_duration:PT1H", share_delivery_count_limit="3",
                 share_isolation_level="read_committed") == (ErrorCode.none, None)
    assert c.image.configs[(group, "g")] == {
        "share.auto.offset.reset": "by_duration:PT1H", "share.delivery.count.limit": "3",
        "share.isolation.level": "read_committed"}


# --- the effective settings of a share group ------------------------------------------------

def test_settings_are_the_override_else_the_broker_default() -> None:
    assert share_group_settings({}, broker_config()) == ShareGroupSettings(
        record_lock_duration_ms=30000, delivery_count_limit=5, partition_max_record_locks=2000,
        auto_offset_reset=ShareAutoOffsetReset(ResetStrategy.LATEST),
        isolation_level=IsolationLevel.READ_UNCOMMITTED, dlq_topic=None,
        dlq_copy_record=False)
    b = broker_config(group_share_delivery_count_limit=4,
                      group_share_partition_max_record_locks=300,
                      group_share_record_lock_duration_ms=20000)
    settings = share_group_settings({
        "share.record.lock.duration.ms": "45000", "share.auto.offset.reset": "by_duration:P1D",
        "share.isolation.level": "read_committed",
        "errors.deadletterqueue.topic.name": "dlq.orders",
        "errors.deadletterqueue.copy.record.enable": "true"}, b, "g")
    assert settings == ShareGroupSettings(
        record_lock_duration_ms=45000, delivery_count_limit=4, partition_max_record_locks=300,
        auto_offset_reset=ShareAutoOffsetReset(ResetStrategy.BY_DURATION, 86_400_000),
        isolation_level=IsolationLevel.READ_COMMITTED, dlq_topic="dlq.orders",
        dlq_copy_record=True)
    assert settings.isolation_level == 1 and str(settings.isolation_level) == "read_committed"
    assert share_group_settings({"errors.deadletterqueue.topic.name": " "},
                                b).dlq_topic is None


def test_an_override_outside_bounds_moved_since_is_capped(caplog) -> None:
    """Kafka's GroupConfig.evaluate: the broker's bounds may have changed after the
    override was accepted; the effective value is capped to them (with a warning)."""
    overrides = {"share.delivery.count.limit": "8", "share.partition.max.record.locks": "150",
                 "share.record.lock.duration.ms": "not a number"}
    with caplog.at_level(logging.WARNING):
        settings = share_group_settings(overrides, broker_config(
            group_share_max_delivery_count_limit=6,
            group_share_min_partition_max_record_locks=200), "g")
    assert (settings.delivery_count_limit, settings.partition_max_record_locks,
            settings.record_lock_duration_ms) == (6, 200, 30000)
    assert "capped to 6" in caplog.text and "Ignoring group config" in caplog.text


# --- share.version --------------------------------------------------------------------------

def test_share_version_levels_and_bootstrap_default() -> None:
    assert SUPPORTED_FEATURES[SHARE_VERSION] == (0, 2)
    # ShareVersion's bootstrap levels: SV_1 at 4.2-IV0 (28), SV_2 at 4.4-IV0 (31).
    assert default_feature_levels(METADATA_VERSION_LEVEL)[SHARE_VERSION] == 2
    assert [default_feature_levels(v).get(SHARE_VERSION) for v in (27, 28, 30, 31)] == \
        [None, 1, 1, 2]
    assert SHARE_VERSION not in default_feature_levels(21)  # formatted for 3.9
    assert not share_groups_enabled({}) and not share_groups_enabled({SHARE_VERSION: 0})
    assert share_groups_enabled({SHARE_VERSION: 1}) and not share_dlq_enabled({SHARE_VERSION: 1})
    assert share_dlq_enabled({SHARE_VERSION: 2})


def test_share_version_goes_down_to_zero_and_back_up() -> None:
    c = controller()
    apply(c, c.features.bootstrap_records())
    assert c.image.features[SHARE_VERSION] == 2
    refused = c.features.update_features([(SHARE_VERSION, 3, UPGRADE)])
    assert refused.response == (
        ErrorCode.invalid_update_version,
        "Invalid update version 3 for feature share.version. Local controller 1 only "
        "supports versions 0-2")
    lowered = c.features.update_features([(SHARE_VERSION, 0, UPGRADE)])
    assert lowered.response[0] == ErrorCode.invalid_update_version  # a downgrade must say so
    down = c.features.update_features([(SHARE_VERSION, 0, SAFE_DOWNGRADE)])
    apply(c, down.records)
    assert SHARE_VERSION not in c.image.features  # level 0: no longer finalized
    up = c.features.update_features([(SHARE_VERSION, 2, UPGRADE)])
    apply(c, up.records)
    assert c.image.features[SHARE_VERSION] == 2


async def test_share_apis_answer_unsupported_version_at_share_version_0(broker  # noqa: F811
                                                                         ) -> None:
    """KafkaApis' isShareGroupProtocolEnabled gate: the error code alone, before anything
    else is looked at."""
    topic_id = create_topic(broker, "queue")
    broker.image.replay(r.FeatureLevelRecord(name=SHARE_VERSION, feature_level=0))
    heartbeat = await ask(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": "workers", "member_id": "m1", "member_epoch": 0, "rack_id": None,
        "subscribed_topic_names": ["queue"]})
    assert (heartbeat.error_code, heartbeat.error_message) == (
        ErrorCode.unsupported_version, None)
    described = await ask(broker, ApiKey.SHARE_GROUP_DESCRIBE, 1, {
        "group_ids": ["workers", "other"], "include_authorized_operations": False})
    assert [(g.group_id, g.error_code, g.group_state, list(g.members)) for g in
            described.groups] == [("workers", ErrorCode.unsupported_version, "", []),
                                  ("other", ErrorCode.unsupported_version, "", [])]
    fetched = await ask(broker, ApiKey.SHARE_FETCH, 1, share_fetch_body(topic_id, "m1", 0))
    assert (fetched.error_code, list(fetched.responses)) == (ErrorCode.unsupported_version, [])
    acked = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                      share_ack_body(topic_id, "m1", 1, 0, 0, 1))
    assert (acked.error_code, list(acked.responses)) == (ErrorCode.unsupported_version, [])


def test_the_assignment_intervals_of_a_group() -> None:
    """Kafka 4.4's consumer.assignment.interval.ms and share.assignment.interval.ms: at
    least 0, within the broker's group.{consumer,share}.{min,max}.assignment.interval.ms,
    their default the broker's group.{consumer,share}.assignment.interval.ms."""
    assert error_of({"consumer.assignment.interval.ms": "0",
                     "share.assignment.interval.ms": "15000"}) is None
    assert error_of({"consumer.assignment.interval.ms": "-1"}) == \
        "Invalid value -1 for configuration consumer.assignment.interval.ms: " \
        "Value must be at least 0"
    assert error_of({"consumer.assignment.interval.ms": "15001"}) == \
        "consumer.assignment.interval.ms must be less than or equal to " \
        "group.consumer.max.assignment.interval.ms"
    assert error_of({"share.assignment.interval.ms": "100"},
                    group_share_min_assignment_interval_ms=500) == \
        "share.assignment.interval.ms must be greater than or equal to " \
        "group.share.min.assignment.interval.ms"
    b = broker_config(group_consumer_assignment_interval_ms=2500)
    assert describe_group_config("consumer.assignment.interval.ms", {}, b) == ("2500", False)
    assert describe_group_config("share.assignment.interval.ms", {}, b) == ("1000", False)
    assert describe_group_config("consumer.assignment.interval.ms",
                                 {"consumer.assignment.interval.ms": "40"}, b) == ("40", True)
