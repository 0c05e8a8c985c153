"""Kafka's client quota metrics: what each quota type's sensors report (a rate over the
quota's windows and the mean throttle time, Kafka's ``Rate`` and ``Avg`` with its default
``metrics.num.samples=2`` of ``metrics.sample.window.ms=30000`` for what only reports),
under the bean tags of the quota entity level, as the JMX exporter's quota rules name
them. Numbers are worked out from Kafka's formulas (``Rate.windowSize``,
``Avg.combine``, ``QuotaUtils.throttleTime``)."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ottla.broker.quota.client_quota_manager import ABSENT, ClientQuotaManager, QuotaType
from ottla.broker.quota.controller_mutation_quota import (
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.common.stats.avg import Avg
from ottla.server.metrics.jmx_names import quota_metric
from ottla.server.metrics.quota_collector import ClientQuotaCollector, sanitized_user

BYTE_RATE, REQUEST_TIME = "kafka_server_quota_byte_rate", "kafka_server_quota_request_time"
MUTATION_RATE, THROTTLE = "kafka_server_quota_mutation_rate", "kafka_server_quota_throttle_time"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

QUEUE_SIZES = {t: f"kafka_server_{t.lower()}_queue_size"
               for t in ("Produce", "Fetch", "Request", "ControllerMutation")}
EXEMPT = "kafka_server_request_exempt_request_time"
PER_TYPE = {*QUEUE_SIZES.values(), EXEMPT}
"""The beans ``kafka.server:type=<quota type>`` without entity, which every Kafka node
has whether or not a quota is set."""
EMPTY = {(name, ()): 0.0 for name in PER_TYPE}


def scrape(quotas: ClientQuotaManagers, now_ms: int) -> Samples:
    """The collector's samples at ``now_ms`` as Prometheus parses them."""
    registry = CollectorRegistry()
    registry.register(ClientQuotaCollector(quotas, lambda: now_ms))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


# --- Avg: Kafka's Avg, 2 samples of 30 s -----------------------------------------------------

def test_avg_is_the_mean_of_the_samples_kept_and_nan_without_any() -> None:
    avg = Avg(2, 30_000)
    assert math.isnan(avg.measure(0))
    avg.record(10, 0)
    avg.record(20, 29_999)  # the same sample
    assert avg.measure(29_999) == 15
    avg.record(30, 30_000)  # a new sample
    assert avg.measure(30_000) == 20
    # The first sample's last record is samples * window old at 89.999 s: reset.
    assert avg.measure(89_999) == 30
    assert math.isnan(avg.measure(90_000))


# --- what the managers record -----------------------------------------------------------------

def test_throttle_time_is_the_mean_of_the_throttles_a_manager_applied() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update_quota((ABSENT, "app"), 500.0)
    assert manager.record("alice", "app", 4000, 0) == 0  # within: nothing recorded
    assert manager.record("alice", "app", 2000, 100) == 1900
    assert manager.record("alice", "app", 2000, 100) == 5900
    sensor = manager.sensors[(ABSENT, "app")]
    assert sensor.throttle_time.measure(100) == 3900
    assert manager.rate(sensor, 100) == pytest.approx(8000 / 10.1)  # over the 10 s floor


def test_a_request_quotas_throttle_time_is_the_capped_one() -> None:
    managers = ClientQuotaManagers(samples=11, window_seconds=1)
    managers.request.update_quota((ABSENT, "app"), 1.0)
    assert managers.request.record("alice", "app", 500.0, 0) == 1000
    assert managers.request.sensors[(ABSENT, "app")].throttle_time.measure(0) == 1000


def test_mutation_rate_counts_the_partitions_charged_and_throttle_time_the_answers() -> None:
    """Kafka's mutation-rate: a Rate of its own metrics' samples (2 of 30 s, so over at
    least 30 s) beside the bucket; a refused topic is not charged, so not counted."""
    manager = ControllerMutationQuotaManager(10, 1)
    manager.update_quota((ABSENT, "admin"), 10)
    now = 5_000_000
    quota = manager.quota_for("u", "admin", strict=False, now_ms=now)
    for _ in range(3):
        quota.record(90, now)  # the bucket: 100 -> -170
    assert quota.throttle(now) == 17_000
    strict = manager.quota_for("u", "admin", strict=True, now_ms=now)
    with pytest.raises(ThrottlingQuotaExceeded):
        strict.record(50, now)
    assert strict.throttle(now) == 17_000
    sensor = manager.sensors[(ABSENT, "admin")]
    assert manager.rate(sensor, now) == 270 / 30
    assert sensor.throttle_time.measure(now) == 17_000
    # A client without a quota of its own is measured too (Kafka's unbounded sensor).
    free = manager.quota_for("u", "other", strict=True, now_ms=now)
    free.record(60, now)
    assert free.throttle(now) == 0
    other = manager.sensors[(ABSENT, "other")]
    assert manager.rate(other, now) == 2.0 and math.isnan(other.throttle_time.measure(now))


# --- the series -----------------------------------------------------------------------------

def test_names_are_the_exporters_quota_rules() -> None:
    assert quota_metric("byte-rate") == BYTE_RATE
    assert quota_metric("throttle-time") == THROTTLE
    assert quota_metric("mutation-rate") == MUTATION_RATE


def test_users_are_url_encoded_as_kafkas_metric_tags() -> None:
    """Kafka's Sanitizer.sanitize: Java's URLEncoder, then ``*`` and ``+`` (a space)
    percent-encoded."""
    assert sanitized_user("alice") == "alice"
    assert sanitized_user("CN=alice, O=x") == "CN%3Dalice%2C%20O%3Dx"
    assert sanitized_user("a*b~c_d.e-f") == "a%2Ab%7Ec_d.e-f"
    assert sanitized_user("é") == "%C3%A9"


def test_each_entity_has_the_tags_of_its_quota_level() -> None:
    quotas = ClientQuotaManagers()
    quotas.produce.update_quota((ABSENT, "app"), 500.0)
    quotas.fetch.update_quota(("CN=alice, O=x", ABSENT), 1000.0)
    quotas.request.update_quota(("bob", "app"), 1.0)
    quotas.produce.record("alice", "app", 6000, 0)
    quotas.produce.record("alice", "other", 1000, 0)  # no quota of its own
    quotas.fetch.record("CN=alice, O=x", "c1", 5000, 0)
    quotas.fetch.record("CN=alice, O=x", "c2", 5000, 0)  # the same user's rate
    quotas.request.record("bob", "app", 5.0, 0)
    samples = scrape(quotas, 0)
    produce = {"resource": "Produce", "clientId": "app"}
    fetch = {"resource": "Fetch", "user": "CN%3Dalice%2C%20O%3Dx"}
    request = {"resource": "Request", "user": "bob", "clientId": "app"}
    assert samples[key(BYTE_RATE, **produce)] == 600.0  # 6000 B over the 10 s floor
    assert samples[key(THROTTLE, **produce)] == 2000  # (600 - 500) / 500 * 10 s
    other = key(BYTE_RATE, resource="Produce", clientId="other")
    assert samples[other] == 100.0
    assert math.isnan(samples[key(THROTTLE, resource="Produce", clientId="other")])
    assert samples[key(BYTE_RATE, **fetch)] == 1000.0
    assert math.isnan(samples[key(THROTTLE, **fetch)])  # at its quota, not over it
    assert samples[key(REQUEST_TIME, **request)] == 0.5
    entities = {k: v for k, v in samples.items() if k[0] not in PER_TYPE}
    assert {name for name, _ in entities} == {BYTE_RATE, REQUEST_TIME, THROTTLE}
    assert len(entities) == 8


def test_nothing_is_served_without_quotas_and_idle_clients_go_after_an_hour() -> None:
    quotas = ClientQuotaManagers()
    quotas.produce.record("alice", "app", 6000, 0)  # no quota set: not measured
    assert scrape(quotas, 0) == EMPTY
    quotas.controller_mutation.update_quota((ABSENT, "admin"), 1)
    quotas.controller_mutation.quota_for("u", "admin", strict=True, now_ms=0).record(3, 0)
    labels = {"resource": "ControllerMutation", "clientId": "admin"}
    assert scrape(quotas, 0)[key(MUTATION_RATE, **labels)] == 0.1  # 3 over 30 s
    # The quota removed, the sensor stays until its client has been idle for an hour.
    quotas.controller_mutation.update_quota((ABSENT, "admin"), None)
    assert scrape(quotas, 3_600_000)[key(MUTATION_RATE, **labels)] == 0.0
    assert scrape(quotas, 3_600_001) == EMPTY


# --- each quota type's own metrics --------------------------------------------------------

def test_queue_size_counts_the_throttles_whose_delay_is_not_over() -> None:
    """Kafka's delayQueue of ThrottledChannel: one per throttled response, out once its
    delay has passed; a connection throttled again while muted counts twice."""
    quotas = ClientQuotaManagers()
    queues = quotas.delay_queues
    assert set(queues) == {"Produce", "Fetch", "Request", "ControllerMutation"}
    queues["Produce"].add(1000, 0)
    queues["Produce"].add(3000, 500)
    queues["Request"].add(200, 0)
    queues["Fetch"].add(0, 0)  # no throttle: not queued
    assert scrape(quotas, 199)[(QUEUE_SIZES["Request"], ())] == 1
    samples = scrape(quotas, 999)
    assert {t: samples[(n, ())] for t, n in QUEUE_SIZES.items()} == {
        "Produce": 2, "Fetch": 0, "Request": 0, "ControllerMutation": 0}
    assert scrape(quotas, 1000)[(QUEUE_SIZES["Produce"], ())] == 1
    assert scrape(quotas, 3500)[(QUEUE_SIZES["Produce"], ())] == 0


def test_exempt_request_time_is_counted_while_a_request_quota_is_set() -> None:
    """Kafka's exempt-request-time: a Rate (2 samples of 30 s) of the percentage of a
    thread exempt requests took, recorded only while quotas are enabled."""
    quotas = ClientQuotaManagers()
    quotas.request.record_exempt(50.0, 0)  # no request quota: not recorded
    assert scrape(quotas, 0)[(EXEMPT, ())] == 0.0
    quotas.request.update_quota((ABSENT, "app"), 1.0)
    quotas.request.record_exempt(50.0, 0)
    quotas.request.record_exempt(10.0, 1000)
    # Rate.windowSize with 2 samples: the 1 s elapsed plus the one missing whole window.
    assert scrape(quotas, 1000)[(EXEMPT, ())] == pytest.approx(60 / 31)


def test_tokens_are_what_is_left_in_a_clients_bucket() -> None:
    """KIP-599's tokens: the burst (samples * window * quota) less what was charged,
    refilled at the quota; Long.MAX_VALUE for a client no quota bounds."""
    quotas = ClientQuotaManagers(controller_samples=10, controller_window_seconds=1)
    quotas.controller_mutation.update_quota((ABSENT, "admin"), 10)
    now = 5_000_000
    quotas.controller_mutation.quota_for("u", "admin", strict=False, now_ms=now).record(
        130, now)
    quotas.controller_mutation.quota_for("u", "other", strict=False, now_ms=now).record(
        5, now)
    tokens = "kafka_server_quota_tokens"
    admin = key(tokens, resource="ControllerMutation", clientId="admin")
    other = key(tokens, resource="ControllerMutation", clientId="other")
    assert scrape(quotas, now)[admin] == 100 - 130
    assert scrape(quotas, now + 2500)[admin] == 100 - 130 + 25
    assert scrape(quotas, now)[other] == 9.223372036854776e18
