"""A node: wires storage, the metadata quorum, the controller and the broker together,
serves its listeners, and shuts down cleanly."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.group_coordinator import GroupCoordinatorService
from ottla.broker.handlers import load_all
from ottla.broker.replica_manager import ReplicaManager
from ottla.controller.quorum_controller import ControllerResult, QuorumController
from ottla.metadata import records as meta
from ottla.metadata.bootstrap import read_bootstrap
from ottla.metadata.image import MetadataImage
from ottla.raft.single_voter import METADATA_TOPIC, SingleVoterRaft
from ottla.server.config import KafkaConfig, validate_dynamic_broker_config
from ottla.server.controller_driver import ControllerDriver
from ottla.server.network import KafkaServer, RequestDispatcher
from ottla.storage.cleaner import LogCleaner
from ottla.storage.log_manager import LogManager
from ottla.storage.meta_properties import MetaProperties, check_log_dirs

log = logging.getLogger(__name__)

_TOPIC_RECORDS = (meta.TopicRecord, meta.PartitionRecord, meta.PartitionChangeRecord,
                  meta.RemoveTopicRecord, meta.ConfigRecord, meta.RegisterBrokerRecord,
                  meta.UnfenceBrokerRecord, meta.FenceBrokerRecord)


class Node:
    def __init__(self, config: KafkaConfig, clock: Any = time.time) -> None:
        self.config = config
        self.clock = clock
        self.servers: list[KafkaServer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self._cleaning: asyncio.Future[Any] | None = None
        self.fault: BaseException | None = None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def start(self) -> None:
        cfg = self.config
        node_id = cfg.node_id
        dirs = cfg.all_log_dirs
        self.cluster_id = check_log_dirs(dirs, node_id)
        now = self.now_ms()

        self.raft = SingleVoterRaft(cfg.metadata_log_dir, node_id, now)
        self.controller = QuorumController(
            node_id, default_num_partitions=cfg["num.partitions"],
            default_replication_factor=cfg["default.replication.factor"],
            delete_topic_enable=cfg["delete.topic.enable"],
            broker_config_validator=validate_dynamic_broker_config)
        self.image = MetadataImage()
        replayed = 0
        for offset, record in self.raft.read_committed():
            self.controller.replay(record, offset)
            self.image.replay(record, offset)
            replayed += 1
        log.info("Replayed %d metadata records (epoch %d)", replayed, self.raft.epoch)

        self.log_manager = LogManager(cfg.log_dirs, now,
                                      skip_dirs=frozenset({f"{METADATA_TOPIC}-0"}))
        loop = asyncio.get_running_loop()
        self.log_manager.on_roll = lambda lg, base: loop.run_in_executor(None, lg.flush, base)
        self.log_manager.discover()
        self.cleaner = LogCleaner(lambda: self.log_manager.logs)
        self.replica_manager = ReplicaManager(node_id, self.log_manager, self._topic_defaults)
        self.driver = ControllerDriver(self.controller, self.raft, self._publish,
                                       self._on_fault, self.clock)
        meta_props = MetaProperties.read(cfg.metadata_log_dir)
        self.driver.directory_id = meta_props.directory_id if meta_props else None
        controller_names = set(cfg.controller_listener_names)
        self.driver.endpoints = [(ln.name, ln.host or "localhost", ln.port)
                                 for ln in cfg.listeners if ln.name in controller_names]
        self.broker = Broker(node_id=node_id, cluster_id=self.cluster_id, config=cfg,
                             image=self.image, replica_manager=self.replica_manager,
                             controller=self.driver, clock=self.clock)
        self.group_coordinator = GroupCoordinatorService(self.broker, cfg)
        self.broker.group_coordinator = self.group_coordinator
        self.replica_manager.apply_metadata(self.image, now)
        self.log_manager.delete_stray(set(self.replica_manager.partitions))
        self.log_manager.started()
        self.group_coordinator.on_metadata(now)

        if self.raft.end_offset == 0:
            # A new cluster: start from the bootstrap snapshot `storage format` wrote.
            boot = read_bootstrap(cfg.metadata_log_dir)
            first = boot.records if boot is not None and boot.records else None
            await self.driver.submit(
                lambda c: ControllerResult(first or c.bootstrap_records()))
        registry = load_all()
        dispatcher = RequestDispatcher(self.broker, registry)
        controller_names = set(cfg.controller_listener_names)
        socket_options = {k: cfg[k] for k in ("socket.send.buffer.bytes",
                                              "socket.receive.buffer.bytes")
                          if k in cfg.explicit}
        for listener in cfg.listeners:
            kind = "controller" if listener.name in controller_names else "broker"
            if kind == "broker" and "broker" not in cfg.roles:
                continue
            if kind == "controller" and "controller" not in cfg.roles:
                continue
            server = KafkaServer(self.broker, dispatcher, listener.name, kind, listener.host,
                                 listener.port, cfg["socket.request.max.bytes"],
                                 socket_options)
            await server.start()
            self.servers.append(server)
            log.info("Listening on %s://%s:%d", listener.name, listener.host or "0.0.0.0",
                     server.port)
        await self._register_broker()
        self._tasks.append(asyncio.ensure_future(self._housekeeping()))

    async def _register_broker(self) -> None:
        """Register after binding, so an advertised port 0 becomes the bound port."""
        bound = {s.listener_name: s.port for s in self.servers}
        endpoints = []
        for ln in self.config.advertised_listeners:
            port = ln.port or bound.get(ln.name, ln.port)
            endpoints.append((ln.name, ln.host, port, ln.protocol_id))
        incarnation = uuid.uuid4()
        rack = self.config["broker.rack"]
        epoch = await self.driver.submit(
            lambda c: c.register_broker(self.config.node_id, incarnation, endpoints, rack,
                                        self.raft.end_offset))
        self.broker.broker_epoch = epoch

    def _topic_defaults(self, image: MetadataImage) -> dict[str, Any]:
        dynamic = {**image.broker_configs(None), **image.broker_configs(self.config.node_id)}
        return self.config.topic_defaults(dynamic)

    def _publish(self, committed: list[tuple[int, Any]]) -> None:
        """Apply committed metadata records to the broker's image and its partitions."""
        touched = False
        for offset, record in committed:
            self.image.replay(record, offset)
            touched = touched or isinstance(record, _TOPIC_RECORDS)
        if touched:
            now = self.now_ms()
            self.replica_manager.apply_metadata(self.image, now)
            self.group_coordinator.on_metadata(now)

    def _on_fault(self, error: BaseException) -> None:
        """A metadata write failed: the node cannot go on safely; stop it."""
        log.critical("Fatal fault in the metadata log: %s", error)
        self.fault = error
        self._stopped.set()

    async def _housekeeping(self) -> None:
        """Periodic tasks: flush.ms, the recovery-point checkpoint, producer expiry."""
        cfg = self.config
        checkpoint_every = cfg["log.flush.offset.checkpoint.interval.ms"] / 1000
        retention_every = cfg["log.retention.check.interval.ms"] / 1000
        expire_every = 600.0
        balance_every = cfg["leader.imbalance.check.interval.seconds"]
        last_checkpoint = last_expire = last_retention = last_balance = time.monotonic()
        while True:
            await asyncio.sleep(min(1.0, retention_every))
            now = self.now_ms()
            try:
                self.log_manager.flush_dirty(now)
                mono = time.monotonic()
                if mono - last_retention >= retention_every:
                    last_retention = mono
                    self.log_manager.cleanup(now)
                    if cfg["log.cleaner.enable"] and self._cleaning is None:
                        self._start_cleaning(now)
                if mono - last_checkpoint >= checkpoint_every:
                    last_checkpoint = mono
                    self.log_manager.checkpoint()
                await self._fence_stale_brokers(now)
                if cfg["auto.leader.rebalance.enable"] and mono - last_balance >= balance_every:
                    last_balance = mono
                    moved = await self.driver.submit(lambda c: c.balance_partition_leaders())
                    if moved:
                        log.info("Moved %d leaderships back to preferred replicas", len(moved))
                if mono - last_expire >= expire_every:
                    last_expire = mono
                    expiration = self.broker.dynamic_config("producer.id.expiration.ms")
                    for lg in self.log_manager.logs.values():
                        lg.producer_state.remove_expired(now, expiration)
            except OSError:
                log.exception("Housekeeping failed")

    async def _fence_stale_brokers(self, now_ms: int) -> None:
        """Fence brokers whose heartbeats stopped (this process's broker cannot miss)."""
        timeout = self.config["broker.session.timeout.ms"]
        try:
            fenced = await self.driver.submit(lambda c: c.fence_stale_brokers(
                now_ms, timeout, frozenset({self.config.node_id})))
        except Exception:
            log.exception("Fencing stale brokers failed")
            return
        for broker_id in fenced or ():
            log.info("Fenced broker %d: no heartbeat for %d ms", broker_id, timeout)

    def _start_cleaning(self, now_ms: int) -> None:
        """Compact the dirtiest log: the rewrite on a worker thread, the swap back on the
        loop, so requests keep flowing while a big log is cleaned."""
        chosen = self.cleaner.pick(now_ms)
        if chosen is None:
            return
        loop = asyncio.get_running_loop()
        prepared = loop.run_in_executor(None, self.cleaner.prepare, *chosen, now_ms)

        def done(future: asyncio.Future[Any]) -> None:
            self._cleaning = None
            try:
                plan = future.result()
                if chosen[0] in self.log_manager.logs:
                    self.cleaner.commit(plan)
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
                await asyncio.wait_for(asyncio.shield(self._cleaning), 30)
            except (TimeoutError, Exception):
                pass
        if hasattr(self, "group_coordinator"):
            self.group_coordinator.shutdown()
        if hasattr(self, "log_manager"):
            self.log_manager.shutdown()
        if hasattr(self, "raft"):
            self.raft.close()
        log.info("Shut down cleanly")
