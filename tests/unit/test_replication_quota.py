"""Replication throttles (KIP-73) without a network: the sampled rate, the
``*.replication.throttled.replicas`` lists, and when a partition's replication waits."""

from __future__ import annotations

import pytest

from ottla.broker.replication.replication_quota import ReplicationQuota
from ottla.common.config import LONG_MAX, ConfigError
from ottla.common.stats.rate import Rate
from ottla.common.topic_configs import TOPIC_CONFIGS, throttled_partitions

NOW = 1_700_000_000_000


def test_a_first_burst_is_spread_over_all_but_one_window() -> None:
    """As Kafka's Rate: with fewer full windows than samples - 1, the elapsed time is
    counted as samples - 1 windows, so one burst is not an unbounded rate."""
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1_000_000, NOW)
    assert rate.measure(NOW) == pytest.approx(100_000)
    rate.record(1_000_000, NOW + 500)
    assert rate.measure(NOW + 500) == pytest.approx(2_000_000 / 10.5)


def test_old_windows_leave_the_rate() -> None:
    rate = Rate(samples=3, window_ms=1000)
    rate.record(3000, NOW)
    rate.record(3000, NOW + 2500)
    assert rate.measure(NOW + 2500) == pytest.approx(6000 / 2.5)
    assert rate.measure(NOW + 3000) == pytest.approx(3000 / 2.5)  # the first one is gone
    assert rate.measure(NOW + 10_000) == 0


def test_throttled_replicas_name_partitions_per_broker() -> None:
    value = ["0:1", "0:2", "1:2", "3:1"]
    assert throttled_partitions(value, 1) == {0, 3}
    assert throttled_partitions(value, 2) == {0, 1}
    assert throttled_partitions(value, 9) == frozenset()
    assert throttled_partitions(["*"], 9) is None


@pytest.mark.parametrize("value", ["0:1,x:2", "0-1", "*,0:1", "0:"])
def test_a_malformed_throttled_replicas_list_is_refused_with_kafka_words(value: str) -> None:
    with pytest.raises(ConfigError, match=r"must be the literal '\*' or a list of replicas"):
        TOPIC_CONFIGS.parse({"leader.replication.throttled.replicas": value})
    assert TOPIC_CONFIGS.parse({"leader.replication.throttled.replicas": "0:1, 2:3"})


def quota(bound: int, listed: str = "0:1") -> ReplicationQuota:
    configs = {"t": {"leader.replication.throttled.replicas": listed}}
    return ReplicationQuota(1, "leader.replication.throttled.replicas", lambda: bound,
                            lambda topic: configs.get(topic, {}), samples=11, window_ms=1000)


def test_only_listed_out_of_sync_replicas_over_the_rate_wait() -> None:
    q = quota(10_000)
    assert not q.should_throttle("t", 0, in_sync=False, now_ms=NOW)  # nothing sent yet
    q.record(200_000, NOW)  # 20 kB/s over the first ten seconds
    assert q.should_throttle("t", 0, in_sync=False, now_ms=NOW)
    assert not q.should_throttle("t", 0, in_sync=True, now_ms=NOW)  # acks=all never waits
    assert not q.should_throttle("t", 1, in_sync=False, now_ms=NOW)  # not listed
    assert not q.should_throttle("u", 0, in_sync=False, now_ms=NOW)
    assert not q.should_throttle("t", 0, in_sync=False, now_ms=NOW + 11_000)  # it aged out


def test_without_a_rate_nothing_is_throttled_and_star_lists_every_partition() -> None:
    unbounded = quota(LONG_MAX, "*")
    unbounded.record(10**12, NOW)
    assert not unbounded.should_throttle("t", 5, in_sync=False, now_ms=NOW)
    bounded = quota(1, "*")
    bounded.record(100, NOW)
    assert bounded.should_throttle("t", 5, in_sync=False, now_ms=NOW)
