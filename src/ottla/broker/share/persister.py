"""The persister of share-partition state (Kafka's Persister SPI and DefaultStatePersister,
seed 001): how a share-partition leader reads, initializes and writes its durable state.

Leaders never write ``__share_group_state`` themselves: the share coordinator that owns
the key (the leader of ``partitionFor(group:topicId:partition)``) does. The persister
calls this broker's coordinator directly when it owns the key, and otherwise sends the
Initialize/Read/WriteShareGroupState RPCs to the broker that does, as Kafka's
PersisterStateManager; the group coordinator's offsets admin APIs read summaries and
delete states the same way. A coordinator that cannot answer now (moved, loading, not yet
elected) is an error the caller retries or answers as retriable.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.share_coordinator import ShareCoordinatorService
from ottla.broker.inter_broker import InterBrokerClients
from ottla.coordinator.share.shard import PersisterStateBatch, SharePartitionKey
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError

NO_STATE = -1
"""A start offset or state epoch the coordinator does not have yet."""


@dataclass(frozen=True, slots=True)
class PersistedState:
    """ReadShareGroupState's answer for one share-partition."""

    error: ErrorCode
    state_epoch: int = NO_STATE
    start_offset: int = NO_STATE
    batches: list[PersisterStateBatch] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StateSummary:
    """ReadShareGroupStateSummary's answer for one share-partition: what the offsets admin
    APIs show (its start offset and, for KIP-1226's lag, the delivery-complete count).
    A share-partition with no state answers NONE with the defaults."""

    error: ErrorCode
    message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = NO_STATE
    delivery_complete_count: int = NO_STATE


class StatePersister(Protocol):
    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> PersistedState: ...

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode: ...

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state_epoch: int, leader_epoch: int, start_offset: int,
                          delivery_complete_count: int, batches: list[PersisterStateBatch]
                          ) -> ErrorCode: ...

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int = -1) -> StateSummary: ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int
                           ) -> ErrorCode: ...


class CoordinatorPersister:
    """Kafka's DefaultStatePersister: each call goes to the share coordinator that owns
    the key, this broker's own service or another broker's over the state RPCs."""

    def __init__(self, broker: BrokerContext, coordinator: ShareCoordinatorService) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self._peers = InterBrokerClients(broker, "share-state")

    async def _call(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    local: Callable[[SharePartitionKey], Awaitable[Any]], api_key: ApiKey,
                    version: int, fields: dict[str, Any]) -> tuple[ErrorCode, Any]:
        """The owner's answer for one partition: (error, the answer or result)."""
        key = SharePartitionKey(group_id, topic_id, partition)
        try:
            owner = self.coordinator.coordinator_for(key.coordinator_key)
            if owner == self.broker.node_id:
                answer = await local(key)
                return answer.error, answer
            response = await self._peers.request(owner, api_key, version, {
                "group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": partition, **fields}]}]})
        except KafkaError as e:
            return e.code, None
        result = response.results[0].partitions[0]
        return ErrorCode(result.error_code), result

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> PersistedState:
        error, answer = await self._call(
            group_id, topic_id, partition,
            lambda key: self.coordinator.read_state(key, leader_epoch),
            ApiKey.READ_SHARE_GROUP_STATE, 0, {"leader_epoch": leader_epoch})
        if error != ErrorCode.none:
            return PersistedState(error)
        return PersistedState(error, answer.state_epoch, answer.start_offset,
                              list(answer.state_batches))

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode:
        error, _ = await self._call(
            group_id, topic_id, partition,
            lambda key: self.coordinator.initialize_state(key, state_epoch, start_offset),
            ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
            {"state_epoch": state_epoch, "start_offset": start_offset})
        return error

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state_epoch: int, leader_epoch: int, start_offset: int,
                          delivery_complete_count: int, batches: list[PersisterStateBatch]
                          ) -> ErrorCode:
        stored = list(batches)
        error, _ = await self._call(
            group_id, topic_id, partition,
            lambda key: self.coordinator.write_state(
                key, state_epoch, leader_epoch, start_offset, delivery_complete_count,
                stored),
            ApiKey.WRITE_SHARE_GROUP_STATE, 1,
            {"state_epoch": state_epoch, "leader_epoch": leader_epoch,
             "start_offset": start_offset, "delivery_complete_count": delivery_complete_count,
             "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                "delivery_state": b.delivery_state,
                                "delivery_count": b.delivery_count} for b in stored]})
        return error

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int = -1) -> StateSummary:
        async def local(key: SharePartitionKey) -> Any:
            return self.coordinator.read_state_summary(key, leader_epoch)

        error, answer = await self._call(
            group_id, topic_id, partition, local, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1,
            {"leader_epoch": leader_epoch})
        if answer is None:
            return StateSummary(error)
        message = getattr(answer, "message", None) or getattr(answer, "error_message", None)
        if error != ErrorCode.none:
            return StateSummary(error, message)
        return StateSummary(error, message, answer.state_epoch, answer.leader_epoch,
                            answer.start_offset, answer.delivery_complete_count)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int
                           ) -> ErrorCode:
        error, _ = await self._call(
            group_id, topic_id, partition, lambda key: self.coordinator.delete_state(key),
            ApiKey.DELETE_SHARE_GROUP_STATE, 0, {})
        return error

    async def close(self) -> None:
        await self._peers.close()
