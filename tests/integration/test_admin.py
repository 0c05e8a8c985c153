"""Topic administration through confluent-kafka's AdminClient and the ``ottla topics`` CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import WireClient, wait_until


def admin(ottla) -> AdminClient:
    return AdminClient({"bootstrap.servers": ottla.bootstrap})


def create(client: AdminClient, *topics: NewTopic, **kw) -> dict:
    futures = client.create_topics(list(topics), operation_timeout=10, **kw)
    results = {}
    for name, future in futures.items():
        try:
            future.result()
            results[name] = None
        except KafkaException as e:
            results[name] = e.args[0].code()
    return results


def test_create_list_describe_delete(ottla) -> None:
    client = admin(ottla)
    assert create(client, NewTopic("orders", 6, 1), NewTopic("audit", 1, 1)) == \
        {"orders": None, "audit": None}
    assert {"orders", "audit"} <= set(client.list_topics(timeout=10).topics)
    desc = client.describe_topics(TopicCollection(["orders"]))["orders"].result()
    assert len(desc.partitions) == 6
    assert all(p.leader.id == 1 and [r.id for r in p.isr] == [1] for p in desc.partitions)
    assert desc.topic_id is not None
    for future in client.delete_topics(["audit"], operation_timeout=10).values():
        future.result()
    assert "audit" not in client.list_topics(timeout=10).topics
    assert create(client, NewTopic("audit", 2, 1)) == {"audit": None}
    assert len(client.list_topics(timeout=10).topics["audit"].partitions) == 2


def test_create_errors_use_kafka_codes(ottla) -> None:
    client = admin(ottla)
    create(client, NewTopic("dup", 1, 1))
    results = create(client, NewTopic("dup", 1, 1), NewTopic("bad$name", 1, 1),
                     NewTopic("cfg", 1, 1, config={"retention.ms": "forever"}),
                     NewTopic("cfg2", 1, 1, config={"no.such.key": "1"}),
                     NewTopic("rf", 1, 3))
    assert results == {
        "dup": KafkaError.TOPIC_ALREADY_EXISTS,
        "bad$name": KafkaError.TOPIC_EXCEPTION,
        "cfg": KafkaError.INVALID_CONFIG,
        "cfg2": KafkaError.INVALID_CONFIG,
        "rf": KafkaError.INVALID_REPLICATION_FACTOR,
    }
    assert create(client, NewTopic("only-validated", 3, 1), validate_only=True) == \
        {"only-validated": None}
    assert "only-validated" not in client.list_topics(timeout=10).topics


def test_describe_and_alter_topic_configs_report_sources(ottla) -> None:
    client = admin(ottla)
    create(client, NewTopic("conf", 1, 1, config={"retention.ms": "123456"}))
    resource = ConfigResource(ConfigResource.Type.TOPIC, "conf")
    configs = client.describe_configs([resource])[resource].result()
    assert configs["retention.ms"].value == "123456"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    resource = ConfigResource(ConfigResource.Type.TOPIC, "conf", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    client.incremental_alter_configs([resource])[resource].result()
    fresh = ConfigResource(ConfigResource.Type.TOPIC, "conf")
    configs = client.describe_configs([fresh])[fresh].result()
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    bad = ConfigResource(ConfigResource.Type.TOPIC, "conf", incremental_configs=[
        ConfigEntry("segment.bytes", "tiny", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        client.incremental_alter_configs([bad])[bad].result()
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_dynamic_broker_configs_become_topic_defaults(ottla) -> None:
    client = admin(ottla)
    with WireClient(ottla.bootstrap) as wire:  # cluster-wide default: resource name ""
        response = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": 4, "resource_name": "", "configs": [
                {"name": "log.retention.ms", "config_operation": 0, "value": "3600000"},
                {"name": "log.segment.bytes", "config_operation": 0, "value": "1048576"}]}],
            "validate_only": False})
        assert response.responses[0].error_code == 0
        bad = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": 4, "resource_name": "", "configs": [
                {"name": "node.id", "config_operation": 0, "value": "7"}]}],
            "validate_only": False})
        assert bad.responses[0].error_code == ErrorCode.invalid_request
    per_broker = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("log.segment.bytes", "2097152", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([per_broker])[per_broker].result()
    create(client, NewTopic("inherits", 1, 1))
    resource = ConfigResource(ConfigResource.Type.TOPIC, "inherits")
    configs = client.describe_configs([resource])[resource].result()
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert configs["segment.bytes"].value == "2097152"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    described = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker_configs = client.describe_configs([described])[described].result()
    assert broker_configs["log.retention.ms"].value == "3600000"
    assert broker_configs["num.partitions"].value == "1"
    assert broker_configs["node.id"].is_read_only


def test_create_partitions(ottla) -> None:
    client = admin(ottla)
    create(client, NewTopic("grow", 2, 1))
    client.create_partitions([NewPartitions("grow", 5)], operation_timeout=10)["grow"].result()
    wait_until(lambda: len(client.list_topics(timeout=10).topics["grow"].partitions) == 5)
    with pytest.raises(KafkaException) as e:
        client.create_partitions([NewPartitions("grow", 3)])["grow"].result()
    assert e.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_metadata_auto_creates_topics_with_defaults(make_ottla) -> None:
    node = make_ottla(**{"num.partitions": "4"})
    client = AdminClient({"bootstrap.servers": node.bootstrap})
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": node.bootstrap})
    producer.produce("auto-made", b"hello")
    assert producer.flush(15) == 0
    assert len(client.list_topics(timeout=10).topics["auto-made"].partitions) == 4


def test_auto_create_can_be_disabled(make_ottla) -> None:
    node = make_ottla(**{"auto.create.topics.enable": "false"})
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    md = consumer.list_topics("never-made", timeout=10)
    assert md.topics["never-made"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    consumer.close()


def run_cli(*args: str, stdin: str | None = None, timeout: float = 60) -> \
        subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ottla", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def test_topics_cli(ottla) -> None:
    bs = ["--bootstrap-server", ottla.bootstrap]
    created = run_cli("topics", *bs, "--create", "--topic", "cli-topic", "--partitions", "3",
                      "--config", "retention.ms=1000")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "Created topic cli-topic."
    again = run_cli("topics", *bs, "--create", "--topic", "cli-topic")
    assert again.returncode == 1 and "already exists" in again.stderr
    assert run_cli("topics", *bs, "--create", "--topic", "cli-topic",
                   "--if-not-exists").returncode == 0
    listed = run_cli("topics", *bs, "--list")
    assert "cli-topic" in listed.stdout.split()
    described = run_cli("topics", *bs, "--describe", "--topic", "cli-topic")
    lines = described.stdout.strip().splitlines()
    assert lines[0].startswith("Topic: cli-topic\tTopicId: ")
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=1000" in lines[0]
    assert lines[1].strip().startswith("Topic: cli-topic\tPartition: 0\tLeader: 1\tReplicas: 1")
    assert run_cli("topics", *bs, "--alter", "--topic", "cli-topic",
                   "--partitions", "4").returncode == 0
    assert run_cli("topics", *bs, "--delete", "--topic", "cli-topic").returncode == 0
    assert "cli-topic" not in run_cli("topics", *bs, "--list").stdout.split()
