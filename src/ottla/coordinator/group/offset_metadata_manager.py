"""Committed offsets of one shard (Kafka's OffsetMetadataManager): group -> topic ->
partition -> offset.

Commits become OffsetCommit records, a tombstone deletes an offset, and replaying those
records is the only way the map changes. Whether a commit, fetch or deletion is allowed
depends on the group (its generation, members, subscriptions), which this manager asks of
a ``GroupOffsetsView`` rather than knowing the kinds of groups itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar, Protocol

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.config import GroupConfig
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.responses import OffsetDeleteAnswer, PartitionErrors
from ottla.coordinator.runtime import CoordinatorResult, TransactionalRecord
from ottla.protocol.errors import ErrorCode

E = ErrorCode

MEMBER_EPOCH_COMMIT_VERSION = 9
"""OffsetCommit v9+ (KIP-848): a commit to an unknown group is GROUP_ID_NOT_FOUND (not
ILLEGAL_GENERATION), and a consumer member's stale epoch STALE_MEMBER_EPOCH; a
TxnOffsetCommit's member is checked as such a commit's."""

CommittedOffsets = list[tuple[str, list[tuple[int, int, int, str]]]]
"""OffsetFetch's answer: (topic, [(partition, offset, leader epoch, metadata)])."""


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(slots=True)
class _Write:
    end_offset: int
    """The log end after the record's batch (-1 until appended)."""
    before: OffsetAndMetadata | None
    """The committed offset before this write."""


@dataclass(frozen=True, slots=True)
class OffsetExpiration:
    """When a group's offsets may expire (Kafka's OffsetExpirationCondition)."""

    empty: bool
    """An empty group's offsets expire retention after it emptied (or their commit)."""
    empty_since_ms: int
    subscribed_topics: set[str] | None
    """A live group's offsets of topics outside these expire retention after their commit;
    None when the subscriptions are unknown, so that none expires."""


class GroupOffsetsView(Protocol):
    """What offsets need to know of the groups; the GroupMetadataManager provides it."""

    def ensure_group(self, group_id: str) -> None:
        """A commit to an unknown group creates it (a simple, member-less group)."""

    def validate_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                               instance_id: str | None, version: int) -> ErrorCode | None:
        """None if the member may commit for the group, else the error for every offset."""

    def offsets_committed(self, group_id: str, member_id: str) -> None:
        """An accepted commit counts as a sign of life of its member."""

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> None:
        """Raise the KafkaError a member that names itself gets for a stale identity."""

    def validate_offset_delete(self, group_id: str) -> ErrorCode | None:
        """None if the group's offsets may be deleted, else the group-level error."""

    def is_subscribed_to_topic(self, group_id: str, topic: str) -> bool: ...

    def offset_expiration(self, group_id: str) -> OffsetExpiration | None: ...


def commit_record(group: str, topic: str, partition: int, offset: int, leader_epoch: int,
                  metadata: str, now_ms: int) -> rec.CoordinatorRecord:
    return rec.CoordinatorRecord(
        rec.OffsetCommitKey(group=group, topic=topic, partition=partition),
        rec.OffsetCommitValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                              commit_timestamp=now_ms))


def tombstone(group: str, topic: str, partition: int) -> rec.CoordinatorRecord:
    return rec.CoordinatorRecord(
        rec.OffsetCommitKey(group=group, topic=topic, partition=partition), None)


class OffsetMetadataManager:
    RECORD_KEYS: ClassVar[tuple[type, ...]] = (rec.OffsetCommitKey,)

    def __init__(self, config: GroupConfig, groups: GroupOffsetsView,
                 metrics: GroupCoordinatorMetrics | None = None) -> None:
        self._config = config
        self._metrics = metrics
        self._groups = groups
        self._by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        self._uncommitted: dict[tuple[str, str, int], list[_Write]] = {}
        """Per offset, its writes the partition's high watermark has not passed yet, each
        with the value before it: OffsetFetch answers from before the first of them, so
        a client never reads an offset that a coordinator failover could take back."""
        self._unplaced: list[_Write] = []
        """Writes replayed before their append, waiting for ``on_written``."""
        self._pending_txn: dict[int, dict[tuple[str, str, int], OffsetAndMetadata]] = {}
        """Transactional commits per producer id, until its COMMIT (they become the
        committed offsets) or ABORT marker (they are dropped)."""

    # --- replay: the one path from records to offsets --------------------------------------

    def replay(self, record: rec.CoordinatorRecord, offset: int = -1) -> None:
        """Apply a commit or a tombstone; ``offset`` is the record's (-1 for a write not
        yet appended: ``on_written`` gives its place)."""
        key: rec.OffsetCommitKey = record.key
        value: rec.OffsetCommitValue | None = record.value
        write = _Write(offset + 1 if offset >= 0 else -1,
                       self.committed(key.group, key.topic, key.partition))
        self._uncommitted.setdefault((key.group, key.topic, key.partition), []).append(write)
        if offset < 0:
            self._unplaced.append(write)
        if value is None:
            topics = self._by_group.get(key.group)
            if topics is None:
                return
            partitions = topics.get(key.topic)
            if partitions is not None:
                partitions.pop(key.partition, None)
                if not partitions:
                    del topics[key.topic]
            if not topics:
                del self._by_group[key.group]
            return
        self._groups.ensure_group(key.group)
        self._by_group.setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = \
            OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata,
                              value.commit_timestamp)

    def replay_transactional(self, producer_id: int, record: rec.CoordinatorRecord) -> None:
        """A TxnOffsetCommit's record: pending in the producer's transaction."""
        key: rec.OffsetCommitKey = record.key
        value: rec.OffsetCommitValue | None = record.value
        if value is None:
            return
        self._groups.ensure_group(key.group)
        self._pending_txn.setdefault(producer_id, {})[(key.group, key.topic, key.partition)] = \
            OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata,
                              value.commit_timestamp)

    def replay_marker(self, producer_id: int, commit: bool, offset: int) -> None:
        """The producer's transaction ended at ``offset``: its pending offsets become the
        group's (COMMIT) or are forgotten (ABORT), as Kafka's replayEndTransactionMarker."""
        pending = self._pending_txn.pop(producer_id, {})
        if not commit:
            return
        for (group, topic, partition), committed in pending.items():
            self.replay(commit_record(group, topic, partition, committed.offset,
                                      committed.leader_epoch, committed.metadata,
                                      committed.commit_timestamp_ms), offset)

    def on_written(self, end_offset: int) -> None:
        """The writes replayed since the last call were appended, ending at
        ``end_offset``: committed once the high watermark reaches it."""
        for write in self._unplaced:
            write.end_offset = end_offset
        self._unplaced.clear()

    def on_committed(self, high_watermark: int) -> None:
        """The partition's high watermark moved: the writes below it are committed."""
        for key in list(self._uncommitted):
            writes = self._uncommitted[key]
            while writes and 0 <= writes[0].end_offset <= high_watermark:
                writes.pop(0)
            if not writes:
                del self._uncommitted[key]

    def on_loaded(self, now_ms: int) -> None:
        """Nothing to start: expiration runs from the shard, across groups and offsets."""

    def on_unloaded(self) -> None:
        """Nothing parked here."""

    # --- reading ---------------------------------------------------------------------------

    def committed(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._by_group.get(group_id, {}).get(topic, {}).get(partition)

    def _committed_view(self, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        """The group's offsets as of the high watermark (writes above it undone)."""
        current = self._by_group.get(group_id, {})
        pending = [(k, w[0].before) for k, w in self._uncommitted.items() if k[0] == group_id]
        if not pending:
            return current
        view = {topic: dict(partitions) for topic, partitions in current.items()}
        for (_, topic, partition), before in pending:
            if before is None:
                view.get(topic, {}).pop(partition, None)
            else:
                view.setdefault(topic, {})[partition] = before
        return {topic: partitions for topic, partitions in view.items() if partitions}

    def committed_offsets(self) -> Iterator[tuple[str, str, int, int]]:
        """Every group's committed offsets as of the high watermark, as OffsetFetch reads
        them: (group, topic, partition, offset). One pass over the shard (the consumer-lag
        metrics read it when scraped)."""
        before = {key: writes[0].before for key, writes in self._uncommitted.items()}
        for group_id, topics in self._by_group.items():
            for topic, partitions in topics.items():
                for partition, committed in partitions.items():
                    key = (group_id, topic, partition)
                    if key in before:
                        continue
                    yield group_id, topic, partition, committed.offset
        for (group_id, topic, partition), committed_before in before.items():
            if committed_before is not None:
                yield group_id, topic, partition, committed_before.offset

    def _all(self, group_id: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        for topic, partitions in self._by_group.get(group_id, {}).items():
            for partition, committed in partitions.items():
                yield topic, partition, committed

    # --- OffsetCommit, OffsetFetch, OffsetDelete -----------------------------------------

    def commit_offsets(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                       instance_id: str | None,
                       offsets: Iterable[tuple[str, int, int, int, str | None]],
                       version: int) -> CoordinatorResult[PartitionErrors]:
        """``offsets`` are (topic, partition, offset, leader epoch, metadata)."""
        offsets = list(offsets)
        error = self._groups.validate_offset_commit(group_id, generation_id, member_id,
                                                    instance_id, version)
        if error is not None:
            return CoordinatorResult(response={(t, p): error for t, p, *_ in offsets})
        self._groups.offsets_committed(group_id, member_id)
        records = []
        results: PartitionErrors = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            metadata = metadata or ""
            if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                results[(topic, partition)] = E.offset_metadata_too_large
                continue
            records.append(commit_record(group_id, topic, partition, offset, leader_epoch,
                                         metadata, now_ms))
            results[(topic, partition)] = E.none
        if self._metrics is not None:
            self._metrics.offset_commits += len(records)
        return CoordinatorResult(records, results)

    def txn_commit_offsets(self, now_ms: int, group_id: str, producer_id: int,
                           producer_epoch: int, generation_id: int, member_id: str,
                           instance_id: str | None,
                           offsets: Iterable[tuple[str, int, int, int, str | None]]
                           ) -> CoordinatorResult[PartitionErrors]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and
        stay pending until its marker; a member that names itself must be current
        (KIP-447: a zombie of an older generation is fenced)."""
        offsets = list(offsets)
        if member_id or generation_id >= 0:
            error = self._groups.validate_offset_commit(group_id, generation_id, member_id,
                                                        instance_id, MEMBER_EPOCH_COMMIT_VERSION)
            if error is not None:
                return CoordinatorResult(response={(t, p): error for t, p, *_ in offsets})
        records: list[TransactionalRecord] = []
        results: PartitionErrors = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            metadata = metadata or ""
            if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                results[(topic, partition)] = E.offset_metadata_too_large
                continue
            records.append(TransactionalRecord(producer_id, producer_epoch, commit_record(
                group_id, topic, partition, offset, leader_epoch, metadata, now_ms)))
            results[(topic, partition)] = E.none
        if self._metrics is not None:
            self._metrics.offset_commits += len(records)
        return CoordinatorResult(list(records), results)

    def unstable_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                         ) -> set[tuple[str, int]]:
        """The partitions whose offset an open transaction is about to change, or a write
        above the high watermark has changed (a transaction's COMMIT marker among them):
        with ``require_stable`` (KIP-447) OffsetFetch answers them UNSTABLE_OFFSET_COMMIT
        and the client asks again. Kafka reads such a fetch from the latest state once
        the high watermark passes it; answering the offset from before the marker
        instead would send a new owner back over records whose transaction its
        producer was told had committed."""
        pending = {(topic, partition) for offsets in self._pending_txn.values()
                   for (group, topic, partition) in offsets if group == group_id}
        pending |= {(topic, partition) for (group, topic, partition) in self._uncommitted
                    if group == group_id}
        if topics is None:
            return pending
        return {(topic, p) for topic, partitions in topics for p in partitions
                if (topic, p) in pending}

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> CommittedOffsets:
        """All topics if ``topics`` is None; a partition without an offset gets -1. A
        KIP-848 member that names itself (OffsetFetch v9) must have the current epoch."""
        self._groups.validate_offset_fetch(group_id, member_id, member_epoch)
        committed = self._committed_view(group_id)
        if topics is None:
            return [(topic, [(p, o.offset, o.leader_epoch, o.metadata)
                             for p, o in sorted(parts.items())])
                    for topic, parts in committed.items()]
        result = []
        for topic, partitions in topics:
            parts = committed.get(topic, {})
            entries = []
            for p in partitions:
                o = parts.get(p)
                entries.append((p, o.offset, o.leader_epoch, o.metadata) if o
                               else (p, -1, -1, ""))
            result.append((topic, entries))
        return result

    def delete_offsets(self, now_ms: int, group_id: str, topics: list[tuple[str, list[int]]]
                       ) -> CoordinatorResult[OffsetDeleteAnswer]:
        """A topic the group still subscribes to keeps its offsets."""
        error = self._groups.validate_offset_delete(group_id)
        if error is not None:
            return CoordinatorResult(response=OffsetDeleteAnswer(error, {}))
        records = []
        results: PartitionErrors = {}
        for topic, partitions in topics:
            subscribed = self._groups.is_subscribed_to_topic(group_id, topic)
            for p in partitions:
                if subscribed:
                    results[(topic, p)] = E.group_subscribed_to_topic
                    continue
                results[(topic, p)] = E.none
                if self.committed(group_id, topic, p) is not None:
                    records.append(tombstone(group_id, topic, p))
        if self._metrics is not None:
            self._metrics.offset_deletions += len(records)
        return CoordinatorResult(records, OffsetDeleteAnswer(E.none, results))

    # --- deleting groups and expiring offsets ----------------------------------------------

    def delete_all_offsets(self, group_id: str) -> list[rec.CoordinatorRecord]:
        """Tombstones for every offset of a group that is being deleted."""
        return [tombstone(group_id, topic, partition)
                for topic, partition, _ in self._all(group_id)]

    def cleanup_expired_offsets(self, now_ms: int, group_id: str,
                                records: list[rec.CoordinatorRecord]) -> bool:
        """offsets.retention.minutes: append tombstones for the group's expired offsets
        (``OffsetExpiration`` says which) and say whether none is left, in which case the
        group itself may go."""
        expiration = self._groups.offset_expiration(group_id)
        if expiration is None:
            return False
        retention = self._config.offsets_retention_ms
        count = 0
        expired = 0
        for topic, partition, committed in self._all(group_id):
            count += 1
            if expiration.empty:
                base = max(expiration.empty_since_ms, committed.commit_timestamp_ms)
            elif expiration.subscribed_topics is not None and \
                    topic not in expiration.subscribed_topics:
                base = committed.commit_timestamp_ms
            else:
                continue
            if base + retention <= now_ms:
                records.append(tombstone(group_id, topic, partition))
                expired += 1
        if self._metrics is not None:
            self._metrics.offset_expirations += expired
        return count == expired
