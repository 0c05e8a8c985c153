"""Committed offsets of one coordinator shard: group -> topic -> partition -> offset.

Kafka's OffsetMetadataManager: commits become OffsetCommit records, a tombstone deletes an
offset, and replaying those records is the only way the map changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ottla.coordinator.group import records as rec


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


class Offsets:
    def __init__(self) -> None:
        self.by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def replay(self, key: rec.OffsetCommitKey, value: rec.OffsetCommitValue | None) -> None:
        if value is None:
            topics = self.by_group.get(key.group)
            if topics is None:
                return
            partitions = topics.get(key.topic)
            if partitions is not None:
                partitions.pop(key.partition, None)
                if not partitions:
                    del topics[key.topic]
            if not topics:
                del self.by_group[key.group]
            return
        self.by_group.setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = \
            OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata,
                              value.commit_timestamp)

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.by_group.get(group, {}).get(topic, {}).get(partition)

    def topics(self, group: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self.by_group.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self.by_group.get(group))

    def all(self, group: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        for topic, partitions in self.by_group.get(group, {}).items():
            for partition, committed in partitions.items():
                yield topic, partition, committed


def commit_record(group: str, topic: str, partition: int, offset: int, leader_epoch: int,
                  metadata: str, now_ms: int) -> rec.CoordinatorRecord:
    return rec.CoordinatorRecord(
        rec.OffsetCommitKey(group=group, topic=topic, partition=partition),
        rec.OffsetCommitValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                              commit_timestamp=now_ms))


def tombstone(group: str, topic: str, partition: int) -> rec.CoordinatorRecord:
    return rec.CoordinatorRecord(
        rec.OffsetCommitKey(group=group, topic=topic, partition=partition), None)
