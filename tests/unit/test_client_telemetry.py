"""KIP-714 client telemetry on a broker, sans-I/O: subscriptions matched and validated as
Kafka's ClientMetricsConfigs does, GetTelemetrySubscriptions and PushTelemetry decided as
Kafka's ClientMetricsManager decides them (ids, intervals, throttling, the terminating
push, the error codes), OTLP payloads decoded (every codec), and what clients pushed
served under Prometheus names until they stop pushing."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from ottla.broker.telemetry.client_metrics_manager import (
    ClientInfo,
    ClientMetricsManager,
    subscription_id,
)
from ottla.broker.telemetry.client_telemetry_exporter import (
    ClientTelemetryExporter,
    label_name,
    metric_name,
)
from ottla.common import client_metrics_configs as cm
from ottla.common.client_metrics_configs import ClientMetricsConfigError, Subscription
from ottla.common.uuids import kafka_uuid_text
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.api import ApiKey
from ottla.protocol.compression import CompressionType, compress
from ottla.protocol.errors import ErrorCode
from ottla.protocol.errors import ErrorCode as E
from ottla.server.metrics.client_telemetry_collector import ClientTelemetryCollector
from tests.unit.test_broker_handlers import ask as handler_ask
from tests.unit.test_broker_handlers import broker, create_topic  # noqa: F401 - the fixture
from tests.unit.test_metrics import scrape, value

NOW = 1_000_000
PRODUCER = ClientInfo("billing-producer", "confluent-kafka-python", "2.16.0", "10.0.0.7",
                      50123, ("PLAINTEXT", "10.0.0.7", 50123))
CONSUMER = ClientInfo("audit-consumer", "apache-kafka-java", "4.4.0", "10.0.0.8", 50200,
                      ("PLAINTEXT", "10.0.0.8", 50200))


# --- the subscriptions' configs ---------------------------------------------------------------

@pytest.mark.parametrize(("name", "configs", "message", "invalid_request"), [
    ("", {"interval.ms": "1000"}, "Subscription name can't be empty", True),
    ("s", {"intervals": "1000"}, "Unknown client metrics configuration: intervals", True),
    ("s", {"interval.ms": "99"}, "Invalid value 99 for interval.ms, interval must be "
     "between 100 and 3600000 (1 hour)", True),
    ("s", {"interval.ms": "3600001"}, "Invalid value 3600001 for interval.ms, interval must "
     "be between 100 and 3600000 (1 hour)", True),
    ("s", {"interval.ms": "often"}, "Invalid value often for configuration interval.ms: "
     "Not a number of type INT", False),
    ("s", {"match": "client_id=a=b"}, "Illegal client matching pattern: client_id=a=b",
     False),
    ("s", {"match": "client_name=a"}, "Illegal client matching pattern: client_name=a",
     False),
    ("s", {"match": "client_id=("}, "Illegal client matching pattern: client_id=(", False),
    ("s", {"match": "client_id="}, "Illegal client matching pattern: client_id=", False),
])
def test_subscriptions_are_refused_with_kafkas_messages(
        name: str, configs: dict[str, str], message: str, invalid_request: bool) -> None:
    with pytest.raises(ClientMetricsConfigError) as refused:
        cm.validate(name, configs)
    assert str(refused.value) == message
    assert refused.value.invalid_request is invalid_request


def test_a_subscription_parses_as_kafkas_config_def_does() -> None:
    cm.validate("s", {"metrics": "org.apache.kafka.producer., *", "interval.ms": " 100 ",
                      "match": "client_id = billing-.*, client_software_name=confluent.*"})
    subscription = Subscription.from_configs("s", {
        "metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.",
        "match": "client_id=billing-.*"})
    assert subscription.metrics == {"org.apache.kafka.producer.", "org.apache.kafka.consumer."}
    assert subscription.interval_ms == cm.INTERVAL_MS_DEFAULT
    assert subscription.matches(PRODUCER.attributes(uuid.UUID(int=5)))
    assert not subscription.matches(CONSUMER.attributes(uuid.UUID(int=5)))
    assert not Subscription.from_configs("s", {"match": "client_id=billing"}).matches(
        PRODUCER.attributes(uuid.UUID(int=5)))  # the whole value, as Java's matches()
    assert cm.parse_list("") == [] and cm.parse_list(" a ,b, ") == ["a", "b", ""]


# --- GetTelemetrySubscriptions and PushTelemetry -----------------------------------------------

class Receiver:
    def __init__(self, fail: Exception | None = None) -> None:
        self.pushed: list[tuple[Any, int, bytes]] = []
        self.fail = fail

    def export(self, instance: Any, compression_type: int, payload: bytes, now_ms: int
               ) -> None:
        if self.fail is not None:
            raise self.fail
        self.pushed.append((instance.instance_id, compression_type, payload))


def manager(*subscriptions: tuple[str, dict[str, str]], max_bytes: int = 1000,
            receiver: Any = None) -> ClientMetricsManager:
    metrics = ClientMetricsManager(max_bytes, random.Random(7), receiver or Receiver())
    metrics.update_subscriptions(dict(subscriptions))
    return metrics


PRODUCER_METRICS = ("producers", {"metrics": "org.apache.kafka.producer.",
                                  "interval.ms": "1000", "match": "client_id=billing-.*"})


def test_without_a_matching_subscription_a_client_is_asked_for_nothing() -> None:
    answer = manager(PRODUCER_METRICS).get_subscriptions(NOW, None, CONSUMER)
    assert answer["error_code"] == E.none
    assert answer["requested_metrics"] == []
    assert answer["push_interval"] == cm.INTERVAL_MS_DEFAULT
    assert answer["accepted_compression_types"] == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
    assert answer["delta_temporality"] is True
    assert answer["telemetry_max_bytes"] == 1000
    assert answer["client_instance_id"] not in (None, uuid.UUID(int=0))


def test_matching_subscriptions_are_merged() -> None:
    metrics = manager(PRODUCER_METRICS, ("java", {"metrics": "org.apache.kafka.consumer.",
                                                  "interval.ms": "5000"}))
    answer = metrics.get_subscriptions(NOW, None, PRODUCER)
    assert answer["requested_metrics"] == ["org.apache.kafka.consumer.",
                                           "org.apache.kafka.producer."]
    assert answer["push_interval"] == 1000  # the smallest
    everything = manager(PRODUCER_METRICS, ("all", {"metrics": "*"}))
    assert everything.get_subscriptions(NOW, None, PRODUCER)["requested_metrics"] == ["*"]


def test_asking_again_within_the_interval_is_throttled() -> None:
    metrics = manager(PRODUCER_METRICS)
    first = metrics.get_subscriptions(NOW, None, PRODUCER)
    instance_id = first["client_instance_id"]
    again = metrics.get_subscriptions(NOW + 500, instance_id, PRODUCER)
    assert again["error_code"] == E.throttling_quota_exceeded
    later = metrics.get_subscriptions(NOW + 1000, instance_id, PRODUCER)
    assert later["error_code"] == E.none
    assert later["client_instance_id"] == instance_id
    assert later["subscription_id"] == first["subscription_id"]


def test_pushes_follow_the_interval_and_the_terminating_push_comes_any_time() -> None:
    receiver = Receiver()
    metrics = manager(PRODUCER_METRICS, receiver=receiver)
    got = metrics.get_subscriptions(NOW, None, PRODUCER)
    instance_id, sub = got["client_instance_id"], got["subscription_id"]

    def push(at: int, terminating: bool = False, payload: bytes = b"x",
             subscription: int = sub, codec: int = 0) -> E:
        return metrics.push(at, instance_id, subscription, terminating, codec, payload,
                            PRODUCER)[0]

    assert push(NOW + 300) == E.none  # right after the fetch: in time, whatever the jitter
    assert push(NOW + 600) == E.throttling_quota_exceeded
    assert push(NOW + 1300) == E.none
    assert push(NOW + 2300, subscription=sub + 1) == E.unknown_subscription_id
    assert push(NOW + 3300, codec=9) == E.unsupported_compression_type
    assert push(NOW + 4300, payload=b"y" * 1001) == E.telemetry_too_large
    assert push(NOW + 5300, payload=b"") == E.none  # nothing to export
    assert push(NOW + 5400, terminating=True) == E.none  # early, but the last one
    assert push(NOW + 9000) == E.invalid_request  # nothing after the terminating push
    assert [p[2] for p in receiver.pushed] == [b"x", b"x", b"x"]


def test_after_a_failed_push_the_subscription_may_be_fetched_at_once() -> None:
    metrics = manager(PRODUCER_METRICS)
    got = metrics.get_subscriptions(NOW, None, PRODUCER)
    instance_id = got["client_instance_id"]
    error, message = metrics.push(NOW + 100, instance_id, 12345, False, 0, b"x", PRODUCER)
    assert error == E.unknown_subscription_id
    assert message == f"Unknown client subscription id for the client " \
        f"[{kafka_uuid_text(instance_id)}]"
    assert metrics.get_subscriptions(NOW + 200, instance_id, PRODUCER)["error_code"] == E.none


def test_a_changed_subscription_reaches_a_client_at_once_with_a_new_id() -> None:
    metrics = manager(PRODUCER_METRICS)
    got = metrics.get_subscriptions(NOW, None, PRODUCER)
    instance_id = got["client_instance_id"]
    metrics.update_subscriptions({"producers": {**PRODUCER_METRICS[1], "interval.ms": "2000"}})
    assert metrics.push(NOW + 100, instance_id, got["subscription_id"], False, 0, b"x",
                        PRODUCER)[0] == E.unknown_subscription_id
    again = metrics.get_subscriptions(NOW + 150, instance_id, PRODUCER)
    assert again["error_code"] == E.none and again["push_interval"] == 2000
    assert again["subscription_id"] != got["subscription_id"]
    metrics.update_subscriptions({"producers": {**PRODUCER_METRICS[1], "interval.ms": "2000"}})
    assert metrics.version == 2  # an unchanged set bumps nothing


def test_reserved_ids_and_unreadable_payloads_are_refused() -> None:
    metrics = manager(PRODUCER_METRICS, receiver=Receiver(fail=ValueError("garbage")))
    for reserved in (None, uuid.UUID(int=0), uuid.UUID(int=1)):
        assert metrics.push(NOW, reserved, 0, False, 0, b"x", PRODUCER)[0] == \
            E.invalid_request
    got = metrics.get_subscriptions(NOW, None, PRODUCER)
    assert metrics.push(NOW + 1, got["client_instance_id"], got["subscription_id"], False,
                        0, b"x", PRODUCER)[0] == E.invalid_record


def test_instances_expire_and_go_with_their_connection() -> None:
    metrics = manager(PRODUCER_METRICS)
    first = metrics.get_subscriptions(NOW, None, PRODUCER)["client_instance_id"]
    second = metrics.get_subscriptions(NOW, None, CONSUMER)["client_instance_id"]
    metrics.on_disconnect(CONSUMER.connection)
    assert list(metrics.instances) == [first]
    metrics.expire(NOW + 59_999)
    assert list(metrics.instances) == [first]  # at least a minute, or three intervals
    metrics.expire(NOW + 60_000)
    assert not metrics.instances and second != first


def test_the_subscription_id_changes_with_the_metrics_and_the_interval() -> None:
    instance = uuid.UUID(int=99)
    ids = {subscription_id(("a",), 1000, instance), subscription_id(("a", "b"), 1000, instance),
           subscription_id(("a",), 2000, instance), subscription_id(("a",), 1000, uuid.UUID(
               int=98))}
    assert len(ids) == 4
    assert all(-2**31 <= i < 2**31 for i in ids)


# --- OTLP payloads and what /metrics shows of them ------------------------------------------

def attribute(key: str, text: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=text))


def payload(*metrics: Metric, resource: tuple[KeyValue, ...] = ()) -> bytes:
    return MetricsData(resource_metrics=[ResourceMetrics(
        resource=Resource(attributes=list(resource)),
        scope_metrics=[ScopeMetrics(metrics=list(metrics))])]).SerializeToString()


def gauge(name: str, value: float, **attributes: str) -> Metric:
    return Metric(name=name, gauge=Gauge(data_points=[NumberDataPoint(
        as_double=value, attributes=[attribute(k, v) for k, v in attributes.items()])]))


def counter(name: str, value: int, delta: bool = True) -> Metric:
    return Metric(name=name, sum=Sum(is_monotonic=True, aggregation_temporality=1 if delta
                                     else 2, data_points=[NumberDataPoint(as_int=value)]))


def test_names_and_labels_follow_the_prometheus_conventions() -> None:
    assert metric_name("org.apache.kafka.producer.record.queue.time.max") == \
        "org_apache_kafka_producer_record_queue_time_max"
    assert metric_name("org.apache.kafka.client.connection.creations.total") == \
        "org_apache_kafka_client_connection_creations"  # the counter adds _total back
    assert label_name("node.id") == "node_id"
    assert label_name("1st") == "key_1st"


@pytest.mark.parametrize("codec", list(CompressionType))
def test_pushed_metrics_are_served_per_client_until_it_stops_pushing(codec: int) -> None:
    exporter = ClientTelemetryExporter(telemetry_max_bytes=1 << 20)
    metrics = manager(("all", {"metrics": "*", "interval.ms": "1000"}), receiver=exporter)
    got = metrics.get_subscriptions(NOW, None, PRODUCER)
    instance_id, sub = got["client_instance_id"], got["subscription_id"]
    resource = (attribute("client_id", "forged"), attribute("rack", "r1"))
    first = payload(gauge("org.apache.kafka.producer.record.queue.time.max", 12.5,
                          **{"node.id": "1"}),
                    counter("org.apache.kafka.producer.connection.creation.total", 2),
                    counter("org.apache.kafka.producer.requests", 10, delta=False),
                    gauge("kafka.server.spoofed", 1.0), resource=resource)
    assert metrics.push(NOW + 10, instance_id, sub, False, codec, compress(codec, first),
                        PRODUCER)[0] == E.none
    second = payload(counter("org.apache.kafka.producer.connection.creation.total", 3),
                     counter("org.apache.kafka.producer.requests", 25, delta=False),
                     resource=resource)
    assert metrics.push(NOW + 1010, instance_id, sub, False, codec, compress(codec, second),
                        PRODUCER)[0] == E.none

    clock = [NOW + 1500]
    samples = scrape(ClientTelemetryCollector(exporter, lambda: clock[0]))
    client = {"client_instance_id": kafka_uuid_text(instance_id),
              "client_id": "billing-producer"}
    assert value(samples, "org_apache_kafka_producer_record_queue_time_max", **client,
                 node_id="1", rack="r1", exported_client_id="forged") == 12.5
    assert value(samples, "org_apache_kafka_producer_connection_creation_total", **client,
                 rack="r1", exported_client_id="forged") == 5  # deltas added up
    assert value(samples, "org_apache_kafka_producer_requests_total", **client, rack="r1",
                 exported_client_id="forged") == 25  # cumulative: as pushed
    assert not any(name.startswith("kafka") for name, _ in samples)
    clock[0] = NOW + 1010 + 60_000  # three intervals, and a minute, without a push
    assert scrape(ClientTelemetryCollector(exporter, lambda: clock[0])) != {}
    clock[0] += 1
    assert scrape(ClientTelemetryCollector(exporter, lambda: clock[0])) == {}


def test_a_payload_that_is_no_otlp_or_decompresses_too_far_is_refused() -> None:
    exporter = ClientTelemetryExporter(telemetry_max_bytes=100)
    metrics = manager(("all", {"metrics": "*", "interval.ms": "100"}), receiver=exporter)
    got = metrics.get_subscriptions(NOW, None, PRODUCER)
    instance_id, sub = got["client_instance_id"], got["subscription_id"]
    assert metrics.push(NOW + 1, instance_id, sub, False, 0, b"\xff\xff\xff", PRODUCER)[0] \
        == E.invalid_record
    bomb = compress(CompressionType.ZSTD, payload(gauge("g" * 3000, 1.0)))
    assert len(bomb) <= 100
    assert metrics.push(NOW + 200, instance_id, sub, False, CompressionType.ZSTD, bomb,
                        PRODUCER)[0] == E.telemetry_too_large


# --- the subscriptions as admin clients see them -------------------------------------------

def subscribe(image: Any, name: str, **configs: str) -> None:
    for key, text in configs.items():
        image.replay(r.ConfigRecord(resource_type=ConfigResourceType.CLIENT_METRICS,
                                    resource_name=name, name=key.replace("_", "."),
                                    value=text))


async def test_describe_configs_shows_a_subscription_with_kafkas_defaults(broker  # noqa: F811
                                                                        ) -> None:
    subscribe(broker.image, "producers", metrics="org.apache.kafka.producer., org.x.",
              interval_ms="1000")
    described = await handler_ask(broker, ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 16, "resource_name": name, "configuration_keys": None}
                      for name in ("producers", "")],
        "include_synonyms": True, "include_documentation": False})
    producers, unnamed = described.results
    assert [(c.name, c.value, c.config_source, len(c.synonyms)) for c in producers.configs] \
        == [("metrics", "org.apache.kafka.producer.,org.x.", 7, 1),
            ("interval.ms", "1000", 7, 1), ("match", "", 5, 0)]
    assert (unnamed.error_code, unnamed.error_message) == (
        ErrorCode.invalid_request, "Client metrics subscription name must not be empty")


async def test_list_config_resources_lists_the_subscriptions_and_the_rest(broker  # noqa: F811
                                                                        ) -> None:
    subscribe(broker.image, "producers", interval_ms="1000")
    subscribe(broker.image, "all", metrics="*")
    create_topic(broker, "orders")
    legacy = await handler_ask(broker, ApiKey.LIST_CONFIG_RESOURCES, 0, {})
    assert [c.resource_name for c in legacy.config_resources] == ["all", "producers"]
    everything = await handler_ask(broker, ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
    assert [(c.resource_type, c.resource_name) for c in everything.config_resources] == [
        (16, "all"), (16, "producers"), (8, "1"), (4, "1"), (2, "orders")]
    unknown = await handler_ask(broker, ApiKey.LIST_CONFIG_RESOURCES, 1,
                                {"resource_types": [2, 64]})
    assert unknown.error_code == ErrorCode.unsupported_version


@pytest.mark.parametrize(("argv", "message"), [
    ([], "Command must include exactly one action: --alter, --delete, --describe or --list."),
    (["--list", "--describe"], "Command must include exactly one action: --alter, --delete, "
     "--describe or --list."),
    (["--list"], "--bootstrap-server must be specified."),
    (["--bootstrap-server", "b:9092", "--list", "--name", "a"],
     'Option "[list]" can\'t be used with option "[name]"'),
    (["--bootstrap-server", "b:9092", "--describe", "--interval", "5"],
     'Option "[describe]" can\'t be used with option "[interval]"'),
    (["--bootstrap-server", "b:9092", "--alter", "--metrics", "a"],
     "One of --name or --generate-name must be specified with --alter."),
    (["--bootstrap-server", "b:9092", "--alter", "--name", "a", "--generate-name"],
     "One of --name or --generate-name must be specified with --alter."),
    (["--bootstrap-server", "b:9092", "--delete"],
     "A client metrics resource name must be specified with --delete."),
    (["--bootstrap-server", "b:9092", "--alter", "--generate-name"], None),
])
def test_the_tool_checks_its_arguments_as_kafka_client_metrics_sh(argv: list[str],
                                                                  message: str | None) -> None:
    from ottla.cli.client_metrics import check_args
    from ottla.cli.main import build_parser

    assert check_args(build_parser().parse_args(["client-metrics", *argv])) == message


def test_the_telemetry_apis_are_advertised_only_with_a_receiver(broker) -> None:  # noqa: F811
    """As Kafka lists GetTelemetrySubscriptions and PushTelemetry only with a telemetry
    receiver configured: here, a node serving /metrics."""
    from ottla.server.apis import broker_dispatcher

    table = broker_dispatcher(broker, lambda: NOW / 1000).table
    telemetry = {int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS), int(ApiKey.PUSH_TELEMETRY)}
    assert not telemetry & {key for key, _, _ in table.versions()}
    assert telemetry <= set(table.specs)  # served all the same, as Kafka's KafkaApis
    broker.client_metrics.receiver = ClientTelemetryExporter(1 << 20)
    assert telemetry <= {key for key, _, _ in table.versions()}
