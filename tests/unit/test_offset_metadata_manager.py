"""The OffsetMetadataManager on its own: commits, fetches, deletions and expiration of
committed offsets, checked against a fake view of the groups (no runtime, no sockets)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.config import GroupConfig
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.offset_metadata_manager import (
    OffsetExpiration,
    OffsetMetadataManager,
)
from ottla.coordinator.runtime import CoordinatorResult
from ottla.protocol.errors import ErrorCode as E
from ottla.protocol.errors import KafkaError

NOW = 1_000_000
RETENTION = 60_000


@dataclass
class FakeGroup:
    generation: int = 0
    members: set[str] = field(default_factory=set)
    subscribed: set[str] | None = None
    empty_since_ms: int = -1


class FakeGroups:
    """A GroupOffsetsView over plain data: a member commits with the group's generation."""

    def __init__(self) -> None:
        self.groups: dict[str, FakeGroup] = {}
        self.committed_by: list[tuple[str, str]] = []

    def ensure_group(self, group_id: str) -> None:
        self.groups.setdefault(group_id, FakeGroup())

    def validate_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                               instance_id: str | None, version: int) -> E | None:
        group = self.groups.get(group_id)
        if group is None or (generation_id < 0 and not group.members):
            return None if generation_id < 0 else E.illegal_generation
        if member_id not in group.members:
            return E.unknown_member_id
        if generation_id != group.generation:
            return E.stale_member_epoch if version >= 9 else E.illegal_generation
        return None

    def offsets_committed(self, group_id: str, member_id: str) -> None:
        self.committed_by.append((group_id, member_id))

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id and member_epoch >= 0 and \
                member_epoch != group.generation:
            raise KafkaError(E.stale_member_epoch, "stale")

    def validate_offset_delete(self, group_id: str) -> E | None:
        return None if group_id in self.groups else E.group_id_not_found

    def is_subscribed_to_topic(self, group_id: str, topic: str) -> bool:
        subscribed = self.groups[group_id].subscribed
        return subscribed is not None and topic in subscribed

    def offset_expiration(self, group_id: str) -> OffsetExpiration | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        return OffsetExpiration(not group.members, group.empty_since_ms, group.subscribed)


def manager(**config: int) -> tuple[OffsetMetadataManager, FakeGroups]:
    groups = FakeGroups()
    return OffsetMetadataManager(GroupConfig(offsets_retention_ms=RETENTION, **config),
                                 groups), groups


class Log:
    end = 0


def apply(offsets: OffsetMetadataManager, result: CoordinatorResult,
          committed: bool = True) -> CoordinatorResult:
    """What the runtime does with a write: replay its records (here after a round trip
    through Kafka's byte layout), append them, and (on one replica, at once) see the
    high watermark pass them."""
    for record in result.records:
        offsets.replay(rec.decode(*rec.encode(record)))
    if result.records:
        Log.end += len(result.records)
        offsets.on_written(Log.end)
    if committed:
        offsets.on_committed(Log.end)
    return result


def commit(offsets: OffsetMetadataManager, group: str, generation: int, member: str,
           entries: list[tuple[str, int, int, str | None]], now: int = NOW,
           version: int = 9) -> CoordinatorResult:
    return apply(offsets, offsets.commit_offsets(
        now, group, generation, member, None,
        [(t, p, o, -1, meta) for t, p, o, meta in entries], version))


def test_a_simple_commit_creates_the_group_and_can_be_fetched() -> None:
    offsets, groups = manager(offset_metadata_max_bytes=4)
    result = commit(offsets, "g", -1, "", [("t", 1, 7, None), ("t", 0, 5, "meta"),
                                           ("u", 0, 1, "too long")])
    assert result.response == {("t", 1): E.none, ("t", 0): E.none,
                               ("u", 0): E.offset_metadata_too_large}
    assert len(result.records) == 2
    assert "g" in groups.groups and groups.committed_by == [("g", "")]
    assert offsets.fetch_offsets("g", [("t", [0, 1, 2]), ("u", [0])]) == \
        [("t", [(0, 5, -1, "meta"), (1, 7, -1, ""), (2, -1, -1, "")]), ("u", [(0, -1, -1, "")])]
    assert offsets.fetch_offsets("g", None) == [("t", [(0, 5, -1, "meta"), (1, 7, -1, "")])]
    assert offsets.fetch_offsets("other", None) == []


def test_a_stale_generation_fails_every_offset_and_writes_nothing() -> None:
    offsets, groups = manager()
    groups.groups["g"] = FakeGroup(generation=3, members={"m"})
    entries = [("t", 0, 1, None), ("t", 1, 1, None)]
    for version, error in ((8, E.illegal_generation), (9, E.stale_member_epoch)):
        result = commit(offsets, "g", 2, "m", entries, version=version)
        assert (result.records, result.response) == ([], {("t", 0): error, ("t", 1): error})
    assert commit(offsets, "g", 3, "x", entries).response == \
        {("t", 0): E.unknown_member_id, ("t", 1): E.unknown_member_id}
    assert groups.committed_by == []
    assert commit(offsets, "g", 3, "m", entries).response == \
        {("t", 0): E.none, ("t", 1): E.none}
    assert groups.committed_by == [("g", "m")]
    assert offsets.fetch_offsets("g", [("t", [0])], "m", 3) == [("t", [(0, 1, -1, "")])]
    with pytest.raises(KafkaError) as stale:
        offsets.fetch_offsets("g", [("t", [0])], "m", 2)
    assert stale.value.code == E.stale_member_epoch


def test_deleting_offsets_spares_subscribed_topics() -> None:
    offsets, groups = manager()
    commit(offsets, "g", -1, "", [("t", 0, 1, None), ("u", 0, 1, None)])
    groups.groups["g"].subscribed = {"t"}
    assert offsets.delete_offsets(NOW, "nope", [("t", [0])]).response == \
        (E.group_id_not_found, {})
    result = apply(offsets, offsets.delete_offsets(NOW, "g", [("t", [0]), ("u", [0, 1])]))
    assert result.response == (E.none, {("t", 0): E.group_subscribed_to_topic,
                                         ("u", 0): E.none, ("u", 1): E.none})
    assert result.records == [rec.CoordinatorRecord(
        rec.OffsetCommitKey(group="g", topic="u", partition=0), None)]
    assert offsets.fetch_offsets("g", None) == [("t", [(0, 1, -1, "")])]
    assert [r.key.topic for r in offsets.delete_all_offsets("g")] == ["t"]


def test_an_empty_groups_offsets_expire_retention_after_it_emptied() -> None:
    offsets, groups = manager()
    commit(offsets, "g", -1, "", [("t", 0, 1, None), ("t", 1, 1, None)], now=NOW)
    groups.groups["g"].empty_since_ms = NOW + 10_000
    records: list[rec.CoordinatorRecord] = []
    assert offsets.cleanup_expired_offsets(NOW + RETENTION, "g", records) is False
    assert records == []
    assert offsets.cleanup_expired_offsets(NOW + 10_000 + RETENTION, "g", records) is True
    assert [(r.key.topic, r.key.partition, r.value) for r in records] == \
        [("t", 0, None), ("t", 1, None)]
    assert offsets.cleanup_expired_offsets(NOW, "unknown", records) is False


def test_a_live_groups_offsets_expire_only_for_topics_it_left() -> None:
    offsets, groups = manager()
    commit(offsets, "g", -1, "", [("t", 0, 1, None), ("u", 0, 1, None)], now=NOW)
    groups.groups["g"].members = {"m"}
    records: list[rec.CoordinatorRecord] = []
    # Unknown subscriptions keep every offset.
    assert offsets.cleanup_expired_offsets(NOW + 10 * RETENTION, "g", records) is False
    assert records == []
    groups.groups["g"].subscribed = {"t"}
    assert offsets.cleanup_expired_offsets(NOW + RETENTION - 1, "g", records) is False
    assert records == []
    assert offsets.cleanup_expired_offsets(NOW + RETENTION, "g", records) is False
    assert [(r.key.topic, r.key.partition) for r in records] == [("u", 0)]


def test_deleted_and_expired_offsets_are_counted_as_kafka_records_them() -> None:
    """Kafka's offset-deletion-count grows by the tombstones OffsetDelete writes (not for
    a partition without an offset, nor for a subscribed topic), offset-expiration-count by
    the offsets the retention check expires."""
    groups = FakeGroups()
    metrics = GroupCoordinatorMetrics()
    offsets = OffsetMetadataManager(GroupConfig(offsets_retention_ms=RETENTION), groups,
                                    metrics)
    commit(offsets, "g", -1, "", [("t", 0, 1, None), ("u", 0, 1, None), ("u", 1, 1, None)],
           now=NOW)
    groups.groups["g"].subscribed = {"t"}
    apply(offsets, offsets.delete_offsets(NOW, "g", [("t", [0]), ("u", [0, 7])]))
    assert (metrics.offset_deletions, metrics.offset_expirations) == (1, 0)
    records: list[rec.CoordinatorRecord] = []  # the group is empty: all expire together
    assert offsets.cleanup_expired_offsets(NOW + RETENTION - 1, "g", records) is False
    assert metrics.offset_expirations == 0
    assert offsets.cleanup_expired_offsets(NOW + RETENTION, "g", records) is True
    assert (metrics.offset_deletions, metrics.offset_expirations) == (1, 2)


def test_fetches_read_offsets_as_of_the_high_watermark() -> None:
    """A commit the replicas do not all have yet is not read back by anyone: a
    coordinator failover could still take it back."""
    offsets, _ = manager()
    commit(offsets, "g", -1, "", [("t", 0, 5, None)])
    first_end = Log.end
    apply(offsets, offsets.commit_offsets(NOW, "g", -1, "", None,
                                          [("t", 0, 9, -1, None), ("t", 1, 3, -1, None)], 9),
          committed=False)
    assert offsets.fetch_offsets("g", [("t", [0, 1])]) == \
        [("t", [(0, 5, -1, ""), (1, -1, -1, "")])]
    assert offsets.fetch_offsets("g", None) == [("t", [(0, 5, -1, "")])]
    assert offsets.committed("g", "t", 0).offset == 9  # writes see the latest state
    offsets.on_committed(first_end)  # not far enough yet
    assert offsets.fetch_offsets("g", [("t", [0])]) == [("t", [(0, 5, -1, "")])]
    offsets.on_committed(Log.end)
    assert offsets.fetch_offsets("g", None) == [("t", [(0, 9, -1, ""), (1, 3, -1, "")])]


def test_a_deletion_above_the_high_watermark_still_reads_the_committed_offset() -> None:
    offsets, _ = manager()
    commit(offsets, "g", -1, "", [("t", 0, 5, None)])
    apply(offsets, offsets.delete_offsets(NOW, "g", [("t", [0])]), committed=False)
    assert offsets.fetch_offsets("g", None) == [("t", [(0, 5, -1, "")])]
    offsets.on_committed(Log.end)
    assert offsets.fetch_offsets("g", None) == []


def test_every_groups_offsets_are_listed_as_fetches_read_them() -> None:
    """What the consumer-lag metrics read: one pass over the shard, as of the high
    watermark (a commit and a deletion above it not yet seen)."""
    offsets, _ = manager()
    commit(offsets, "g", -1, "", [("t", 0, 5, None), ("t", 1, 6, None)])
    commit(offsets, "h", -1, "", [("u", 0, 1, None)])
    apply(offsets, offsets.commit_offsets(NOW, "g", -1, "", None,
                                          [("t", 0, 9, -1, None), ("t", 2, 3, -1, None)], 9),
          committed=False)
    apply(offsets, offsets.delete_offsets(NOW, "h", [("u", [0])]), committed=False)
    assert sorted(offsets.committed_offsets()) == [
        ("g", "t", 0, 5), ("g", "t", 1, 6), ("h", "u", 0, 1)]
    offsets.on_committed(Log.end)
    assert sorted(offsets.committed_offsets()) == [
        ("g", "t", 0, 9), ("g", "t", 1, 6), ("g", "t", 2, 3)]


def test_records_loaded_above_the_high_watermark_stay_unread_until_committed() -> None:
    """A new coordinator loads its whole log; what its predecessor wrote past the high
    watermark is read only once committed."""
    offsets, _ = manager()
    for offset, value in ((0, 4), (1, 8)):
        offsets.replay(rec.CoordinatorRecord(
            rec.OffsetCommitKey(group="g", topic="t", partition=0),
            rec.OffsetCommitValue(offset=value, leader_epoch=-1, metadata="",
                                  commit_timestamp=NOW)), offset)
    offsets.on_committed(1)
    assert offsets.fetch_offsets("g", None) == [("t", [(0, 4, -1, "")])]
    offsets.on_committed(2)
    assert offsets.fetch_offsets("g", None) == [("t", [(0, 8, -1, "")])]


def test_transactional_offsets_wait_for_their_marker() -> None:
    """TxnOffsetCommit (KIP-98): the offsets are written in the producer's transaction,
    fetched as before (UNSTABLE for require_stable) until its COMMIT marker makes them
    the group's; an ABORT drops them."""
    from ottla.coordinator.runtime import TransactionalRecord

    offsets, _ = manager()
    apply(offsets, offsets.commit_offsets(NOW, "g", -1, "", None, [("t", 0, 5, -1, "")], 8))
    result = offsets.txn_commit_offsets(NOW, "g", 42, 0, -1, "", None,
                                        [("t", 0, 9, -1, ""), ("t", 1, 3, -1, "")])
    assert result.response == {("t", 0): E.none, ("t", 1): E.none}
    assert all(isinstance(r, TransactionalRecord) and r.producer_id == 42
               for r in result.records)
    for record in result.records:
        offsets.replay_transactional(record.producer_id, record.record)
    assert offsets.fetch_offsets("g", [("t", [0, 1])]) == [("t", [(0, 5, -1, ""),
                                                                  (1, -1, -1, "")])]
    assert offsets.unstable_offsets("g", [("t", [0, 1, 2])]) == {("t", 0), ("t", 1)}
    offsets.replay_marker(42, commit=True, offset=100)
    # The COMMIT marker is in the log but not yet below the high watermark: the offsets
    # from before it are still the ones fetched, and not stable (its producer may have
    # been told the transaction committed: a new owner must not start from them).
    assert offsets.fetch_offsets("g", [("t", [0, 1])]) == [("t", [(0, 5, -1, ""),
                                                                  (1, -1, -1, "")])]
    assert offsets.unstable_offsets("g", [("t", [0, 1, 2])]) == {("t", 0), ("t", 1)}
    offsets.on_committed(200)
    assert offsets.fetch_offsets("g", [("t", [0, 1])]) == [("t", [(0, 9, -1, ""),
                                                                  (1, 3, -1, "")])]
    assert offsets.unstable_offsets("g", None) == set()
    aborted = offsets.txn_commit_offsets(NOW, "g", 43, 0, -1, "", None, [("t", 0, 50, -1, "")])
    for record in aborted.records:
        offsets.replay_transactional(record.producer_id, record.record)
    offsets.replay_marker(43, commit=False, offset=201)
    assert offsets.fetch_offsets("g", [("t", [0])]) == [("t", [(0, 9, -1, "")])]
    assert offsets.unstable_offsets("g", None) == set()
