"""Applies committed metadata to this node's MetadataImage, and takes its snapshots.

Every node, broker or controller, follows ``__cluster_metadata`` through its Raft
replica (a voter on controllers, an observer on brokers: seed 003's "brokers pull"),
and this publisher turns each committed batch into image updates, in offset order.
The image is what the broker serves Metadata, DescribeCluster and configs from; after
a batch that touched topics, brokers or configs, ``on_change`` lets the node update its
partitions and coordinators. The records of a metadata transaction reach the image
together, at its EndTransactionRecord, or never (AbortTransactionRecord). The node's
authorizer (if ``authorizer.class.name`` is set) follows the image's ACLs: each batch's
ACL changes, or all of them again after a snapshot (Kafka's AclPublisher); a broker's
client quota managers follow its client quotas the same way (Kafka's
DynamicClientQuotaPublisher).

Snapshots: once ``metadata.log.max.record.bytes.between.snapshots`` bytes of batches
have been applied since the last one (or ``metadata.log.max.snapshot.interval.ms`` has
passed with something new), the image is written as a ``.checkpoint`` file at the
applied offset (by the Raft driver, off the event loop) and the log before it is
dropped once the file is durable. A replica that falls behind the log start loads the
leader's snapshot instead of the entries.

What it applied is what Kafka's ``broker-metadata-metrics`` tell: the last offset, its
batch's append time (the batch's timestamp; a snapshot's LastContainedLogTimestamp),
and the errors met. As in Kafka, a record that fails to replay on a node without the
controller role is logged, counted (``metadata-load-error-count``) and skipped, where a
controller stops (its state machine cannot skip one); a publisher (the node's
partitions and coordinators, the ACLs, the client quotas) that fails on a delta is
logged and counted (``metadata-apply-error-count``) on every node, and the next delta
is applied all the same.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot
from ottla.metadata.delta import MetadataDelta
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.protocol.records import read_header
from ottla.raft.messages import Committed
from ottla.security.authorizer import StandardAuthorizer
from ottla.server.metrics.metadata_batch_stats import MetadataBatchStats
from ottla.server.raft_driver import RaftDriver

log = logging.getLogger(__name__)

class MetadataPublisher:
    def __init__(self, image: MetadataImage, raft: RaftDriver, *,
                 on_change: Callable[[MetadataDelta], None] = lambda delta: None,
                 snapshot_bytes: int = 20 << 20, snapshot_interval_ms: int = 3600000,
                 clock: Callable[[], float] = time.time,
                 authorizer: StandardAuthorizer | None = None,
                 client_quotas: ClientQuotaManagers | None = None,
                 cluster_id: str = "", fatal_load_errors: bool = True) -> None:
        self.image = image
        self.raft = raft
        self.on_change = on_change
        self.authorizer = authorizer
        """Kept current with the image's ACLs (None: the node authorizes nothing)."""
        self.client_quotas = client_quotas
        """Kept current with the image's client quotas (None: a node without a broker)."""
        self.cluster_id = cluster_id
        """What a client quota callback's ``Cluster`` says."""
        self.snapshot_bytes = snapshot_bytes
        self.snapshot_interval_ms = snapshot_interval_ms
        self.clock = clock
        self.applied_end = 0
        """Offsets below this are applied to the image."""
        self.last_applied_timestamp = -1
        """The append time of the batch (or snapshot) of the last offset applied; -1 for
        none (Kafka's empty MetadataProvenance)."""
        self.fatal_load_errors = fatal_load_errors
        """A record that fails to replay stops the node (a controller) rather than being
        counted and skipped (a broker)."""
        self.load_errors = 0
        self.apply_errors = 0
        self.batch_stats: MetadataBatchStats | None = None
        """Each batch's records and replay time, when the node serves metrics."""
        self.snapshots_loaded = 0
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = self.now_ms()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.loader = MetadataLoader(image)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def applied_offset(self) -> int:
        """The last offset applied (-1 for none): what BrokerHeartbeat reports."""
        return self.applied_end - 1

    async def wait_for(self, end_offset: int) -> None:
        """Until the image has every offset below ``end_offset``."""
        if self.applied_end >= end_offset:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((end_offset, future))
        await future

    # --- RaftListener ------------------------------------------------------------------

    def on_committed(self, committed: Committed) -> None:
        changed = False
        if committed.snapshot is not None:
            end = committed.snapshot.end_offset
            snapshot = decode_snapshot(committed.snapshot.data)
            self.loader.load_snapshot(snapshot.records, end)
            self.applied_end = end
            self.last_applied_timestamp = snapshot.last_contained_log_timestamp
            self.snapshots_loaded += 1
            self._bytes_since_snapshot = 0
            changed = True
            log.info("Loaded the metadata snapshot at offset %d", end)
        offset = committed.base_offset
        stats = self.batch_stats
        for entry in committed.entries:
            started = time.perf_counter() if stats is not None else 0.0
            records = entry.payload if isinstance(entry.payload, (tuple, list)) \
                else ()  # control entries carry no metadata
            for i, record in enumerate(records):
                changed = self._apply(record, offset + i) or changed
            if stats is not None:
                stats.loaded(len(records), (time.perf_counter() - started) * 1e6)
            if entry.raw is not None:
                self._bytes_since_snapshot += len(entry.raw)
                self.last_applied_timestamp = read_header(entry.raw, 0).max_timestamp
            offset += entry.count
        self.applied_end = max(self.applied_end, offset)
        delta = self.loader.take_delta()
        self._publish("the ACLs", lambda: self._publish_acls(delta))
        client_quotas = self.client_quotas
        if client_quotas is not None:
            if delta.full:
                self._publish("the client quotas",
                              lambda: client_quotas.load(self.image.client_quotas))
            elif delta.client_quotas:
                self._publish("the client quotas", lambda: client_quotas.apply(
                    delta.client_quotas, self.image.client_quotas))
            if client_quotas.callback is not None and (
                    delta.full or delta.partitions or delta.removed_topics or delta.brokers):
                # Kafka's DynamicTopicClusterQuotaPublisher: topics or brokers changed.
                self._publish("the client quota callback's cluster",
                              lambda: client_quotas.update_cluster_metadata(
                                  self.image, self.cluster_id))
        if changed or delta.full:
            self._publish("the metadata", lambda: self.on_change(delta))
        still = []
        for end, future in self._waiters:
            if end <= self.applied_end:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((end, future))
        self._waiters = still
        self._maybe_snapshot()

    def on_raft_state(self) -> None:
        pass

    def _apply(self, record: Any, offset: int) -> bool:
        try:
            return self.loader.apply(record, offset)
        except Exception:
            if self.fatal_load_errors:
                raise
            self.load_errors += 1
            log.error("Error replaying the metadata log record at offset %d (%s); "
                      "skipping it", offset, type(record).__name__, exc_info=True)
            return False

    def _publish(self, what: str, publish: Callable[[], None]) -> None:
        try:
            publish()
        except Exception:
            self.apply_errors += 1
            log.error("Error publishing %s at offset %d", what, self.applied_offset,
                      exc_info=True)

    def _publish_acls(self, delta: MetadataDelta) -> None:
        authorizer = self.authorizer
        if authorizer is None:
            return
        if delta.full:
            authorizer.load(self.image.acls)
        elif delta.acl_changes:
            authorizer.apply_changes(delta.acl_changes)
        if not authorizer.loaded and self.raft.leader_id is not None and \
                self.applied_end >= self.raft.high_watermark > 0:
            # Caught up with the log as the quorum's leader commits it: the ACLs are in.
            authorizer.loaded = True
            log.info("The authorizer has the ACLs of the metadata log (%d)",
                     authorizer.acl_count)

    def _maybe_snapshot(self) -> None:
        if self._bytes_since_snapshot == 0 or self.loader.in_transaction:
            return  # (a snapshot inside a transaction would lose what it holds back)
        now = self.now_ms()
        due = self.snapshot_interval_ms > 0 and \
            now - self._last_snapshot_ms >= self.snapshot_interval_ms
        if self._bytes_since_snapshot < self.snapshot_bytes and not due:
            return
        data: Any = encode_snapshot(self.image.to_records(), now)
        if self.raft.create_snapshot(self.applied_end, data):
            log.info("Writing a metadata snapshot at offset %d (%d bytes)", self.applied_end,
                     len(data))
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now
