"""The share-group offsets admin APIs (KIP-932, KIP-1226; Kafka's GroupCoordinatorService
for DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, and
the share-state deletion that DeleteGroups does first): they join a share group's state
in its group coordinator shard to the share-partition states that the persister reads
from and writes to the share coordinators."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.group_coordinator import GroupCoordinatorService
from ottla.broker.inter_broker import InterBrokerClients, latest_offsets
from ottla.broker.share.persister import StatePersister, StateSummary
from ottla.common.backoff import ExponentialBackoff
from ottla.common.tasks import cancel_and_wait
from ottla.coordinator.group.share_group import UNINITIALIZED, has_lag, share_partition_lag
from ottla.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")
log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
PERSISTER_ATTEMPTS = 5
PERSISTER_BACKOFF_MS = 100
"""A share coordinator that is not there is asked again this many times, the wait
doubling from this."""
_PERSISTER_BACKOFF = ExponentialBackoff(PERSISTER_BACKOFF_MS,
                                        PERSISTER_BACKOFF_MS * 2 ** (PERSISTER_ATTEMPTS - 2))
_NOT_YET = frozenset({ErrorCode.coordinator_not_available,
                      ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator})
UNKNOWN_TOPIC_OR_PARTITION = "This server does not host this topic-partition."
NO_OFFSETS_TO_DELETE = "There is no offset information to delete."
INVALID_GROUP_ID = "The group id is invalid."
"""Kafka's messages."""


class ShareGroupOffsetsAdmin:
    def __init__(self, broker: BrokerContext, groups: GroupCoordinatorService,
                 persister: StatePersister) -> None:
        self.broker = broker
        self.groups = groups
        self.persister = persister
        """The share-partition leaders' persister: Kafka hands the group coordinator the
        same Persister."""
        self._cleanups: set[asyncio.Task[None]] = set()

    def on_topics_deleted(self, partition_counts: dict[uuid.UUID, int]) -> None:
        """Topics went: the share groups this broker coordinates lose their state on
        them (Kafka's deleteShareGroupStateForTopics on partitions deleted), so nothing
        of it is left in ``__share_group_state``."""
        task = asyncio.ensure_future(self._delete_topic_states_of_all(partition_counts))
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def _delete_topic_states_of_all(self, partition_counts: dict[uuid.UUID, int]
                                          ) -> None:
        groups: list[str] = await self.groups.read_every_shard(
            lambda shard: [g["group_id"] for g in shard.list_groups(set(), {"share"})])
        errors = await asyncio.gather(*(
            self._delete_state(group_id, topic_id, partition)
            for group_id in groups for topic_id, count in partition_counts.items()
            for partition in range(count)))
        failed = [e for e in errors if e != ErrorCode.none]
        if failed:
            log.warning("Deleting the share state of deleted topics %s: %d of %d failed "
                        "(first: %s)", sorted(map(str, partition_counts)), len(failed),
                        len(errors), failed[0].name)

    async def close(self) -> None:
        for task in list(self._cleanups):
            await cancel_and_wait(task)

    @staticmethod
    async def _retrying(call: Callable[[], Awaitable[T]], error: Callable[[T], ErrorCode]
                        ) -> T:
        """``call`` again, backing off, while the share coordinator of its key is not there
        (moved, loading, its topic being created), as Kafka's PersisterStateManager finds
        the coordinator again; the last answer otherwise."""
        for attempt in range(PERSISTER_ATTEMPTS - 1):
            result = await call()
            if error(result) not in _NOT_YET:
                return result
            await asyncio.sleep(_PERSISTER_BACKOFF.backoff(attempt) / 1000)
        return await call()

    async def _summary(self, group_id: str, topic_id: uuid.UUID, partition: int
                       ) -> StateSummary:
        return await self._retrying(
            lambda: self.persister.read_state_summary(group_id, topic_id, partition),
            lambda summary: summary.error)

    async def _delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int
                            ) -> ErrorCode:
        return await self._retrying(
            lambda: self.persister.delete_state(group_id, topic_id, partition), lambda e: e)

    async def _summaries(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]
                         ) -> list[tuple[int, StateSummary]]:
        found = await asyncio.gather(*(self._summary(group_id, topic_id, p)
                                       for p in partitions))
        return list(zip(partitions, found, strict=True))

    async def _states(self, group_id: str) -> list[DescribedTopic]:
        """The share-partitions ``group_id`` has state for (a start offset), by topic.
        Kafka lists them in the group's ShareGroupStatePartitionMetadata record; here the
        leaders initialize the states themselves, so every partition of every topic is
        asked for (the states outlive the subscriptions: an empty group subscribes to
        nothing, and it is the one whose offsets are reset)."""
        topics = sorted(self.groups.user_topics().items())
        answers = await asyncio.gather(*(self._summaries(group_id, topic_id, list(range(count)))
                                         for _, (topic_id, count) in topics))
        found = []
        for (name, (topic_id, _)), summaries in zip(topics, answers, strict=True):
            held = [(p, s) for p, s in summaries
                    if s.error == ErrorCode.none and s.start_offset >= 0]
            if held:
                found.append((name, topic_id, held))
        return found

    async def describe_share_group_offsets(self, group_id: str,
                                           topics: list[tuple[str, list[int]]] | None
                                           ) -> dict[str, Any]:
        """One group of DescribeShareGroupOffsets (Kafka's describeShareGroupOffsets, and
        describeShareGroupAllOffsets for ``topics`` None): each share-partition's start
        offset, leader epoch and lag. A partition without state, or whose state cannot be
        read, has start offset -1 (an absence, not an error, as OffsetFetch answers); a
        topic that does not exist too."""
        try:
            unknown: list[dict[str, Any]] = []
            if topics is None:
                await self.groups.read_committed(group_id, lambda shard: None)  # its coordinator
                described = await self._states(group_id)
            else:
                image = self.broker.image
                known = []
                for name, partitions in topics:
                    topic = image.topics_by_name.get(name)
                    if topic is None:
                        unknown.append({"topic_name": name, "topic_id": ZERO_UUID,
                                        "partitions": [_described(p, StateSummary(
                                            ErrorCode.none)) for p in partitions]})
                    else:
                        known.append((name, topic.topic_id, partitions))
                answers = await asyncio.gather(*(self._summaries(group_id, topic_id, parts)
                                                 for _, topic_id, parts in known))
                described = [(name, topic_id, summaries) for (name, topic_id, _), summaries
                             in zip(known, answers, strict=True)]
        except KafkaError as e:
            return {"group_id": group_id, "topics": [], "error_code": e.code,
                    "error_message": e.message}
        ends = await self._end_offsets({
            (name, p) for name, _, summaries in described for p, s in summaries
            if s.error == ErrorCode.none and has_lag(s.start_offset, s.delivery_complete_count)})
        return {"group_id": group_id, "error_code": ErrorCode.none, "error_message": None,
                "topics": [{"topic_name": name, "topic_id": topic_id, "partitions": [
                    _described(p, s, ends.get((name, p))) for p, s in summaries]}
                    for name, topic_id, summaries in described] + unknown}

    async def _end_offsets(self, partitions: set[tuple[str, int]]
                           ) -> dict[tuple[str, int], int | KafkaError]:
        """Each partition's end offset as Kafka's lag takes it: ListOffsets for the latest
        offset, read_uncommitted, answered by the partition's leader (its high
        watermark); the error of a partition whose leader cannot answer."""
        image = self.broker.image
        ends: dict[tuple[str, int], int | KafkaError] = {}
        remote: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            topic = image.topics_by_name.get(tp[0])
            registration = None if topic is None else topic.partitions.get(tp[1])
            if registration is None:
                ends[tp] = KafkaError(ErrorCode.unknown_topic_or_partition,
                                      UNKNOWN_TOPIC_OR_PARTITION)
            elif registration.leader < 0:
                ends[tp] = KafkaError(ErrorCode.leader_not_available)
            elif registration.leader != self.broker.node_id:
                remote.setdefault(registration.leader, []).append(tp)
            else:
                try:
                    partition = self.broker.replica_manager.require(*tp, image)
                    partition.check_leader_epoch(-1)
                    ends[tp] = partition.high_watermark
                except KafkaError as e:
                    ends[tp] = e
        if remote:
            peers = InterBrokerClients(self.broker, "share-lag")
            try:
                for answer in await asyncio.gather(*(latest_offsets(peers, node, tps)
                                                     for node, tps in remote.items())):
                    ends.update(answer)
            finally:
                await peers.close()
        return ends

    async def alter_share_group_offsets(self, group_id: str,
                                        topics: list[tuple[str, list[tuple[int, int]]]]
                                        ) -> dict[str, Any]:
        """AlterShareGroupOffsets (Kafka's KafkaApis and GroupCoordinatorService): the
        group must be empty (or not exist yet); each partition's state is initialized at
        its new start offset with a state epoch above the one it had, so that a leader
        still holding the old state has its next write refused (FENCED_STATE_EPOCH) and
        reads the state again. A topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION
        for its partitions; an error of the group, the whole response."""
        if not group_id:
            return _alter_error(KafkaError(ErrorCode.invalid_group_id, INVALID_GROUP_ID))
        image = self.broker.image
        responses: list[dict[str, Any]] = []
        known = []
        for name, partitions in topics:
            topic = image.topics_by_name.get(name)
            if topic is None:
                responses.append({"topic_name": name, "topic_id": ZERO_UUID, "partitions": [
                    _partition_error(p, ErrorCode.unknown_topic_or_partition,
                                     UNKNOWN_TOPIC_OR_PARTITION) for p, _ in partitions]})
            else:
                known.append((name, topic, partitions))
        try:
            group_epoch: int = await self.groups.write(
                group_id, lambda shard, now: shard.alter_share_group_offsets(now, group_id))
            answers = await asyncio.gather(*(
                asyncio.gather(*(self._initialize(group_id, topic.topic_id, p, offset,
                                                  group_epoch)
                                 if p in topic.partitions else _unknown_partition()
                                 for p, offset in partitions))
                for _, topic, partitions in known))
        except KafkaError as e:
            return _alter_error(e)
        for (name, topic, partitions), errors in zip(known, answers, strict=True):
            responses.append({"topic_name": name, "topic_id": topic.topic_id, "partitions": [
                _partition_error(p, *error) for (p, _), error in
                zip(partitions, errors, strict=True)]})
        return {"error_code": ErrorCode.none, "error_message": None, "responses": responses}

    async def _initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          start_offset: int, group_epoch: int
                          ) -> tuple[ErrorCode, str | None]:
        summary = await self._summary(group_id, topic_id, partition)
        if summary.error != ErrorCode.none:
            return summary.error, summary.message
        state_epoch = max(group_epoch, summary.state_epoch + 1)
        error = await self._retrying(
            lambda: self.persister.initialize_state(group_id, topic_id, partition,
                                                    state_epoch, start_offset),
            lambda e: e)
        return error, None

    async def delete_share_group_offsets(self, group_id: str, topics: list[str]
                                         ) -> dict[str, Any]:
        """DeleteShareGroupOffsets (Kafka's deleteShareGroupOffsets): the states of the
        topics' share-partitions, of an existing, empty share group. A topic with no
        state for the group gets UNKNOWN_TOPIC_OR_PARTITION."""
        if not group_id:
            return _delete_error(KafkaError(ErrorCode.invalid_group_id, INVALID_GROUP_ID))
        try:
            await self.groups.read_committed(
                group_id, lambda shard: shard.validate_share_group_offsets_deletable(group_id))
            responses = await asyncio.gather(*(self._delete_topic_states(group_id, name)
                                               for name in topics))
        except KafkaError as e:
            return _delete_error(e)
        return {"error_code": ErrorCode.none, "error_message": None,
                "responses": list(responses)}

    async def _delete_topic_states(self, group_id: str, name: str) -> dict[str, Any]:
        topic = self.broker.image.topics_by_name.get(name)
        if topic is None:
            return {"topic_name": name, "topic_id": ZERO_UUID,
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "error_message": UNKNOWN_TOPIC_OR_PARTITION}
        summaries = await self._summaries(group_id, topic.topic_id, sorted(topic.partitions))
        failed = [s for _, s in summaries if s.error != ErrorCode.none]
        if failed:
            return {"topic_name": name, "topic_id": topic.topic_id,
                    "error_code": failed[0].error, "error_message": failed[0].message}
        held = [p for p, s in summaries if s.start_offset >= 0]
        if not held:
            return {"topic_name": name, "topic_id": ZERO_UUID,
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "error_message": NO_OFFSETS_TO_DELETE}
        errors = await asyncio.gather(*(self._delete_state(group_id, topic.topic_id, p)
                                        for p in held))
        error = next((e for e in errors if e != ErrorCode.none), ErrorCode.none)
        return {"topic_name": name, "topic_id": topic.topic_id, "error_code": error,
                "error_message": None}

    async def delete_share_group_states(self, group_id: str) -> None:
        """What DeleteGroups does first for an empty share group (Kafka's
        deleteShareGroups): delete its share-partition states, so that a group of that id
        made later starts afresh. Raises the error of a state that could not be deleted,
        and the group is then not deleted."""
        if not await self.groups.read_committed(group_id,
                                         lambda shard: shard.is_empty_share_group(group_id)):
            return
        found = await self._states(group_id)
        errors = await asyncio.gather(*(self._delete_state(group_id, topic_id, p)
                                        for _, topic_id, held in found for p, _ in held))
        error = next((e for e in errors if e != ErrorCode.none), None)
        if error is not None:
            raise KafkaError(error, f"Deleting the share-partition states of {group_id}")


DescribedTopic = tuple[str, uuid.UUID, list[tuple[int, StateSummary]]]


def _described(partition: int, summary: StateSummary,
               end_offset: int | KafkaError | None = None) -> dict[str, Any]:
    """A DescribeShareGroupOffsets partition, as Kafka's GroupCoordinatorService builds
    it: a summary that failed shows no state (start offset -1, leader epoch 0); the lag is
    known only with a start offset, a delivery-complete count and the end offset, and a
    partition whose end offset cannot be had carries that error."""
    if summary.error != ErrorCode.none:
        summary = StateSummary(ErrorCode.none)
    if isinstance(end_offset, KafkaError):
        return {"partition_index": partition, "start_offset": 0, "leader_epoch": 0,
                "lag": UNINITIALIZED, "error_code": end_offset.code,
                "error_message": end_offset.message}
    lag = UNINITIALIZED if end_offset is None else share_partition_lag(
        end_offset, summary.start_offset, summary.delivery_complete_count)
    return {"partition_index": partition, "start_offset": summary.start_offset,
            "leader_epoch": summary.leader_epoch, "lag": lag, "error_code": ErrorCode.none,
            "error_message": None}


async def _unknown_partition() -> tuple[ErrorCode, str | None]:
    return ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION


def _partition_error(partition: int, code: ErrorCode, message: str | None
                     ) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": code, "error_message": message}


def _alter_error(error: KafkaError) -> dict[str, Any]:
    return {"error_code": error.code, "error_message": error.message, "responses": []}


def _delete_error(error: KafkaError) -> dict[str, Any]:
    return {"error_code": error.code, "error_message": error.message, "responses": []}

