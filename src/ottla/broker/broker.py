"""The broker: the state and services request handlers work with."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ottla.broker.fetch_session import FetchSessionCache
from ottla.broker.replica_manager import ReplicaManager
from ottla.metadata.image import MetadataImage


class ControllerChannel(Protocol):
    """How a broker hands an operation to the active controller and awaits its commit.

    ``op`` receives the controller and returns a ControllerResult; the awaited value is the
    result's response, released once its records are committed and applied here.
    """

    def submit(self, op: Callable[[Any], Any]) -> Awaitable[Any]: ...


class ProducerIdManager:
    """Hands out producer ids from blocks the controller allocates (AllocateProducerIds)."""

    def __init__(self, broker_id: int, controller: ControllerChannel) -> None:
        self.broker_id = broker_id
        self.controller = controller
        self._next = 0
        self._end = 0

    async def generate(self, broker_epoch: int) -> int:
        if self._next >= self._end:
            start, length = await self.controller.submit(
                lambda c: c.allocate_producer_ids(self.broker_id, broker_epoch))
            self._next, self._end = start, start + length
        pid = self._next
        self._next += 1
        return pid


class Broker:
    def __init__(self, *, node_id: int, cluster_id: str, config: Any, image: MetadataImage,
                 replica_manager: ReplicaManager, controller: ControllerChannel,
                 clock: Callable[[], float] = time.time) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.config = config
        """The node's KafkaConfig (server.config); handlers read keys from it."""
        self.image = image
        self.replica_manager = replica_manager
        self.controller = controller
        self.clock = clock
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.producer_ids = ProducerIdManager(node_id, controller)
        self.broker_epoch = -1
        self.group_coordinator: Any = None
        """The GroupCoordinatorService, set by the node."""

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def dynamic_config(self, name: str) -> Any:
        """A broker config, taking AlterConfigs overrides (per broker, then cluster) first."""
        for scope in (self.node_id, None):
            overrides = self.image.broker_configs(scope)
            if name in overrides:
                return self.config.definitions[name].parse(overrides[name])
        return self.config[name]
