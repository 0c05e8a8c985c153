"""The consumer group protocol's (KIP-848) requests and configs, as the handlers and the
ConsumerGroupManager share them, and the topics view its assignments are computed over;
and the classic protocol's embedded ``consumer`` protocol (Kafka's ConsumerProtocol: the
subscription and assignment bytes of JoinGroup and SyncGroup), which the coordinator reads
and writes only for classic members inside a consumer group and to convert groups.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError

from ottla.common.config import INT_MAX
from ottla.common.group_configs import BrokerConfig, effective_group_config
from ottla.common.server_config import BROKER_CONFIGS, KafkaConfig
from ottla.coordinator.group.assignors import Assignment

TopicsView = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
"""Topic name -> (topic id, partition count) of the metadata image, user topics only."""

ASSIGNMENT_INTERVAL = "group.consumer.assignment.interval.ms"


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")
    assignment_interval_ms: int = 1000
    max_size: int = INT_MAX
    group_overrides: Callable[[str], Mapping[str, str]] = lambda _group_id: {}
    """A group's dynamic configs (GROUP config resources), which beat the broker's."""
    broker: BrokerConfig | None = None
    """Reads a broker config with its AlterConfigs overrides (``BrokerContext.
    dynamic_config``): group.consumer.assignment.interval.ms is dynamic. None: the
    fields above and the defaults of the bounds."""

    def _broker_config(self, name: str) -> Any:
        if self.broker is not None:
            return self.broker(name)
        if name == ASSIGNMENT_INTERVAL:
            return self.assignment_interval_ms
        return BROKER_CONFIGS[name].default

    def assignment_interval(self, group_id: str) -> int:
        """The least time between two target assignments of ``group_id``: its
        consumer.assignment.interval.ms, else the broker's (dynamic) value, either kept
        within group.consumer.{min,max}.assignment.interval.ms as Kafka clamps them."""
        value = int(effective_group_config(group_id, "consumer.assignment.interval.ms",
                                           self.group_overrides(group_id),
                                           self._broker_config))
        low = int(self._broker_config("group.consumer.min.assignment.interval.ms"))
        high = int(self._broker_config("group.consumer.max.assignment.interval.ms"))
        return min(max(value, low), high)

    def session_timeout(self, group_id: str) -> int:
        value = self.group_overrides(group_id).get("consumer.session.timeout.ms")
        return self.session_timeout_ms if value is None else int(value)

    def heartbeat_interval(self, group_id: str) -> int:
        value = self.group_overrides(group_id).get("consumer.heartbeat.interval.ms")
        return self.heartbeat_interval_ms if value is None else int(value)

    @classmethod
    def from_config(cls, config: KafkaConfig,
                    group_overrides: Callable[[str], Mapping[str, str]] | None = None,
                    broker: BrokerConfig | None = None) -> ConsumerGroupConfig:
        return cls(config["group.consumer.session.timeout.ms"],
                   config["group.consumer.heartbeat.interval.ms"],
                   tuple(config["group.consumer.assignors"]),
                   config[ASSIGNMENT_INTERVAL],
                   config["group.consumer.max.size"],
                   group_overrides or (lambda _group_id: {}),
                   broker or config.__getitem__)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Assignment | None
    client_id: str
    client_host: str
    client_generated_member_id: bool = True
    """ConsumerGroupHeartbeat v1+ (KIP-1082): the client makes its member id, so an empty
    one is invalid even when joining; v0 lets the coordinator make it."""
    regex_topics_visible: Callable[[str], bool] | None = None
    """With an authorizer, whether the member's principal may DESCRIBE a topic: the
    topics its regular expression matches are kept only if so (Kafka's coordinator
    resolves a group's regular expressions with the context of a member's heartbeat)."""


# --- the embedded consumer protocol of classic groups (Kafka's ConsumerProtocol) -------------

PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")
_SUBSCRIPTIONS: tuple[Any, ...] = tuple(
    m.ConsumerProtocolSubscription
    for m in (subscription_v0, subscription_v1, subscription_v2, subscription_v3))
_ASSIGNMENTS: tuple[Any, ...] = (assignment_v0, assignment_v1, assignment_v2, assignment_v3)
_read_subscription = [entity_reader(cls) for cls in _SUBSCRIPTIONS]
_read_assignment = [entity_reader(m.ConsumerProtocolAssignment) for m in _ASSIGNMENTS]
_write_assignment = [entity_writer(m.ConsumerProtocolAssignment) for m in _ASSIGNMENTS]

TopicNamePartitions = dict[str, set[int]]


class MalformedProtocol(ValueError):
    """Embedded protocol bytes that do not parse (Kafka's SchemaException)."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    owned: TopicNamePartitions
    rack_id: str | None


def protocol_version(data: bytes) -> int:
    """The version a client wrote its subscription with, clamped to what Kafka reads; an
    assignment goes back to the member in the same version."""
    if len(data) < _VERSION.size:
        raise MalformedProtocol("Buffer underflow while parsing consumer protocol's header")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise MalformedProtocol(f"Unsupported consumer protocol version: {version}")
    return min(version, len(_SUBSCRIPTIONS) - 1)


def decode_subscription(data: bytes) -> Subscription:
    version = protocol_version(data)
    try:
        decoded, _ = _read_subscription[version](data, _VERSION.size)
    except (DecodeError, ValueError) as e:
        raise MalformedProtocol(f"Malformed consumer protocol subscription: {e}") from None
    owned: TopicNamePartitions = {}
    for tp in getattr(decoded, "owned_partitions", ()):
        owned.setdefault(tp.topic, set()).update(tp.partitions)
    return Subscription(tuple(decoded.topics), owned, getattr(decoded, "rack_id", None))


def decode_assignment(data: bytes) -> TopicNamePartitions:
    version = protocol_version(data)
    try:
        decoded, _ = _read_assignment[version](data, _VERSION.size)
    except (DecodeError, ValueError) as e:
        raise MalformedProtocol(f"Malformed consumer protocol assignment: {e}") from None
    assigned: TopicNamePartitions = {}
    for tp in decoded.assigned_partitions:
        assigned.setdefault(tp.topic, set()).update(tp.partitions)
    return assigned


def encode_assignment(assigned: TopicNamePartitions, version: int) -> bytes:
    module = _ASSIGNMENTS[version]
    entity = module.ConsumerProtocolAssignment(assigned_partitions=tuple(
        module.TopicPartition(topic=topic, partitions=tuple(sorted(partitions)))
        for topic, partitions in sorted(assigned.items()) if partitions))
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    _write_assignment[version](buf, entity)
    return buf.getvalue()


def by_name(assignment: Assignment, topics: Mapping[str, tuple[uuid.UUID, int]]
            ) -> TopicNamePartitions:
    """Topic ids to names (for a classic member); topics no longer known are left out."""
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    return {names[t]: set(ps) for t, ps in assignment.items() if t in names and ps}


def by_id(assigned: TopicNamePartitions, topics: Mapping[str, tuple[uuid.UUID, int]]
          ) -> Assignment:
    """Topic names to ids; topics no longer known are left out."""
    return {topics[name][0]: set(ps) for name, ps in assigned.items()
            if name in topics and ps}
