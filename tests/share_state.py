"""A share-state persister for tests without a network: the real share coordinator shard
on the coordinator runtime over an in-memory ``__share_group_state`` (every write
committed at once), behind the ``StatePersister`` interface the leader uses; writes can
be made to fail, as when the coordinator moves."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from ottla.broker.share.persister import PersistedState, StateSummary
from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.coordinator.share.shard import (
    PersisterStateBatch,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    SharePartitionKey,
    decode_record,
    encode_record,
)
from ottla.protocol.errors import ErrorCode

TP = ("__share_group_state", 0)


class _Log:
    def __init__(self) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        self.entries += [encode_record(r) for r in records]
        return len(self.entries)

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return len(self.entries)

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        for offset, (key, value) in enumerate(self.entries):
            yield offset, decode_record(key, value)


class ShardPersister:
    def __init__(self) -> None:
        self.log = _Log()
        self.runtime: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            self.log, lambda ctx: ShareCoordinatorShard(ctx, ShareCoordinatorConfig()))
        self.runtime.load(TP, 0)
        self.now = 0
        self.fail_writes = False

    def _call(self, operation: Any) -> Any:
        self.now += 1
        answers: list[Any] = []
        self.runtime.write(TP, operation, answers.append, self.now)
        return answers[0]

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> PersistedState:
        key = SharePartitionKey(group_id, topic_id, partition)
        answer = self._call(lambda shard, now: shard.read_state(now, key, leader_epoch))
        if answer.error != ErrorCode.none:
            return PersistedState(answer.error)
        return PersistedState(answer.error, answer.state_epoch, answer.start_offset,
                              list(answer.state_batches))

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode:
        key = SharePartitionKey(group_id, topic_id, partition)
        answer = self._call(lambda shard, now: shard.initialize_state(
            now, key, state_epoch, start_offset))
        return answer.error

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state_epoch: int, leader_epoch: int, start_offset: int,
                          delivery_complete_count: int, batches: list[PersisterStateBatch]
                          ) -> ErrorCode:
        if self.fail_writes:
            return ErrorCode.coordinator_not_available
        key = SharePartitionKey(group_id, topic_id, partition)
        stored = list(batches)
        answer = self._call(lambda shard, now: shard.write_state(
            now, key, state_epoch, leader_epoch, start_offset, delivery_complete_count,
            stored))
        return answer.error

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int = -1) -> StateSummary:
        key = SharePartitionKey(group_id, topic_id, partition)
        answer = self.runtime.read(TP, lambda shard: shard.read_state_summary(key,
                                                                              leader_epoch))
        return StateSummary(answer.error, answer.message, answer.state_epoch,
                            answer.leader_epoch, answer.start_offset,
                            answer.delivery_complete_count)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int
                           ) -> ErrorCode:
        key = SharePartitionKey(group_id, topic_id, partition)
        return self._call(lambda shard, now: shard.delete_state(now, key)).error
