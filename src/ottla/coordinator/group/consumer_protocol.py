"""The consumer group protocol's (KIP-848) requests and configs, as the handlers and the
ConsumerGroupManager share them, and the topics view its assignments are computed over.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ottla.common.server_config import KafkaConfig
from ottla.coordinator.group.assignors import Assignment

TopicsView = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
"""Topic name -> (topic id, partition count) of the metadata image, user topics only."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")
    assignment_interval_ms: int = 1000
    max_size: int = 2**31 - 1

    @classmethod
    def from_config(cls, config: KafkaConfig) -> ConsumerGroupConfig:
        return cls(config["group.consumer.session.timeout.ms"],
                   config["group.consumer.heartbeat.interval.ms"],
                   tuple(config["group.consumer.assignors"]),
                   config["group.consumer.assignment.interval.ms"],
                   config["group.consumer.max.size"])


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
