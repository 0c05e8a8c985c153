"""Dynamic configs of brokers, topics and groups through confluent-kafka's AdminClient, a
KIP-848 consumer told a group's heartbeat interval, and ``ottla configs`` (kafka-configs.sh)
against a real node."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import WireClient, wait_until


def admin(ottla) -> AdminClient:
    client = AdminClient({"bootstrap.servers": ottla.bootstrap})
    client.bootstrap = ottla.bootstrap  # type: ignore[attr-defined]
    return client


def incremental(client: AdminClient, resource_type, name: str,
                *ops: tuple[str, str, AlterConfigOpType]) -> int:
    """Error code of IncrementalAlterConfigs on one resource (0 when it succeeded); the
    cluster default (name "") goes over the wire, as librdkafka refuses an empty name."""
    if name == "":
        with WireClient(client.bootstrap) as wire:
            response = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": 4, "resource_name": "", "configs": [
                    {"name": k, "config_operation": int(op.value), "value": v}
                    for k, v, op in ops]}], "validate_only": False})
        return int(response.responses[0].error_code)
    resource = ConfigResource(resource_type, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    try:
        client.incremental_alter_configs([resource])[resource].result(30)
        return 0
    except KafkaException as e:
        return e.args[0].code()


def describe(client: AdminClient, resource_type, name: str) -> dict:
    resource = ConfigResource(resource_type, name)
    return client.describe_configs([resource])[resource].result(30)


def cli(ottla, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ottla", "configs", "--bootstrap-server",
                           ottla.bootstrap, *args], capture_output=True, text=True, timeout=60)


SET, APPEND, SUBTRACT = (AlterConfigOpType.SET, AlterConfigOpType.APPEND,
                         AlterConfigOpType.SUBTRACT)
BROKER, TOPIC, GROUP = (ConfigResource.Type.BROKER, ConfigResource.Type.TOPIC,
                        ConfigResource.Type.GROUP)


def test_every_dynamic_kafka_broker_config_is_accepted_and_described(ottla) -> None:
    client = admin(ottla)
    # A per-broker SASL key and a listener-prefixed SSL key Ottla does not act on yet.
    assert incremental(client, BROKER, "1",
                       ("sasl.kerberos.min.time.before.relogin", "30000", SET),
                       ("listener.name.plaintext.ssl.keystore.location", "/k.jks", SET),
                       ("log.cleaner.threads", "2", SET)) == 0
    configs = describe(client, BROKER, "1")
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source) == ("30000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    keystore = configs["listener.name.plaintext.ssl.keystore.location"]
    assert (keystore.value, keystore.source) == \
        ("/k.jks", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert configs["log.cleaner.threads"].value == "2"
    assert incremental(client, BROKER, "", ("log.cleaner.backoff.ms", "20000", SET)) == 0
    assert describe(client, BROKER, "1")["log.cleaner.backoff.ms"].source == \
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def test_broker_configs_kafka_refuses_are_refused_with_its_errors(ottla) -> None:
    client = admin(ottla)
    # Not dynamic in Kafka: INVALID_REQUEST "Cannot update these configs dynamically".
    assert incremental(client, BROKER, "1", ("log.dirs", "/elsewhere", SET)) == \
        ErrorCode.invalid_request
    # A per-broker key as the cluster default.
    assert incremental(client, BROKER, "", ("sasl.kerberos.min.time.before.relogin",
                                             "30000", SET)) == ErrorCode.invalid_request
    # An SSL store without its listener prefix.
    assert incremental(client, BROKER, "1", ("ssl.keystore.location", "/k.jks", SET)) == \
        ErrorCode.invalid_request
    assert incremental(client, BROKER, "1", ("log.cleaner.threads", "many", SET)) == \
        ErrorCode.invalid_request
    assert incremental(client, BROKER, "1", ("log.cleaner.threads", "2", APPEND)) == \
        ErrorCode.invalid_config
    assert "log.dirs" not in {k for k, e in describe(client, BROKER, "1").items()
                              if e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}


def test_append_and_subtract_on_list_configs(ottla) -> None:
    client = admin(ottla)
    client.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
    assert incremental(client, TOPIC, "t", ("cleanup.policy", "compact", APPEND)) == 0
    assert describe(client, TOPIC, "t")["cleanup.policy"].value == "delete,compact"
    assert incremental(client, TOPIC, "t", ("cleanup.policy", "delete", SUBTRACT)) == 0
    assert describe(client, TOPIC, "t")["cleanup.policy"].value == "compact"
    assert incremental(client, TOPIC, "t", ("retention.ms", "1", APPEND)) == \
        ErrorCode.invalid_config
    # A list-typed broker key (its default is delete).
    assert incremental(client, BROKER, "", ("log.cleanup.policy", "compact", APPEND)) == 0
    assert describe(client, BROKER, "1")["log.cleanup.policy"].value == "delete,compact"


def test_group_configs_are_validated_stored_and_given_to_members(make_ottla) -> None:
    # Bounds that let a group ask for a heartbeat every 200 ms (the default is 5 s).
    ottla = make_ottla(**{"group.consumer.min.heartbeat.interval.ms": "100"})
    client = admin(ottla)
    client.create_topics([NewTopic("events", 1, 1)])["events"].result(30)
    before = describe(client, GROUP, "g")
    assert before["consumer.heartbeat.interval.ms"].value == "5000"
    assert before["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # Out of the broker's bounds (group.consumer.min.session.timeout.ms is 45000).
    assert incremental(client, GROUP, "g", ("consumer.session.timeout.ms", "1000", SET)) == \
        ErrorCode.invalid_config
    assert incremental(client, GROUP, "g", ("no.such.key", "1", SET)) == \
        ErrorCode.invalid_config
    assert incremental(client, GROUP, "g", ("consumer.heartbeat.interval.ms", "200", SET),
                       ("consumer.session.timeout.ms", "50000", SET)) == 0
    after = describe(client, GROUP, "g")
    assert after["consumer.heartbeat.interval.ms"].value == "200"
    assert after["consumer.heartbeat.interval.ms"].source == ConfigSource.GROUP_CONFIG.value

    # A KIP-848 member is told the group's interval in each ConsumerGroupHeartbeat
    # answer (what a client then heartbeats at); a group without the setting gets the
    # broker's default. Checked in the answer itself rather than by counting a client's
    # heartbeats over a time window.
    client.create_topics([NewTopic("other-events", 1, 1)])["other-events"].result(30)

    def join(group: str, topic: str) -> timedelta:
        def answered() -> Any:
            with WireClient(ottla.bootstrap) as wire:
                response = wire.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
                    "group_id": group, "member_id": "", "member_epoch": 0,
                    "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
                    "subscribed_topic_names": [topic], "server_assignor": None,
                    "topic_partitions": []})
            return response if response.error_code == ErrorCode.none else None
        return wait_until(answered, 30, 0.2, f"{group} to take a member").heartbeat_interval
    assert join("g", "events") == timedelta(milliseconds=200)
    assert join("other", "other-events") == timedelta(milliseconds=5000)


def test_configs_cli(ottla) -> None:
    client = admin(ottla)
    client.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    out = cli(ottla, "--entity-type", "topics", "--entity-name", "orders", "--alter",
              "--add-config", "retention.ms=5000,cleanup.policy=[delete,compact]")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Completed updating config for topic orders."
    out = cli(ottla, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert out.stdout.splitlines() == [
        "Dynamic configs for topic orders are:",
        "  cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        # Kafka lists no broker synonym for retention.ms: its first, log.retention.ms, has
        # no default and takes log.retention.hours=168 with it (ConfigHelper).
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}",
    ]
    out = cli(ottla, "--entity-type", "topics", "--entity-name", "orders", "--alter",
              "--delete-config", "retention.ms")
    assert out.returncode == 0, out.stderr
    assert "retention.ms" not in describe(client, TOPIC, "orders") or \
        describe(client, TOPIC, "orders")["retention.ms"].source != \
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    out = cli(ottla, "--entity-type", "topics", "--entity-name", "orders", "--alter",
              "--delete-config", "segment.ms")
    assert out.returncode == 1 and "Invalid config(s): segment.ms" in out.stderr

    out = cli(ottla, "--entity-type", "brokers", "--entity-default", "--alter",
              "--add-config", "log.cleaner.backoff.ms=20000")
    assert out.stdout.strip() == "Completed updating default config for brokers in the cluster."
    out = cli(ottla, "--entity-type", "brokers", "--entity-default", "--describe")
    # A new cluster's activation wrote min.insync.replicas with ELR on (Kafka 4.4's
    # kafka-configs prints the same two lines on a new Kafka node)
    assert out.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.backoff.ms=20000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=20000}",
        "  min.insync.replicas=1 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}"]
    out = cli(ottla, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
    assert out.stdout.splitlines()[0] == "All configs for broker 1 are:"
    assert any(line.startswith("  log.cleaner.backoff.ms=20000 ")
               for line in out.stdout.splitlines())
    out = cli(ottla, "--entity-type", "brokers", "--entity-name", "1", "--alter",
              "--add-config", "log.dirs=/x")
    assert out.returncode == 1 and "Cannot update these configs dynamically" in out.stderr

    out = cli(ottla, "--entity-type", "groups", "--entity-name", "g", "--alter",
              "--add-config", "consumer.heartbeat.interval.ms=7000")
    assert out.stdout.strip() == "Completed updating config for group g.", out.stderr
    out = cli(ottla, "--entity-type", "groups", "--entity-name", "g", "--describe")
    assert out.stdout.splitlines() == [
        "Dynamic configs for group g are:",
        "  consumer.heartbeat.interval.ms=7000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=7000, "
        "DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}"]
