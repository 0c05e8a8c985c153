"""Kafka's client quota metrics: what each quota type's sensors report (a rate over the
quota's windows and the mean throttle time, Kafka's ``Rate`` and ``Avg`` with its default
``metrics.num.samples=2`` of ``metrics.sample.window.ms=30000`` for what only reports),
under the bean tags of the quota entity level, as the JMX exporter's quota rules name
them. Numbers are worked out from Kafka's formulas (``Rate.windowSize``,
``Avg.combine``, ``QuotaUtils.throttleTime``)."""

from __future__ import annotations

import math

import pytest

from ottla.broker.quota.avg import Avg
from ottla.broker.quota.client_quota_manager import ABSENT, ClientQuotaManager, QuotaType
from ottla.broker.quota.controller_mutation_quota import (
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from ottla.broker.quota.quota_managers import ClientQuotaManagers

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
