"""The ground every part of the broker role stands on: who this broker is, its config,
the metadata image it follows, the partitions it hosts, its way to the active controller
and its clock.

The broker's services (the coordinators, the share-partition manager, the persister,
the dead-letter queue) take a ``BrokerContext`` rather than the ``Broker``, so that the
``Broker`` stands above everything it holds and holds it typed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from ottla.broker.controller_client import ControllerClient
from ottla.broker.replication.replica_fetcher import Endpoint
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.client.security import client_security
from ottla.common.server_config import KafkaConfig
from ottla.common.topics import NewTopic
from ottla.metadata.image import MetadataImage

T = TypeVar("T")


def run_now(job: Callable[[], T]) -> Awaitable[T]:
    """``BrokerContext.offload`` where no worker thread is set up (tests, tools): run the
    job at once and hand its result (or error) over as a future."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    try:
        future.set_result(job())
    except Exception as e:
        future.set_exception(e)
    return future


class BrokerContext:
    def __init__(self, *, node_id: int, cluster_id: str, config: KafkaConfig,
                 image: MetadataImage, replica_manager: ReplicaManager,
                 controller: ControllerClient,
                 clock: Callable[[], float] = time.time) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.config = config
        """The node's config (``server.properties``); ``dynamic_config`` for keys that
        AlterConfigs may override."""
        self.image = image
        """The committed metadata, updated in place by the node's metadata publisher."""
        self.replica_manager = replica_manager
        self.controller = controller
        self.clock = clock
        self.broker_epoch = -1
        """This broker's registration epoch, set by the node's lifecycle once registered."""
        self.inter_broker_security = client_security(
            config, self.inter_broker_listener, "sasl.mechanism.inter.broker.protocol")
        """TLS and SASL towards other brokers' inter-broker listener (None: PLAINTEXT)."""
        self.kraft_version: Callable[[], int] = lambda: 0
        """The metadata quorum's ``kraft.version`` (the node's KRaft client's), which
        ApiVersions lists among the finalized features."""
        self.offload: Callable[[Callable[[], Any]], Awaitable[Any]] = run_now
        self.validate_dynamic_config: Callable[[Mapping[str, str | None]], None] = \
            lambda configs: None
        """Raises ``ConfigError`` if this broker could not take these dynamic configs of
        its own (set by the node: its TLS listeners check a new keystore)."""
        """Runs CPU-heavy request work off the event loop (the node's validation thread):
        a large compressed batch's decompression and record walk."""

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def dynamic_config(self, name: str) -> Any:
        """A broker config, taking AlterConfigs overrides (per broker, then cluster)
        first. Its value is of the key's type (int, str, list, ...)."""
        for scope in (self.node_id, None):
            overrides = self.image.broker_configs(scope)
            if name in overrides:
                return self.config.definitions[name].parse(overrides[name])
        return self.config[name]

    def auto_created(self, name: str, configs: dict[str, str | None] | None = None
                     ) -> NewTopic:
        """A topic this broker creates on its own (a client's Metadata for an unknown
        topic, a share group's dead-letter queue): with this broker's ``num.partitions``
        and ``default.replication.factor``, as Kafka's AutoTopicCreationManager sends
        them, not the controller's defaults a CreateTopics with -1 would take."""
        return NewTopic(name, self.config["num.partitions"],
                        self.config["default.replication.factor"],
                        configs=dict(configs or {}))

    @property
    def inter_broker_listener(self) -> str | None:
        """``inter.broker.listener.name``, else the listener named after
        ``security.inter.broker.protocol`` (Kafka's rule)."""
        return self.config["inter.broker.listener.name"] or \
            self.config["security.inter.broker.protocol"]

    def endpoint_of(self, broker_id: int) -> Endpoint | None:
        """Where this broker reaches ``broker_id``: its inter-broker listener."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return None
        name = self.inter_broker_listener
        endpoint = registration.endpoints.get(name) if name else None
        if endpoint is None and registration.endpoints:
            endpoint = next(iter(registration.endpoints.values()))
        return (endpoint.host, endpoint.port) if endpoint is not None else None
