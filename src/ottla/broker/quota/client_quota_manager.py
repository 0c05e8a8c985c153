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

With a ``client.quota.callback.class`` (``client_quota_callback``) the callback decides
the tags and the quotas instead of the lookup above, and every request is measured.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, Generic, TypeVar

from ottla.broker.quota.client_quota_callback import (
    CLIENT_ID_TAG,
    DEFAULT_NAME,
    USER_TAG,
    ClientQuotaCallback,
    ClientQuotaEntity,
    ClientQuotaType,
    ConfigEntity,
    ConfigEntityType,
)
from ottla.broker.quota.delay_queue import DelayQueue
from ottla.broker.quota.token_bucket import TokenBucket
from ottla.common.principal import Principal
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


@dataclass(frozen=True, slots=True)
class MetricTags:
    """Tags a ``client.quota.callback.class`` gave with keys other than Kafka's ``user``
    and ``client-id`` (its ``quotaMetricTags`` may return any map): the clients given the
    same map share a rate, its metrics carry them. In the callback's order."""

    tags: tuple[tuple[str, str], ...]

    def as_dict(self) -> dict[str, str]:
        return dict(self.tags)


SensorKey = Tags | MetricTags
"""What a measured rate is kept under: ``Tags``, or a callback's own ``MetricTags``."""

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
        self.sensors: dict[SensorKey, Sensor[StatT]] = {}
        self._next_expiry_ms = 0
        self.callback: ClientQuotaCallback | None = None
        """Kafka's ``client.quota.callback.class``: it decides tags and quotas instead
        (``use_callback``)."""
        self._callback_type = ClientQuotaType(quota_type.name)
        self.delay_queue = DelayQueue()
        """The connections throttled for this type lately (its ``queue-size``)."""

    def use_callback(self, callback: ClientQuotaCallback) -> None:
        """Let ``callback`` decide the tags and quotas; every request is measured from now
        on (Kafka's ``CUSTOM_QUOTAS``). The quotas set so far are given to it."""
        self.callback = callback
        self.enabled = True
        for key, value in self.overrides.items():
            callback.update_quota(self._callback_type, quota_entity(key), value)
        self.refresh_bounds()

    def refresh_bounds(self) -> None:
        """Ask again for the quota of every client measured (Kafka's
        ``updateQuotaMetricConfigs``)."""
        for tags, sensor in self.sensors.items():
            sensor.bound = self.quota_limit(tags)

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
        measured so far (Kafka's ``updateQuota``, which tells the callback)."""
        callback = self.callback
        if value is None:
            removed = self.overrides.pop(key, None)
            if callback is not None and removed is not None:
                callback.remove_quota(self._callback_type, quota_entity(key))
        else:
            self.overrides[key] = value
            if callback is not None:
                callback.update_quota(self._callback_type, quota_entity(key), value)
        self._levels_changed()

    def set_quotas(self, quotas: Mapping[QuotaKey, float]) -> None:
        """Replace every quota of this type."""
        callback = self.callback
        if callback is not None:
            for key in self.overrides.keys() - quotas.keys():
                callback.remove_quota(self._callback_type, quota_entity(key))
            for key, value in quotas.items():
                if self.overrides.get(key) != value:
                    callback.update_quota(self._callback_type, quota_entity(key), value)
        self.overrides = dict(quotas)
        self._levels_changed()

    def _levels_changed(self) -> None:
        user, client = [k[0] for k in self.overrides], [k[1] for k in self.overrides]
        self._pair_level = any(u != ABSENT and c != ABSENT for u, c in zip(user, client))
        self._user_level = any(u != ABSENT and c == ABSENT for u, c in zip(user, client))
        self._client_level = any(u == ABSENT and c != ABSENT for u, c in zip(user, client))
        self.enabled = bool(self.overrides) or self.callback is not None
        self.refresh_bounds()

    def quota_tags(self, user: str, client_id: str) -> SensorKey:
        """Under which (user, client id) a request's rate is measured: the levels of the
        quota that applies to it (Kafka's ``DefaultQuotaCallback.quotaMetricTags``), or
        the callback's tags."""
        if self.callback is not None:
            return self._callback_tags(user, client_id)
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

    def quota_limit(self, tags: SensorKey) -> float | None:
        """The quota of the rate measured under ``tags``: the most specific one set at
        its levels (Kafka's ``DefaultQuotaCallback.quotaLimit``), or the callback's."""
        if isinstance(tags, MetricTags):
            assert self.callback is not None
            limit = self.callback.quota_limit(self._callback_type, tags.as_dict())
            return None if limit is None else float(limit)
        user, client_id = tags
        if self.callback is not None:
            metric_tags = {USER_TAG: user} if user else {}
            if client_id:
                metric_tags[CLIENT_ID_TAG] = client_id
            limit = self.callback.quota_limit(self._callback_type, metric_tags)
            return None if limit is None else float(limit)
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

    def _callback_tags(self, user: str, client_id: str) -> SensorKey:
        assert self.callback is not None
        tags = self.callback.quota_metric_tags(self._callback_type, Principal("User", user),
                                               client_id)
        if set(tags) <= {USER_TAG, CLIENT_ID_TAG}:
            return tags.get(USER_TAG) or ABSENT, tags.get(CLIENT_ID_TAG) or ABSENT
        return MetricTags(tuple((str(k), str(v)) for k, v in tags.items()))

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota that applies to ``user`` with ``client_id``, if any."""
        return self.quota_limit(self.quota_tags(user, client_id))

    # --- recording ---------------------------------------------------------------------

    def _sensor(self, user: str, client_id: str | None, now_ms: int) -> Sensor[StatT]:
        tags = self.quota_tags(user, client_id or ABSENT)
        callback = self.callback
        if callback is not None and callback.quota_reset_required(self._callback_type):
            self.refresh_bounds()
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

    def tracked(self, now_ms: int) -> list[tuple[SensorKey, Sensor[StatT]]]:
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
        self.exempt_time = Rate(METRICS_NUM_SAMPLES, METRICS_SAMPLE_WINDOW_MS)
        """The request quota's ``exempt-request-time``: the time of the requests no
        quota bounds (between nodes, a follower's fetch), as a percentage of a thread."""

    def record_exempt(self, value: float, now_ms: int) -> None:
        """Time spent on a request exempt from the quota, counted while any request
        quota is set (Kafka's ``maybeRecordExempt``)."""
        if self.enabled:
            self.exempt_time.record(value, now_ms)

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


def quota_entity(key: QuotaKey) -> ClientQuotaEntity:
    """A quota's key as Kafka's ``ClientQuotaEntity`` gives it to a callback."""
    user, client_id = key
    parts = []
    if user is DEFAULT:
        parts.append(ConfigEntity(DEFAULT_NAME, ConfigEntityType.DEFAULT_USER))
    elif user != ABSENT:
        parts.append(ConfigEntity(user, ConfigEntityType.USER))
    if client_id is DEFAULT:
        parts.append(ConfigEntity(DEFAULT_NAME, ConfigEntityType.DEFAULT_CLIENT_ID))
    elif client_id != ABSENT:
        parts.append(ConfigEntity(client_id, ConfigEntityType.CLIENT_ID))
    return ClientQuotaEntity(tuple(parts))


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: the delay X that brings the rate O measured
    over W down to the quota T, ``O * W / (W + X) = T``, so ``X = (O - T) / T * W``,
    rounded as Java's ``Math.round``."""
    return math.floor((observed - bound) / bound * window_ms + 0.5)
