"""The share coordinator service on a broker (Kafka's ShareCoordinatorService): the
coordinator service over ``__share_group_state`` with share coordinator shards, keyed by
``group:topicId:partition``, answering Initialize/Read/Write/Delete/ReadSummary
ShareGroupState for the share-partition leaders.

Besides the shards' own timers (cold-partition snapshots), it prunes the state topic:
every ``share.coordinator.state.topic.prune.interval.ms`` each loaded partition's log
start moves up to the first record a reload still needs (the oldest snapshot any
share-partition's state starts from), as Kafka's coordinator issues DeleteRecords.
"""

from __future__ import annotations

import asyncio
import logging

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.coordinator_service import CoordinatorService
from ottla.common.tasks import cancel_and_wait
from ottla.common.topics import SHARE_GROUP_STATE_TOPIC
from ottla.coordinator.runtime import CoordinatorState
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
            prune_interval_ms=config["share.coordinator.state.topic.prune.interval.ms"],
            write_timeout_ms=config["share.coordinator.write.timeout.ms"])
        super().__init__(
            broker, config["share.coordinator.state.topic.num.partitions"],
            config["share.coordinator.state.topic.replication.factor"],
            {"cleanup.policy": "delete", "compression.type": "uncompressed",
             "min.insync.replicas": str(config["share.coordinator.state.topic.min.isr"]),
             "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"]),
             "unclean.leader.election.enable": "false", "retention.ms": "-1"},
            lambda ctx: ShareCoordinatorShard(ctx, self.share_config),
            encode_record, decode_record)
        self._pruner: asyncio.Task[None] | None = None

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

    def on_loaded(self, tp: tuple[str, int]) -> None:
        if self._pruner is None or self._pruner.done():
            self._pruner = asyncio.ensure_future(self._prune_forever())

    async def _prune_forever(self) -> None:
        while self.runtime.contexts:
            await asyncio.sleep(self.share_config.prune_interval_ms / 1000)
            try:
                self.prune()
            except Exception:
                log.exception("Pruning %s failed", SHARE_GROUP_STATE_TOPIC)

    def prune(self) -> dict[tuple[str, int], int]:
        """Move each loaded partition's log start to its first record still needed;
        the new starts."""
        moved: dict[tuple[str, int], int] = {}
        for tp, context in list(self.runtime.contexts.items()):
            if context.state is not CoordinatorState.ACTIVE:
                continue
            offset = context.shard.last_redundant_offset()
            partition = self.broker.replica_manager.partitions.get(tp)
            if offset is None or partition is None:
                continue
            offset = min(offset, partition.high_watermark)
            if offset > partition.log.log_start_offset:
                moved[tp] = partition.log.delete_records_before(offset)
                log.debug("Pruned %s-%d below %d", tp[0], tp[1], offset)
        return moved

    async def close(self) -> None:
        await cancel_and_wait(self._pruner)
