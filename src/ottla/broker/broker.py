"""The broker role of a node (Kafka's BrokerServer as KafkaApis sees it): the
``BrokerContext`` plus every service the broker runs, built here in dependency order
and held typed, so a handler reaches each through one object.

What it holds, from the bottom up: replication (the replica manager given to it, the
replica fetchers, the ISR changes and the replicas' log dirs sent to the controller, the
replication throttles),
fetch sessions, client quotas, producer ids, the coordinators over their internal topics (group,
transaction, share) and the leaders' transaction verification (KIP-890), and share
groups on the leaders (the share-state persister, the dead-letter queue, the
share-partition manager, the share-group offsets admin), and KIP-714 client telemetry.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from ottla.broker.context import BrokerContext
from ottla.broker.controller_client import ControllerClient
from ottla.broker.coordinators.group_coordinator import GroupCoordinatorService
from ottla.broker.coordinators.producer_id_manager import ProducerIdManager
from ottla.broker.coordinators.share_coordinator import ShareCoordinatorService
from ottla.broker.coordinators.transaction_coordinator import TransactionCoordinatorService
from ottla.broker.deadline_timer import DeadlineTimer, monotonic_ms
from ottla.broker.fetch_session import FetchSessionCache
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.broker.replication.alter_partition_manager import AlterPartitionManager
from ottla.broker.replication.assignments_manager import AssignmentsManager
from ottla.broker.replication.partition import Partition
from ottla.broker.replication.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from ottla.broker.replication.replica_fetcher import ReplicaFetcherManager
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.replication.replication_quota import ByteRateQuota, ReplicationQuota
from ottla.broker.share.dead_letter_queue import DeadLetterQueue
from ottla.broker.share.offsets_admin import ShareGroupOffsetsAdmin
from ottla.broker.share.partition_manager import SharePartitionManager
from ottla.broker.share.persister import CoordinatorPersister
from ottla.broker.telemetry.client_metrics_manager import ClientMetricsManager
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.broker.transaction_verification import AddPartitionsToTxnManager
from ottla.common.features import METADATA_VERSION, METADATA_VERSION_LEVEL
from ottla.common.server_config import KafkaConfig
from ottla.metadata.delta import MetadataDelta
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.metadata.isr_change import IsrChange

LeaderHint = dict[str, int]
"""KIP-951's CurrentLeader of a partition: ``leader_id`` and ``leader_epoch``."""
NodeEndpoint = dict[str, object]
"""KIP-951's NodeEndpoint: ``node_id``, ``host``, ``port`` and ``rack``."""


class Broker(BrokerContext):
    def __init__(self, *, node_id: int, cluster_id: str, config: KafkaConfig,
                 image: MetadataImage, replica_manager: ReplicaManager,
                 controller: ControllerClient,
                 clock: Callable[[], float] = time.time,
                 client_quotas: ClientQuotaManagers | None = None) -> None:
        super().__init__(node_id=node_id, cluster_id=cluster_id, config=config, image=image,
                         replica_manager=replica_manager, controller=controller, clock=clock)
        # Replication.
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
        self.replica_fetchers = ReplicaFetcherManager(
            node_id, config, self.endpoint_of, lambda: self.broker_epoch, self.now_ms,
            lambda p, moved: replica_manager.followed(p, moved, self.now_ms()),
            quota=self.follower_quota, security=self.inter_broker_security,
            metadata_level=lambda: self.image.features.get(METADATA_VERSION,
                                                           METADATA_VERSION_LEVEL))
        self.alter_partitions = AlterPartitionManager(
            node_id, lambda: self.broker_epoch, controller.call,
            lambda p, isr, epoch: replica_manager.isr_answered(p, isr, epoch, self.now_ms()),
            replica_manager.isr_update_failed)
        self.assignments = AssignmentsManager(node_id, lambda: self.broker_epoch,
                                              controller.call, lambda: self.image)
        """Where this broker put each replica, for the controller (KIP-858)."""
        self.log_dir_moves = ReplicaAlterLogDirsManager(
            replica_manager, self.now_ms, chunk_bytes=config["replica.fetch.max.bytes"],
            quota=ByteRateQuota(
                lambda: self.dynamic_config("replica.alter.log.dirs.io.max.bytes.per.second"),
                config["alter.log.dirs.replication.quota.window.num"],
                config["alter.log.dirs.replication.quota.window.size.seconds"] * 1000))
        """Copies replicas moving between this broker's log dirs (AlterReplicaLogDirs)."""
        # Parked requests time out on the monotonic clock, answered at the wall clock's now.
        self.purgatory_timer = DeadlineTimer(
            "purgatory", monotonic_ms,
            lambda _timer_ms: replica_manager.expire_delayed(self.now_ms()))
        for purgatory in (replica_manager.produce_purgatory, replica_manager.fetch_purgatory):
            purgatory.timer_ms = monotonic_ms
            purgatory.on_deadline_change = self.purgatory_timer.deadline_changed
        replica_manager.lag_clock = monotonic_ms  # and so do followers' lag timers
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.client_quotas = client_quotas if client_quotas is not None else \
            ClientQuotaManagers(config["quota.window.num"], config["quota.window.size.seconds"])
        """Client quotas (KIP-13, KIP-219): the metadata publisher keeps them current;
        Produce and Fetch record what their clients send and fetch against them."""
        self._topic_stats: BrokerTopicStats | None = None
        # The coordinators.
        self.producer_ids = ProducerIdManager(node_id, controller)
        self.group_coordinator = GroupCoordinatorService(self)
        self.transaction_coordinator = TransactionCoordinatorService(self, self.producer_ids)
        self.share_coordinator = ShareCoordinatorService(self)
        self.txn_verification = AddPartitionsToTxnManager(self, self.transaction_coordinator)
        # Share groups on the leaders.
        self.share_persister = CoordinatorPersister(self, self.share_coordinator)
        self.dead_letters = DeadLetterQueue(self)
        self.share_partitions = SharePartitionManager(self, self.share_persister,
                                                      self.dead_letters)
        self.share_offsets = ShareGroupOffsetsAdmin(self, self.group_coordinator,
                                                    self.share_persister)
        # Client telemetry: served, and advertised once the node has a receiver for it.
        self.client_metrics = ClientMetricsManager(config["telemetry.max.bytes"],
                                                   random.Random())
        self._update_client_metrics()

    @property
    def topic_stats(self) -> BrokerTopicStats | None:
        """What Produce, Fetch and the followers count (Kafka's BrokerTopicStats), when the
        node serves metrics (``prometheus.listener``); None otherwise: nothing is
        counted."""
        return self._topic_stats

    @topic_stats.setter
    def topic_stats(self, stats: BrokerTopicStats | None) -> None:
        self._topic_stats = stats
        self.replica_fetchers.topic_stats = stats
        for coordinator in self.coordinators:
            coordinator.writer.topic_stats = stats

    @property
    def coordinators(self) -> tuple[GroupCoordinatorService, TransactionCoordinatorService,
                                    ShareCoordinatorService]:
        return self.group_coordinator, self.transaction_coordinator, self.share_coordinator

    # --- replication -----------------------------------------------------------------------

    def start_replication(self) -> None:
        """Follow the partitions this broker does not lead, and send the ISR changes of
        those it leads to the controller (a node's broker; handler tests drive
        followers by hand)."""
        replicas = self.replica_manager
        replicas.followers = self.replica_fetchers
        replicas.alter_isr = self._alter_isr
        replicas.isr_eligible = self._isr_eligible
        replicas.assign_dir = self.assignments.on_assignment
        replicas.on_move_started = self.log_dir_moves.started

    def _isr_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        registration = self.image.brokers.get(broker_id)
        return registration is not None and not registration.fenced and \
            not registration.in_controlled_shutdown and \
            (broker_epoch < 0 or broker_epoch == registration.epoch)

    def _alter_isr(self, partition: Partition, isr: list[int]) -> None:
        epochs = {f.replica_id: f.broker_epoch for f in partition.replication.followers.values()}
        epochs[self.node_id] = self.broker_epoch
        self.alter_partitions.submit(partition, IsrChange.proposed(
            partition.topic_id, partition.index, partition.leader_epoch, isr, epochs,
            partition.state.partition_epoch))

    # --- what handlers ask of the image -----------------------------------------------------

    @property
    def rack_aware_reads(self) -> bool:
        """``replica.selector.class`` names Kafka's RackAwareReplicaSelector (KIP-392)."""
        selector = self.config["replica.selector.class"] or ""
        return selector.endswith("RackAwareReplicaSelector")

    def rack_of(self, broker_id: int) -> str | None:
        registration = self.image.brokers.get(broker_id)
        return registration.rack if registration is not None else None

    def leader_hints(self, listener: str, partitions: list[tuple[str | None, int]]
                     ) -> tuple[dict[tuple[str | None, int], LeaderHint], list[NodeEndpoint]]:
        """KIP-951: for partitions a client sent to the wrong broker, the current leader
        and leader epoch the metadata image names, and the leaders' endpoints on the
        client's listener, so it retries without a Metadata round trip."""
        hints: dict[tuple[str | None, int], LeaderHint] = {}
        endpoints: dict[int, NodeEndpoint] = {}
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

    # --- following the metadata and stopping --------------------------------------------------

    def on_metadata(self, delta: MetadataDelta, now_ms: int) -> None:
        """Committed metadata moved: each coordinator loads the partitions of its topic
        this broker now leads and unloads the rest; share groups forget deleted topics
        (their share-partitions here, and their state in the share coordinators)."""
        for coordinator in self.coordinators:
            coordinator.on_metadata(now_ms)
        if delta.full or delta.client_metrics:
            self._update_client_metrics()
        if delta.removed_topics:
            self.share_partitions.on_topics_deleted(set(delta.removed_topics))
            self.share_offsets.on_topics_deleted(dict(delta.removed_partition_counts))

    def _update_client_metrics(self) -> None:
        self.client_metrics.update_subscriptions(
            {name: configs for (kind, name), configs in self.image.configs.items()
             if kind == ConfigResourceType.CLIENT_METRICS})

    def shutdown(self) -> None:
        """Answer the requests parked in purgatories and stop the timers (what can stop
        without waiting; ``close`` stops the rest first)."""
        self.share_partitions.shutdown()
        for coordinator in self.coordinators:
            coordinator.shutdown()
        self.purgatory_timer.cancel()
        self.replica_manager.shutdown()

    async def close(self) -> None:
        """Stop every service: their tasks and connections first (the share-partition
        manager's writes before the persister they go through, the persister before the
        share coordinator it calls), then replication, then what ``shutdown`` stops."""
        await self.transaction_coordinator.close()
        await self.txn_verification.close()
        self.share_partitions.shutdown()
        await self.share_offsets.close()
        await self.share_persister.close()
        await self.dead_letters.close()
        await self.replica_fetchers.shutdown()
        await self.log_dir_moves.shutdown()
        await self.alter_partitions.close()
        await self.assignments.close()
        self.shutdown()
