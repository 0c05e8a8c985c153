"""Ottla's /metrics against the real Prometheus JMX exporter on Apache Kafka 4.4: a Kafka
node run with the exporter's Java agent and its example KRaft rules (both installed by
``make kafka-ref``: tests/kafka_ref/jmx_exporter.py) and an Ottla node with
``prometheus.listener``, the same traffic on both (tests/kafka_ref/jmx_names.py's
``traffic``), both scraped. Every metric the common Kafka Grafana dashboards query
(tests/kafka_ref/dashboard_metrics.py) must be in Kafka's scrape under the name the
mapping gives (so the list is Kafka's truth, not Ottla's), and in Ottla's with the same
name and the same label names, but for the few ``NOT_IN_OTTLA`` says cannot be."""

from __future__ import annotations

import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import OttlaProcess, free_port
from tests.kafka_ref.cluster import NODE_JVM_OPTS, single_node
from tests.kafka_ref.dashboard_metrics import DASHBOARD_METRICS, NOT_IN_OTTLA
from tests.kafka_ref.install import InstallError
from tests.kafka_ref.jmx_exporter import KAFKA_KRAFT_RULES
from tests.kafka_ref.jmx_exporter import install as install_agent
from tests.kafka_ref.jmx_names import traffic
from tests.kafka_tools import require_kafka

Scrape = dict[str, set[frozenset[str]]]
"""Sample name -> the label-name sets its series have."""


def parse(text: str) -> Scrape:
    found: Scrape = defaultdict(set)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name].add(frozenset(sample.labels))
    return dict(found)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return response.read().decode()


def kafka_scrape(base: Path) -> Scrape:
    """A combined Kafka node with the agent serving its beans on a free port."""
    require_kafka()
    try:
        agent = install_agent()
    except InstallError as e:
        pytest.fail(f"the Prometheus JMX exporter could not be installed (make kafka-ref): {e}",
                    pytrace=False)
    port = free_port()
    cluster = single_node(base)
    node = cluster.nodes[1]
    node.jvm_opts = (*NODE_JVM_OPTS, f"-javaagent:{agent}=127.0.0.1:{port}:{KAFKA_KRAFT_RULES}")
    node.share_classes = False  # the agent's jar is not on the archive's classpath
    with cluster:
        traffic(cluster.bootstrap)
        return parse(scrape(port))


def ottla_scrape(base: Path) -> Scrape:
    port = free_port()
    base.mkdir(parents=True)
    node = OttlaProcess(str(base / "data"),
                        overrides={"prometheus.listener": f"127.0.0.1:{port}"})
    node.start()
    try:
        traffic(node.bootstrap)
        return parse(scrape(port))
    finally:
        node.stop()


def test_every_dashboard_metric_of_kafkas_exporter_is_in_ottlas_scrape(tmp_path: Path) -> None:
    kafka = kafka_scrape(tmp_path / "kafka")
    ottla = ottla_scrape(tmp_path / "ottla")

    expected = [m for m in DASHBOARD_METRICS if m.name is not None]
    not_kafkas = [m.name for m in expected if m.name not in kafka]
    assert not not_kafkas, f"the mapping names series Kafka's exporter does not serve: {not_kafkas}"
    # A dashboard metric the rules name otherwise is truly absent under the queried name.
    for metric in DASHBOARD_METRICS:
        if metric.name is None:
            assert metric.queried not in kafka, f"{metric.queried} is served: map it"

    missing: list[str] = []
    for metric in expected:
        assert metric.name is not None
        if metric.name in NOT_IN_OTTLA:
            assert metric.name not in ottla, f"{metric.name} is served: drop it from NOT_IN_OTTLA"
            continue
        for labels in sorted(kafka[metric.name], key=sorted):
            if labels not in ottla.get(metric.name, set()):
                missing.append(f"{metric.name}{{{','.join(sorted(labels))}}}")
    assert not missing, f"dashboard series Kafka's exporter serves and Ottla does not: {missing}"
