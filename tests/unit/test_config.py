"""server.properties parsing, validation and the topic defaults it implies."""

from __future__ import annotations

import pytest

from ottla.common.config import ConfigError, load_properties
from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.storage.log_config import LogConfig


def test_java_properties_syntax() -> None:
    text = "# comment\n! also\nkey1=value1\nkey2 : value2\nkey3 value3\n" \
           "multi=a,\\\n    b\nesc=tab\\there\nempty=\n"
    assert load_properties(text) == {"key1": "value1", "key2": "value2", "key3": "value3",
                                     "multi": "a,b", "esc": "tab\there", "empty": ""}


def test_dev_defaults_make_a_combined_node() -> None:
    config = KafkaConfig(dev_defaults())
    assert config.roles == {"broker", "controller"}
    assert config.node_id == 1
    assert [(ln.name, ln.port) for ln in config.broker_listeners] == [("PLAINTEXT", 9092)]
    assert [ln.host for ln in config.advertised_listeners] == ["127.0.0.1"]
    assert config.quorum_voters == {1: ("127.0.0.1", 9093)}
    assert config.log_dirs == ["./ottla-data"]


def test_a_controller_advertises_its_controller_listeners_in_their_named_order() -> None:
    """What a controller registers (KIP-919, Kafka's
    ``effectiveAdvertisedControllerListeners``): advertised.listeners where it names a
    controller listener, else the listener itself; the first of controller.listener.names
    first; an unspecified host as 127.0.0.1."""
    config = KafkaConfig(dict(dev_defaults(), **{
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093,CTL2://0.0.0.0:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                          "CTL2:SSL",
        "controller.listener.names": "CTL2,CONTROLLER",
        "advertised.listeners": "PLAINTEXT://b.example:9092,CONTROLLER://c.example:19093"}))
    assert [(ln.name, ln.host, ln.port, ln.protocol_id)
            for ln in config.advertised_controller_listeners] == [
        ("CTL2", "127.0.0.1", 9094, 1), ("CONTROLLER", "c.example", 19093, 0)]
    assert [ln.name for ln in config.advertised_listeners] == ["PLAINTEXT"]


def test_listener_names_are_upper_case_wherever_they_are_named() -> None:
    """Kafka's ListenerName.normalised: a server.properties in lower case names the
    same listeners as one in upper case, so a controller listener named ``controller``
    in one key is the ``CONTROLLER`` of every other (the quorum and the KIP-853
    requests match endpoints by that name)."""
    config = KafkaConfig(dict(dev_defaults(), **{
        "listeners": "plaintext://:9092,controller://:9093,Internal://:9094",
        "listener.security.protocol.map": "plaintext:PLAINTEXT,controller:PLAINTEXT,"
                                          "internal:SSL",
        "controller.listener.names": "controller",
        "inter.broker.listener.name": "internal",
        "advertised.listeners": "plaintext://b.example:9092,internal://b.example:9094"}))
    assert [(ln.name, ln.port) for ln in config.listeners] == [
        ("PLAINTEXT", 9092), ("CONTROLLER", 9093), ("INTERNAL", 9094)]
    assert config.controller_listener_names == ["CONTROLLER"]
    assert config["inter.broker.listener.name"] == "INTERNAL"
    assert config.security_protocol_map == {
        "PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", "INTERNAL": "SSL"}
    assert [ln.name for ln in config.advertised_controller_listeners] == ["CONTROLLER"]
    assert [ln.name for ln in config.advertised_listeners] == ["PLAINTEXT", "INTERNAL"]


@pytest.mark.parametrize("override,message", [
    ({"process.roles": ""}, "process.roles"),
    ({"node.id": "-1"}, "node.id"),
    ({"num.partitions": "zero"}, "num.partitions"),
    ({"num.partitions": "0"}, "at least 1"),
    ({"listeners": "PLAINTEXT:/nope"}, "listeners"),
    ({"listeners": "UNKNOWN://:1,CONTROLLER://:2"}, "security protocol"),
    ({"controller.listener.names": "OTHER"}, "controller.listener.names"),
    ({"auto.create.topics.enable": "maybe"}, "either true or false"),
    ({"log.cleanup.policy": "shred"}, "log.cleanup.policy"),
    ({"log.page.cache.window.bytes": "0"}, "-1 or at least 4096"),
    ({"prometheus.listener": "9404"}, "prometheus.listener: expected host:port"),
    ({"prometheus.listener": "127.0.0.1:70000"}, "expected host:port"),
])
def test_bad_values_are_clear_errors(override: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        KafkaConfig({**dev_defaults(), **override})


@pytest.mark.parametrize("value,where", [
    ("", None), ("127.0.0.1:9404", ("127.0.0.1", 9404)), (":9404", ("", 9404)),
    ("[::1]:0", ("::1", 0)),
])
def test_prometheus_listener_is_host_and_port_or_off(value: str, where: object) -> None:
    config = KafkaConfig({**dev_defaults(), "prometheus.listener": value})
    assert config.prometheus_listener == where


def test_unknown_keys_are_accepted_with_a_warning(caplog) -> None:
    config = KafkaConfig({**dev_defaults(), "some.plugin.setting": "1"})
    assert config.unknown == ["some.plugin.setting"]
    assert "isn't a known config" in caplog.text


def test_topic_defaults_follow_broker_synonyms() -> None:
    config = KafkaConfig({**dev_defaults(), "log.retention.hours": "2",
                          "log.segment.bytes": "4096", "message.max.bytes": "2000"})
    defaults = config.topic_defaults()
    assert defaults["retention.ms"] == 2 * 3600000
    assert defaults["segment.bytes"] == 4096
    log_config = LogConfig.resolve({"segment.bytes": "8192"}, defaults)
    assert log_config.segment_bytes == 8192
    assert log_config.max_message_bytes == 2000
    # log.retention.ms wins over hours, and dynamic configs win over both
    config = KafkaConfig({**dev_defaults(), "log.retention.hours": "2",
                          "log.retention.ms": "500"})
    assert config.topic_defaults()["retention.ms"] == 500
    assert config.topic_defaults({"log.retention.ms": "9"})["retention.ms"] == 9
