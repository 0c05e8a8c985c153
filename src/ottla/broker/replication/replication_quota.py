"""Replication throttles (Kafka's ``ReplicationQuotaManager``, KIP-73): a bound in bytes
per second on the replication traffic of chosen partitions, so moving a partition to a
new broker does not starve the clients of the brokers involved.

Two quotas per broker: the *leader* one bounds what this broker sends to followers of the
partitions listed for it in ``leader.replication.throttled.replicas``
(``leader.replication.throttled.rate``); the *follower* one bounds what it fetches for the
partitions in ``follower.replication.throttled.replicas``
(``follower.replication.throttled.rate``). A replica that is in sync is never throttled:
the throttle slows catching up, never the ``acks=all`` path. Over the bound, a leader
answers a throttled partition with no records (the follower asks again) and a follower
leaves it out of its fetch, until the measured rate is back under the bound. A third,
``replica.alter.log.dirs.io.max.bytes.per.second``, bounds the copies of replicas moving
between this broker's log dirs (all of them: Kafka's alter-log-dirs thread fetches
nothing while it is exceeded).

The rate is Kafka's sampled ``Rate``: bytes over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds``, divided by at least all but one of those
windows, so a first burst does not count as an infinite rate. Sans-I/O: callers pass
``now_ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ottla.common.config import LONG_MAX
from ottla.common.stats.rate import Rate
from ottla.common.topic_configs import throttled_partitions


class ByteRateQuota:
    """A bound in bytes per second (read when it matters: a dynamic broker config) on
    what is recorded against it, measured by a sampled ``Rate``."""

    def __init__(self, bound: Callable[[], int], samples: int = 11, window_ms: int = 1000
                 ) -> None:
        self.bound = bound
        self.rate = Rate(samples, window_ms)

    def is_exceeded(self, now_ms: int) -> bool:
        bound = self.bound()
        return bound < LONG_MAX and self.rate.measure(now_ms) > bound

    def record(self, size: int, now_ms: int) -> None:
        if size > 0:
            self.rate.record(size, now_ms)


class ReplicationQuota(ByteRateQuota):
    """One side's throttle: which partitions it applies to (from their topic config) and
    whether the bytes recorded for them exceed the rate."""

    def __init__(self, broker_id: int, replicas_config: str,
                 bound: Callable[[], int], topic_configs: Callable[[str], Mapping[str, str]],
                 samples: int = 11, window_ms: int = 1000) -> None:
        super().__init__(bound, samples, window_ms)
        self.broker_id = broker_id
        self.replicas_config = replicas_config
        self.topic_configs = topic_configs
        self._parsed: dict[str, tuple[object, frozenset[int] | None]] = {}

    def is_throttled(self, topic: str, partition: int) -> bool:
        raw = self.topic_configs(topic).get(self.replicas_config)
        if not raw:
            return False
        cached = self._parsed.get(topic)
        if cached is None or cached[0] != raw:
            cached = self._parsed[topic] = (raw, throttled_partitions(raw, self.broker_id))
        partitions = cached[1]
        return partitions is None or partition in partitions

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_exceeded(now_ms)
