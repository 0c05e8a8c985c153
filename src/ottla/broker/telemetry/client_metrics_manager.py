"""KIP-714 client telemetry on a broker (Kafka's ClientMetricsManager), sans-I/O: which
metrics each client instance is asked to push and how often, and whether a push is
accepted. Every decision takes ``now_ms``; ids come from the caller's ``random.Random``.

- GetTelemetrySubscriptions: a client without an instance id gets a new one. Its instance
  is matched against every subscription (``common.client_metrics_configs``): the union of
  the matching ones' metric prefixes (just ``*`` if one has it), the smallest of their
  intervals (five minutes, and no metrics, when none matches), and a subscription id that
  changes with them. Asking again before the push interval has passed since its last
  request is THROTTLING_QUOTA_EXCEEDED, unless its last push failed with
  UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
- PushTelemetry: refused with INVALID_REQUEST for a reserved instance id or after the
  instance's terminating push; THROTTLING_QUOTA_EXCEEDED before its interval (the first
  push after a subscription fetch and a terminating push are always in time);
  UNKNOWN_SUBSCRIPTION_ID for an id other than its current one (the subscriptions
  changed: it fetches them again); UNSUPPORTED_COMPRESSION_TYPE for a codec Kafka does
  not know; TELEMETRY_TOO_LARGE over ``telemetry.max.bytes``. An accepted payload goes to
  the receiver (``ClientTelemetryReceiver``); one it cannot read is INVALID_RECORD.
- A change of the subscriptions re-matches each instance on its next request, with its
  timestamps reset, as Kafka re-creates it. An instance not heard from for the longer of
  a minute and three push intervals is forgotten, and so is the one of a connection that
  closes; at most ``CACHE_MAX_SIZE`` are kept (the least recently used go first).
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import crc32c

from ottla.common import client_metrics_configs as cm
from ottla.common.client_metrics_configs import Subscription
from ottla.common.uuids import kafka_uuid_text
from ottla.protocol.compression import CompressionType
from ottla.protocol.errors import ErrorCode

SUPPORTED_COMPRESSION_TYPES = (CompressionType.ZSTD, CompressionType.LZ4,
                               CompressionType.GZIP, CompressionType.SNAPPY)
"""``accepted_compression_types``, in Kafka's order of preference (clients take the first
they have)."""
CACHE_MAX_SIZE = 16384
CACHE_EXPIRY_MS = 60_000
RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})
"""Kafka's ``Uuid.RESERVED``: the zero id and the metadata topic's."""
ConnectionKey = tuple[str, str, int]
"""(listener, client host, client port): one client connection."""


class TelemetryTooLarge(Exception):
    """A payload that decompresses to more than the receiver takes."""


class ClientTelemetryReceiver(Protocol):
    """Where accepted pushes go (Kafka's ClientTelemetryExporter plugin)."""

    def export(self, instance: ClientInstance, compression_type: int, payload: bytes,
               now_ms: int) -> None:
        """Take one push; raise ``TelemetryTooLarge``, or anything else for a payload it
        cannot read."""


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """What Kafka matches subscriptions against (ClientMetricsInstanceMetadata), less the
    instance id: from the request header and the connection."""

    client_id: str
    software_name: str
    software_version: str
    host: str
    port: int
    connection: ConnectionKey

    def attributes(self, instance_id: uuid.UUID) -> dict[str, str | None]:
        return {cm.CLIENT_INSTANCE_ID: kafka_uuid_text(instance_id),
                cm.CLIENT_ID: self.client_id,
                cm.CLIENT_SOFTWARE_NAME: self.software_name,
                cm.CLIENT_SOFTWARE_VERSION: self.software_version,
                cm.CLIENT_SOURCE_ADDRESS: self.host,
                cm.CLIENT_SOURCE_PORT: str(self.port)}


@dataclass(slots=True)
class ClientInstance:
    """One client instance's subscription and the state of its requests (Kafka's
    ClientMetricsInstance)."""

    instance_id: uuid.UUID
    client: ClientInfo
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.none
    expires_ms: int = field(default=0)

    def get_in_time(self, now_ms: int) -> bool:
        """Kafka's maybeUpdateGetRequestTimestamp."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def push_in_time(self, now_ms: int) -> bool:
        """Kafka's maybeUpdatePushRequestTimestamp: the first push after a fetch of the
        subscription is in time whenever it comes (clients jitter the interval)."""
        in_time = self.last_get_ms > self.last_push_ms or \
            now_ms - self.last_push_ms >= self.push_interval_ms
        if in_time:
            self.last_push_ms = now_ms
        return in_time


def subscription_id(metrics: tuple[str, ...], push_interval_ms: int,
                    instance_id: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC-32C of the metrics and interval, xor the id's
    hash. Kafka writes the set in its hash order; the metrics are sorted here. The value
    means nothing to a client, beyond changing with the subscription."""
    crc = crc32c.crc32c(f"[{', '.join(metrics)}]{push_interval_ms}".encode())
    bits = instance_id.int
    mixed = (bits >> 64) ^ (bits & (2 ** 64 - 1))
    return _int32(_int32(crc) ^ _int32(mixed >> 32) ^ _int32(mixed))


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientMetricsManager:
    def __init__(self, telemetry_max_bytes: int, rng: random.Random,
                 receiver: ClientTelemetryReceiver | None = None) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.rng = rng
        self.receiver = receiver
        """Kafka advertises the telemetry APIs only with a receiver configured; a node's
        is its Prometheus endpoint (``prometheus.listener``)."""
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0
        """Bumped by every change of the subscriptions (Kafka's subscriptionUpdateVersion)."""
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        """Least recently asked first."""
        self._by_connection: dict[ConnectionKey, uuid.UUID] = {}

    @property
    def enabled(self) -> bool:
        return self.receiver is not None

    # --- subscriptions ------------------------------------------------------------------

    def update_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """The CLIENT_METRICS resources of the committed metadata, by name; a change of
        any re-matches every instance on its next request."""
        subscriptions = {name: Subscription.from_configs(name, values)
                         for name, values in configs.items()}
        if subscriptions != self.subscriptions:
            self.subscriptions = subscriptions
            self.version += 1

    def _matched(self, instance_id: uuid.UUID, client: ClientInfo) -> ClientInstance:
        attributes = client.attributes(instance_id)
        interval = cm.INTERVAL_MS_DEFAULT
        metrics: set[str] = set()
        for subscription in self.subscriptions.values():
            if subscription.matches(attributes):
                metrics |= subscription.metrics
                interval = min(interval, subscription.interval_ms)
        chosen = (cm.ALL_METRICS,) if cm.ALL_METRICS in metrics else tuple(sorted(metrics))
        return ClientInstance(instance_id, client,
                              subscription_id(chosen, interval, instance_id), self.version,
                              chosen, interval)

    # --- the instances ------------------------------------------------------------------

    def _instance(self, instance_id: uuid.UUID, client: ClientInfo, now_ms: int
                  ) -> ClientInstance:
        """Kafka's clientInstance: the cached instance (re-matched if the subscriptions
        changed since it was), its expiry moved on."""
        self.expire(now_ms)
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscription_version < self.version:
            known = instance.client if instance is not None else client
            instance = self._matched(instance_id, known)
            self.instances[instance_id] = instance
            self._by_connection[client.connection] = instance_id
            while len(self.instances) > CACHE_MAX_SIZE:
                self._forget(next(iter(self.instances)))
        self.instances.move_to_end(instance_id)
        instance.expires_ms = now_ms + max(CACHE_EXPIRY_MS, 3 * instance.push_interval_ms)
        return instance

    def _forget(self, instance_id: uuid.UUID) -> None:
        instance = self.instances.pop(instance_id, None)
        if instance is not None and \
                self._by_connection.get(instance.client.connection) == instance_id:
            del self._by_connection[instance.client.connection]

    def expire(self, now_ms: int) -> None:
        """Forget the instances whose expiry passed (those asked least recently first)."""
        while self.instances:
            oldest = next(iter(self.instances.values()))
            if oldest.expires_ms > now_ms:
                break
            self._forget(oldest.instance_id)

    def on_disconnect(self, connection: ConnectionKey) -> None:
        """A client connection closed: forget the instance it last spoke for (Kafka's
        ClientConnectionDisconnectListener)."""
        instance_id = self._by_connection.pop(connection, None)
        if instance_id is not None:
            self.instances.pop(instance_id, None)

    def _new_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if candidate not in self.instances and candidate not in RESERVED_IDS and \
                    not kafka_uuid_text(candidate).startswith("-"):
                return candidate

    # --- the requests -------------------------------------------------------------------

    def get_subscriptions(self, now_ms: int, instance_id: uuid.UUID | None,
                          client: ClientInfo) -> dict[str, Any]:
        """The GetTelemetrySubscriptions response (v0) to ``client``."""
        if instance_id is None or instance_id == uuid.UUID(int=0):
            instance_id = self._new_id()
        instance = self._instance(instance_id, client, now_ms)
        if not instance.get_in_time(now_ms) and instance.last_error not in (
                ErrorCode.unknown_subscription_id, ErrorCode.unsupported_compression_type):
            return {"throttle_time": 0, "error_code": ErrorCode.throttling_quota_exceeded,
                    "client_instance_id": uuid.UUID(int=0), "subscription_id": 0,
                    "accepted_compression_types": [], "push_interval": 0,
                    "telemetry_max_bytes": 0, "delta_temporality": False,
                    "requested_metrics": []}
        instance.last_error = ErrorCode.none
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "client_instance_id": instance_id,
                "subscription_id": instance.subscription_id,
                "accepted_compression_types": [int(c) for c in SUPPORTED_COMPRESSION_TYPES],
                "push_interval": instance.push_interval_ms,
                "telemetry_max_bytes": self.telemetry_max_bytes,
                "delta_temporality": True,
                "requested_metrics": list(instance.metrics)}

    def push(self, now_ms: int, instance_id: uuid.UUID | None, subscription: int,
             terminating: bool, compression_type: int, payload: bytes, client: ClientInfo
             ) -> tuple[ErrorCode, str | None]:
        """A PushTelemetry: its error and Kafka's message (``none``, None if accepted),
        the payload handed to the receiver if it was."""
        if instance_id is None or instance_id in RESERVED_IDS:
            shown = "null" if instance_id is None else kafka_uuid_text(instance_id)
            return ErrorCode.invalid_request, \
                f"Invalid request from the client [{shown}], invalid client instance id"
        instance = self._instance(instance_id, client, now_ms)
        error = self._validate_push(instance, now_ms, subscription, terminating,
                                    compression_type, len(payload))
        instance.terminating = terminating
        if error is not None:
            instance.last_error = error[0]
            return error
        if payload and self.receiver is not None:
            try:
                self.receiver.export(instance, compression_type, payload, now_ms)
            except TelemetryTooLarge:
                instance.last_error = ErrorCode.telemetry_too_large
                return ErrorCode.telemetry_too_large, None
            except Exception:
                instance.last_error = ErrorCode.invalid_record
                return ErrorCode.invalid_record, None
        instance.last_error = ErrorCode.none
        return ErrorCode.none, None

    def _validate_push(self, instance: ClientInstance, now_ms: int, subscription: int,
                       terminating: bool, compression_type: int, size: int
                       ) -> tuple[ErrorCode, str] | None:
        """Kafka's validatePushRequest, in its order."""
        shown = kafka_uuid_text(instance.instance_id)
        if instance.terminating:
            return ErrorCode.invalid_request, (
                f"Client [{shown}] sent the previous request with state terminating to TRUE, "
                "can not acceptany requests after that")
        if not instance.push_in_time(now_ms) and not terminating:
            return ErrorCode.throttling_quota_exceeded, (
                f"Request from the client [{shown}] arrived before the next push interval "
                "time")
        if subscription != instance.subscription_id:
            return ErrorCode.unknown_subscription_id, \
                f"Unknown client subscription id for the client [{shown}]"
        if compression_type not in CompressionType._value2member_map_:
            return ErrorCode.unsupported_compression_type, (
                f"Unknown compression type [{compression_type}] is received in telemetry "
                f"request from [{shown}]")
        if size > self.telemetry_max_bytes:
            return ErrorCode.telemetry_too_large, (
                f"Telemetry request from [{shown}] is larger than the maximum allowed size "
                f"[{self.telemetry_max_bytes}]")
        return None
