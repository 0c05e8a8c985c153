"""The broker: the state and services request handlers work with."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ottla.broker.deadline_timer import DeadlineTimer
from ottla.broker.fetch_session import FetchSessionCache
from ottla.broker.replication.alter_partition_manager import AlterPartitionManager, IsrChange
from ottla.broker.replication.partition import Partition
from ottla.broker.replication.replica_fetcher import ReplicaFetcherManager
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.replication.replication_quota import ReplicationQuota
from ottla.common.server_config import KafkaConfig
from ottla.common.topics import NewTopic
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import RequestContext


class ControllerClient(Protocol):
    """What a broker needs of the active controller, wherever it runs (the node's
    ``server.controller_channel.ControllerClient`` provides it): ``call`` sends the
    broker's own request, ``forward`` a client's, whole."""

    def call(self, api_key: int, version: int, body: Any, timeout: float = ...,
             client_id: str | None = ...) -> Awaitable[Any]: ...

    def forward(self, ctx: RequestContext, request: Any, timeout: float = ...
                ) -> Awaitable[Any]: ...


CREATE_TOPICS_VERSION = 7


async def create_topics(controller: ControllerClient, topics: list[NewTopic]
                        ) -> dict[str, ErrorCode]:
    """Ask the active controller to create topics (``NewTopic``s) the broker needs itself
    (auto-creation, internal topics); the error per topic name."""
    response = await controller.call(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, {
        "topics": [{"name": t.name, "num_partitions": t.num_partitions,
                    "replication_factor": t.replication_factor, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()]}
                   for t in topics],
        "timeout": 30000, "validate_only": False})
    return {t.name: ErrorCode(t.error_code) for t in response.topics}


class ProducerIdManager:
    """Hands out producer ids from blocks the controller allocates (AllocateProducerIds);
    concurrent callers share one allocation."""

    def __init__(self, broker_id: int, controller: ControllerClient) -> None:
        self.broker_id = broker_id
        self.controller = controller
        self._next = 0
        self._end = 0
        self._allocating: asyncio.Future[Any] | None = None

    async def generate(self, broker_epoch: int) -> int:
        while self._next >= self._end:
            if self._allocating is None:
                self._allocating = asyncio.ensure_future(self.controller.call(
                    ApiKey.ALLOCATE_PRODUCER_IDS, 0,
                    {"broker_id": self.broker_id, "broker_epoch": broker_epoch}))
            allocating = self._allocating
            try:
                response = await asyncio.shield(allocating)
            finally:
                if self._allocating is allocating and allocating.done():
                    self._allocating = None
            if response.error_code != ErrorCode.none:
                raise KafkaError(response.error_code, "The controller did not allocate "
                                 "producer ids")
            if self._next >= self._end:
                self._next = response.producer_id_start
                self._end = response.producer_id_start + response.producer_id_len
        pid = self._next
        self._next += 1
        return pid


T = TypeVar("T")


def run_now(job: Callable[[], T]) -> Awaitable[T]:
    """``Broker.offload`` where no worker thread is set up (tests, tools): run the job
    at once and hand its result (or error) over as a future."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    try:
        future.set_result(job())
    except Exception as e:
        future.set_exception(e)
    return future


class Broker:
    def __init__(self, *, node_id: int, cluster_id: str, config: KafkaConfig,
                 image: MetadataImage,
                 replica_manager: ReplicaManager | None, controller: ControllerClient,
                 clock: Callable[[], float] = time.time) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.config = config
        """The node's config (``server.properties``); handlers read keys from it."""
        self.image = image
        self.replica_manager: ReplicaManager = replica_manager  # type: ignore[assignment]
        """None on a node that is only a controller (no broker listener reaches it)."""
        self.controller = controller
        self.clock = clock
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.producer_ids = ProducerIdManager(node_id, controller)
        self.broker_epoch = -1
        self.group_coordinator: Any = None
        """The GroupCoordinatorService, set by the node."""
        self.transaction_coordinator: Any = None
        """The TransactionCoordinatorService, set by the node."""
        self.share_partitions: Any = None
        """The SharePartitionManager (share groups' in-flight records), set by the node."""
        self.share_coordinator: Any = None
        """The ShareCoordinatorService (``__share_group_state``), set by the node."""
        self.offload: Callable[[Callable[[], Any]], Awaitable[Any]] = run_now
        """Runs CPU-heavy request work off the event loop (a node's validation thread):
        a large compressed batch's decompression and record walk."""
        samples = config["replication.quota.window.num"]
        window_ms = config["replication.quota.window.size.seconds"] * 1000
        self.leader_quota = ReplicationQuota(
            node_id, "leader.replication.throttled.replicas",
            lambda: self.dynamic_config("leader.replication.throttled.rate"),
            lambda topic: self.image.topic_configs(topic), samples, window_ms)
        """What this broker sends to out-of-sync followers of throttled partitions."""
        self.follower_quota = ReplicationQuota(
            node_id, "follower.replication.throttled.replicas",
            lambda: self.dynamic_config("follower.replication.throttled.rate"),
            lambda topic: self.image.topic_configs(topic), samples, window_ms)
        """What this broker fetches for throttled partitions it is out of sync for."""
        self.purgatory_timer: DeadlineTimer | None = None
        if replica_manager is not None:
            timer = self.purgatory_timer = DeadlineTimer(
                "purgatory", self.now_ms, replica_manager.expire_delayed)
            replica_manager.produce_purgatory.on_deadline_change = timer.deadline_changed
            replica_manager.fetch_purgatory.on_deadline_change = timer.deadline_changed

    @property
    def rack_aware_reads(self) -> bool:
        """``replica.selector.class`` names Kafka's RackAwareReplicaSelector (KIP-392)."""
        selector = self.config["replica.selector.class"] or ""
        return selector.endswith("RackAwareReplicaSelector")

    def rack_of(self, broker_id: int) -> str | None:
        registration = self.image.brokers.get(broker_id)
        return registration.rack if registration is not None else None

    def leader_hints(self, listener: str, partitions: list[tuple[str | None, int]]
                     ) -> tuple[dict[tuple[str | None, int], dict[str, int]],
                                list[dict[str, object]]]:
        """KIP-951: for partitions a client sent to the wrong broker, the current leader
        and leader epoch the metadata image names, and the leaders' endpoints on the
        client's listener, so it retries without a Metadata round trip."""
        hints: dict[tuple[str | None, int], dict[str, int]] = {}
        endpoints: dict[int, dict[str, object]] = {}
        for name, index in partitions:
            topic = self.image.topics_by_name.get(name) if name is not None else None
            registration = topic.partitions.get(index) if topic is not None else None
            if registration is None or registration.leader < 0:
                hints[(name, index)] = {"leader_id": -1, "leader_epoch": -1}
                continue
            hints[(name, index)] = {"leader_id": registration.leader,
                                    "leader_epoch": registration.leader_epoch}
            broker = self.image.brokers.get(registration.leader)
            endpoint = broker.endpoints.get(listener) if broker is not None else None
            if broker is not None and endpoint is not None:
                endpoints[broker.broker_id] = {"node_id": broker.broker_id,
                                               "host": endpoint.host, "port": endpoint.port,
                                               "rack": broker.rack}
        return hints, list(endpoints.values())

    def start_replication(self) -> None:
        """Follow the partitions this broker does not lead, and send the ISR changes of
        those it leads to the controller (a node's broker; handler tests drive
        followers by hand)."""
        replicas = self.replica_manager
        self.replica_fetchers = ReplicaFetcherManager(
            self.node_id, self.config, self._endpoint_of, lambda: self.broker_epoch,
            self.now_ms, lambda p, moved: replicas.followed(p, moved, self.now_ms()),
            quota=self.follower_quota)
        self.alter_partitions = AlterPartitionManager(
            self.node_id, lambda: self.broker_epoch, self.controller.call,
            lambda p, isr, epoch: replicas.isr_answered(p, isr, epoch, self.now_ms()))
        replicas.followers = self.replica_fetchers
        replicas.alter_isr = self._alter_isr
        replicas.isr_eligible = self._isr_eligible

    def _isr_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        registration = self.image.brokers.get(broker_id)
        return registration is not None and not registration.fenced and \
            not registration.in_controlled_shutdown and \
            (broker_epoch < 0 or broker_epoch == registration.epoch)

    def _alter_isr(self, partition: Partition, isr: list[int]) -> None:
        epochs = {f.replica_id: f.broker_epoch for f in partition.replication.followers.values()}
        epochs[self.node_id] = self.broker_epoch
        self.alter_partitions.submit(IsrChange(partition, isr, epochs, partition.leader_epoch,
                                               partition.state.partition_epoch))

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where this broker reaches ``broker_id``: its inter-broker listener."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return None
        name = self.config["inter.broker.listener.name"]
        endpoint = registration.endpoints.get(name) if name else None
        if endpoint is None and registration.endpoints:
            endpoint = next(iter(registration.endpoints.values()))
        return (endpoint.host, endpoint.port) if endpoint is not None else None

    async def stop_replication(self) -> None:
        fetchers = getattr(self, "replica_fetchers", None)
        if fetchers is not None:
            await fetchers.shutdown()
        alter_partitions = getattr(self, "alter_partitions", None)
        if alter_partitions is not None:
            await alter_partitions.close()

    def shutdown(self) -> None:
        """Answer the requests parked in purgatories and stop their timer."""
        if self.purgatory_timer is not None:
            self.purgatory_timer.cancel()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def dynamic_config(self, name: str) -> Any:
        """A broker config, taking AlterConfigs overrides (per broker, then cluster) first."""
        for scope in (self.node_id, None):
            overrides = self.image.broker_configs(scope)
            if name in overrides:
                return self.config.definitions[name].parse(overrides[name])
        return self.config[name]
