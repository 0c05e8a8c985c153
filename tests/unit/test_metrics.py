"""The metrics a node serves on prometheus.listener (``ottla.server.metrics``): Kafka's
names as the JMX exporter's rules give them, each collector's series from known state
(parsed back from the text exposition, as Prometheus reads it), what the connections
record per request, and the HTTP endpoint's answers to good and bad requests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from kio.index import load_request_schema
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, ApiTable
from ottla.server.metrics import endpoint as endpoint_module
from ottla.server.metrics.broker_collectors import (
    BrokerTopicMetricsCollector,
    ReplicaManagerCollector,
)
from ottla.server.metrics.controller_collector import KafkaControllerCollector
from ottla.server.metrics.endpoint import MetricsEndpoint
from ottla.server.metrics.jmx_names import gauge, histogram, meter, yammer_quantile
from ottla.server.metrics.node_metrics import node_registry
from ottla.server.metrics.request_collector import (
    RequestMetricsCollector,
    SocketServerCollector,
)
from ottla.server.metrics.request_metrics import (
    RESERVOIR,
    RequestChannelMetrics,
    request_name,
)
from ottla.server.network import KafkaServer
from ottla.server.request_dispatcher import RequestDispatcher
from ottla.storage.log_manager import LogManager
from tests.unit.test_network import METADATA_V12, ask

BROKER = 1

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(*collectors: Any) -> Samples:
    """Every sample the collectors give, as Prometheus reads the exposition:
    (name, sorted labels) -> value."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


# --- names ----------------------------------------------------------------------------------

def test_names_follow_the_jmx_exporter_rules() -> None:
    assert meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec") == \
        "kafka_server_brokertopicmetrics_messagesin"  # the counter family adds _total
    assert meter("kafka.network", "RequestMetrics", "RequestsPerSec") == \
        "kafka_network_requestmetrics_requests"
    assert gauge("kafka.server", "ReplicaManager", "UnderReplicatedPartitions") == \
        "kafka_server_replicamanager_underreplicatedpartitions"
    assert gauge("kafka.controller", "KafkaController", "ActiveControllerCount") == \
        "kafka_controller_kafkacontroller_activecontrollercount"
    assert histogram("kafka.network", "RequestMetrics", "TotalTimeMs") == \
        "kafka_network_requestmetrics_totaltimems"
    with pytest.raises(ValueError):
        meter("kafka.server", "ReplicaManager", "PartitionCount")


def test_request_names_are_kafkas_api_names() -> None:
    """Kafka's ``ApiKeys.name`` is the message name without ``Request``: the name of each
    kio request schema, for every API."""
    assert request_name(ApiKey.PRODUCE) == "Produce"
    assert request_name(ApiKey.OFFSET_COMMIT) == "OffsetCommit"
    assert request_name(ApiKey.DESCRIBE_TOPIC_PARTITIONS) == "DescribeTopicPartitions"
    for key in ApiKey:
        for version in range(20):
            try:
                schema = load_request_schema(key, version)
            except Exception:
                continue
            assert request_name(key) == schema.__name__.removesuffix("Request")
            break


def test_quantiles_interpolate_as_yammer_snapshots_do() -> None:
    values = [float(v) for v in range(1, 11)]  # 1..10
    assert yammer_quantile([], 0.5) == 0.0
    assert yammer_quantile(values, 0.5) == 5.5  # position 5.5: between 5 and 6
    assert yammer_quantile(values, 0.75) == pytest.approx(8.25)
    assert yammer_quantile(values, 0.99) == 10.0  # past the last: the largest
    assert yammer_quantile(values, 0.01) == 1.0


# --- BrokerTopicMetrics -------------------------------------------------------------------

def image_with(*topics: str) -> MetadataImage:
    image = MetadataImage()
    for name in topics:
        image.replay(r.TopicRecord(name=name, topic_id=uuid.uuid4()))
    return image


def test_broker_topic_metrics_per_topic_and_for_all_topics() -> None:
    stats = BrokerTopicStats()
    stats.produced("orders", ErrorCode.none, 10, 1000)
    stats.produced("orders", ErrorCode.invalid_record, 0, 50)
    stats.produced("audit", ErrorCode.none, 1, 70)
    stats.fetched("orders", ErrorCode.none)
    stats.sent("orders", 600)
    samples = scrape(BrokerTopicMetricsCollector(stats, image_with("orders", "audit")))
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(samples, messages, topic="orders") == 10
    assert value(samples, messages, topic="audit") == 1
    assert value(samples, messages) == 11  # the topic-less bean: all topics
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total") == 1070
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total",
                 topic="orders") == 600
    assert value(samples, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                 topic="orders") == 2
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic="orders") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_totalfetchrequests_total") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_failedfetchrequests_total") == 0


def test_a_deleted_topics_series_go_but_the_totals_keep_its_counts() -> None:
    stats = BrokerTopicStats()
    stats.produced("gone", ErrorCode.none, 5, 500)
    stats.produced("kept", ErrorCode.none, 1, 100)
    samples = scrape(BrokerTopicMetricsCollector(stats, image_with("kept")))
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert (messages, (("topic", "gone"),)) not in samples
    assert value(samples, messages, topic="kept") == 1
    assert value(samples, messages) == 6


# --- ReplicaManager -------------------------------------------------------------------------

def hosted(tmp_path: Any, *partitions: tuple[str, int, list[int], list[int], int]
           ) -> tuple[ReplicaManager, MetadataImage]:
    """A replica manager of broker 1 hosting ``partitions``: (topic, leader, replicas,
    ISR, min.insync.replicas)."""
    image = MetadataImage()
    for topic, leader, replicas, isr, min_isr in partitions:
        topic_id = uuid.uuid4()
        image.replay(r.TopicRecord(name=topic, topic_id=topic_id))
        image.replay(r.PartitionRecord(partition_id=0, topic_id=topic_id,
                                       replicas=tuple(replicas), isr=tuple(isr),
                                       leader=leader, leader_epoch=0, partition_epoch=0))
        image.replay(r.ConfigRecord(resource_type=ConfigResourceType.TOPIC,
                                    resource_name=topic, name="min.insync.replicas",
                                    value=str(min_isr)))
    logs = LogManager([str(tmp_path / "logs")], now_ms=0)
    logs.discover()
    logs.started()
    manager = ReplicaManager(BROKER, logs, lambda image: {})
    manager.apply_metadata(image, 0)
    return manager, image


def test_replica_manager_gauges_count_as_kafkas_partitions_do(tmp_path) -> None:
    manager, image = hosted(
        tmp_path,
        ("healthy", 1, [1, 2, 3], [1, 2, 3], 2),
        ("at-min", 1, [1, 2, 3], [1, 2], 2),       # under-replicated, at min ISR
        ("below-min", 1, [1, 2, 3], [1], 2),       # under-replicated, under min ISR
        ("followed", 2, [1, 2, 3], [2], 2),        # led elsewhere: no leader gauge counts it
        ("single", 1, [1], [1], 2))                # min ISR capped at the replicas: at min
    samples = scrape(ReplicaManagerCollector(manager, image))
    name = "kafka_server_replicamanager_{}".format
    assert value(samples, name("partitioncount")) == 5
    assert value(samples, name("leadercount")) == 4
    assert value(samples, name("underreplicatedpartitions")) == 2
    assert value(samples, name("underminisrpartitioncount")) == 1
    assert value(samples, name("atminisrpartitioncount")) == 2
    assert value(samples, name("offlinereplicacount")) == 0
    assert value(samples, name("isrshrinks_total")) == 0


def test_isr_changes_the_controller_accepted_are_counted(tmp_path) -> None:
    manager, image = hosted(tmp_path, ("orders", 1, [1, 2, 3], [1, 2, 3], 1))
    partition = manager.partitions[("orders", 0)]
    partition.replication.pending_isr = [1, 2]
    manager.isr_answered(partition, [1, 2], 1, 0)
    partition.replication.pending_isr = [1, 2, 3]
    manager.isr_answered(partition, [1, 2, 3], 2, 0)
    partition.replication.pending_isr = [1, 3]
    manager.isr_answered(partition, None, -1, 0)  # refused: nothing changed
    samples = scrape(ReplicaManagerCollector(manager, image))
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 1
    assert value(samples, "kafka_server_replicamanager_isrexpands_total") == 1


# --- KafkaController ----------------------------------------------------------------------

class Offsets:
    replayed_end = 42
    committed_end = 40


class Driver:
    """What the collector reads of a ControllerDriver."""

    def __init__(self, active: bool) -> None:
        self.is_active = active
        self.offsets = Offsets()


def test_controller_gauges_from_the_image() -> None:
    image = MetadataImage()
    for broker_id, fenced in ((101, False), (102, False), (103, True)):
        image.replay(r.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=5,
            end_points=(), rack=None, fenced=fenced))
    for name, leaders in (("a", [101, 102]), ("b", [-1, 101, 103])):
        topic_id = uuid.uuid4()
        image.replay(r.TopicRecord(name=name, topic_id=topic_id))
        for index, leader in enumerate(leaders):
            image.replay(r.PartitionRecord(
                partition_id=index, topic_id=topic_id, replicas=(101, 102, 103),
                isr=(101,), leader=leader, leader_epoch=0, partition_epoch=0))
    name = "kafka_controller_kafkacontroller_{}".format
    active = scrape(KafkaControllerCollector(Driver(True), image))  # type: ignore[arg-type]
    assert value(active, name("activecontrollercount")) == 1
    assert value(active, name("globaltopiccount")) == 2
    assert value(active, name("globalpartitioncount")) == 5
    assert value(active, name("offlinepartitionscount")) == 1
    assert value(active, name("preferredreplicaimbalancecount")) == 3  # led by 102, 103, -1
    assert value(active, name("fencedbrokercount")) == 1
    assert value(active, name("activebrokercount")) == 2
    assert value(active, name("lastappliedrecordoffset")) == 41
    assert value(active, name("lastcommittedrecordoffset")) == 39
    standby = scrape(KafkaControllerCollector(Driver(False), image))  # type: ignore[arg-type]
    assert value(standby, name("activecontrollercount")) == 0


# --- RequestMetrics, recorded by the connections -----------------------------------------

def test_fetches_count_as_fetch_and_by_who_fetched_and_verification_apart() -> None:
    metrics = RequestChannelMetrics()

    class Request:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(fields)

    class State:
        replica_id = 102

    metrics.record(ApiKey.FETCH, 16, Request(replica_state=None, replica_id=-1),
                   0.0, 0.001, 0.501, 0.502)
    metrics.record(ApiKey.FETCH, 17, Request(replica_state=State()), 0.0, 0.0, 0.0, 0.0)
    metrics.record(ApiKey.FETCH, 10, Request(replica_id=103), 0.0, 0.0, 0.0, 0.0)
    verify = Request(transactions=[Request(verify_only=True)])
    metrics.record(ApiKey.ADD_PARTITIONS_TO_TXN, 5, verify, 0.0, 0.0, 0.0, 0.0)
    samples = scrape(RequestMetricsCollector(metrics))
    requests = "kafka_network_requestmetrics_requests_total"
    assert value(samples, requests, request="Fetch", version="16") == 1
    assert value(samples, requests, request="Fetch", version="17") == 1
    assert value(samples, requests, request="FetchConsumer", version="16") == 1
    assert value(samples, requests, request="FetchFollower", version="17") == 1
    assert value(samples, requests, request="FetchFollower", version="10") == 1
    assert value(samples, requests, request="AddPartitionsToTxnVerification",
                 version="5") == 1
    assert not any(labels and dict(labels).get("request") == "AddPartitionsToTxn"
                   for _, labels in samples)
    consumer = dict(request="FetchConsumer")
    total = "kafka_network_requestmetrics_totaltimems"
    assert value(samples, total, quantile="0.50", **consumer) == pytest.approx(502.0)
    assert value(samples, total + "_count", **consumer) == 1
    assert value(samples, total + "_sum", **consumer) == pytest.approx(502.0)
    assert value(samples, "kafka_network_requestmetrics_localtimems", quantile="0.99",
                 **consumer) == pytest.approx(1.0)
    assert value(samples, "kafka_network_requestmetrics_remotetimems", quantile="0.75",
                 **consumer) == pytest.approx(500.0)
    assert value(samples, "kafka_network_requestmetrics_responsesendtimems", quantile="0.95",
                 **consumer) == pytest.approx(1.0)


def test_the_histograms_keep_the_latest_requests() -> None:
    metrics = RequestChannelMetrics()
    for i in range(RESERVOIR + 100):
        slow = i >= 100  # the first 100 fall out of the reservoir
        metrics.record(ApiKey.METADATA, 12, None, 0.0, 0.0, 0.0, 1.0 if slow else 0.0)
    samples = scrape(RequestMetricsCollector(metrics))
    total = "kafka_network_requestmetrics_totaltimems"
    assert value(samples, total, request="Metadata", quantile="0.50") == 1000.0
    assert value(samples, total + "_count", request="Metadata") == RESERVOIR + 100


def failing(services: Any, ctx: Any, req: Any) -> Any:
    raise TypeError("a bug")


async def waiting(services: Any, ctx: Any, req: Any) -> Any:
    await asyncio.sleep(0.05)
    raise KafkaError(ErrorCode.group_authorization_failed, "no")


async def test_each_answered_request_is_recorded_with_its_times() -> None:
    metrics = RequestChannelMetrics()
    table = ApiTable("broker", None, [ApiSpec(ApiKey.METADATA, 0, 12, failing),
                                      ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, waiting)])
    server = KafkaServer(RequestDispatcher(table), "PLAINTEXT", "127.0.0.1", 0, 1 << 20,
                         request_metrics=metrics)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        for i in range(3):  # answered UNKNOWN_SERVER_ERROR, recorded all the same
            await ask(reader, writer, ApiKey.METADATA, 12, METADATA_V12, i)
        await ask(reader, writer, ApiKey.METADATA, 9, {
            **METADATA_V12, "include_cluster_authorized_operations": False}, 3)
        await ask(reader, writer, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": ["g"], "include_authorized_operations": False}, 4)
        samples = scrape(RequestMetricsCollector(metrics), SocketServerCollector(
            lambda: [server]))
    finally:
        writer.close()
        await server.stop()
    requests = "kafka_network_requestmetrics_requests_total"
    assert value(samples, requests, request="Metadata", version="12") == 3
    assert value(samples, requests, request="Metadata", version="9") == 1
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count",
                 request="Metadata") == 4
    # The waiting handler's 50 ms are remote time (waiting), not local; its refusal is
    # an answer like any other.
    group = dict(request="DescribeGroups", quantile="0.50")
    assert value(samples, "kafka_network_requestmetrics_remotetimems", **group) >= 45
    assert value(samples, "kafka_network_requestmetrics_localtimems", **group) < 45
    assert value(samples, "kafka_network_requestmetrics_totaltimems", **group) >= 45
    assert value(samples, "kafka_server_socket_server_metrics_connection_count",
                 listener="PLAINTEXT") == 1


# --- the node's registry and the endpoint ---------------------------------------------------

def test_each_node_has_a_registry_of_its_own() -> None:
    """Two nodes in one process: each registry has its own process collector (the
    default registry would refuse the second) and its own request metrics."""
    first = node_registry(image=MetadataImage(), requests=RequestChannelMetrics(),
                          servers=list, broker=None, controller=None)
    second_metrics = RequestChannelMetrics()
    second_metrics.record(ApiKey.API_VERSIONS, 3, None, 0.0, 0.0, 0.0, 0.0)
    second = node_registry(image=MetadataImage(), requests=second_metrics, servers=list,
                           broker=None, controller=None)
    assert b"process_cpu_seconds_total" in generate_latest(first)
    assert b"ApiVersions" not in generate_latest(first)
    assert b'request="ApiVersions"' in generate_latest(second)


async def http(port: int, data: bytes, close_after: bool = False) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    if close_after:
        writer.write_eof()
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


def head(response: bytes) -> tuple[str, dict[str, str], bytes]:
    top, _, body = response.partition(b"\r\n\r\n")
    status, *lines = top.decode().split("\r\n")
    return status, dict(line.split(": ", 1) for line in lines), body


class Constant:
    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily
        yield GaugeMetricFamily("ottla_test_value", "a constant", value=7)


class Broken:
    def collect(self) -> Iterable[Any]:
        raise RuntimeError("a bug")


async def test_the_endpoint_serves_metrics_and_refuses_everything_else(monkeypatch) -> None:
    registry = CollectorRegistry()
    registry.register(Constant())
    endpoint = MetricsEndpoint(registry, "127.0.0.1", 0)
    await endpoint.start()
    port = endpoint.port
    try:
        status, headers, body = head(await http(port, b"GET /metrics HTTP/1.1\r\n"
                                                      b"Host: x\r\n\r\n"))
        assert status == "HTTP/1.1 200 OK"
        assert headers["Content-Type"] == CONTENT_TYPE_LATEST
        assert int(headers["Content-Length"]) == len(body)
        assert b"ottla_test_value 7.0" in body
        status, _, body = head(await http(port, b"GET /metrics?name=x HTTP/1.0\r\n\r\n"))
        assert status.endswith("200 OK") and b"ottla_test_value" in body
        status, _, body = head(await http(port, b"HEAD /metrics HTTP/1.1\r\n\r\n"))
        assert status.endswith("200 OK") and body == b""
        status, _, _ = head(await http(port, b"GET / HTTP/1.1\r\n\r\n"))
        assert status == "HTTP/1.1 404 Not Found"
        status, headers, _ = head(await http(port, b"DELETE /metrics HTTP/1.1\r\n\r\n"))
        assert status == "HTTP/1.1 405 Method Not Allowed"
        assert headers["Allow"] == "GET, HEAD"
        for bad in (b"nonsense\r\n\r\n", b"GET /metrics SMTP\r\n\r\n", b"\xff\xfe\r\n\r\n"):
            status, _, _ = head(await http(port, bad))
            assert status == "HTTP/1.1 400 Bad Request"
        # Cut short, or more head than allowed: closed without an answer.
        assert await http(port, b"GET /metrics HTTP/1.1\r\n", close_after=True) == b""
        assert await http(port, b"GET /" + b"x" * 20000) == b""
        monkeypatch.setattr(endpoint_module, "READ_TIMEOUT_S", 0.1)
        assert await http(port, b"GET /metrics") == b""  # never finished: timed out
        # A collector that fails makes the scrape fail, not the node.
        broken = Broken()
        registry.register(broken)
        status, _, _ = head(await http(port, b"GET /metrics HTTP/1.1\r\n\r\n"))
        assert status == "HTTP/1.1 500 Internal Server Error"
        registry.unregister(broken)
        # Still serving after all that.
        status, _, _ = head(await http(port, b"GET /metrics HTTP/1.1\r\n\r\n"))
        assert status.endswith("200 OK")
    finally:
        await endpoint.stop()
