"""The replica manager: the partitions this broker hosts, kept in line with the metadata.

It opens a log for every partition the metadata image assigns to this broker, removes the
logs of deleted topics, keeps each log's config current, and is the one place produce
appends and fetch reads go through. It owns the purgatories where requests wait on
partitions (``acks=all`` produces on the high watermark, long-polling fetches on new
data) and wakes them whenever a partition moves: an append, a new leader or ISR, a
removal. Whoever else waits on a high watermark (the coordinators' committed responses)
subscribes to ``high_watermark_listeners``.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from ottla.broker.log_validator import (
    DEFAULT_MAX_DECOMPRESSED_BATCH,
    PendingBatch,
    validate_batch,
)
from ottla.broker.purgatory.delayed_operation import DelayedOperationPurgatory
from ottla.broker.replication.partition import Partition
from ottla.broker.replication.partition_state import LeaderAndIsr
from ottla.broker.replication.replica_alter_log_dirs import MoveStep, copy_step
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.common.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    directory_assignment_supported,
)
from ottla.common.topics import TopicPartition
from ottla.metadata.delta import LocalReplica, MetadataDelta, local_changes
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import BatchHeader, build_marker, read_header
from ottla.storage.log import AppendInfo, Log, future_dir_name
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

log = logging.getLogger(__name__)



class FollowerFetching(Protocol):
    def follow(self, partition: Partition, leader_id: int) -> None: ...

    def unfollow(self, tp: TopicPartition) -> None: ...


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager,
                 topic_defaults: Callable[[MetadataImage], dict[str, Any]],
                 max_decompressed_batch: int = DEFAULT_MAX_DECOMPRESSED_BATCH) -> None:
        self.broker_id = broker_id
        self.max_decompressed_batch = max_decompressed_batch
        self.log_manager = log_manager
        self.topic_defaults = topic_defaults
        self.partitions: dict[TopicPartition, Partition] = {}
        self.offline: set[TopicPartition] = set()
        """Partitions assigned here whose log could not be opened or whose log dir failed
        (a full disk among the causes): answered KAFKA_STORAGE_ERROR (Kafka's
        HostedPartition.Offline) until a restart finds the dir repaired."""
        self.produce_purgatory: DelayedOperationPurgatory[TopicPartition] = \
            DelayedOperationPurgatory("Produce")
        self.fetch_purgatory: DelayedOperationPurgatory[TopicPartition] = \
            DelayedOperationPurgatory("Fetch")
        self.high_watermark_listeners: list[Callable[[TopicPartition], None]] = []
        """Called with a partition whose high watermark moved."""
        self.followers: FollowerFetching | None = None
        """Fetches the partitions this broker follows (set by the broker; none in tests
        that drive followers by hand)."""
        self.alter_isr: Callable[[Partition, list[int]], None] | None = None
        """Sends a leader's ISR change to the controller (set by the broker)."""
        self.assign_dir: Callable[[uuid.UUID, int, uuid.UUID], None] | None = None
        """Tells the controller the log dir holding a replica (topic id, partition,
        directory id) where the metadata names another (set by the broker: its
        AssignmentsManager)."""
        self.isr_eligible: Callable[[int, int], bool] = lambda replica_id, epoch: True
        """Whether a broker (id, the epoch its fetch named) may join an ISR: registered,
        not fenced or shutting down, in that epoch (KIP-903). The controller refuses
        others (INELIGIBLE_REPLICA); asking first saves a refusal per fetch."""
        self._assign_dirs = False
        """The metadata version has directory assignment (KIP-858)."""
        self.on_move_started: Callable[[], None] = lambda: None
        """A replica began moving between log dirs (set by the broker: its
        ReplicaAlterLogDirsManager runs the moves)."""
        self.lag_clock: Callable[[], int] | None = None
        """The clock followers' lag (``replica.lag.time.max.ms``) is timed on, in ms: the
        broker gives a monotonic one, so that a step of the leader's wall clock neither
        drops every follower from its ISRs (forward) nor keeps a dead one in them for the
        step's length (back). None: the ``now_ms`` each call is given."""
        self.isr_expands = 0
        self.isr_shrinks = 0
        """ISR changes of partitions led here that the controller accepted (Kafka's
        IsrExpandsPerSec and IsrShrinksPerSec meters)."""
        self.failed_isr_updates = 0
        """ISR changes the controller refused (Kafka's FailedIsrUpdatesPerSec)."""

    # --- following the metadata --------------------------------------------------------

    def log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        return LogConfig.resolve(image.topic_configs(topic), self.topic_defaults(image))

    def apply_metadata(self, image: MetadataImage, now_ms: int,
                       budget_s: float | None = None) -> bool:
        """Make the hosted partitions match the whole image (create, update, delete): at
        start, after a snapshot, and when dynamic broker configs change every topic's
        defaults. Each commit otherwise goes through ``apply_delta``.

        Opening a new log creates a directory and five files, milliseconds each, on the
        event loop. With ``budget_s`` it stops opening new logs once that much time has
        gone (after at least one) and returns True: the caller calls again later, and each
        call diffs against the image it is given, so deletes and re-creates in between
        are followed. A partition whose log is not open yet answers
        NOT_LEADER_OR_FOLLOWER, which clients retry, as a Kafka broker does before its
        metadata publisher has made the log."""
        wanted: dict[TopicPartition, LocalReplica] = {}
        for topic in image.topics_by_name.values():
            for index, reg in topic.partitions.items():
                if self.broker_id in reg.replicas:
                    wanted[(topic.name, index)] = LocalReplica(topic.topic_id, reg)
        for tp in [tp for tp in self.partitions if tp not in wanted]:
            self._remove(tp, now_ms)
        for tp in [tp for tp in self.offline if tp not in wanted]:
            self._forget_offline(tp)
        return self._host(image, wanted, now_ms, budget_s, update_configs=True)

    def apply_delta(self, image: MetadataImage, delta: MetadataDelta, now_ms: int,
                    budget_s: float | None = None) -> bool:
        """Follow one commit: only the partitions and configs it changed (Kafka's
        ``ReplicaManager.applyDelta`` with ``localChanges``). True if logs are left to
        open, as for ``apply_metadata``, whose next call finishes them."""
        if delta.full or delta.broker_configs:
            return self.apply_metadata(image, now_ms, budget_s)
        changes = local_changes(delta, image, self.broker_id)
        for tp, partition in list(self.partitions.items()):
            if partition.topic_id in changes.deleted_topics or tp in changes.deletes:
                self._remove(tp, now_ms)
        deleted_names = set(changes.deleted_topics.values())
        for tp in [tp for tp in self.offline if tp in changes.deletes or tp[0] in deleted_names]:
            self._forget_offline(tp)
        configs: dict[str, LogConfig] = {}
        for tp, partition in self.partitions.items():
            if tp[0] in delta.topic_configs:
                config = configs.get(tp[0])
                if config is None:
                    config = configs[tp[0]] = self.log_config(image, tp[0])
                partition.log.config = config
        return self._host(image, {**changes.leaders, **changes.followers}, now_ms, budget_s,
                          update_configs=False)

    def _host(self, image: MetadataImage, replicas: dict[TopicPartition, LocalReplica],
              now_ms: int, budget_s: float | None, update_configs: bool) -> bool:
        """Open or update the partitions of ``replicas`` (as leader or follower)."""
        elr = image.features.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= 1
        self._assign_dirs = directory_assignment_supported(image.features)
        assign = self.assign_dir if self._assign_dirs else None
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        pending = False
        configs: dict[str, LogConfig] = {}
        for tp, replica in replicas.items():
            reg = replica.registration
            state = LeaderAndIsr(reg.leader, reg.leader_epoch, reg.partition_epoch,
                                 list(reg.replicas), list(reg.isr), reg.leader_recovery_state)
            partition = self.partitions.get(tp)
            if partition is not None and partition.topic_id != replica.topic_id:
                self._remove(tp, now_ms)  # deleted and created again under the same name
                partition = None
            if partition is not None and not update_configs:
                self._set_hw_min_isr(partition, elr)
                moved = partition.update_state(state, self._lag_now(now_ms))
                self._moved(tp, moved, True, now_ms)
                self._follow_or_lead(partition)
                self._check_directory(tp, replica, assign)
                continue
            config = configs.get(tp[0])
            if config is None:
                config = configs[tp[0]] = self.log_config(image, tp[0])
            if partition is None:
                if pending:
                    continue
                try:
                    log_ = self.log_manager.load_log(tp, config, replica.topic_id, now_ms,
                                                     reg.directory(self.broker_id))
                except KafkaError as e:
                    if tp not in self.offline:
                        log.error("Partition %s-%d is offline: %s", *tp, e)
                    self.offline.add(tp)
                    continue
                self.offline.discard(tp)
                if tp in self.log_manager.futures:  # a move a restart interrupted
                    self.on_move_started()
                partition = self.partitions[tp] = Partition(
                    tp[0], tp[1], replica.topic_id, log_, self.broker_id, state,
                    self._lag_now(now_ms),
                    config["min.insync.replicas"] if elr else 0)
                self._moved(tp, False, True, now_ms)
                self._follow_or_lead(partition)
                self._check_directory(tp, replica, assign)
                pending = deadline is not None and time.perf_counter() >= deadline
            else:
                partition.log.config = config
                self._set_hw_min_isr(partition, elr)
                moved = partition.update_state(state, self._lag_now(now_ms))
                self._moved(tp, moved, True, now_ms)
                self._follow_or_lead(partition)
                self._check_directory(tp, replica, assign)
        return pending and any(tp not in self.partitions and tp not in self.offline
                               for tp in replicas)

    def _check_directory(self, tp: TopicPartition, replica: LocalReplica,
                         assign: Callable[[uuid.UUID, int, uuid.UUID], None] | None) -> None:
        """Where the metadata places this broker's replica in another log dir than the
        one holding its log (not yet assigned, or placed before dirs were tracked), tell
        the controller (Kafka's ``maybeUpdateTopicAssignment``)."""
        if assign is None:
            return
        actual = self.log_manager.directory_id_of(tp)
        if actual is not None and actual != replica.registration.directory(self.broker_id):
            assign(replica.topic_id, tp[1], actual)

    def on_dir_offline(self, log_dir: str, now_ms: int) -> list[TopicPartition]:
        """A log dir failed (Kafka's ``ReplicaManager.handleLogDirFailure``): its
        partitions stop here (no more fetching; requests waiting on them are woken) and
        answer KAFKA_STORAGE_ERROR from now on, until a restart finds the dir repaired,
        whatever the metadata says of them. The partitions taken offline."""
        gone = [tp for tp, partition in self.partitions.items() if partition.log.offline]
        for tp in gone:
            if self.followers is not None:
                self.followers.unfollow(tp)
            del self.partitions[tp]
            self.offline.add(tp)
            self._moved(tp, False, True, now_ms)
        log.warning("Broker %d stopped serving %d partitions in the failed log directory %s",
                    self.broker_id, len(gone), log_dir)
        return gone

    def _forget_offline(self, tp: TopicPartition) -> None:
        """An offline partition whose topic went: nothing is hosted for it any more."""
        self.offline.discard(tp)
        self.log_manager.forget_offline(tp)

    @staticmethod
    def _set_hw_min_isr(partition: Partition, elr: bool) -> None:
        partition.replication.hw_min_isr = \
            partition.log.config["min.insync.replicas"] if elr else 0

    def _follow_or_lead(self, partition: Partition) -> None:
        """A follower fetches from the leader the image names; a leader, or a replica
        without a leader, fetches from nobody."""
        if self.followers is None:
            return
        leader = partition.state.leader
        if leader >= 0 and leader != self.broker_id:
            self.followers.follow(partition, leader)
        else:
            self.followers.unfollow((partition.topic, partition.index))
        if self.alter_isr is not None:
            recovered = partition.replication.recovery_to_report()
            if recovered is not None:
                log.info("%s-%d: an unclean leader, reporting itself recovered",
                         partition.topic, partition.index)
                self.alter_isr(partition, recovered)

    def _remove(self, tp: TopicPartition, now_ms: int) -> None:
        if self.followers is not None:
            self.followers.unfollow(tp)
        self.partitions.pop(tp)
        log.info("Removing partition %s-%d", *tp)
        self.log_manager.delete_log(tp)
        self._moved(tp, False, True, now_ms)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    # --- produce -----------------------------------------------------------------------

    def validate(self, partition: Partition, records: bytes | memoryview | None, now_ms: int
                 ) -> tuple[bytearray, BatchHeader] | PendingBatch:
        """Validate one produced batch (KafkaError with the partition's error code), or
        return what is left to validate off the event loop (``PendingBatch.finish``)."""
        return validate_batch(records, partition.log.config, now_ms,
                              f"{partition.topic}-{partition.index}",
                              self.max_decompressed_batch)

    def append(self, partition: Partition, records: bytes | memoryview | None,
               required_acks: int, now_ms: int) -> AppendInfo:
        """Validate and append one produced batch; raises KafkaError with the partition's
        error code."""
        validated = self.validate(partition, records, now_ms)
        if isinstance(validated, PendingBatch):
            validated = validated.finish()
        return self.append_validated(partition, *validated, required_acks, now_ms)

    def append_validated(self, partition: Partition, batch: bytearray, header: BatchHeader,
                         required_acks: int, now_ms: int) -> AppendInfo:
        """Append a batch ``validate`` accepted."""
        return self._append(partition, batch, header, required_acks,
                            partition.log.config["min.insync.replicas"], now_ms)

    def append_internal(self, partition: Partition, batch: bytearray, header: BatchHeader,
                        now_ms: int) -> AppendInfo:
        """Append a batch the broker built itself (a coordinator's records)."""
        return self._append(partition, batch, header, -1, 1, now_ms)

    def append_marker(self, partition: Partition, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int, now_ms: int,
                      stats: BrokerTopicStats | None = None) -> AppendInfo:
        """WriteTxnMarkers: the transaction coordinator's COMMIT or ABORT marker for a
        producer (Kafka's append with origin COORDINATOR, ``acks=all``: the coordinator
        completes the transaction only once every marker is replicated). ``stats``
        counts it as MessagesIn and BytesIn, as Kafka's appendToLocalLog counts every
        local append."""
        marker = bytearray(build_marker(producer_id=producer_id, producer_epoch=producer_epoch,
                                        commit=commit, coordinator_epoch=coordinator_epoch,
                                        timestamp=now_ms))
        size = len(marker)
        info = self._append(partition, marker, read_header(marker), -1, 1, now_ms)
        if stats is not None:
            stats.appended(partition.topic, info.last_offset - info.first_offset + 1, size)
        return info

    def _append(self, partition: Partition, batch: bytearray, header: BatchHeader,
                required_acks: int, min_insync_replicas: int, now_ms: int) -> AppendInfo:
        high_watermark = partition.high_watermark
        try:
            info = partition.append_as_leader(batch, header, now_ms, required_acks,
                                              min_insync_replicas)
        except OSError as e:
            # Anything below (segment, index, epoch checkpoint) failing on disk takes the
            # log dir offline instead of the node.
            partition.log.fail(e)
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"{partition.topic}-{partition.index}: {e}") from e
        if not info.duplicate:
            self._moved((partition.topic, partition.index),
                        partition.high_watermark != high_watermark, False, now_ms)
        return info

    def update_follower_fetch(self, partition: Partition, replica_id: int, fetch_offset: int,
                              now_ms: int, broker_epoch: int = -1) -> None:
        """A follower fetched ``partition`` from ``fetch_offset`` (it has everything
        before): the high watermark may move, and what waits on it with it."""
        moved = partition.update_follower_fetch(replica_id, fetch_offset,
                                                self._lag_now(now_ms), broker_epoch)
        self._moved((partition.topic, partition.index), moved, False, now_ms)
        if self.alter_isr is not None and partition.is_leader and \
                replica_id not in partition.state.isr and \
                self.isr_eligible(replica_id, broker_epoch):
            isr = partition.replication.isr_to_expand(replica_id)
            if isr is not None:
                self.alter_isr(partition, isr)

    def followed(self, partition: Partition, high_watermark_moved: bool, now_ms: int) -> None:
        """A follower appended its leader's records (or learned a new high watermark)."""
        self._moved((partition.topic, partition.index), high_watermark_moved, False, now_ms)

    def maybe_shrink_isr(self, now_ms: int, replica_lag_time_max_ms: int) -> None:
        """Drop from the ISRs this broker leads the followers that have lagged for
        ``replica.lag.time.max.ms`` (run every half of it, as Kafka does)."""
        if self.alter_isr is None:
            return
        for partition in self.partitions.values():
            isr = partition.replication.isr_to_shrink(self._lag_now(now_ms),
                                                      replica_lag_time_max_ms)
            if isr is not None:
                log.info("Shrinking the ISR of %s-%d from %s to %s", partition.topic,
                         partition.index, partition.state.isr, isr)
                self.alter_isr(partition, isr)

    def _lag_now(self, now_ms: int) -> int:
        return self.lag_clock() if self.lag_clock is not None else now_ms

    def isr_answered(self, partition: Partition, isr: list[int] | None, partition_epoch: int,
                     now_ms: int) -> None:
        """The controller answered an ISR change of ``partition``."""
        if self.partitions.get((partition.topic, partition.index)) is not partition:
            return
        proposed, before = partition.replication.pending_isr, len(partition.state.isr)
        moved = partition.isr_answered(isr, partition_epoch)
        if isr is not None and proposed is not None:
            # Counted as Kafka's Partition counts an accepted change; one the metadata
            # overtook (no longer pending) is not.
            if len(isr) > before:
                self.isr_expands += 1
            elif len(isr) < before:
                self.isr_shrinks += 1
        self._moved((partition.topic, partition.index), moved, isr is not None, now_ms)

    def isr_update_failed(self, partition: Partition) -> None:
        """The controller refused an ISR change of ``partition`` (or made it with another
        leader)."""
        self.failed_isr_updates += 1

    def producer_id_count(self) -> int:
        """Producer ids kept in the producer state of the partitions hosted here, offline
        ones left out (Kafka's ``ReplicaManager.producerIdCount``)."""
        return sum(len(partition.log.producer_state.producers)
                   for partition in self.partitions.values() if not partition.log.offline)

    # --- moving replicas between log dirs (AlterReplicaLogDirs) ---------------------------

    def alter_replica_log_dirs(self, dirs: dict[TopicPartition, str], image: MetadataImage,
                               now_ms: int) -> dict[TopicPartition, ErrorCode]:
        """Start moving each replica to the log dir given, as Kafka's
        ``ReplicaManager.alterReplicaLogDirs``: the future log's name must fit in a file
        name (INVALID_TOPIC_EXCEPTION), the dir must be one of this broker's
        (LOG_DIR_NOT_FOUND), online (KAFKA_STORAGE_ERROR) and not cordoned
        (INVALID_REPLICA_ASSIGNMENT, KIP-1066); a partition not hosted
        here is recorded to be made there and answers REPLICA_NOT_AVAILABLE, or
        UNKNOWN_TOPIC_OR_PARTITION if the metadata does not know it either; a replica
        already there, or already moving there, is left as it is (NONE); one moving
        elsewhere starts again towards the new dir."""
        results: dict[TopicPartition, ErrorCode] = {}
        logs = self.log_manager
        for tp, log_dir in dirs.items():
            try:
                if len(future_dir_name(*tp)) > 255:  # a file name's limit
                    raise KafkaError(ErrorCode.invalid_topic_exception,
                                     "The topic name is too long.")
                logs.check_log_dir(log_dir)
                if tp in self.offline:
                    raise KafkaError(ErrorCode.kafka_storage_error,
                                     f"Partition {tp[0]}-{tp[1]} is offline")
                future = logs.futures.get(tp)
                if future is not None and os.path.dirname(future.dir) != log_dir:
                    logs.abort_future_log(tp)
                    future = None
                if tp not in self.partitions:
                    logs.preferred_dirs[tp] = log_dir
                partition = self.require(tp[0], tp[1], image)
                if future is None and os.path.dirname(partition.log.dir) != log_dir:
                    if logs.offline_dirs:
                        # As Kafka: no future log while a dir is offline, lest the same
                        # partition end up with futures in two dirs.
                        raise KafkaError(ErrorCode.kafka_storage_error,
                                         "Cannot move a replica while a log dir is offline")
                    logs.create_future_log(tp, log_dir, now_ms)
                    log.info("Moving %s-%d from %s to %s", *tp,
                             os.path.dirname(partition.log.dir), log_dir)
                    self.on_move_started()
                results[tp] = ErrorCode.none
            except KafkaError as e:
                log.warning("Unable to alter log dirs for %s-%d: %s", *tp, e)
                # Kafka keeps REPLICA_NOT_AVAILABLE here "for compatibility".
                results[tp] = ErrorCode.replica_not_available \
                    if e.code == ErrorCode.not_leader_or_follower else e.code
            except OSError as e:
                log.warning("Unable to alter log dirs for %s-%d: %s", *tp, e)
                logs.mark_offline(log_dir)
                results[tp] = ErrorCode.kafka_storage_error
        return results

    def moving(self) -> list[TopicPartition]:
        """The partitions with a move in progress."""
        return list(self.log_manager.futures)

    def move_step(self, tp: TopicPartition, max_bytes: int, now_ms: int) -> MoveStep:
        """Copy the next chunk of ``tp``'s move; once the copy has caught up, swap it in.
        A move whose source or destination failed is given up. False if nothing
        changed (nothing could be copied)."""
        logs = self.log_manager
        future = logs.futures.get(tp)
        partition = self.partitions.get(tp)
        if future is None:
            return MoveStep(False, 0)
        if partition is None or partition.log.offline or future.offline:
            logs.abort_future_log(tp)
            return MoveStep(True, 0)
        end = future.log_end_offset
        try:
            caught_up, copied = copy_step(partition.log, future, max_bytes, now_ms)
        except OSError as e:
            log.error("Moving %s-%d failed: %s", *tp, e)
            future.fail(e)
            logs.abort_future_log(tp)
            return MoveStep(True, 0)
        except KafkaError as e:
            log.error("Moving %s-%d failed: %s", *tp, e)
            logs.abort_future_log(tp)
            return MoveStep(True, 0)
        if caught_up:
            self._promote_future(tp, partition, future)
            return MoveStep(True, copied)
        return MoveStep(future.log_end_offset != end, copied)

    def abort_move(self, tp: TopicPartition) -> None:
        """Give up moving ``tp``: its future log goes, its log stays where it is."""
        self.log_manager.abort_future_log(tp)

    def _promote_future(self, tp: TopicPartition, partition: Partition, future: Log) -> None:
        """The future log takes the partition's place, with what the current one keeps
        beside its records (Kafka's ``maybeReplaceCurrentWithFutureReplica``). Its own
        recovery point stays: the copy's fsyncs are its own."""
        current = partition.log
        future.config = current.config
        future.high_watermark = current.high_watermark
        future.log_start_offset = current.log_start_offset
        future.producer_state = current.producer_state
        future.last_flush_ms = current.last_flush_ms
        if future.leader_epoch_cache.entries != current.leader_epoch_cache.entries:
            future.leader_epoch_cache.entries = list(current.leader_epoch_cache.entries)
            future.leader_epoch_cache.save()
        partition.log = self.log_manager.replace_current_with_future(tp)
        log.info("Moved %s-%d to %s", *tp, os.path.dirname(future.dir))
        directory = self.log_manager.directory_id_of(tp)
        if self.assign_dir is not None and directory is not None and self._assign_dirs:
            self.assign_dir(partition.topic_id, tp[1], directory)

    # --- purgatories ------------------------------------------------------------------

    def _moved(self, tp: TopicPartition, high_watermark_moved: bool, leadership: bool,
               now_ms: int) -> None:
        """A partition moved: its log grew, its high watermark advanced, its leader or
        ISR changed (``leadership``), or it went away. Wake what waits on it."""
        if high_watermark_moved or leadership:
            self.produce_purgatory.check_and_complete(tp, now_ms)
        self.fetch_purgatory.check_and_complete(tp, now_ms)
        if high_watermark_moved:
            for listener in self.high_watermark_listeners:
                listener(tp)

    def expire_delayed(self, now_ms: int) -> int | None:
        """Answer every parked request whose deadline passed; the next deadline."""
        self.produce_purgatory.expire(now_ms)
        self.fetch_purgatory.expire(now_ms)
        deadlines = [d for d in (self.produce_purgatory.next_deadline(),
                                 self.fetch_purgatory.next_deadline()) if d is not None]
        return min(deadlines, default=None)

    def shutdown(self) -> None:
        """Answer every parked request with what it has (a broker shutting down)."""
        self.produce_purgatory.complete_all()
        self.fetch_purgatory.complete_all()

    def require(self, topic: str, index: int, image: MetadataImage) -> Partition:
        """The hosted partition, or the error Kafka gives for it."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition
        known = image.topics_by_name.get(topic)
        if known is not None and index in known.partitions:
            if (topic, index) in self.offline:
                raise KafkaError(ErrorCode.kafka_storage_error,
                                 f"{topic}-{index} is offline: its log directory failed")
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"This broker does not host {topic}-{index}")
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         "This server does not host this topic-partition.")
