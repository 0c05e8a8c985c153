"""The share groups' per-group configs through confluent-kafka's AdminClient (GROUP config
resources: IncrementalAlterConfigs, DescribeConfigs) and the share.version feature through
``ottla features``, against a real node: Kafka's INVALID_CONFIG and messages for bad
values, and a share consumer refused as Kafka refuses it while share groups are off."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import KafkaError, KafkaException, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import WireClient, wait_until
from tests.integration.test_groups import produce

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
FAST = {"group.share.heartbeat.interval.ms": "1000",
        "group.share.min.heartbeat.interval.ms": "1000",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "6000"}
NEW_KEYS = ("share.delivery.count.limit", "share.partition.max.record.locks",
            "share.auto.offset.reset", "share.isolation.level",
            "errors.deadletterqueue.topic.name", "errors.deadletterqueue.copy.record.enable")


def alter(admin: AdminClient, group: str, *ops: tuple[str, str | None, AlterConfigOpType]
          ) -> KafkaError | None:
    """IncrementalAlterConfigs on one GROUP resource: None, or the resource's error."""
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
        return None
    except KafkaException as e:
        return e.args[0]


def describe(admin: AdminClient, group: str) -> dict:
    resource = ConfigResource(ResourceType.GROUP, group)
    return admin.describe_configs([resource])[resource].result(30)


def test_the_share_group_configs_are_set_described_and_checked(make_ottla) -> None:
    node = make_ottla(**{"group.share.max.delivery.count.limit": "12"})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    before = describe(admin, "orders")
    assert set(NEW_KEYS) <= set(before)
    assert before["share.delivery.count.limit"].value == "5"  # group.share.delivery.count.limit
    assert before["share.partition.max.record.locks"].value == "2000"
    assert before["share.delivery.count.limit"].source == ConfigSource.DEFAULT_CONFIG.value

    assert alter(admin, "orders", ("share.delivery.count.limit", "12", SET),
                 ("share.partition.max.record.locks", "100", SET),
                 ("share.auto.offset.reset", "by_duration:P1DT12H", SET),
                 ("share.isolation.level", "read_committed", SET),
                 ("errors.deadletterqueue.topic.name", "dlq.orders", SET),
                 ("errors.deadletterqueue.copy.record.enable", "true", SET)) is None
    after = describe(admin, "orders")
    assert {k: (after[k].value, after[k].source) for k in NEW_KEYS} == {
        "share.delivery.count.limit": ("12", ConfigSource.GROUP_CONFIG.value),
        "share.partition.max.record.locks": ("100", ConfigSource.GROUP_CONFIG.value),
        "share.auto.offset.reset": ("by_duration:P1DT12H", ConfigSource.GROUP_CONFIG.value),
        "share.isolation.level": ("read_committed", ConfigSource.GROUP_CONFIG.value),
        "errors.deadletterqueue.topic.name": ("dlq.orders", ConfigSource.GROUP_CONFIG.value),
        "errors.deadletterqueue.copy.record.enable": ("true", ConfigSource.GROUP_CONFIG.value)}

    refused = {
        ("share.delivery.count.limit", "13"):
            "share.delivery.count.limit must be less than or equal to "
            "group.share.max.delivery.count.limit",
        ("share.delivery.count.limit", "1"):
            "Invalid value 1 for configuration share.delivery.count.limit: "
            "Value must be at least 2",
        ("share.partition.max.record.locks", "4001"):
            "share.partition.max.record.locks must be less than or equal to "
            "group.share.max.partition.max.record.locks",
        ("share.auto.offset.reset", "by_duration:-PT1H"):
            "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: "
            "Invalid value `by_duration:-PT1H` for configuration share.auto.offset.reset. "
            "The value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.",
        ("share.isolation.level", "serializable"):
            "Invalid value serializable for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ("errors.deadletterqueue.topic.name", "__orders_dlq"):
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ("errors.deadletterqueue.copy.record.enable", "maybe"):
            "Invalid value maybe for configuration errors.deadletterqueue.copy.record.enable: "
            "Expected value to be either true or false",
    }
    for (key, value), message in refused.items():
        error = alter(admin, "orders", (key, value, SET))
        assert error is not None and error.code() == ErrorCode.invalid_config, (key, value)
        assert error.str() == message
    unchanged = describe(admin, "orders")
    assert all(unchanged[k].value == after[k].value for k in NEW_KEYS)

    assert alter(admin, "orders", ("share.delivery.count.limit", None, DELETE)) is None
    back = describe(admin, "orders")["share.delivery.count.limit"]
    assert (back.value, back.source) == ("5", ConfigSource.DEFAULT_CONFIG.value)


def test_the_defaults_of_the_keys_without_a_broker_synonym_are_described(make_ottla) -> None:
    node = make_ottla()
    shown = describe(AdminClient({"bootstrap.servers": node.bootstrap}), "orders")
    assert {k: shown[k].value for k in NEW_KEYS[2:]} == {
        "share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted",
        "errors.deadletterqueue.topic.name": "",
        "errors.deadletterqueue.copy.record.enable": "false"}


def features(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ottla", "features", "--bootstrap-server",
                           node.bootstrap, *args], capture_output=True, text=True, timeout=60)


def heartbeat_error(node) -> int:
    with WireClient(node.bootstrap) as client:
        return client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": "probe", "member_id": "AAAAAAAAAAAAAAAAAAAAAA", "member_epoch": 0,
            "rack_id": None, "subscribed_topic_names": ["queue"]}).error_code


def test_share_groups_are_off_at_share_version_0_and_back_on_at_1(make_ottla) -> None:
    node = make_ottla(**FAST)
    with WireClient(node.bootstrap) as c:
        assert c.create_topic("queue", partitions=1).topics[0].error_code == 0
    described = features(node, "describe")
    assert "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t" \
           "FinalizedVersionLevel: 2\t" in described.stdout  # a new 4.4-IV2 cluster's

    down = features(node, "downgrade", "--feature", "share.version=0")
    assert (down.returncode, down.stdout.strip()) == (0, "share.version was downgraded to 0.")
    assert "share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t" \
           "FinalizedVersionLevel: 0\t" in features(node, "describe").stdout
    wait_until(lambda: heartbeat_error(node) == ErrorCode.unsupported_version, timeout=15)
    # librdkafka, as Kafka's client, takes UNSUPPORTED_VERSION from ShareGroupHeartbeat as
    # fatal: the share consumer's poll raises it.
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": "off"})
    try:
        consumer.subscribe(["queue"])

        def refused() -> KafkaError | None:
            try:
                consumer.poll(0.2)
            except KafkaException as e:
                return e.args[0]
            return None
        error = wait_until(refused, timeout=30, message="a fatal heartbeat error")
        assert (error.code(), error.fatal()) == (KafkaError.UNSUPPORTED_VERSION, True)
    finally:
        consumer.close()

    up = features(node, "upgrade", "--feature", "share.version=1")
    assert (up.returncode, up.stdout.strip()) == (0, "share.version was upgraded to 1.")
    wait_until(lambda: heartbeat_error(node) == ErrorCode.none, timeout=15)
    # Records produced before the group first fetches: it starts at the earliest.
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    assert alter(admin, "on", ("share.auto.offset.reset", "earliest", SET)) is None
    produce(node, "queue", 20)
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": "on"})
    got: list[bytes] = []
    try:
        consumer.subscribe(["queue"])

        def received() -> bool:
            got.extend(m.value() for m in consumer.poll(0.2) or [] if m.error() is None)
            return len(got) >= 20
        wait_until(received, timeout=30, message=lambda: f"received {len(got)}")
        assert sorted(got, key=int) == [str(i).encode() for i in range(20)]
        assert _member_count(node, "on") == 1
    finally:
        consumer.close()


def _member_count(node, group: str) -> int:
    with WireClient(node.bootstrap) as client:
        described = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0]
    return len(described.members) if described.error_code == 0 else 0
