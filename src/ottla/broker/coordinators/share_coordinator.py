"""The share coordinator service on a broker (Kafka's ShareCoordinatorService): the
coordinator service over ``__share_group_state`` with share coordinator shards, keyed by
``group:topicId:partition``, answering Initialize/Read/Write/Delete/ReadSummary
ShareGroupState for the share-partition leaders.

The shards' timers snapshot cold partitions and, every
``share.coordinator.state.topic.prune.interval.ms``, hand this service the offset below
which their partition's records are redundant (the oldest snapshot any share-partition's
state starts from, once committed); the partition's log start moves there, as Kafka's
coordinator issues DeleteRecords. One path: the shard decides, the driver deletes.
"""

from __future__ import annotations

import logging

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.coordinator_service import CoordinatorService
from ottla.common.topics import SHARE_GROUP_STATE_TOPIC, TopicPartition
from ottla.coordinator.share.shard import (
    DeleteStateAnswer,
    InitializeStateAnswer,
    PersisterStateBatch,
    ReadStateAnswer,
    ReadStateSummaryAnswer,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    SharePartitionKey,
    WriteStateAnswer,
    decode_record,
    encode_record,
)

log = logging.getLogger(__name__)


class ShareCoordinatorService(CoordinatorService[ShareCoordinatorShard]):
    topic_name = SHARE_GROUP_STATE_TOPIC
    kind = "share coordinator"

    def __init__(self, broker: BrokerContext) -> None:
        config = broker.config
        self.share_config = ShareCoordinatorConfig(
            snapshot_update_records_per_snapshot=config[
                "share.coordinator.snapshot.update.records.per.snapshot"],
            cold_partition_snapshot_interval_ms=config[
                "share.coordinator.cold.partition.snapshot.interval.ms"],
            prune_interval_ms=config["share.coordinator.state.topic.prune.interval.ms"])
        super().__init__(
            broker, config["share.coordinator.state.topic.num.partitions"],
            config["share.coordinator.state.topic.replication.factor"],
            {"cleanup.policy": "delete", "compression.type": "uncompressed",
             "min.insync.replicas": str(config["share.coordinator.state.topic.min.isr"]),
             "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"]),
             "unclean.leader.election.enable": "false", "retention.ms": "-1"},
            lambda ctx: ShareCoordinatorShard(
                ctx, self.share_config, on_prune=lambda offset: self._prune(ctx.tp, offset)),
            encode_record, decode_record,
            write_timeout_ms=config["share.coordinator.write.timeout.ms"])

    # --- the APIs ---------------------------------------------------------------------------

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int,
                               start_offset: int) -> InitializeStateAnswer:
        answer: InitializeStateAnswer = await self.write(
            key.coordinator_key, lambda shard, now: shard.initialize_state(
                now, key, state_epoch, start_offset))
        return answer

    async def write_state(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                          start_offset: int, delivery_complete_count: int,
                          batches: list[PersisterStateBatch]) -> WriteStateAnswer:
        answer: WriteStateAnswer = await self.write(
            key.coordinator_key, lambda shard, now: shard.write_state(
                now, key, state_epoch, leader_epoch, start_offset, delivery_complete_count,
                batches))
        return answer

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateAnswer:
        answer: ReadStateAnswer = await self.write(
            key.coordinator_key, lambda shard, now: shard.read_state(now, key, leader_epoch))
        return answer

    def read_state_summary(self, key: SharePartitionKey, leader_epoch: int
                           ) -> ReadStateSummaryAnswer:
        answer: ReadStateSummaryAnswer = self.read(key.coordinator_key,
                         lambda shard: shard.read_state_summary(key, leader_epoch))
        return answer

    async def delete_state(self, key: SharePartitionKey) -> DeleteStateAnswer:
        answer: DeleteStateAnswer = await self.write(
            key.coordinator_key, lambda shard, now: shard.delete_state(now, key))
        return answer

    # --- pruning ----------------------------------------------------------------------------

    def _prune(self, tp: TopicPartition, offset: int) -> None:
        """A shard's prune timer found every record below ``offset`` redundant (and
        committed): the partition's log start moves there, as Kafka's coordinator
        issues DeleteRecords."""
        partition = self.broker.replica_manager.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return
        offset = min(offset, partition.high_watermark)
        if offset > partition.log.log_start_offset:
            partition.log.delete_records_before(offset)
            log.debug("Pruned %s-%d below %d", tp[0], tp[1], offset)
