"""Client quotas enforced on a broker (Kafka's ClientQuotaManager with its
DefaultQuotaCallback, and QuotaManagers): which quota applies to a request, the rate of
what its client sent or fetched, and how long the client is throttled for. Sans-I/O:
callers pass ``now_ms``; the network layer does the muting (KIP-219).

Which quota applies to a request of user U (the principal's name) with client id C is the
most specific one set, in Kafka's order:

    /users/U/clients/C, /users/U/clients/<default>, /users/U,
    /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
    /clients/C, /clients/<default>

The clients it applies to share one measured rate, as Kafka's sensors do: a quota of a
user's is measured over all that user's client ids, a quota of a client id over every user
using it, a user's client id alone over that pair. With no quota of a type set anywhere
its manager is off, and recording costs one attribute read.

The rate is Kafka's ``Rate`` (``quota.window.num`` samples of ``quota.window.size.seconds``).
A client over its quota Q with a measured rate O over a window W is throttled for
``(O - Q) / Q * W`` ms (Kafka's ``QuotaUtils.throttleTime``): what it takes for the rate
over the longer window to fall back to Q if nothing more is recorded.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, Generic, TypeVar

from ottla.broker.quota.token_bucket import TokenBucket
from ottla.common.stats.avg import Avg
from ottla.common.stats.rate import Rate
from ottla.metadata.client_quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)

ABSENT: Final = ""
"""In a quota's key: this level (user or client id) is not part of the entity. Kafka's
empty metric tag; entity names are never empty (the controller refuses them)."""
DEFAULT: Final = None
"""In a quota's key: the default user or client id."""

QuotaKey = tuple[str | None, str | None]
"""(user, client id) of a quota: a name, ``DEFAULT`` or ``ABSENT`` each."""
Tags = tuple[str, str]
"""(user, client id) a measured rate is kept under: a name or ``ABSENT`` each."""

INACTIVE_SENSOR_EXPIRY_MS = 3_600_000
"""Kafka's InactiveSensorExpirationTimeSeconds: a client's rate is forgotten after an hour
without a request."""
EXPIRY_CHECK_INTERVAL_MS = 30_000
MAX_SENSORS = 100_000
"""Rates kept at most per manager: client ids are the clients' to choose, and a client
cycling through them must not grow the broker's memory for an hour (Kafka keeps every
one). Past it the rates created first are forgotten (their clients start afresh)."""
METRICS_NUM_SAMPLES = 2
METRICS_SAMPLE_WINDOW_MS = 30_000
"""Kafka's ``metrics.num.samples`` and ``metrics.sample.window.ms`` defaults: the samples
of the stats a quota only reports (``throttle-time``, ``mutation-rate``), not enforces."""


class QuotaType(Enum):
    """What a manager measures, and the quota key that bounds it."""

    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE
    CONTROLLER_MUTATION = CONTROLLER_MUTATION_RATE


StatT = TypeVar("StatT", Rate, TokenBucket)


@dataclass(slots=True)
class Sensor(Generic[StatT]):
    """What is measured of the clients sharing one quota (a ``Rate``, or the
    ``TokenBucket`` of controller mutations) and the quota bounding it (None: no quota
    applies), with what Kafka's sensors also report: the throttle times applied (its
    ``throttle-time`` sensor) and, beside a bucket, the ``mutation-rate``."""

    stat: StatT
    bound: float | None
    last_record_ms: int
    throttle_time: Avg
    mutation_rate: Rate | None = None


class QuotaSensors(ABC, Generic[StatT]):
    """Which quota of one type applies to a request and the sensors measuring its clients
    (what Kafka's ``ClientQuotaManager`` and its subclasses share); subclasses say what a
    sensor measures and how a recording is judged."""

    def __init__(self, quota_type: QuotaType, samples: int = 11, window_seconds: int = 1
                 ) -> None:
        self.quota_type = quota_type
        self.samples = samples
        self.window_seconds = window_seconds
        self.overrides: dict[QuotaKey, float] = {}
        self.enabled = False
        """Whether any quota of this type is set: off, nothing is recorded."""
        self._user_level = self._client_level = self._pair_level = False
        self.sensors: dict[Tags, Sensor[StatT]] = {}
        self._next_expiry_ms = 0

    @abstractmethod
    def _new_stat(self) -> StatT:
        """What a new sensor measures."""

    def _new_mutation_rate(self) -> Rate | None:
        """A rate a sensor reports beside its bucket (controller mutations only)."""
        return None

    @abstractmethod
    def rate(self, sensor: Sensor[StatT], now_ms: int) -> float:
        """The value of the sensor's rate metric (``byte-rate``, ``request-time``,
        ``mutation-rate``) at ``now_ms``, as Kafka's reads when its bean is read."""

    # --- quotas ----------------------------------------------------------------------

    def update_quota(self, key: QuotaKey, value: float | None) -> None:
        """Set (or, with None, remove) the quota of one entity, and re-bound the rates
        measured so far (Kafka's ``updateQuota``)."""
        if value is None:
            self.overrides.pop(key, None)
        else:
            self.overrides[key] = value
        self._levels_changed()

    def set_quotas(self, quotas: Mapping[QuotaKey, float]) -> None:
        """Replace every quota of this type."""
        self.overrides = dict(quotas)
        self._levels_changed()

    def _levels_changed(self) -> None:
        user, client = [k[0] for k in self.overrides], [k[1] for k in self.overrides]
        self._pair_level = any(u != ABSENT and c != ABSENT for u, c in zip(user, client))
        self._user_level = any(u != ABSENT and c == ABSENT for u, c in zip(user, client))
        self._client_level = any(u == ABSENT and c != ABSENT for u, c in zip(user, client))
        self.enabled = bool(self.overrides)
        for tags, sensor in self.sensors.items():
            sensor.bound = self.quota_limit(tags)

    def quota_tags(self, user: str, client_id: str) -> Tags:
        """Under which (user, client id) a request's rate is measured: the levels of the
        quota that applies to it (Kafka's ``DefaultQuotaCallback.quotaMetricTags``)."""
        levels = (self._user_level, self._client_level, self._pair_level)
        if levels == (False, True, False) or not any(levels):
            return ABSENT, client_id
        if levels == (True, False, False):
            return user, ABSENT
        if levels == (False, False, True):
            return user, client_id
        o = self.overrides
        if (user, client_id) in o or (user, DEFAULT) in o:
            return user, client_id
        if (user, ABSENT) in o:
            return user, ABSENT
        if (DEFAULT, client_id) in o or (DEFAULT, DEFAULT) in o:
            return user, client_id
        if (DEFAULT, ABSENT) in o:
            return user, ABSENT
        return ABSENT, client_id

    def quota_limit(self, tags: Tags) -> float | None:
        """The quota of the rate measured under ``tags``: the most specific one set at
        its levels (Kafka's ``DefaultQuotaCallback.quotaLimit``)."""
        user, client_id = tags
        o = self.overrides
        if user and client_id:
            chain: tuple[QuotaKey, ...] = ((user, client_id), (user, DEFAULT),
                                           (DEFAULT, client_id), (DEFAULT, DEFAULT))
        elif user:
            chain = ((user, ABSENT), (DEFAULT, ABSENT))
        elif client_id:
            chain = ((ABSENT, client_id), (ABSENT, DEFAULT))
        else:
            return None
        for key in chain:
            value = o.get(key)
            if value is not None:
                return value
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota that applies to ``user`` with ``client_id``, if any."""
        return self.quota_limit(self.quota_tags(user, client_id))

    # --- recording ---------------------------------------------------------------------

    def _sensor(self, user: str, client_id: str | None, now_ms: int) -> Sensor[StatT]:
        tags = self.quota_tags(user, client_id or ABSENT)
        sensor = self.sensors.get(tags)
        if sensor is None:
            if len(self.sensors) >= MAX_SENSORS:
                self._evict(now_ms)
            sensor = self.sensors[tags] = Sensor(
                self._new_stat(), self.quota_limit(tags), now_ms,
                Avg(METRICS_NUM_SAMPLES, METRICS_SAMPLE_WINDOW_MS), self._new_mutation_rate())
        sensor.last_record_ms = now_ms
        if now_ms >= self._next_expiry_ms:
            self._expire(now_ms)
        return sensor

    def tracked(self, now_ms: int) -> list[tuple[Tags, Sensor[StatT]]]:
        """The sensors kept at ``now_ms``, those idle for an hour forgotten first (Kafka
        expires them on a timer): what the quota metrics show."""
        self._expire(now_ms)
        return list(self.sensors.items())

    def _expire(self, now_ms: int) -> None:
        """Forget the rates of clients silent for an hour (Kafka's sensor expiry)."""
        self._next_expiry_ms = now_ms + EXPIRY_CHECK_INTERVAL_MS
        stale = [tags for tags, s in self.sensors.items()
                 if now_ms - s.last_record_ms > INACTIVE_SENSOR_EXPIRY_MS]
        for tags in stale:
            del self.sensors[tags]

    def _evict(self, now_ms: int) -> None:
        """Make room under ``MAX_SENSORS``: the idle first, then the oldest created."""
        self._expire(now_ms)
        excess = len(self.sensors) - MAX_SENSORS * 9 // 10
        if excess > 0:
            for tags in list(itertools.islice(self.sensors, excess)):
                del self.sensors[tags]



class ClientQuotaManager(QuotaSensors[Rate]):
    """A rate quota (bytes produced or fetched, request time): Kafka's
    ``ClientQuotaManager``."""

    def __init__(self, quota_type: QuotaType, samples: int = 11, window_seconds: int = 1,
                 max_throttle_ms: int | None = None) -> None:
        super().__init__(quota_type, samples, window_seconds)
        self.max_throttle_ms = max_throttle_ms
        """Kafka's request quota caps a throttle at one window; the byte rates do not."""

    def _new_stat(self) -> Rate:
        return Rate(self.samples, self.window_seconds * 1000)

    def rate(self, sensor: Sensor[Rate], now_ms: int) -> float:
        return sensor.stat.measure(now_ms)

    def record(self, user: str, client_id: str | None, value: float, now_ms: int) -> int:
        """Record ``value`` for the client and return how long to throttle it, 0 if its
        rate is within its quota (Kafka's ``maybeRecordAndGetThrottleTimeMs``)."""
        if not self.enabled:
            return 0
        sensor = self._sensor(user, client_id, now_ms)
        rate = sensor.stat
        rate.record(value, now_ms)
        bound = sensor.bound
        if bound is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = throttle_time_ms(observed, bound, rate.window_size(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        if throttle > 0:
            sensor.throttle_time.record(throttle, now_ms)
        return throttle

    def unrecord(self, user: str, client_id: str | None, value: float, now_ms: int) -> None:
        """Take back ``value`` recorded for a response that was not sent (a throttled
        fetch answers with nothing; Kafka's ``unrecordQuotaSensor``)."""
        if self.enabled:
            self._sensor(user, client_id, now_ms).stat.record(-value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str | None) -> float | None:
        """The most that can be recorded without certainly being throttled (Kafka's
        ``getMaxValueInQuotaWindow``: the quota over all but one window), or None when no
        quota applies: what a consumer's fetch is capped to."""
        if not self.enabled:
            return None
        bound = self.quota(user, client_id or ABSENT)
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_seconds


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: the delay X that brings the rate O measured
    over W down to the quota T, ``O * W / (W + X) = T``, so ``X = (O - T) / T * W``,
    rounded as Java's ``Math.round``."""
    return math.floor((observed - bound) / bound * window_ms + 0.5)
