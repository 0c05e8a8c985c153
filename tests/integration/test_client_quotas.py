"""Client quotas on a real node, as a user sees them: set with ``ottla configs`` (the
AdminClient of confluent-kafka 2.16 has no client quota calls), then a confluent-kafka
producer and consumer running as fast as they can with the throttled client id. What is
asserted is what the user sees: librdkafka reports being throttled (its ``throttle_cb``:
the broker's throttle_time_ms), the rate achieved over the run stays within a wide margin
of the quota, a client with another id is not throttled, the quotas are described as
set, and they survive a restart of the node. The node's /metrics shows Kafka's quota
metrics for the throttled client ids, as the JMX exporter names them.

The margin: Kafka's rate is measured over at least 10 windows of 1 s, so a client may
send ten seconds' worth of its quota at once before it is throttled, and over a run of
T s it gets about ``quota * (max(T, 10) + 1) / T``: under twice the quota for the 6 s
runs here, well under the 3x asserted.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import encode_request
from ottla.protocol.messages import build
from tests.helpers import OttlaProcess, WireClient, free_port, wait_until
from tests.integration.test_metrics import Samples, scrape
from tests.java_clients import run

PRODUCER_QUOTA = 200_000
"""Bytes/s for the throttled producer's client id."""
CONSUMER_QUOTA = 200_000
RUN_S = 6.0
VALUE = b"v" * 1000


METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def node(tmp_path_factory: Any) -> Iterator[OttlaProcess]:
    node = OttlaProcess(str(tmp_path_factory.mktemp("client-quotas") / "data"),
                        overrides={"num.partitions": "1",
                                   "prometheus.listener": f"127.0.0.1:{METRICS_PORT}"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for future in admin.create_topics([NewTopic("quota-fast", 1, 1),
                                           NewTopic("quota-slow", 1, 1)]).values():
            future.result(30)
        yield node
    finally:
        node.stop()


def configs(node: OttlaProcess, *args: str) -> str:
    """``ottla configs`` against the node; its output (it must succeed)."""
    done = subprocess.run([sys.executable, "-m", "ottla", "configs", "--bootstrap-server",
                           node.bootstrap, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def described(node: OttlaProcess) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """Every entity's quotas, as DescribeClientQuotas on the broker answers."""
    with WireClient(node.bootstrap) as wire:
        response = wire.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {
            "components": [], "strict": False})
    assert response.error_code == 0, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


class Throttles:
    """What librdkafka reports through ``throttle_cb``."""

    def __init__(self) -> None:
        self.events: list[float] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event.throttle_time)


def produce_flat_out(node: OttlaProcess, client_id: str, topic: str, seconds: float
                     ) -> tuple[float, Throttles]:
    """Produce 1 kB records as fast as librdkafka takes them for ``seconds``; the bytes
    per second acknowledged over the run, and the throttles reported."""
    throttles = Throttles()
    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += len(msg.value())

    producer = Producer({"bootstrap.servers": node.bootstrap, "client.id": client_id,
                         "linger.ms": 1, "batch.size": 16384, "acks": 1,
                         "queue.buffering.max.kbytes": 4096, "throttle_cb": throttles})
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    elapsed = time.monotonic() - start
    rate = acked[0] / elapsed
    producer.purge()
    producer.flush(10)
    return rate, throttles


def quota_series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """``kafka_server_quota_<name>``'s samples by their labels."""
    return {labels: value for (n, labels), value in samples.items()
            if n == f"kafka_server_quota_{name}"}


def test_a_producer_over_its_quota_is_throttled_and_held_near_it(node: OttlaProcess) -> None:
    assert configs(node, "--alter", "--entity-type", "clients", "--entity-name",
                   "slow-producer", "--add-config", f"producer_byte_rate={PRODUCER_QUOTA}") == \
        "Completed updating config for client slow-producer.\n"
    wait_until(lambda: described(node).get((("client-id", "slow-producer"),)), 10)
    rate, throttles = produce_flat_out(node, "slow-producer", "quota-slow", RUN_S)
    assert throttles.events and max(throttles.events) > 0, "librdkafka saw no throttling"
    assert PRODUCER_QUOTA / 2 < rate < 3 * PRODUCER_QUOTA, rate
    # Another client id is not throttled: the same loop runs far faster.
    other_rate, other_throttles = produce_flat_out(node, "fast-producer", "quota-fast", 2.0)
    assert not other_throttles.events
    assert other_rate > 3 * PRODUCER_QUOTA, other_rate
    # Kafka's kafka.server:type=Produce,client-id=C beans (byte-rate, throttle-time) as
    # the JMX exporter's quota rules name them: the producer held at its quota shows a
    # rate near it and the throttle times it was given. The other is measured too (as
    # in Kafka, every client of a quota type once a quota of it is set) but was never
    # throttled: Kafka's Avg of no throttle time is NaN. No Fetch or Request series: no
    # quota of those types is set yet.
    samples = scrape(METRICS_PORT)
    rates, throttles = quota_series(samples, "byte_rate"), quota_series(samples, "throttle_time")
    slow = (("clientId", "slow-producer"), ("resource", "Produce"))
    fast = (("clientId", "fast-producer"), ("resource", "Produce"))
    assert PRODUCER_QUOTA / 2 < rates[slow] < 3 * PRODUCER_QUOTA, rates[slow]
    assert throttles[slow] > 0
    assert rates[fast] > 0 and math.isnan(throttles[fast])
    assert {dict(labels)["resource"] for labels in rates | throttles} == {"Produce"}
    assert not quota_series(samples, "request_time")


def consume_flat_out(node: OttlaProcess, client_id: str, seconds: float,
                     until_bytes: int | None = None) -> tuple[float, int, Throttles]:
    """Read ``quota-fast`` from the start for ``seconds`` (or until ``until_bytes``);
    the bytes per second read, the bytes, the throttles reported."""
    throttles = Throttles()
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "client.id": client_id,
                         "group.id": f"g-{client_id}", "enable.auto.commit": False,
                         "throttle_cb": throttles})
    consumer.assign([TopicPartition("quota-fast", 0, 0)])
    read = 0
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds and (until_bytes is None or
                                                       read < until_bytes):
            for msg in consumer.consume(500, 0.1):
                if msg.error() is None:
                    read += len(msg.value())
        elapsed = time.monotonic() - start
    finally:
        consumer.close()
    return read / elapsed, read, throttles


def fill(node: OttlaProcess, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "client.id": "filler",
                         "linger.ms": 5})
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(30) == 0


def test_a_consumer_over_its_quota_is_throttled_and_held_near_it(node: OttlaProcess) -> None:
    fill(node, "quota-fast", 12_000)  # 12 MB, more than both consumers read
    assert configs(node, "--alter", "--entity-type", "clients", "--entity-name",
                   "slow-consumer", "--add-config", f"consumer_byte_rate={CONSUMER_QUOTA}") == \
        "Completed updating config for client slow-consumer.\n"
    wait_until(lambda: described(node).get((("client-id", "slow-consumer"),)), 10)
    rate, read, throttles = consume_flat_out(node, "slow-consumer", RUN_S)
    assert throttles.events and max(throttles.events) > 0, "librdkafka saw no throttling"
    assert CONSUMER_QUOTA / 2 < rate < 3 * CONSUMER_QUOTA, rate
    fast_rate, fast_read, fast_throttles = consume_flat_out(node, "fast-consumer", 10.0,
                                                            until_bytes=4 * read)
    assert not fast_throttles.events
    assert fast_read >= 4 * read and fast_rate > 3 * CONSUMER_QUOTA, fast_rate


def test_quotas_are_described_as_set_and_survive_a_restart(node: OttlaProcess) -> None:
    assert configs(node, "--alter", "--entity-type", "users", "--entity-name", "alice",
                   "--entity-type", "clients", "--entity-default", "--add-config",
                   "request_percentage=50,consumer_byte_rate=1048576") == \
        "Completed updating config for user alice.\n"
    expected = {
        (("client-id", "slow-producer"),): {"producer_byte_rate": PRODUCER_QUOTA},
        (("client-id", "slow-consumer"),): {"consumer_byte_rate": CONSUMER_QUOTA},
        (("client-id", None), ("user", "alice")): {"request_percentage": 50.0,
                                                   "consumer_byte_rate": 1048576.0}}
    assert described(node) == expected
    assert sorted(configs(node, "--describe", "--entity-type", "clients").splitlines()) == [
        f"Quota configs for client-id 'slow-consumer' are consumer_byte_rate="
        f"{float(CONSUMER_QUOTA)}",
        f"Quota configs for client-id 'slow-producer' are producer_byte_rate="
        f"{float(PRODUCER_QUOTA)}"]
    node.stop()
    node.start()
    assert described(node) == expected
    # And enforced again: a burst beyond ten seconds' worth is throttled at once.
    _, throttles = produce_flat_out(node, "slow-producer", "quota-slow", 3.0)
    assert throttles.events and max(throttles.events) > 0


def test_topic_mutations_beyond_the_controller_mutation_rate_are_refused_or_throttled(
        node: OttlaProcess) -> None:
    """KIP-599: with ``controller_mutation_rate=1`` a client may create a burst of 11
    partitions (Kafka's 11 samples of 1 s), then earns one back a second. Kafka's Java
    Admin (CreateTopics v7, strict) sees the topic that finds the bucket empty refused
    with ThrottlingQuotaExceededException, and by default retries it until it passes; an
    old client (v5, permissive) is not refused, only told the throttle time."""
    assert configs(node, "--alter", "--entity-type", "clients", "--entity-name", "slow-admin",
                   "--add-config", "controller_mutation_rate=1") == \
        "Completed updating config for client slow-admin.\n"
    wait_until(lambda: described(node).get((("client-id", "slow-admin"),)), 10)
    started_at = time.monotonic()
    events = run({"op": "admin", "bootstrap": node.bootstrap,
                  "config": {"client.id": "slow-admin"}, "calls": [
                      {"call": "create_topics", "retry_on_quota_violation": False,
                       "topics": [{"name": "mutation-a", "partitions": 16,
                                   "replication_factor": 1}]},  # the bucket: 11 -> -5
                      {"call": "create_topics", "retry_on_quota_violation": False,
                       "topics": [{"name": "mutation-b", "partitions": 1,
                                   "replication_factor": 1}]},
                      {"call": "create_topics",  # retried until the bucket is back at 0
                       "topics": [{"name": "mutation-c", "partitions": 1,
                                   "replication_factor": 1}]}]})
    results = [e for e in events if e["event"] == "result"]
    assert results[0].get("value") == "ok", results[0]
    assert results[1].get("error") == "ThrottlingQuotaExceededException", results[1]
    assert results[1]["message"] == "The throttling quota has been exceeded."
    assert results[2].get("value") == "ok", results[2]
    assert time.monotonic() - started_at >= 4.0  # mutation-c waited out the 5 s
    other = run({"op": "admin", "bootstrap": node.bootstrap,
                 "config": {"client.id": "fast-admin"}, "calls": [
                     {"call": "create_topics", "retry_on_quota_violation": False,
                      "topics": [{"name": f"mutation-free-{i}", "partitions": 8,
                                  "replication_factor": 1} for i in range(3)]}]})
    assert [e.get("value") for e in other if e["event"] == "result"] == ["ok"]
    # An old client: CreateTopics v5 knows no THROTTLING_QUOTA_EXCEEDED.
    with WireClient(node.bootstrap, client_id="slow-admin") as wire:
        old = wire.request(ApiKey.CREATE_TOPICS, 5, {
            "topics": [{"name": f"mutation-old-{i}", "num_partitions": 12,
                        "replication_factor": 1, "assignments": [], "configs": []}
                       for i in range(2)], "timeout": 30000, "validate_only": False})
    assert [(t.name, t.error_code) for t in old.topics] == [
        ("mutation-old-0", 0), ("mutation-old-1", 0)]
    assert old.throttle_time.total_seconds() > 5
    created = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10).topics
    assert {"mutation-a", "mutation-c", "mutation-old-0", "mutation-old-1"} <= set(created)
    assert "mutation-b" not in created
    # The controller's kafka.server:type=ControllerMutation,client-id=slow-admin bean:
    # the partitions it was charged per second and the throttle times it was given.
    # KIP-599's tokens: what is left in each client's bucket, below its burst of 11 while
    # it earns back what the old client took it below zero by; Long.MAX_VALUE (a double)
    # for a client no quota bounds.
    samples = scrape(METRICS_PORT)
    labels = (("clientId", "slow-admin"), ("resource", "ControllerMutation"))
    assert quota_series(samples, "mutation_rate")[labels] > 0
    assert quota_series(samples, "throttle_time")[labels] > 0
    assert quota_series(samples, "tokens")[labels] < 11
    assert quota_series(samples, "tokens")[
        (("clientId", "fast-admin"), ("resource", "ControllerMutation"))] == 2.0**63


def connect_from(address: str, node: OttlaProcess, count: int = 1) -> list[bool]:
    """Open ``count`` connections from ``address`` (a loopback alias) at once, each
    sending ApiVersions; whether each was served (answered), not closed unread."""
    host, port = node.bootstrap.rsplit(":", 1)
    request = encode_request(ApiKey.API_VERSIONS, 0, 1, "rate-test",
                             build(request_schema(ApiKey.API_VERSIONS, 0), {}))
    socks = [socket.create_connection((host, int(port)), timeout=10,
                                      source_address=(address, 0)) for _ in range(count)]
    served = []
    try:
        for sock in socks:
            sock.sendall(request)
        for sock in socks:
            try:
                served.append(len(sock.recv(4)) == 4)
            except ConnectionResetError:
                served.append(False)  # closed with the request unread: a reset
    finally:
        for sock in socks:
            sock.close()
    return served


def test_an_address_over_its_connection_creation_rate_has_connections_closed(
        node: OttlaProcess) -> None:
    """KIP-612: ``connection_creation_rate`` of an ip entity. Measured over at least ten
    1 s windows, a rate of 2 lets 20 connections through at once; the next ones are
    closed unread (after the throttle time) and do not count, while other addresses are
    served. Removing the quota lifts it."""
    assert configs(node, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.2",
                   "--add-config", "connection_creation_rate=2") == \
        "Completed updating config for ip 127.0.0.2.\n"
    wait_until(lambda: described(node).get((("ip", "127.0.0.2"),)), 10)
    assert configs(node, "--describe", "--entity-type", "ips") == \
        "Quota configs for ip '127.0.0.2' are connection_creation_rate=2.0\n"
    served = connect_from("127.0.0.2", node, 24)
    assert served[:20] == [True] * 20 and not any(served[20:]), served
    assert connect_from("127.0.0.3", node, 24) == [True] * 24
    configs(node, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.2",
            "--delete-config", "connection_creation_rate")
    wait_until(lambda: (("ip", "127.0.0.2"),) not in described(node), 10)
    assert connect_from("127.0.0.2", node, 24) == [True] * 24


def test_a_client_over_its_request_percentage_is_throttled(node: OttlaProcess) -> None:
    """Kafka's request quota: ``request_percentage`` is the share of one thread a client's
    requests may take (measured over at least 10 s). A producer limited to 0.01% (1 ms
    over 10 s) is told to back off (librdkafka's ``throttle_cb``) within a few hundred
    requests, and still has every record acknowledged."""
    assert configs(node, "--alter", "--entity-type", "clients", "--entity-name",
                   "slow-requests", "--add-config", "request_percentage=0.01") == \
        "Completed updating config for client slow-requests.\n"
    wait_until(lambda: described(node).get((("client-id", "slow-requests"),)), 10)
    throttles = Throttles()
    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += 1

    producer = Producer({"bootstrap.servers": node.bootstrap, "client.id": "slow-requests",
                         "linger.ms": 0, "acks": 1, "throttle_cb": throttles})
    for i in range(300):
        producer.produce("quota-fast", b"r%d" % i, on_delivery=delivered)
        producer.flush(10)  # one request at a time
        if throttles.events:
            break
    producer.flush(30)
    assert throttles.events and max(throttles.events) > 0, "librdkafka saw no throttling"
    assert acked[0] == i + 1
    # kafka.server:type=Request,client-id=slow-requests: its share of a thread (in
    # percent) and the throttle times it was given (at most one window, 1 s).
    samples = scrape(METRICS_PORT)
    labels = (("clientId", "slow-requests"), ("resource", "Request"))
    assert quota_series(samples, "request_time")[labels] > 0
    assert 0 < quota_series(samples, "throttle_time")[labels] <= 1000


def test_throttled_connections_are_counted_in_their_quota_types_delay_queue(
        node: OttlaProcess) -> None:
    """Kafka's ``kafka.server:type=<quota type>`` beans without entity: ``queue-size``,
    the throttled connections whose delay is not over (a producer 10 s over its byte
    rate is in Produce's, not the others', and out once its delay has passed), and
    Request's ``exempt-request-time``, the time of requests no request quota bounds
    (this combined node's broker heartbeats to its controller) while one is set."""
    queue = "kafka_server_produce_queue_size"
    for entity, quota in (("queued-producer", "producer_byte_rate=1000"),
                          ("exempt-probe", "request_percentage=50")):
        configs(node, "--alter", "--entity-type", "clients", "--entity-name", entity,
                "--add-config", quota)
        wait_until(lambda e=entity: described(node).get((("client-id", e),)), 10)
    before = scrape(METRICS_PORT)[(queue, ())]
    throttles = Throttles()
    producer = Producer({"bootstrap.servers": node.bootstrap, "client.id": "queued-producer",
                         "acks": 1, "throttle_cb": throttles})
    # 20 kB (and the request's own bytes) against 1 kB/s over the rate's 10 s floor:
    # (2000 - 1000) / 1000 * 10 s and a little more; librdkafka reports seconds.
    producer.produce("quota-slow", b"q" * 20_000)
    assert producer.flush(30) == 0
    wait_until(lambda: producer.poll(0.1) is not None or throttles.events, 10, 0,
               "the throttle time reported")
    assert throttles.events and 10 < max(throttles.events) < 11, throttles.events
    samples = scrape(METRICS_PORT)
    assert samples[(queue, ())] >= before + 1
    assert samples[("kafka_server_fetch_queue_size", ())] == 0
    assert samples[("kafka_server_controllermutation_queue_size", ())] == 0
    wait_until(lambda: scrape(METRICS_PORT)[("kafka_server_request_exempt_request_time",
                                             ())] > 0, 30, 0.5, "exempt request time")
    wait_until(lambda: scrape(METRICS_PORT)[(queue, ())] == 0, 40, 0.5,
               "the producer's delay over")
