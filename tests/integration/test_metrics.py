"""GET /metrics on prometheus.listener, as a Kafka user reads it: a real node, records
produced and consumed with confluent-kafka, the endpoint scraped over HTTP and parsed as
Prometheus parses it, and the series named as the JMX exporter names Kafka's. Then a
cluster: a broker killed with SIGKILL shows as under-replicated partitions on the
surviving leader."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import KRaftCluster, OttlaProcess, free_port, wait_until
from tests.integration.test_quorum import create
from tests.integration.test_replication import full_isr, partitions

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of the node's /metrics: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == CONTENT_TYPE_LATEST
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples that carry ``labels`` (the unlabelled series if none
    are given); a series not (yet) served fails."""
    found = [v for (n, have), v in samples.items() if n == name and (
        set(labels.items()) <= set(have) if labels else not have)]
    assert found, f"no {name}{labels or ''} in the scrape"
    return sum(found)


def total_or_zero(samples: Samples, name: str, **labels: str) -> float:
    """As ``total``, 0 for a series not served yet (a request name first seen later)."""
    return sum(v for (n, have), v in samples.items()
               if n == name and set(labels.items()) <= set(have))


class Metered(NamedTuple):
    node: OttlaProcess
    port: int
    """Where it serves /metrics."""


@pytest.fixture(scope="module")
def metered(tmp_path_factory) -> Iterator[Metered]:
    """A combined node serving its metrics (the module's tests share it)."""
    port = free_port()
    node = OttlaProcess(str(tmp_path_factory.mktemp("metrics") / "data"), overrides={
        "prometheus.listener": f"127.0.0.1:{port}", "offsets.topic.num.partitions": "3"})
    node.start()
    yield Metered(node, port)
    node.stop()


RECORDS = 60
VALUE = 200


def test_produce_and_consume_show_as_kafka_would_count_them(metered: Metered) -> None:
    node, port = metered
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("metered", 3, 1)])["metered"].result(15)
    before = scrape(port)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                         "linger.ms": 5})
    produced = 0
    for i in range(RECORDS):
        key, value = b"key-%d" % i, bytes([i % 256]) * VALUE
        produced += len(key) + len(value)
        producer.produce("metered", key=key, value=value, partition=i % 3)
    assert producer.flush(15) == 0
    after_produce = scrape(port)
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert total(after_produce, messages, topic="metered") == RECORDS
    assert total(after_produce, messages) - total(before, messages) == RECORDS
    assert total(after_produce, "kafka_server_brokertopicmetrics_bytesin_total",
                 topic="metered") >= produced
    assert total(after_produce, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                 topic="metered") >= 3  # every partition had a batch
    assert total(after_produce,
                 "kafka_server_brokertopicmetrics_failedproducerequests_total") == 0
    requests = "kafka_network_requestmetrics_requests_total"
    assert total(after_produce, requests, request="Produce") > \
        total_or_zero(before, requests, request="Produce")
    assert total(after_produce, "kafka_network_requestmetrics_totaltimems_count",
                 request="Produce") == total(after_produce, requests, request="Produce")

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "metered-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("metered", p, 0) for p in range(3)])
    consumed = 0
    deadline = time.monotonic() + 20
    try:
        while consumed < RECORDS and time.monotonic() < deadline:
            consumed += sum(1 for m in consumer.consume(100, 0.5) if m.error() is None)
    finally:
        consumer.close()
    assert consumed == RECORDS
    after_consume = scrape(port)
    bytes_out = "kafka_server_brokertopicmetrics_bytesout_total"
    assert total(after_consume, bytes_out, topic="metered") >= produced
    assert total(after_consume, bytes_out) > total(after_produce, bytes_out)
    assert total(after_consume, "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                 topic="metered") >= 3
    for request in ("Fetch", "FetchConsumer"):
        assert total(after_consume, requests, request=request) > \
            total_or_zero(after_produce, requests, request=request)
    assert ("kafka_network_requestmetrics_totaltimems",
            (("quantile", "0.99"), ("request", "Fetch"))) in after_consume

    # The replica manager and the controller, against what Metadata lists.
    def gauges_match() -> bool:
        listed = admin.list_topics(timeout=5).topics
        partition_count = sum(len(t.partitions) for t in listed.values())
        samples = scrape(port)
        return (total(samples, "kafka_server_replicamanager_partitioncount")
                == total(samples, "kafka_server_replicamanager_leadercount")
                == total(samples, "kafka_controller_kafkacontroller_globalpartitioncount")
                == partition_count) and \
            total(samples, "kafka_controller_kafkacontroller_globaltopiccount") == len(listed)
    wait_until(gauges_match, 10, 0.2, lambda: f"partition and topic gauges matching "
               f"Metadata: {scrape(port)}")
    final = scrape(port)
    assert "metered" in admin.list_topics(timeout=5).topics
    assert total(final, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert total(final, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert total(final, "kafka_controller_kafkacontroller_activebrokercount") == 1
    assert total(final, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert total(final, "kafka_controller_kafkacontroller_lastappliedrecordoffset") > 0
    assert total(final, "process_resident_memory_bytes") > 0
    assert total(final, "process_open_fds") > 0
    assert total(final, "kafka_server_socket_server_metrics_connection_count",
                 listener="PLAINTEXT") >= 1  # the admin client's


def test_other_paths_are_not_found(metered: Metered) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{metered.port}/nope", timeout=5)
    assert refused.value.code == 404


@pytest.mark.slow
def test_a_killed_broker_shows_as_under_replicated_on_the_surviving_leader(
        tmp_path) -> None:
    cluster = KRaftCluster(str(tmp_path), controllers=1, brokers=3,
                           controller_props={"broker.session.timeout.ms": "2000"},
                           broker_props={"broker.heartbeat.interval.ms": "300",
                                         "replica.fetch.backoff.ms": "200"})
    ports = {}
    for node_id, node in cluster.nodes.items():
        ports[node_id] = free_port()
        with open(node.config_file or "", "a", encoding="utf-8") as f:
            f.write(f"prometheus.listener=127.0.0.1:{ports[node_id]}\n")
    cluster.start()
    try:
        create(cluster, [NewTopic("tripled", 1, 3)])
        wait_until(lambda: full_isr(cluster, "tripled"), 30, 0.2, "three in-sync replicas")
        leader, replicas, _ = partitions(cluster, "tripled")[0]
        under = "kafka_server_replicamanager_underreplicatedpartitions"
        assert total(scrape(ports[leader]), under) == 0
        follower = next(r for r in replicas if r != leader)
        cluster.nodes[follower].kill9()
        wait_until(lambda: total(scrape(ports[leader]), under) > 0, 30, 0.2,
                   lambda: f"broker {leader} reporting the partition under-replicated "
                           f"after {follower} died: {partitions(cluster, 'tripled')}")
        controller = scrape(ports[cluster.controller_ids[0]])
        assert total(controller, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total(controller, "kafka_controller_kafkacontroller_fencedbrokercount") == 1
        assert total(controller, "kafka_controller_kafkacontroller_activebrokercount") == 2
        for survivor in (b for b in cluster.broker_ids if b not in (leader, follower)):
            assert total(scrape(ports[survivor]), under) == 0  # it leads nothing
    finally:
        cluster.stop()
