"""``client.quota.callback.class`` (KIP-257) on a real node: a Python callback from a
module of the tests (``tests.quota_callbacks.TopicPrefixQuota``) gives the producers of a
tenant a quota per partition of the tenant's topics, learnt from the cluster's metadata.
A confluent-kafka producer of the tenant is throttled (librdkafka's ``throttle_cb``
reports the broker's throttle_time_ms) and held near the quota the callback computed,
while a producer of another client id is not; the node's quota metrics carry the
callback's own ``tenant`` tag; a quota that is a Java class name stops the node at start
with Kafka's config error. Without a callback the built-in quotas are
unchanged (test_client_quotas)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import OttlaProcess, free_port
from tests.integration.test_client_quotas import RUN_S, produce_flat_out, quota_series
from tests.integration.test_metrics import scrape

PER_PARTITION = 50_000
"""Bytes/s the tenant may produce per partition of its topics."""
PARTITIONS = 4
QUOTA = PER_PARTITION * PARTITIONS
METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def node(tmp_path_factory: Any) -> Iterator[OttlaProcess]:
    node = OttlaProcess(str(tmp_path_factory.mktemp("quota-callback") / "data"), overrides={
        "num.partitions": "1",
        "client.quota.callback.class": "tests.quota_callbacks.TopicPrefixQuota",
        "quota.callback.prefix": "tenant-a.",
        "quota.callback.bytes.per.partition": str(PER_PARTITION),
        "prometheus.listener": f"127.0.0.1:{METRICS_PORT}"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for future in admin.create_topics([NewTopic("tenant-a.orders", 1, 1),
                                           NewTopic("tenant-a.events", PARTITIONS - 1, 1),
                                           NewTopic("public", 1, 1)]).values():
            future.result(30)
        yield node
    finally:
        node.stop()


def test_a_tenants_producer_is_held_at_the_quota_its_topics_partitions_give(
        node: OttlaProcess) -> None:
    rate, throttles = produce_flat_out(node, "tenant-a.billing", "tenant-a.orders", RUN_S)
    assert throttles.events and max(throttles.events) > 0, "librdkafka saw no throttling"
    # 4 partitions (1 + 3) of tenant-a. topics: 200 kB/s; Kafka's windows let a client
    # reach under twice that over 6 s (test_client_quotas), never 3x.
    assert QUOTA / 2 < rate < 3 * QUOTA, rate
    # Kafka's ClientQuotaCallback may tag clients as it likes: the tenant's rate is served
    # under the callback's tenant tag, not a client id.
    rates = quota_series(scrape(METRICS_PORT), "byte_rate")
    tenant = (("resource", "Produce"), ("tenant", "tenant-a."))
    assert QUOTA / 2 < rates[tenant] < 3 * QUOTA, rates
    assert not [labels for labels in rates if ("clientId", "tenant-a.billing") in labels]


def test_a_client_the_callback_gives_no_quota_is_not_throttled(node: OttlaProcess) -> None:
    rate, throttles = produce_flat_out(node, "reporting", "public", 2.0)
    assert not throttles.events
    assert rate > 3 * QUOTA, rate


def test_a_java_class_name_stops_the_node_with_kafkas_config_error(tmp_path: Any) -> None:
    java = "io.strimzi.kafka.quotas.StaticQuotaCallback"
    node = OttlaProcess(str(tmp_path / "data"),
                        overrides={"client.quota.callback.class": java})
    done = subprocess.run(node.args(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert (f"Invalid value {java} for configuration client.quota.callback.class: Class "
            f"{java} could not be found.") in done.stderr
