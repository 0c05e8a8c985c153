"""The share groups' offsets admin APIs (KIP-932, KIP-1226) on a broker: DescribeShareGroupOffsets
with start offsets and lag, AlterShareGroupOffsets (empty or new groups only, fencing the
leader's old state), DeleteShareGroupOffsets, DeleteGroups taking a share group's states
with it; the group's part on the shard; and the lag arithmetic."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from ottla.broker.handlers import share_offsets
from ottla.broker.share.offsets_admin import ShareGroupOffsetsAdmin, _described
from ottla.broker.share.partition_manager import SharePartitionManager
from ottla.broker.share.persister import CoordinatorPersister, StateSummary
from ottla.coordinator.group import records as rec
from ottla.coordinator.group.consumer_protocol import HeartbeatRequest
from ottla.coordinator.group.share_group import UNINITIALIZED, has_lag, share_partition_lag
from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from tests.share_state import ShardPersister
from tests.unit.test_broker_handlers import (  # noqa: F401 - the fixtures
    acquired,
    batch,
    broker,
    context,
    coordinator,
    create_topic,
    decoded,
    produce_ok,
    share_ack_body,
    share_fetch_body,
)
from tests.unit.test_broker_handlers import ask as handler_ask
from tests.unit.test_share_groups import TP, Shard

E = ErrorCode
OFFSETS_APIS = {spec.api_key: spec for spec in share_offsets.APIS}
NO_SUCH_PARTITION = "This server does not host this topic-partition."


async def ask(broker: Any, api_key: int, version: int, body: dict[str, Any]) -> Any:  # noqa: F811
    spec = OFFSETS_APIS.get(api_key)
    if spec is None:
        return await handler_ask(broker, api_key, version, body)
    assert spec.min_version <= version <= spec.max_version
    request = build(request_schema(api_key, version), body)
    return decoded(api_key, version, await spec.handler(broker, context(api_key, version),
                                                        request))


# --- the lag (KIP-1226) ------------------------------------------------------------------------

def test_lag_is_the_end_offset_less_the_start_offset_and_the_delivered_past_it() -> None:
    assert share_partition_lag(10, 3, 1) == 6
    assert share_partition_lag(10, 10, 0) == 0
    assert not has_lag(UNINITIALIZED, 0) and not has_lag(3, UNINITIALIZED)
    assert share_partition_lag(10, UNINITIALIZED, 0) == UNINITIALIZED
    assert share_partition_lag(10, 3, UNINITIALIZED) == UNINITIALIZED  # initialized bare


def test_a_described_partition_as_kafka_builds_it() -> None:
    known = StateSummary(E.none, None, 2, 5, 3, 1)
    assert _described(0, known, 10) == {
        "partition_index": 0, "start_offset": 3, "leader_epoch": 5, "lag": 6,
        "error_code": E.none, "error_message": None}
    # A summary that failed is an absence, not an error (as OffsetFetch answers).
    failed = _described(1, StateSummary(E.coordinator_not_available))
    assert (failed["start_offset"], failed["leader_epoch"], failed["lag"],
            failed["error_code"]) == (-1, 0, -1, E.none)
    # The end offset could not be had: the partition carries that error.
    lost = _described(2, known, KafkaError(E.not_leader_or_follower))
    assert (lost["error_code"], lost["lag"]) == (E.not_leader_or_follower, -1)


# --- the group's part, on the shard -------------------------------------------------------------

def test_altering_offsets_creates_an_absent_group_bumps_its_epoch_and_needs_it_empty() -> None:
    s = Shard()
    assert s.write(lambda sh, now: sh.alter_share_group_offsets(now, "new")) == 1
    assert s.write(lambda sh, now: sh.alter_share_group_offsets(now, "new")) == 2
    assert s.runtime.read(TP, lambda sh: sh.is_empty_share_group("new"))
    reloaded = CoordinatorRuntime(s.partition, s.factory)
    reloaded.load(TP, s.now)
    assert reloaded.active(TP).shard.groups["new"].group_epoch == 2
    s.heartbeat("a", 0, group="new")
    replies: list[Any] = []
    s.runtime.write(TP, lambda sh, now: sh.alter_share_group_offsets(now, "new"),
                    replies.append, s.now)
    assert isinstance(replies[0], KafkaError) and replies[0].code == E.non_empty_group
    consumer = HeartbeatRequest("consumers", "c", 0, None, None, 30_000, ("orders",), None,
                                None, None, "client", "/127.0.0.1")
    s.write(lambda sh, now: sh.consumer_group_heartbeat(now, consumer))
    s.runtime.write(TP, lambda sh, now: sh.alter_share_group_offsets(now, "consumers"),
                    replies.append, s.now)
    assert replies[1].code == E.group_id_not_found
    assert not s.runtime.read(TP, lambda sh: sh.is_empty_share_group("consumers"))
    keys = [type(rec.decode(k, v).key).__name__ for k, v in s.partition.entries[:2]]
    assert keys == ["ShareGroupMetadataKey"] * 2


def test_deleting_offsets_needs_an_existing_empty_share_group() -> None:
    s = Shard()

    def refused(group: str) -> tuple[ErrorCode, str | None]:
        try:
            s.runtime.read(TP, lambda sh: sh.validate_share_group_offsets_deletable(group))
        except KafkaError as e:
            return e.code, e.message
        raise AssertionError(f"{group} is deletable")
    assert refused("ghost") == (E.group_id_not_found, "Group ghost not found.")
    s.heartbeat("a", 0)
    assert refused("g") == (E.non_empty_group, "The group is not empty.")
    s.heartbeat("a", -1)
    s.runtime.read(TP, lambda sh: sh.validate_share_group_offsets_deletable("g"))


# --- the APIs on a broker ---------------------------------------------------------------------

def leading(broker: Any, group: str = "workers") -> tuple[uuid.UUID, ShardPersister]:  # noqa: F811
    """A topic ``jobs`` this broker leads with records a, b, c, the share-partition leader
    over an in-memory share coordinator, and ``group`` starting at the log start."""
    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name=group, name="share.auto.offset.reset",
                                       value="earliest"))
    persister = ShardPersister()
    broker.share_partitions = SharePartitionManager(broker, persister)
    broker.share_offsets = ShareGroupOffsetsAdmin(broker, broker.group_coordinator, persister)
    return topic_id, persister


def describe_body(group: str, topics: list[tuple[str, list[int]]] | None) -> dict[str, Any]:
    return {"groups": [{"group_id": group, "topics": None if topics is None else [
        {"topic_name": t, "partitions": ps} for t, ps in topics]}]}


def offsets(response: Any) -> list[tuple[str, int, int, int, int]]:
    return [(t.topic_name, p.partition_index, p.start_offset, p.leader_epoch,
             getattr(p, "lag", None))
            for g in response.groups for t in g.topics for p in t.partitions]


async def test_describe_offsets_start_offsets_lags_and_absences(broker, coordinator  # noqa: F811
                                                                ) -> None:
    topic_id, _ = leading(broker)
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m1", 0))) == [(0, 2, 1)]
    body = describe_body("workers", [("jobs", [0, 1]), ("nowhere", [0])])
    described = await ask(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, body)
    assert offsets(described) == [("jobs", 0, 0, 0, 3), ("jobs", 1, -1, 0, -1),
                                  ("nowhere", 0, -1, 0, -1)]
    assert [t.topic_id for t in described.groups[0].topics] == [topic_id, None]  # zero
    # Offset 1 accepted: the start offset stays, one record past it is done.
    acked = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                      share_ack_body(topic_id, "m1", 1, 1, 1, 1))
    assert acked.responses[0].partitions[0].error_code == E.none
    assert offsets(await ask(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, body))[0] == \
        ("jobs", 0, 0, 0, 2)
    old = await ask(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, body)
    assert offsets(old)[0] == ("jobs", 0, 0, 0, None)  # version 0 has no lag
    every = await ask(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                      describe_body("workers", None))
    assert offsets(every) == [("jobs", 0, 0, 0, 2)]
    nothing = await ask(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                        describe_body("others", None))
    assert (nothing.groups[0].error_code, offsets(nothing)) == (E.none, [])
    broker.share_partitions.shutdown()


def alter_body(group: str, **topics: list[tuple[int, int]]) -> dict[str, Any]:
    return {"group_id": group, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o}
                                         for p, o in ps]} for t, ps in topics.items()]}


def alter_results(response: Any) -> list[tuple[str, int, ErrorCode, str | None]]:
    return [(t.topic_name, p.partition_index, p.error_code, p.error_message)
            for t in response.responses for p in t.partitions]


async def test_alter_offsets_fences_the_leaders_old_state(broker, coordinator  # noqa: F811
                                                          ) -> None:
    """The leader loaded the state at start offset 0; the offsets are altered to 2 (the
    group does not exist yet: it is created); the leader's next write is refused, it
    reads the state again and delivers from 2."""
    topic_id, persister = leading(broker)
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m1", 0))) == [(0, 2, 1)]
    altered = await ask(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body(
        "workers", jobs=[(0, 2), (5, 0)], nowhere=[(0, 0)]))
    assert altered.error_code == E.none
    assert alter_results(altered) == [
        ("nowhere", 0, E.unknown_topic_or_partition, NO_SUCH_PARTITION),
        ("jobs", 0, E.none, None),
        ("jobs", 5, E.unknown_topic_or_partition, NO_SUCH_PARTITION)]
    summary = await persister.read_state_summary("workers", topic_id, 0)
    assert (summary.start_offset, summary.state_epoch, summary.delivery_complete_count) == \
        (2, 1, 0)
    fenced = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                       share_ack_body(topic_id, "m1", 1, 0, 2, 1))
    assert fenced.responses[0].partitions[0].error_code == E.fenced_state_epoch
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m2", 0))) == [(2, 2, 1)]
    # Altered again: the state epoch goes above the one the offsets were written at.
    await ask(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body("workers",
                                                                      jobs=[(0, 0)]))
    assert (await persister.read_state_summary("workers", topic_id, 0)).state_epoch == 2
    broker.share_partitions.shutdown()


async def test_offsets_of_a_group_with_members_are_not_changed(broker, coordinator  # noqa: F811
                                                               ) -> None:
    topic_id, persister = leading(broker)
    await ask(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": "workers", "member_id": "m1", "member_epoch": 0, "rack_id": None,
        "subscribed_topic_names": ["jobs"]})
    altered = await ask(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0,
                        alter_body("workers", jobs=[(0, 2)], nowhere=[(0, 0)]))
    assert (altered.error_code, altered.error_message, list(altered.responses)) == \
        (E.non_empty_group, "The group is not empty.", [])
    deleted = await ask(broker, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
        "group_id": "workers", "topics": [{"topic_name": "jobs"}]})
    assert (deleted.error_code, list(deleted.responses)) == (E.non_empty_group, [])
    assert (await persister.read_state_summary("workers", topic_id, 0)).start_offset == -1
    nameless = await ask(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body(""))
    assert nameless.error_code == E.invalid_group_id
    broker.share_partitions.shutdown()


async def test_delete_offsets_and_delete_groups_remove_the_states(broker, coordinator  # noqa: F811
                                                                  ) -> None:
    topic_id, persister = leading(broker)
    create_topic(broker, "idle")
    missing = await ask(broker, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
        "group_id": "workers", "topics": [{"topic_name": "jobs"}]})
    assert (missing.error_code, missing.error_message) == \
        (E.group_id_not_found, "Group workers not found.")
    await ask(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body("workers",
                                                                      jobs=[(0, 1)]))
    deleted = await ask(broker, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
        "group_id": "workers", "topics": [{"topic_name": t} for t in ("jobs", "idle", "no")]})
    assert deleted.error_code == E.none
    assert [(t.topic_name, t.topic_id == topic_id, t.error_code, t.error_message)
            for t in deleted.responses] == [
        ("jobs", True, E.none, None),
        ("idle", False, E.unknown_topic_or_partition,
         "There is no offset information to delete."),
        ("no", False, E.unknown_topic_or_partition, NO_SUCH_PARTITION)]
    assert (await persister.read_state_summary("workers", topic_id, 0)).start_offset == -1
    await ask(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body("workers",
                                                                      jobs=[(0, 1)]))
    gone = await ask(broker, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["workers"]})
    assert gone.results[0].error_code == E.none
    assert (await persister.read_state_summary("workers", topic_id, 0)).start_offset == -1
    broker.share_partitions.shutdown()


async def test_the_apis_answer_unsupported_version_at_share_version_0(broker  # noqa: F811
                                                                      ) -> None:
    broker.image.replay(r.FeatureLevelRecord(name="share.version", feature_level=0))
    described = await ask(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                          describe_body("g", None))
    assert described.groups[0].error_code == E.unsupported_version
    altered = await ask(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body("g"))
    assert altered.error_code == E.unsupported_version
    deleted = await ask(broker, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0,
                        {"group_id": "g", "topics": []})
    assert deleted.error_code == E.unsupported_version


async def test_the_persister_asks_the_broker_owning_the_key() -> None:
    """Summaries and deletes of a key another broker's share coordinator owns go there
    as ReadShareGroupStateSummary v1 and DeleteShareGroupState."""
    topic_id = uuid.uuid4()
    sent: list[tuple[int, int, int, dict[str, Any]]] = []

    class Peers:
        async def request(self, node: int, api_key: int, version: int,
                          body: dict[str, Any]) -> Any:
            sent.append((node, api_key, version, body))
            partition = {"partition": 0, "error_code": E.none, "error_message": None,
                         "state_epoch": 3, "leader_epoch": 4, "start_offset": 7,
                         "delivery_complete_count": 2}
            if api_key == ApiKey.DELETE_SHARE_GROUP_STATE:
                partition = {"partition": 0, "error_code": E.coordinator_load_in_progress,
                             "error_message": None}
            return build(response_schema(api_key, version), {
                "results": [{"topic_id": topic_id, "partitions": [partition]}]})

    persister = CoordinatorPersister(SimpleNamespace(node_id=1),
                                     SimpleNamespace(coordinator_for=lambda key: 2))
    persister._peers = Peers()  # type: ignore[assignment]
    assert await persister.read_state_summary("g", topic_id, 0) == \
        StateSummary(E.none, None, 3, 4, 7, 2)
    assert await persister.delete_state("g", topic_id, 0) == E.coordinator_load_in_progress
    assert [(node, key, version) for node, key, version, _ in sent] == [
        (2, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1), (2, ApiKey.DELETE_SHARE_GROUP_STATE, 0)]
    assert sent[0][3]["topics"][0]["partitions"] == [{"partition": 0, "leader_epoch": -1}]
