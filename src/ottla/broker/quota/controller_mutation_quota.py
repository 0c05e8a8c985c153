"""Kafka's controller mutation quota (KIP-599, ``controller_mutation_rate``): the
partitions a client may create or delete per second, enforced by the active controller on
CreateTopics, CreatePartitions and DeleteTopics (forwarded or sent to it directly).

Each request gets its own view of its client's bucket. ``strict`` (CreateTopics v6+,
CreatePartitions v3+, DeleteTopics v5+, the versions that know THROTTLING_QUOTA_EXCEEDED)
refuses a topic once the bucket is below zero; ``permissive`` (older versions) accepts it
and only reports the throttle time. A topic is charged all its partitions at once, so one
topic may take the bucket below zero; the next is refused. Sans-I/O: callers pass
``now_ms``.
"""

from __future__ import annotations

from ottla.broker.quota.client_quota_manager import (
    METRICS_NUM_SAMPLES,
    METRICS_SAMPLE_WINDOW_MS,
    QuotaSensors,
    QuotaType,
    Sensor,
)
from ottla.broker.quota.token_bucket import TokenBucket, throttle_time_ms
from ottla.common.stats.rate import Rate


class ThrottlingQuotaExceeded(Exception):
    """A strict quota refused a mutation (Kafka's ThrottlingQuotaExceededException)."""

    MESSAGE = "The throttling quota has been exceeded."

    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__(self.MESSAGE)
        self.throttle_time_ms = throttle_time_ms


class ControllerMutationQuota:
    """One request's view of its client's bucket (Kafka's ``Strict`` and ``Permissive
    ControllerMutationQuota``): the last throttle time, shrinking with the time passed
    since it was computed, is what the response carries."""

    def __init__(self, sensor: Sensor[TokenBucket] | None, strict: bool) -> None:
        self.sensor = sensor
        self.strict = strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    def record(self, permits: int, now_ms: int) -> None:
        """Charge ``permits`` partitions; a strict quota raises ``ThrottlingQuotaExceeded``
        instead when the bucket is already below zero."""
        sensor = self.sensor
        if sensor is None:
            return
        sensor.last_record_ms = now_ms
        bound, bucket = sensor.bound, sensor.stat
        if bound is None:  # Kafka's unbounded sensor: still counted in mutation-rate
            _count(sensor, permits, now_ms)
            return
        if self.strict:
            tokens = bucket.measure(bound, now_ms)
            if tokens < 0:
                self._note(throttle_time_ms(tokens, bound), now_ms)
                raise ThrottlingQuotaExceeded(self._throttle_ms)
            bucket.record(permits, bound, now_ms)
            _count(sensor, permits, now_ms)
            return
        bucket.record(permits, bound, now_ms)
        _count(sensor, permits, now_ms)
        tokens = bucket.measure(bound, now_ms)
        if tokens < 0:
            self._note(throttle_time_ms(tokens, bound), now_ms)

    def _note(self, throttle_ms: int, now_ms: int) -> None:
        self._throttle_ms, self._recorded_ms = throttle_ms, now_ms

    def throttle_time_ms(self, now_ms: int) -> int:
        return max(0, self._throttle_ms - (now_ms - self._recorded_ms))

    def throttle(self, now_ms: int) -> int:
        """The throttle time the response carries, once per request: recorded in the
        client's ``throttle-time`` when positive (Kafka's
        ``quotas.controllerMutation.throttle``)."""
        throttle_ms = self.throttle_time_ms(now_ms)
        if throttle_ms > 0 and self.sensor is not None:
            self.sensor.throttle_time.record(throttle_ms, now_ms)
        return throttle_ms


def _count(sensor: Sensor[TokenBucket], permits: int, now_ms: int) -> None:
    if sensor.mutation_rate is not None:
        sensor.mutation_rate.record(permits, now_ms)


class ControllerMutationQuotaManager(QuotaSensors[TokenBucket]):
    """The buckets of every client with a ``controller_mutation_rate`` quota (Kafka's
    ``ControllerMutationQuotaManager``), on each controller."""

    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        super().__init__(QuotaType.CONTROLLER_MUTATION, samples, window_seconds)

    def _new_stat(self) -> TokenBucket:
        return TokenBucket(self.samples, self.window_seconds)

    def _new_mutation_rate(self) -> Rate:
        """Kafka's ``mutation-rate``: a plain ``Rate`` of the metrics' own samples (it
        only reports; the bucket enforces)."""
        return Rate(METRICS_NUM_SAMPLES, METRICS_SAMPLE_WINDOW_MS)

    def rate(self, sensor: Sensor[TokenBucket], now_ms: int) -> float:
        assert sensor.mutation_rate is not None
        return sensor.mutation_rate.measure(now_ms)

    def quota_for(self, user: str, client_id: str, strict: bool, now_ms: int
                  ) -> ControllerMutationQuota:
        """A request's quota (Kafka's ``newQuotaFor``): unbounded when no quota of this
        type is set anywhere."""
        sensor = self._sensor(user, client_id, now_ms) if self.enabled else None
        return ControllerMutationQuota(sensor, strict)
