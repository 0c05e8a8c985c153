"""A node: a broker, a controller, or both (``process.roles``), around one KRaft client.

Every node runs a Raft replica of ``__cluster_metadata`` (a voter if it is a
controller, an observer if only a broker) and a MetadataPublisher that applies what the
quorum commits to the node's MetadataImage. A controller adds the QuorumController,
active on whichever voter leads. A broker adds its logs, partitions and group
coordinator; it registers with the active controller, waits until it has caught up with
the metadata and is unfenced, and only then serves its listeners.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ottla.broker.broker import Broker
from ottla.broker.quota.client_quota_callback import load_callback
from ottla.broker.quota.connection_rate_quota import ConnectionRateQuotas
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.telemetry.client_telemetry_exporter import ClientTelemetryExporter
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.client.security import ClientSecurity, client_security
from ottla.common.features import METADATA_VERSION
from ottla.common.server_config import KafkaConfig
from ottla.common.tasks import within
from ottla.common.topics import METADATA_PARTITION_DIR, METADATA_TOPIC
from ottla.common.uuids import parse_kafka_uuid
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata.bootstrap import read_bootstrap
from ottla.metadata.delta import MetadataDelta
from ottla.metadata.image import MetadataImage
from ottla.raft.description import QuorumDescription, ReplicaDescription
from ottla.raft.quorum import RaftConfig
from ottla.raft.voter_set import Endpoint, ReplicaKey, VoterNode, VoterSet
from ottla.security.authorizer import StandardAuthorizer, authorizer_configured
from ottla.security.authorizer_metrics import AuthorizerMetrics
from ottla.security.ssl_factory import SslFactory
from ottla.server.apis import broker_dispatcher, controller_dispatcher
from ottla.server.broker_lifecycle import BrokerLifecycle, BrokerState
from ottla.server.controller_apis import ControllerServices
from ottla.server.controller_channel import ControllerChannel
from ottla.server.controller_driver import ControllerDriver
from ottla.server.controller_registration_manager import ControllerRegistrationManager
from ottla.server.cordoned_log_dirs import CordonedLogDirs
from ottla.server.dynamic_listener_ssl import DynamicListenerSsl
from ottla.server.listener_security import listener_security
from ottla.server.memory_pool import MemoryPool
from ottla.server.metadata_publisher import MetadataPublisher
from ottla.server.metrics.log_flush_stats import LogFlushStats
from ottla.server.metrics.metadata_batch_stats import MetadataBatchStats
from ottla.server.metrics.request_metrics import RequestChannelMetrics
from ottla.server.network import ConnectionQuotas, KafkaServer
from ottla.server.raft_driver import RaftDriver
from ottla.server.request_dispatcher import RequestDispatcher
from ottla.storage.cleaner import LogCleaner
from ottla.storage.log_manager import LogManager
from ottla.storage.meta_properties import MetaProperties, MetaPropertiesError, check_log_dirs
from ottla.timeline import SnapshotRegistry

if TYPE_CHECKING:
    from ottla.server.metrics.endpoint import MetricsEndpoint
    from ottla.server.metrics.event_loop_idle import EventLoopIdle

log = logging.getLogger(__name__)

OPEN_LOGS_SLICE_S = 0.02
"""How long one loop turn may spend opening new logs once the broker serves clients."""


class Node:
    def __init__(self, config: KafkaConfig, clock: Any = time.time) -> None:
        self.config = config
        self.clock = clock
        self.servers: list[KafkaServer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self._serving_logs = False
        self._opening_logs = False
        self._cleaning: asyncio.Future[Any] | None = None
        self._cleaner_due = 0.0  # time.monotonic() of the cleaner's next look for work
        self._validation: ThreadPoolExecutor | None = None
        self.fault: BaseException | None = None
        self.raft: RaftDriver | None = None
        self.controller_driver: ControllerDriver | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.controller_registration: ControllerRegistrationManager | None = None
        self.log_manager: LogManager | None = None
        self.cleaner: LogCleaner | None = None
        self.broker: Broker | None = None
        """The broker role (None on a node that is only a controller)."""
        self.channel: ControllerChannel | None = None
        self.listener_ssl: DynamicListenerSsl | None = None
        """The node's TLS (its listeners', its own connections') under dynamic keystore
        and truststore configs."""
        self.controller_security: ClientSecurity | None = None
        """How this node reaches the controllers (the Raft client and the channel)."""
        self.cordoned: CordonedLogDirs | None = None
        """The broker's ``cordoned.log.dirs`` (KIP-1066), static and dynamic."""
        self.authorizer: StandardAuthorizer | None = None
        if authorizer_configured(config):
            self.authorizer = StandardAuthorizer.from_config(config.originals)
            self.authorizer.loaded = False  # until the metadata publisher has caught up
        """Kafka's StandardAuthorizer over the image's ACLs, which every listener of the
        node authorizes with (None without ``authorizer.class.name``: nothing is checked)."""
        self.quota_callback = load_callback(config.originals)
        """``client.quota.callback.class``, made at once so that a bad name stops the node
        before it starts (``ConfigError``)."""
        self.authorizer_metrics: AuthorizerMetrics | None = None
        """Every decision of the authorizer, whichever role's listener asked (as Kafka's
        two authorizers of a combined node share their sensors)."""
        if self.authorizer is not None:
            self.authorizer_metrics = AuthorizerMetrics(config["metrics.num.samples"],
                                                        config["metrics.sample.window.ms"])
        self.request_metrics: RequestChannelMetrics | None = None
        self.log_flush_stats: LogFlushStats | None = None
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.loop_idle: EventLoopIdle | None = None
        """GET /metrics on ``prometheus.listener``, and what the connections count for it
        (both None when it is not set: nothing is counted)."""

    def _broker_state(self) -> BrokerState:
        """The broker's lifecycle state, NOT_RUNNING until its lifecycle exists."""
        return BrokerState.NOT_RUNNING if self.lifecycle is None else self.lifecycle.state

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.config.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.config.roles

    async def start(self) -> None:
        cfg = self.config
        node_id = cfg.node_id
        self.cluster_id = check_log_dirs(cfg.all_log_dirs, node_id)
        meta_props = MetaProperties.read(cfg.metadata_log_dir)
        self.directory_id = meta_props.directory_id if meta_props else None
        """The metadata log dir's directory.id, which DescribeQuorum reports."""
        now = self.now_ms()
        bootstrap = read_bootstrap(cfg.metadata_log_dir)
        self.voters = self._voters(bootstrap)
        raft_config = RaftConfig(
            election_timeout_ms=cfg["controller.quorum.election.timeout.ms"],
            fetch_timeout_ms=cfg["controller.quorum.fetch.timeout.ms"],
            election_backoff_max_ms=cfg["controller.quorum.election.backoff.max.ms"],
            request_timeout_ms=cfg["controller.quorum.request.timeout.ms"])
        controller_listeners = cfg.controller_listener_names
        self.controller_security = controller_security = client_security(
            cfg, controller_listeners[0] if controller_listeners else None,
            "sasl.mechanism.controller.protocol")
        self.raft = RaftDriver(
            node_id=node_id, cluster_id=self.cluster_id,
            voters=self.voters if cfg.quorum_voters else self._voter_set(bootstrap),
            directory=os.path.join(cfg.metadata_log_dir, METADATA_PARTITION_DIR),
            config=raft_config, clock=self.clock, on_fault=self._on_fault,
            security=controller_security, directory_id=self.directory_id,
            bootstrap_servers=self._bootstrap_servers(),
            listener=controller_listeners[0] if controller_listeners else "CONTROLLER")
        if cfg.prometheus_listener is not None:
            # Kafka's metadata log is a UnifiedLog: its segment fsyncs are timed by the
            # same LogFlushStats as the partitions' (a controller's too).
            self.log_flush_stats = LogFlushStats()
            self.raft.flush_timer = self.log_flush_stats.time
        if self.is_controller and cfg.quorum_voters and not self.raft.is_voter:
            raise MetaPropertiesError(f"controller {node_id} is not among the voters "
                                      f"{sorted(self.voters)} of controller.quorum.voters")
        self.image = MetadataImage()
        self.client_quotas = client_quotas = ClientQuotaManagers(
            cfg["quota.window.num"], cfg["quota.window.size.seconds"],
            cfg["controller.quota.window.num"], cfg["controller.quota.window.size.seconds"],
            ConnectionRateQuotas(cfg["quota.window.num"], cfg["quota.window.size.seconds"],
                                 cfg["max.connection.creation.rate"],
                                 {listener.name: cfg.listener_value(
                                     listener.name, "max.connection.creation.rate")
                                  for listener in cfg.listeners}))
        if self.quota_callback is not None:
            client_quotas.use_callback(self.quota_callback)
        self.publisher = MetadataPublisher(
            self.image, self.raft, on_change=self._on_metadata, clock=self.clock,
            snapshot_bytes=cfg["metadata.log.max.record.bytes.between.snapshots"],
            snapshot_interval_ms=cfg["metadata.log.max.snapshot.interval.ms"],
            authorizer=self.authorizer, client_quotas=client_quotas,
            cluster_id=self.cluster_id, fatal_load_errors=self.is_controller)
        if cfg.prometheus_listener is not None and self.is_broker:
            self.publisher.batch_stats = MetadataBatchStats()
        self.raft.listeners.append(self.publisher)
        if self.is_controller:
            controller = QuorumController(
                node_id, default_num_partitions=cfg["num.partitions"],
                default_replication_factor=cfg["default.replication.factor"],
                delete_topic_enable=cfg["delete.topic.enable"],
                unclean_leader_election_enable=cfg["unclean.leader.election.enable"],
                default_min_insync_replicas=cfg["min.insync.replicas"],
                registry=SnapshotRegistry(), broker_config=cfg.get,
                delegation_token_secret_key=cfg["delegation.token.secret.key"],
                delegation_token_max_lifetime_ms=cfg["delegation.token.max.lifetime.ms"],
                delegation_token_expiry_time_ms=cfg["delegation.token.expiry.time.ms"],
                quorum_node_ids=sorted(cfg.quorum_voters))
            controller.features.kraft = self.raft
            boot_records = bootstrap.records if bootstrap is not None else []
            self.controller_driver = ControllerDriver(
                controller, self.raft,
                bootstrap_records=lambda: boot_records or controller.features.bootstrap_records(),
                session_timeout_ms=cfg["broker.session.timeout.ms"],
                leader_balance_interval_s=cfg["leader.imbalance.check.interval.seconds"]
                if cfg["auto.leader.rebalance.enable"] else None,
                max_idle_interval_ms=cfg["metadata.max.idle.interval.ms"],
                token_sweep_interval_ms=cfg["delegation.token.expiry.check.interval.ms"]
                if controller.delegation_tokens.enabled else None,
                on_fault=self._on_fault, clock=self.clock)
            self.raft.listeners.append(self.controller_driver)
        self.channel = ControllerChannel(
            node_id, self.raft, self.controller_driver,
            self.voters if cfg.quorum_voters else {},  # else the metadata log's voters
            describe=self._describe_quorum if self.is_controller else None,
            security=controller_security)

        if self.is_broker:
            self.log_manager = LogManager(cfg.log_dirs, now,
                                          skip_dirs=frozenset({f"{METADATA_TOPIC}-0"}))
            if self.log_flush_stats is not None:
                self.log_manager.flush_timer = self.log_flush_stats.time
            loop = asyncio.get_running_loop()
            self.log_manager.on_roll = \
                lambda lg, base: loop.run_in_executor(None, lg.flush, base)
            self.log_manager.in_background = lambda job: loop.run_in_executor(None, job)
            self.log_manager.on_dir_offline = \
                lambda d: loop.call_soon_threadsafe(self._log_dir_failed, d)
            if cfg["log.page.cache.window.bytes"] > 0:
                self.log_manager.use_page_cache_window(cfg["log.page.cache.window.bytes"])
            self.cordoned = CordonedLogDirs(cfg, lambda: self.image, self.log_manager)
            self.log_manager.discover()
            logs = self.log_manager
            # A log moving between log dirs is not cleaned (Kafka pauses its cleaning).
            self.cleaner = LogCleaner(lambda: logs.logs if not logs.futures else {
                tp: lg for tp, lg in logs.logs.items() if tp not in logs.futures},
                now_ms=self.now_ms())
            replica_manager = ReplicaManager(node_id, self.log_manager, self._topic_defaults,
                                             cfg["max.decompressed.batch.bytes"])
            self.broker = Broker(node_id=node_id, cluster_id=self.cluster_id, config=cfg,
                                 image=self.image, replica_manager=replica_manager,
                                 controller=self.channel, clock=self.clock,
                                 client_quotas=client_quotas)
            # One thread for large compressed batches: one decompression's memory at a time.
            self._validation = ThreadPoolExecutor(1, thread_name_prefix="validation")
            raft = self.raft
            self.broker.kraft_version = lambda: raft.kraft_version
            self.broker.offload = lambda job: loop.run_in_executor(self._validation, job)
            self.broker.start_replication()

        if cfg.prometheus_listener is not None:
            self.request_metrics = RequestChannelMetrics()
            if self.broker is not None:
                self.broker.topic_stats = BrokerTopicStats()
                # The receiver of KIP-714 client telemetry: what clients push is served
                # with the node's metrics.
                self.broker.client_metrics.receiver = ClientTelemetryExporter(
                    cfg["telemetry.max.bytes"])
        await self._bind()
        await self._serve_metrics()
        if self.is_controller:  # what a voter tells the leader with UpdateRaftVoter
            self.raft.set_local_listeners([(name, host, port) for name, host, port, _
                                           in self._controller_endpoints()])
        self.raft.start()
        if self.is_controller:
            self.controller_registration = ControllerRegistrationManager(
                node_id=node_id, image=self.image, channel=self.channel,
                endpoints=self._controller_endpoints(), now_ms=self.now_ms)
            self.controller_registration.start()
        if self.is_broker:
            await self._start_broker()
        self._tasks.append(asyncio.ensure_future(self._housekeeping()))

    def _voters(self, bootstrap: Any) -> dict[int, tuple[str, int]]:
        """controller.quorum.voters, else the voters ``storage format`` recorded."""
        voters = self.config.quorum_voters
        if not voters and bootstrap is not None:
            voters = {v.node_id: (v.host, v.port) for v in bootstrap.voters}
        if not voters and not self.config["controller.quorum.bootstrap.servers"]:
            raise MetaPropertiesError("controller.quorum.voters is not set and the metadata "
                                      "log dir names no initial controllers")
        return voters

    @staticmethod
    def _voter_set(bootstrap: Any) -> VoterSet:
        """A dynamic quorum's (kraft.version 1) voters as ``storage format`` wrote them;
        the metadata log's VotersRecords supersede them."""
        voters = bootstrap.voters if bootstrap is not None else []
        return VoterSet(tuple(
            VoterNode(ReplicaKey(v.node_id, v.directory_id or None),
                      (Endpoint("CONTROLLER", v.host, v.port),)) for v in voters))

    def _bootstrap_servers(self) -> list[tuple[str, int]]:
        """controller.quorum.bootstrap.servers, as (host, port)."""
        servers = []
        for entry in self.config["controller.quorum.bootstrap.servers"]:
            host, _, port = entry.strip().rpartition(":")
            if host and port.isdigit():
                servers.append((host.strip("[]"), int(port)))
        return servers

    async def _bind(self) -> None:
        """Bind every listener; controller listeners serve at once, broker listeners once
        the broker is unfenced (so no client sees a broker that has not caught up)."""
        cfg = self.config
        dispatchers: dict[str, RequestDispatcher[Any]] = {}
        if self.broker is not None:
            dispatchers["broker"] = broker_dispatcher(self.broker, self.clock)
            dispatchers["broker"].disconnect_listeners.append(
                self.broker.share_partitions.on_disconnect)
            client_metrics = self.broker.client_metrics
            dispatchers["broker"].disconnect_listeners.append(
                lambda listener, host, port: client_metrics.on_disconnect(
                    (listener, host, port)))
        if self.is_controller:
            assert self.channel is not None
            dispatchers["controller"] = controller_dispatcher(ControllerServices(
                node_id=cfg.node_id, cluster_id=self.cluster_id, config=cfg,
                image=self.image, channel=self.channel, raft=self.raft, clock=self.clock,
                mutation_quotas=self.client_quotas.controller_mutation),
                self.clock)
        for dispatcher in dispatchers.values():
            dispatcher.authorizer = self.authorizer
            dispatcher.authorizer_metrics = self.authorizer_metrics
        controller_names = set(cfg.controller_listener_names)
        socket_options = {k: cfg[k] for k in ("socket.send.buffer.bytes",
                                              "socket.receive.buffer.bytes")
                          if k in cfg.explicit}
        queued = cfg["queued.max.request.bytes"]
        quotas = ConnectionQuotas(
            MemoryPool(queued if queued > 0 else None), cfg["max.connections"],
            cfg["max.connections.per.ip"], cfg.connection_overrides,
            cfg["connections.max.idle.ms"], rates=self.client_quotas.connection_rates,
            rate_exempt=frozenset(controller_names) | (
                {cfg["inter.broker.listener.name"]} if len(cfg.broker_listeners) > 1
                else set()),
            clock=self.clock, request_quota=self.client_quotas.request,
            delay_queues=self.client_quotas.delay_queues)
        for listener in cfg.listeners:
            kind = "controller" if listener.name in controller_names else "broker"
            if kind not in cfg.roles:
                continue
            server = KafkaServer(dispatchers[kind], listener.name, listener.host,
                                 listener.port, cfg["socket.request.max.bytes"],
                                 socket_options, quotas,
                                 listener_security(cfg, listener, lambda: self.image),
                                 self.request_metrics)
            await server.start(serve=kind == "controller")
            self.servers.append(server)
            log.info("Listening on %s://%s:%d", listener.name, listener.host or "0.0.0.0",
                     server.port)
        clients = [self.broker.inter_broker_security if self.broker is not None else None,
                   self.controller_security]
        self.listener_ssl = DynamicListenerSsl(cfg, lambda: self.image, [
            *(s.security.ssl_factory for s in self.servers
              if s.security.ssl_factory is not None),
            *(c.tls for c in clients if c is not None and isinstance(c.tls, SslFactory))])
        if self.broker is not None:
            self.broker.validate_dynamic_config = self._validate_dynamic_config

    def _validate_dynamic_config(self, per_broker: Mapping[str, str | None]) -> None:
        """This broker's proposed dynamic configs, as Kafka's DynamicBrokerConfig checks
        them: the new config's values (``cordoned.log.dirs``), then the listeners'."""
        if self.cordoned is not None:
            self.cordoned.validate(per_broker)
        if self.listener_ssl is not None:
            self.listener_ssl.validate(per_broker)

    def _controller_endpoints(self) -> list[tuple[str, str, int, int]]:
        """Where this controller listens, as it registers: a port 0 as bound."""
        bound = {s.listener_name: s.port for s in self.servers}
        return [(ln.name, ln.host, ln.port or bound.get(ln.name, 0), ln.protocol_id)
                for ln in self.config.advertised_controller_listeners]

    async def _serve_metrics(self) -> None:
        """GET /metrics on ``prometheus.listener``, from the node's start (a broker's
        metrics before it is unfenced too)."""
        where = self.config.prometheus_listener
        if where is None or self.request_metrics is None:
            return
        # Imported only here: prometheus_client (http.server, email...) costs a node
        # that serves no metrics a noticeable part of its start.
        from ottla.server.metrics.event_loop_idle import EventLoopIdle
        from ottla.server.metrics.node_metrics import MetricsEndpoint, node_registry

        self.loop_idle = EventLoopIdle()
        self.loop_idle.start(asyncio.get_running_loop())
        registry = node_registry(image=self.image, requests=self.request_metrics,
                                 servers=lambda: self.servers, broker=self.broker,
                                 controller=self.controller_driver, raft=self.raft,
                                 loop_idle=self.loop_idle, log_flush=self.log_flush_stats,
                                 client_quotas=(self.client_quotas, self.now_ms),
                                 publisher=self.publisher,
                                 authorizer=(self.authorizer, self.authorizer_metrics,
                                             self.now_ms) if self.authorizer_metrics else None,
                                 broker_state=self._broker_state,
                                 cleaner=self.cleaner
                                 if self.config["log.cleaner.enable"] else None)
        self.metrics_endpoint = MetricsEndpoint(registry, *where, prepare=registry.prepare)
        await self.metrics_endpoint.start()
        log.info("Serving metrics on http://%s:%d/metrics", where[0] or "0.0.0.0",
                 self.metrics_endpoint.port)

    async def _start_broker(self) -> None:
        """Register, wait to be caught up and unfenced, then serve clients."""
        assert self.log_manager is not None and self.channel is not None
        assert self.broker is not None
        cfg = self.config
        bound = {s.listener_name: s.port for s in self.servers}
        endpoints = [(ln.name, ln.host, ln.port or bound.get(ln.name, ln.port), ln.protocol_id)
                     for ln in cfg.advertised_listeners]
        directory_ids = [parse_kafka_uuid(m.directory_id)
                         for m in (MetaProperties.read(d) for d in cfg.log_dirs)
                         if m is not None and m.directory_id]
        self.lifecycle = BrokerLifecycle(
            broker=self.broker, channel=self.channel,
            applied_offset=lambda: self.publisher.applied_offset, endpoints=endpoints,
            rack=cfg["broker.rack"], heartbeat_interval_ms=cfg["broker.heartbeat.interval.ms"],
            session_timeout_ms=cfg["broker.session.timeout.ms"], directory_ids=directory_ids,
            previous_broker_epoch=self.log_manager.previous_broker_epoch,
            log_dir_failure_timeout_ms=cfg["log.dir.failure.timeout.ms"],
            on_fatal=lambda why: self._on_fault(RuntimeError(why)),
            metadata_level=lambda: self.broker.image.features.get(METADATA_VERSION, 0),
            cordoned_dirs=self.cordoned.directory_ids if self.cordoned is not None else list)
        if self.cordoned is not None:
            self.cordoned.on_change = self.lifecycle.propagate_directory_cordoned
        for failed in sorted(self.log_manager.offline_dirs):  # failed before registering
            directory = self.log_manager.directory_id(failed)
            if directory is not None:
                self.lifecycle.propagate_directory_failure(directory)
        self.lifecycle.start()
        unfenced = asyncio.ensure_future(self.lifecycle.unfenced.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        await asyncio.wait([unfenced, stopped], return_when=asyncio.FIRST_COMPLETED)
        unfenced.cancel()
        stopped.cancel()
        if self._stopped.is_set():
            return
        # Caught up with the metadata: whatever it does not assign here is stray.
        self.log_manager.delete_stray(set(self.broker.replica_manager.partitions))
        self.log_manager.started()
        self._serving_logs = True
        for server in self.servers:
            if server.listener_kind == "broker":
                await server.start_serving()

    def _topic_defaults(self, image: MetadataImage) -> dict[str, Any]:
        dynamic = {**image.broker_configs(None), **image.broker_configs(self.config.node_id)}
        return self.config.topic_defaults(dynamic)

    def _on_metadata(self, delta: MetadataDelta) -> None:
        """Committed metadata touched topics, brokers or configs: follow it here.

        Once serving, new logs are opened a slice of loop time at a time (a topic of
        thousands of partitions held every client up for seconds); before, all at once,
        because the stray-log sweep at startup deletes what is not open."""
        if self.controller_registration is not None:
            self.controller_registration.on_metadata()
        if self.listener_ssl is not None and not self._stopped.is_set() and (
                delta.full or str(self.config.node_id) in delta.broker_config_resources):
            self.listener_ssl.update()
        if self._stopped.is_set() or self.broker is None:
            return
        if self.cordoned is not None and (
                delta.full or str(self.config.node_id) in delta.broker_config_resources):
            self.cordoned.update()
        now = self.now_ms()
        budget = OPEN_LOGS_SLICE_S if self._serving_logs else None
        more = self.broker.replica_manager.apply_delta(self.image, delta, now, budget)
        self.broker.on_metadata(delta, now)
        if more and not self._opening_logs:
            self._opening_logs = True
            asyncio.get_running_loop().call_soon(self._open_more_logs)

    def _open_more_logs(self) -> None:
        """The logs a budgeted pass left unopened: a full pass against the image finishes
        them (and follows whatever changed meanwhile)."""
        self._opening_logs = False
        self._on_metadata(MetadataDelta(full=True))

    def _log_dir_failed(self, log_dir: str) -> None:
        """A log dir went offline (Kafka's ``ReplicaManager.handleLogDirFailure``): its
        partitions stop here and answer KAFKA_STORAGE_ERROR, and the controller is told
        at once, so that it moves their leaderships. With every log dir offline the node
        stops, as a Kafka broker halts."""
        if self._stopped.is_set() or self.broker is None or self.log_manager is None:
            return
        logs = self.log_manager
        self.broker.replica_manager.on_dir_offline(log_dir, self.now_ms())
        if all(d in logs.offline_dirs for d in logs.log_dirs):
            self._on_fault(RuntimeError(f"all log dirs in {', '.join(logs.log_dirs)} have "
                                        "failed"))
            return
        directory = logs.directory_id(log_dir)
        if directory is None:
            log.error("Log directory %s has no directory.id: the controller cannot be told "
                      "it is offline", log_dir)
        elif self.lifecycle is not None:
            self.lifecycle.propagate_directory_failure(directory)

    def _describe_quorum(self) -> QuorumDescription:
        """DescribeQuorum's view of the metadata partition (complete on the leader)."""
        assert self.raft is not None
        replica = self.raft.replica
        own_directory = self.directory_id
        now = self.now_ms()
        voters, observers = replica.replica_states(self.raft.now_ms())

        def describe(entry: tuple[ReplicaKey, int, int, int]) -> ReplicaDescription:
            key, end, fetched, caught_up = entry
            if key.id == self.config.node_id and key.directory_id in (None, own_directory):
                return ReplicaDescription(key.id, own_directory, end, now, now)
            return ReplicaDescription(key.id, key.directory_id, end, fetched, caught_up)
        assert self.raft is not None
        return QuorumDescription(
            -1 if replica.leader_id is None else replica.leader_id, replica.epoch,
            replica.high_watermark, [describe(v) for v in voters],
            [describe(o) for o in observers], endpoints=self.raft.voter_endpoints())

    def _on_fault(self, error: BaseException) -> None:
        """The metadata log or the controller failed: the node cannot go on safely."""
        log.critical("Fatal fault: %s", error)
        self.fault = error
        self._stopped.set()

    async def _housekeeping(self) -> None:
        """Periodic broker tasks: flush.ms, checkpoints, retention, the cleaner, producer
        expiry. (The controller's periodic tasks run in its driver, when active.)"""
        cfg = self.config
        checkpoint_every = cfg["log.flush.offset.checkpoint.interval.ms"] / 1000
        retention_every = cfg["log.retention.check.interval.ms"] / 1000
        expire_every = 600.0
        isr_every = cfg["replica.lag.time.max.ms"] / 2000
        marks_every = cfg["replica.high.watermark.checkpoint.interval.ms"] / 1000
        last_checkpoint = last_expire = last_retention = last_isr = last_marks = \
            time.monotonic()
        broker, logs = self.broker, self.log_manager
        if broker is None or logs is None:
            return  # a controller only
        while True:
            await asyncio.sleep(min(1.0, retention_every, isr_every))
            now = self.now_ms()
            try:
                logs.flush_dirty(now)
                mono = time.monotonic()
                if mono - last_retention >= retention_every:
                    last_retention = mono
                    logs.cleanup(now)
                if (cfg["log.cleaner.enable"] and self._cleaning is None
                        and mono >= self._cleaner_due):
                    # As Kafka's cleaner threads: look again log.cleaner.backoff.ms after
                    # finding nothing to clean, at once (the next tick) after a clean.
                    self._cleaner_due = mono + broker.dynamic_config(
                        "log.cleaner.backoff.ms") / 1000
                    self._start_cleaning(now)
                if mono - last_isr >= isr_every:
                    last_isr = mono
                    broker.replica_manager.maybe_shrink_isr(
                        now, cfg["replica.lag.time.max.ms"])
                if mono - last_marks >= marks_every:
                    last_marks = mono
                    logs.checkpoint_high_watermarks()
                if mono - last_checkpoint >= checkpoint_every:
                    last_checkpoint = mono
                    logs.checkpoint()
                if mono - last_expire >= expire_every:
                    last_expire = mono
                    expiration = broker.dynamic_config("producer.id.expiration.ms")
                    for lg in logs.logs.values():
                        lg.producer_state.remove_expired(now, expiration)
            except OSError:
                log.exception("Housekeeping failed")

    def _start_cleaning(self, now_ms: int) -> None:
        """Compact the dirtiest log: the rewrite on a worker thread, the swap back on the
        loop, so requests keep flowing while a big log is cleaned."""
        cleaner = self.cleaner
        assert cleaner is not None
        chosen = cleaner.pick(now_ms)
        if chosen is None:
            return
        loop = asyncio.get_running_loop()
        prepared = loop.run_in_executor(None, cleaner.prepare, *chosen, now_ms)

        def done(future: asyncio.Future[Any]) -> None:
            self._cleaning = None
            try:
                plan = future.result()
                # Not if the log went meanwhile (deleted, or moved to another log dir).
                if self.log_manager is not None and \
                        self.log_manager.logs.get(chosen[0]) is chosen[1]:
                    cleaner.commit(plan)
                    self._cleaner_due = 0.0
                else:
                    for _, swap in plan.swaps:
                        os.unlink(swap)
            except Exception:
                log.exception("Cleaning %s-%d failed", *chosen[0])
        self._cleaning = prepared
        prepared.add_done_callback(done)

    @property
    def bound_ports(self) -> dict[str, int]:
        return {s.listener_name: s.port for s in self.servers}

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def request_stop(self) -> None:
        self._stopped.set()

    async def stop(self) -> None:
        if self.lifecycle is not None:
            await self.lifecycle.stop()  # controlled shutdown while the quorum is reachable
        if self.controller_registration is not None:
            await self.controller_registration.stop()
        if self.raft is not None:
            await self.raft.resign()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        if self.loop_idle is not None:
            self.loop_idle.stop()
        for server in self.servers:
            await server.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self._cleaning is not None:
            try:
                await within(asyncio.shield(self._cleaning), 30)
            except (TimeoutError, Exception):
                pass
        if self.broker is not None:
            await self.broker.close()
        if self._validation is not None:
            self._validation.shutdown(wait=True, cancel_futures=True)
        if self.log_manager is not None:
            self.log_manager.shutdown(
                broker_epoch=self.broker.broker_epoch if self.broker is not None else -1)
        if self.channel is not None:
            await self.channel.close()
        if self.raft is not None:
            await self.raft.stop()
        if self.quota_callback is not None:
            try:
                self.quota_callback.close()
            except Exception:
                log.exception("Closing the client.quota.callback.class failed")
        log.info("Shut down cleanly")
