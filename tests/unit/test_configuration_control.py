"""Dynamic topic and broker configs (ConfigurationControlManager)."""

from __future__ import annotations

import uuid

from ottla.common.topics import NewTopic
from ottla.controller.configuration_control import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller


def test_incremental_alter_configs_set_delete_append_subtract() -> None:
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("a")]).records)
    t = ConfigResourceType.TOPIC
    ops = [("retention.ms", OP_SET, "5000"), ("cleanup.policy", OP_APPEND, "compact")]
    apply(c, c.configuration.incremental_alter_configs([(t, "a", ops)]).records)
    assert c.image.topic_configs("a") == {"retention.ms": "5000",
                                          "cleanup.policy": "delete,compact"}
    ops = [("retention.ms", OP_DELETE, None), ("cleanup.policy", OP_SUBTRACT, "delete")]
    apply(c, c.configuration.incremental_alter_configs([(t, "a", ops)]).records)
    assert c.image.topic_configs("a") == {"cleanup.policy": "compact"}
    bad = c.configuration.incremental_alter_configs([(t, "a", [("segment.bytes", OP_SET, "x")]),
                                       (t, "missing", [("retention.ms", OP_SET, "1")])])
    assert [code for _, _, code, _ in bad.response] == [
        ErrorCode.invalid_config, ErrorCode.unknown_topic_or_partition]


def test_legacy_alter_configs_replaces_the_whole_set() -> None:
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("a", configs={"retention.ms": "1"})]).records)
    apply(c, c.configuration.alter_configs(
        [(ConfigResourceType.TOPIC, "a", {"segment.ms": "99999"})])
          .records)
    assert c.image.topic_configs("a") == {"segment.ms": "99999"}


B, G = ConfigResourceType.BROKER, ConfigResourceType.GROUP


def _codes(result) -> list[tuple[int, str | None]]:
    return [(code, message) for _, _, code, message in result.response]


def test_kafka_broker_keys_ottla_does_not_act_on_are_stored() -> None:
    c = controller()
    ops = [("sasl.kerberos.min.time.before.relogin", OP_SET, "30000"),
           ("listener.name.plaintext.ssl.keystore.location", OP_SET, "/k.jks"),
           ("my.plugin.setting", OP_SET, "x")]  # custom keys pass, as in Kafka
    result = c.configuration.incremental_alter_configs([(B, "1", ops)])
    assert _codes(result) == [(ErrorCode.none, None)]
    apply(c, result.records)
    assert c.image.broker_configs(1) == {"sasl.kerberos.min.time.before.relogin": "30000",
                                         "listener.name.plaintext.ssl.keystore.location":
                                         "/k.jks", "my.plugin.setting": "x"}


def test_broker_keys_kafka_refuses_get_its_errors() -> None:
    c = controller()

    def alter(name: str, key: str, value: str) -> tuple[int, str | None]:
        return _codes(c.configuration.alter_configs([(B, name, {key: value})]))[0]

    assert alter("1", "log.dirs", "/x") == (
        ErrorCode.invalid_request, "Cannot update these configs dynamically: [log.dirs]")
    assert alter("1", "log.retention.hours", "1")[0] == ErrorCode.invalid_request
    assert alter("1", "ssl.keystore.location", "/k") == (
        ErrorCode.invalid_request, "These security configs can be dynamically updated only "
        "per-listener using the listener prefix: [ssl.keystore.location]")
    assert alter("", "sasl.kerberos.min.time.before.relogin", "1") == (
        ErrorCode.invalid_request, "Cannot update these configs at default cluster level, "
        "broker id must be specified: [sasl.kerberos.min.time.before.relogin]")
    assert alter("", "listener.name.plaintext.ssl.keystore.location", "/k")[0] == \
        ErrorCode.invalid_request
    assert alter("1", "log.cleaner.threads", "x")[0] == ErrorCode.invalid_request
    assert alter("", "log.cleaner.threads", "2") == (ErrorCode.none, None)


def test_append_and_subtract_on_broker_and_topic_lists() -> None:
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("a")]).records)
    t = ConfigResourceType.TOPIC
    result = c.configuration.incremental_alter_configs(
        [(B, "", [("log.cleanup.policy", OP_APPEND, "compact")])])
    apply(c, result.records)
    assert c.image.broker_configs(None) == {"log.cleanup.policy": "delete,compact"}
    assert _codes(c.configuration.incremental_alter_configs(
        [(t, "a", [("retention.ms", OP_APPEND, "1")])])) == [
        (ErrorCode.invalid_config, "Can't APPEND to key retention.ms because its type is "
         "not LIST.")]
    assert _codes(c.configuration.incremental_alter_configs(
        [(B, "1", [("log.cleaner.threads", OP_SUBTRACT, "1")])])) == [
        (ErrorCode.invalid_config,
         "Config value subtract is not allowed for config key: log.cleaner.threads")]


def test_group_configs_are_checked_against_the_broker_bounds() -> None:
    c = controller()

    def alter(**configs: str) -> tuple[int, str | None]:
        ops = [(k.replace("_", "."), OP_SET, v) for k, v in configs.items()]
        result = c.configuration.incremental_alter_configs([(G, "g", ops)])
        if result.response[0][2] == ErrorCode.none:
            apply(c, result.records)
        return _codes(result)[0]

    assert alter(consumer_session_timeout_ms="1000") == (
        ErrorCode.invalid_config, "consumer.session.timeout.ms must be greater than or equal "
        "to group.consumer.min.session.timeout.ms")
    assert alter(consumer_heartbeat_interval_ms="20000") == (
        ErrorCode.invalid_config, "consumer.heartbeat.interval.ms must be less than or equal "
        "to group.consumer.max.heartbeat.interval.ms")
    assert alter(nope="1") == (ErrorCode.invalid_config, "Unknown group config name: nope")
    assert alter(share_record_lock_duration_ms="20000",
                 consumer_heartbeat_interval_ms="6000") == (ErrorCode.none, None)
    assert c.image.configs[(G, "g")] == {"share.record.lock.duration.ms": "20000",
                                         "consumer.heartbeat.interval.ms": "6000"}
    assert _codes(c.configuration.incremental_alter_configs(
        [(G, "", [("consumer.heartbeat.interval.ms", OP_SET, "6000")])]))[0][0] == \
        ErrorCode.invalid_request


def test_client_metrics_subscriptions_are_validated_and_stored_as_kafka_does() -> None:
    """CLIENT_METRICS resources (KIP-714): ClientMetricsConfigs' checks, INVALID_REQUEST
    or INVALID_CONFIG with Kafka's messages; the lists take APPEND and SUBTRACT; deleting
    every key deletes the subscription."""
    c = controller()
    cm = ConfigResourceType.CLIENT_METRICS
    ops = [("metrics", OP_SET, "org.apache.kafka.producer."), ("interval.ms", OP_SET, "1000"),
           ("match", OP_SET, "client_id=billing-.*")]
    apply(c, c.configuration.incremental_alter_configs([(cm, "producers", ops)]).records)
    assert c.image.configs[(cm, "producers")] == {
        "metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
        "match": "client_id=billing-.*"}
    apply(c, c.configuration.incremental_alter_configs([(cm, "producers", [
        ("metrics", OP_APPEND, "org.apache.kafka.consumer.")])]).records)
    assert c.image.configs[(cm, "producers")]["metrics"] == \
        "org.apache.kafka.producer.,org.apache.kafka.consumer."
    refused = c.configuration.incremental_alter_configs([
        (cm, "", [("interval.ms", OP_SET, "1000")]),
        (cm, "a", [("interval.ms", OP_SET, "50")]),
        (cm, "b", [("match", OP_SET, "client_colour=red")]),
        (cm, "c", [("colour", OP_SET, "red")]),
        (cm, "d", [("interval.ms", OP_APPEND, "5")])])
    assert _codes(refused) == [
        (ErrorCode.invalid_request, "Subscription name can't be empty"),
        (ErrorCode.invalid_request, "Invalid value 50 for interval.ms, interval must be "
                                    "between 100 and 3600000 (1 hour)"),
        (ErrorCode.invalid_config, "Illegal client matching pattern: client_colour=red"),
        (ErrorCode.invalid_request, "Unknown client metrics configuration: colour"),
        (ErrorCode.invalid_config, "Can't APPEND to key interval.ms because its type is "
                                   "not LIST.")]
    assert not refused.records
    apply(c, c.configuration.incremental_alter_configs([(cm, "producers", [
        (key, OP_DELETE, None) for key in ("metrics", "interval.ms", "match")])]).records)
    assert (cm, "producers") not in c.image.configs


def test_a_broker_key_set_again_is_written_again_so_the_broker_reloads_its_file() -> None:
    """Kafka's KAFKA-14136: a BROKER resource's named keys get a ConfigRecord even when
    their value is unchanged (a keystore renewed in place is reloaded on it); other
    resources' unchanged values write nothing."""
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("t")]).records)
    key = "listener.name.ssl.ssl.keystore.location"
    for alter in (lambda: c.configuration.incremental_alter_configs(
                      [(B, "1", [(key, OP_SET, "/k.pem")])]),
                  lambda: c.configuration.alter_configs([(B, "1", {key: "/k.pem"})])):
        apply(c, alter().records)
        again = alter()
        assert [(rec.resource_name, rec.name, rec.value) for rec in again.records] == \
            [("1", key, "/k.pem")]
    topic = [(ConfigResourceType.TOPIC, "t", [("retention.ms", OP_SET, "1000")])]
    apply(c, c.configuration.incremental_alter_configs(topic).records)
    assert c.configuration.incremental_alter_configs(topic).records == []


def test_a_broker_resource_names_a_broker_or_a_controller_as_kafkas_controller_checks() -> None:
    """Kafka 4.4's ControllerConfigurationValidator (a number, not negative), then its
    ConfigResourceExistenceChecker: a registered broker, a voter of
    controller.quorum.voters or a registered controller (for its controller listeners'
    TLS); the messages are a Kafka 4.4 controller's."""
    c = controller()
    key = "listener.name.controller.ssl.keystore.location"
    assert _codes(c.configuration.incremental_alter_configs([
        (B, "one", [(key, OP_SET, "/k")]), (B, "-1", [(key, OP_SET, "/k")]),
        (B, "3000", [(key, OP_SET, "/k")])])) == [
        (ErrorCode.invalid_request, "Unable to parse broker name as a base 10 number."),
        (ErrorCode.invalid_request, "Invalid negative broker ID."),
        (ErrorCode.broker_id_not_registered, "No node with id 3000 found.")]
    apply(c, c.cluster.register_controller(
        3000, uuid.uuid4(), [("CONTROLLER", "h", 9093, 0)], []).records)
    result = c.configuration.incremental_alter_configs([(B, "3000", [(key, OP_SET, "/k")])])
    assert _codes(result) == [(ErrorCode.none, None)]
    apply(c, result.records)
    assert c.image.broker_configs(3000) == {key: "/k"}
    voters = QuorumController(1, quorum_node_ids=[1, 2, 3])
    assert _codes(voters.configuration.incremental_alter_configs([
        (B, "2", [(key, OP_SET, "/k")])])) == [(ErrorCode.none, None)]
