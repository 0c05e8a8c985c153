"""The follower side of replication without a network: ``ReplicaFetcherManager.apply``
acts on one partition of a leader's Fetch response against a real ``Partition`` over a
real ``Log``, and ``follow``/``unfollow`` keep which partitions are fetched from whom.

The follower is broker 1; the partition's leader is broker 2. The leader's batches are
built with their offsets and leader epochs already set, as a leader's log holds them
(both fields lie outside what the CRC covers, so the batches are valid as they are).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from ottla.broker.replication.partition import Partition
from ottla.broker.replication.replica_fetcher import (
    FollowerState,
    ReplicaFetcher,
    ReplicaFetcherManager,
)
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from ottla.protocol.records import build_batch, check_batch, scan_batches
from ottla.storage.log_manager import LogManager

BROKER, LEADER, THIRD = 1, 2, 3
TP = ("orders", 0)
NOW_MS = 1_700_000_000_000
BACKOFF_MS = 1000  # replica.fetch.backoff.ms


@dataclass
class Follower:
    image: MetadataImage
    topic_id: uuid.UUID
    replicas: ReplicaManager
    manager: ReplicaFetcherManager
    appended: list[tuple[Partition, bool]] = field(default_factory=list)

    @property
    def partition(self) -> Partition:
        return self.replicas.partitions[TP]

    def state(self) -> FollowerState:
        return FollowerState(self.partition, LEADER, self.partition.leader_epoch)

    def change(self, **changes: Any) -> None:
        """Commit a PartitionChangeRecord and let the replica manager follow it."""
        self.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=self.topic_id,
                                                  **changes))
        self.replicas.apply_metadata(self.image, NOW_MS)


@pytest.fixture
async def follower(tmp_path) -> AsyncIterator[Follower]:
    image = MetadataImage()
    topic_id = uuid.uuid4()
    image.replay(r.TopicRecord(name=TP[0], topic_id=topic_id))
    image.replay(r.PartitionRecord(partition_id=0, topic_id=topic_id,
                                   replicas=(LEADER, BROKER, THIRD),
                                   isr=(LEADER, BROKER, THIRD), leader=LEADER,
                                   leader_epoch=0, partition_epoch=0))
    logs = LogManager([str(tmp_path / "logs")], now_ms=NOW_MS)
    logs.discover()
    logs.started()
    replicas = ReplicaManager(BROKER, logs, lambda image: {})
    replicas.apply_metadata(image, NOW_MS)
    appended: list[tuple[Partition, bool]] = []
    manager = ReplicaFetcherManager(
        BROKER, KafkaConfig(dev_defaults()), lambda broker_id: None, lambda: 10,
        lambda: NOW_MS, lambda partition, moved: appended.append((partition, moved)))
    env = Follower(image, topic_id, replicas, manager, appended)
    assert not env.partition.is_leader and env.partition.leader_epoch == 0
    yield env
    await manager.shutdown()
    logs.shutdown()


def leader_batch(base_offset: int, epoch: int, *values: bytes) -> bytes:
    out = build_batch([(b"k", v) for v in values], base_offset=base_offset,
                      partition_leader_epoch=epoch, timestamp=NOW_MS)
    check_batch(out)  # as valid as the leader's log has it
    return out


def answer(*, records: bytes = b"", high_watermark: int = 0, log_start_offset: int = 0,
           error: ErrorCode = ErrorCode.none,
           diverging: tuple[int, int] | None = None) -> Any:
    """One partition of a leader's Fetch v17 response, as the fetcher decodes it."""
    data: dict[str, Any] = {
        "partition_index": 0, "error_code": error, "high_watermark": high_watermark,
        "last_stable_offset": high_watermark, "log_start_offset": log_start_offset,
        "aborted_transactions": None, "preferred_read_replica": -1, "records": records}
    if diverging is not None:
        data["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
    response = build(response_schema(ApiKey.FETCH, 17), {
        "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
        "responses": [{"topic_id": uuid.UUID(int=1), "partitions": [data]}],
        "node_endpoints": []})
    return response.responses[0].partitions[0]


def log_batches(partition: Partition) -> list[tuple[int, int, int]]:
    """(base offset, leader epoch, last offset) of each batch in the follower's log."""
    log = partition.log
    read = log.read(log.log_start_offset, 1 << 30)
    data = read.records.read() if read.records is not None else b""
    return [(h.base_offset, h.partition_leader_epoch, h.last_offset)
            for _, h in scan_batches(data)]


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the loop run until ``condition`` holds, failing after ``timeout`` seconds."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), timeout)


# --- one partition's answer --------------------------------------------------------------

async def test_the_leaders_batches_are_appended_with_their_offsets_and_epochs(
        follower) -> None:
    partition = follower.partition
    first, second = leader_batch(0, 0, b"a", b"b"), leader_batch(2, 1, b"c", b"d", b"e")
    follower.manager.apply(follower.state(), answer(records=first + second,
                                                    high_watermark=3))
    assert partition.log.log_end_offset == 5
    assert log_batches(partition) == [(0, 0, 1), (2, 1, 4)]
    assert partition.log.read(0, 1 << 30).records.read() == first + second  # byte for byte
    assert partition.log.leader_epoch_cache.entries == [(0, 0), (1, 2)]
    assert (partition.high_watermark, partition.log.high_watermark) == (3, 3)
    assert follower.appended == [(partition, True)]


async def test_the_follower_high_watermark_is_the_leaders_as_far_as_its_log_reaches(
        follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(records=leader_batch(0, 0, b"a", b"b"),
                                                    high_watermark=9))
    assert partition.high_watermark == 2 and partition.log.high_watermark == 2
    follower.manager.apply(follower.state(), answer(records=leader_batch(2, 0, b"c"),
                                                    high_watermark=9))
    assert partition.high_watermark == 3
    follower.appended.clear()
    follower.manager.apply(follower.state(), answer(high_watermark=9))
    assert follower.appended == []  # nothing appended, nothing moved
    follower.manager.apply(follower.state(), answer(high_watermark=1))  # a new leader's
    assert partition.high_watermark == 1 and follower.appended == [(partition, True)]


async def test_a_batch_starting_before_the_log_end_is_refused(follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(records=leader_batch(0, 0, b"a", b"b")))
    follower.appended.clear()
    with pytest.raises(KafkaError):
        follower.manager.apply(follower.state(), answer(
            records=leader_batch(1, 0, b"b", b"c"), high_watermark=3))
    assert partition.log.log_end_offset == 2 and log_batches(partition) == [(0, 0, 1)]
    assert partition.high_watermark == 0 and follower.appended == []


async def test_a_batch_after_a_gap_the_cleaner_left_on_the_leader_is_appended(
        follower) -> None:
    # A compacted leader log: the cleaner dropped the whole batch that held 2..4, so the
    # batch after it starts past where this replica's log ends (Kafka accepts it: only a
    # batch starting below the log end is refused).
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(records=leader_batch(0, 0, b"a", b"b")))
    follower.manager.apply(follower.state(), answer(records=leader_batch(5, 0, b"f"),
                                                    high_watermark=6))
    assert log_batches(partition) == [(0, 0, 1), (5, 0, 5)]
    assert partition.log.log_end_offset == 6 and partition.high_watermark == 6


@pytest.mark.parametrize("cut", [29, 100])  # in the header, in the records
async def test_a_batch_cut_by_the_leaders_byte_limit_is_left_for_the_next_fetch(
        follower, cut: int) -> None:
    # A leader's read may end inside a batch when replica.fetch.max.bytes cuts it (as
    # Kafka's does); the follower takes the whole batches and fetches the rest next.
    partition = follower.partition
    first, second = leader_batch(0, 0, b"a" * 100), leader_batch(1, 0, b"b" * 100)
    follower.manager.apply(follower.state(), answer(records=first + second[:cut],
                                                    high_watermark=2))
    assert log_batches(partition) == [(0, 0, 0)] and partition.high_watermark == 1
    assert follower.appended == [(partition, True)]
    follower.manager.apply(follower.state(), answer(records=second, high_watermark=2))
    assert log_batches(partition) == [(0, 0, 0), (1, 0, 1)]
    assert partition.high_watermark == 2


async def test_a_corrupt_batch_is_refused_as_corrupt_message(follower) -> None:
    partition = follower.partition
    corrupt = bytearray(leader_batch(0, 0, b"a", b"b"))
    corrupt[-1] ^= 0xFF
    with pytest.raises(KafkaError) as raised:
        follower.manager.apply(follower.state(), answer(records=bytes(corrupt),
                                                        high_watermark=2))
    assert raised.value.code == ErrorCode.corrupt_message
    assert partition.log.log_end_offset == 0 and follower.appended == []


async def test_a_diverging_epoch_truncates_the_log_where_the_leaders_epoch_ends(
        follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(
        records=leader_batch(0, 0, b"a", b"b", b"c") + leader_batch(3, 1, b"d")
        + leader_batch(4, 1, b"e", b"f"), high_watermark=6))
    assert partition.high_watermark == 6
    # The leader's epoch 1 ends at 4: this replica's 4 and 5 were never committed there.
    follower.manager.apply(follower.state(), answer(
        records=leader_batch(4, 2, b"x"), high_watermark=4, diverging=(1, 4)))
    assert partition.log.log_end_offset == 4
    assert log_batches(partition) == [(0, 0, 2), (3, 1, 3)]  # the records are not taken
    assert partition.high_watermark == 4 and partition.log.high_watermark == 4
    assert partition.log.leader_epoch_cache.entries == [(0, 0), (1, 3)]


async def test_a_diverging_epoch_this_replica_never_had_cuts_at_its_earlier_one(
        follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(
        records=leader_batch(0, 0, b"a", b"b") + leader_batch(2, 3, b"c", b"d")))
    # The leader's epoch 2 (which this replica never saw) ends at 3: cut to where this
    # replica's epoch 0 ends, and ask again.
    follower.manager.apply(follower.state(), answer(diverging=(2, 3)))
    assert partition.log.log_end_offset == 2
    assert partition.log.leader_epoch_cache.entries == [(0, 0)]


class ListOffsetsLeader:
    """The leader's side of a follower's ListOffsets: ``ends`` and ``starts`` per
    partition (an ErrorCode instead of an offset: that error); records each request."""

    def __init__(self, end: int | ErrorCode, start: int | ErrorCode = 0) -> None:
        self.answers = {-1: end, -2: start}
        self.requests: list[dict[str, Any]] = []
        self.versions: list[int] = []

    async def request(self, api_key: ApiKey, version: int, body: dict[str, Any],
                      timeout: float) -> Any:
        assert api_key == ApiKey.LIST_OFFSETS
        build(request_schema(api_key, version), body)  # as the client: every field there
        self.requests.append(body)
        self.versions.append(version)
        topics = []
        for topic in body["topics"]:
            partitions = []
            for p in topic["partitions"]:
                answer = self.answers[p["timestamp"]]
                error = answer if isinstance(answer, ErrorCode) else ErrorCode.none
                partitions.append({
                    "partition_index": p["partition_index"], "error_code": error,
                    "timestamp": -1, "offset": -1 if error else answer, "leader_epoch": 0})
            topics.append({"name": topic["name"], "partitions": partitions})
        return build(response_schema(ApiKey.LIST_OFFSETS, version),
                     {"throttle_time": 0, "topics": topics})


async def out_of_range(follower: Follower, leader: ListOffsetsLeader) -> FollowerState:
    """A Fetch answered OFFSET_OUT_OF_RANGE with no watermarks (-1, as Kafka's leader
    answers an error), then what the fetcher does about it."""
    fetcher = ReplicaFetcher(follower.manager, LEADER, 0)
    state = fetcher.partitions[TP] = follower.state()
    response = build(response_schema(ApiKey.FETCH, 17), {
        "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
        "responses": [{"topic_id": follower.topic_id, "partitions": [{
            "partition_index": 0, "error_code": ErrorCode.offset_out_of_range,
            "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
            "aborted_transactions": None, "records": b""}]}],
        "node_endpoints": []})
    pending = fetcher._process({TP: state}, response)
    assert pending == {TP: state}
    await fetcher._reset_out_of_range(leader, pending)  # type: ignore[arg-type]
    return state


async def test_out_of_range_past_our_log_end_restarts_at_the_leaders_log_start(
        follower) -> None:
    """Kafka's fetchOffsetAndTruncate: the leader's log end (ListOffsets LATEST as
    replica 1) is not before this replica's, and its log start (EARLIEST) is past it: the
    leader deleted what this replica would fetch next, so it starts over there."""
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(records=leader_batch(0, 0, b"a", b"b"),
                                                    high_watermark=2))
    leader = ListOffsetsLeader(end=60, start=50)
    await out_of_range(follower, leader)
    assert [(b["replica_id"], [(p["partition_index"], p["timestamp"],
                                p["current_leader_epoch"])
                               for t in b["topics"] for p in t["partitions"]])
            for b in leader.requests] == [(BROKER, [(0, -1, 0)]), (BROKER, [(0, -2, 0)])]
    log = partition.log
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert log_batches(partition) == [] and log.leader_epoch_cache.entries == []
    assert partition.high_watermark == 50 and log.high_watermark == 50
    follower.manager.apply(follower.state(), answer(records=leader_batch(50, 4, b"z"),
                                                    high_watermark=51, log_start_offset=50))
    assert log_batches(partition) == [(50, 4, 50)] and partition.high_watermark == 51


async def test_list_offsets_goes_in_the_version_kafka_sends_at_the_metadata_version(
        follower) -> None:
    """RemoteLeaderEndPoint uses MetadataVersion.listOffsetRequestVersion: 10 at 4.0-IV3,
    11 from 4.2-IV1 (TimeoutMs, v10's, left at 0)."""
    for level, version in ((25, 10), (29, 11), (33, 11)):
        follower.manager.metadata_level = lambda level=level: level
        leader = ListOffsetsLeader(end=60, start=50)
        await out_of_range(follower, leader)
        assert leader.versions == [version, version]


async def test_out_of_range_beyond_the_leaders_end_truncates_to_its_log_end(
        follower) -> None:
    """This replica has more than the leader (and no epoch to tell where they part): cut
    back to the leader's log end, without asking for its start."""
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(
        records=leader_batch(0, 0, b"a", b"b") + leader_batch(2, 0, b"c", b"d")))
    leader = ListOffsetsLeader(end=2)
    await out_of_range(follower, leader)
    assert partition.log.log_end_offset == 2 and log_batches(partition) == [(0, 0, 1)]
    assert len(leader.requests) == 1


async def test_out_of_range_within_the_leaders_log_changes_nothing(follower) -> None:
    """Neither past the leader's end nor before its start (the leader moved between
    the two answers): fetch again from where this replica is."""
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(records=leader_batch(0, 0, b"a", b"b")))
    await out_of_range(follower, ListOffsetsLeader(end=5, start=1))
    assert partition.log.log_end_offset == 2 and log_batches(partition) == [(0, 0, 1)]


async def test_out_of_range_with_a_list_offsets_error_backs_off(follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(records=leader_batch(0, 0, b"a", b"b")))
    state = await out_of_range(follower, ListOffsetsLeader(
        end=ErrorCode.not_leader_or_follower))
    assert state.backoff_until_ms == NOW_MS + BACKOFF_MS
    assert partition.log.log_end_offset == 2


async def test_a_partition_error_backs_off_and_changes_nothing(follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(records=leader_batch(0, 0, b"a")))
    follower.appended.clear()
    state = follower.state()
    follower.manager.apply(state, answer(error=ErrorCode.not_leader_or_follower,
                                         records=leader_batch(1, 0, b"b"),
                                         high_watermark=2))
    assert state.backoff_until_ms == NOW_MS + BACKOFF_MS
    assert partition.log.log_end_offset == 1 and partition.high_watermark == 0
    assert follower.appended == []


async def test_the_leaders_log_start_is_followed_even_past_our_old_high_watermark(
        follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(
        records=leader_batch(0, 0, b"a", b"b") + leader_batch(2, 0, b"c", b"d"),
        high_watermark=0))
    assert partition.high_watermark == 0
    # The leader committed 0..3 and deleted the records before 4 (DeleteRecords); this
    # replica hears of both in one answer.
    follower.manager.apply(follower.state(), answer(high_watermark=4, log_start_offset=4))
    assert partition.high_watermark == 4
    assert partition.log.log_start_offset == 4
    follower.manager.apply(follower.state(), answer(high_watermark=4, log_start_offset=2))
    assert partition.log.log_start_offset == 4  # never back


# --- which partitions are fetched from whom ------------------------------------------------

def fetched_state(manager: ReplicaFetcherManager, tp: tuple[str, int]) -> FollowerState:
    return manager._assigned[tp].partitions[tp]


async def test_follow_and_unfollow_keep_which_broker_each_partition_is_fetched_from(
        follower) -> None:
    manager, partition = follower.manager, follower.partition
    follower.replicas.followers = manager
    assert manager.followed() == {}
    manager.follow(partition, LEADER)
    assert manager.followed() == {TP: LEADER}
    state = fetched_state(manager, TP)
    assert (state.partition, state.leader_id, state.leader_epoch) == (partition, LEADER, 0)
    # The fetcher runs: no endpoint for the leader, so it backs off, sending nothing.
    await eventually(lambda: state.backoff_until_ms == NOW_MS + BACKOFF_MS)

    manager.follow(partition, LEADER)  # the same leader in the same epoch: no change
    assert fetched_state(manager, TP) is state
    assert state.backoff_until_ms == NOW_MS + BACKOFF_MS

    # A new leader epoch with the same leader (the replica manager follows the image).
    follower.change(leader=LEADER)
    assert partition.leader_epoch == 1
    renewed = fetched_state(manager, TP)
    assert renewed is not state and renewed.leader_epoch == 1
    assert manager.followed() == {TP: LEADER}

    follower.change(leader=THIRD)  # leadership moves: fetch from the new leader
    assert manager.followed() == {TP: THIRD}
    assert TP not in manager._fetchers[(LEADER, 0)].partitions
    assert fetched_state(manager, TP).leader_epoch == 2

    follower.change(leader=BROKER)  # this broker leads now: it fetches from nobody
    assert partition.is_leader and manager.followed() == {}
    assert all(TP not in f.partitions for f in manager._fetchers.values())

    manager.follow(partition, LEADER)
    manager.unfollow(TP)
    manager.unfollow(TP)  # twice is harmless
    assert manager.followed() == {}
    await manager.shutdown()
    assert manager.followed() == {}


async def test_a_fetch_names_the_followers_log_end_last_epoch_and_leader_epoch(
        follower) -> None:
    partition = follower.partition
    follower.manager.apply(follower.state(), answer(
        records=leader_batch(0, 0, b"a") + leader_batch(1, 3, b"b", b"c")))
    fetcher = ReplicaFetcher(follower.manager, LEADER, 0)
    body = fetcher._request({TP: follower.state()})
    assert body["replica_state"] == {"replica_id": BROKER, "replica_epoch": 10}
    (topic,) = body["topics"]
    assert topic["topic_id"] == follower.topic_id
    (p,) = topic["partitions"]
    assert (p["partition"], p["fetch_offset"], p["last_fetched_epoch"],
            p["current_leader_epoch"], p["log_start_offset"]) == (0, 3, 3, 0, 0)
    assert partition.log.log_end_offset == 3


async def test_an_answer_to_a_fetch_from_an_older_leader_epoch_is_dropped(follower) -> None:
    partition = follower.partition
    fetcher = ReplicaFetcher(follower.manager, LEADER, 0)
    state = follower.state()
    fetcher.partitions[TP] = state
    response = build(response_schema(ApiKey.FETCH, 17), {
        "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
        "responses": [{"topic_id": follower.topic_id, "partitions": [{
            "partition_index": 0, "error_code": ErrorCode.none, "high_watermark": 1,
            "last_stable_offset": 1, "log_start_offset": 0, "aborted_transactions": None,
            "records": leader_batch(0, 0, b"a")}]}],
        "node_endpoints": []})
    follower.change(leader=LEADER)  # a new epoch while the fetch was out
    fetcher._process({TP: state}, response)
    assert partition.log.log_end_offset == 0
    fetcher._process({TP: follower.state()}, response)  # not the fetcher's state either
    assert partition.log.log_end_offset == 0
    current = fetcher.partitions[TP] = follower.state()
    fetcher._process({TP: current}, response)
    assert partition.log.log_end_offset == 1


async def test_a_bad_batch_anywhere_in_a_response_appends_none_of_it(follower) -> None:
    """Kafka validates the whole fetched set before appending: a corrupt second batch
    leaves the first unappended too."""
    good = leader_batch(0, 0, b"a")
    bad = bytearray(leader_batch(1, 0, b"b"))
    bad[-1] ^= 0xFF
    with pytest.raises(KafkaError) as refused:
        follower.manager.apply(follower.state(), answer(records=good + bytes(bad),
                                                        high_watermark=2))
    assert refused.value.code == ErrorCode.corrupt_message
    assert follower.partition.log.log_end_offset == 0 and follower.appended == []


def test_a_follower_fetch_session_names_only_what_changed_and_starts_over_on_errors() -> None:
    """KIP-227 from the follower's side: a full fetch opens the session; later fetches
    carry the session's next epoch and only partitions whose position changed, and
    forget those left out; a session error or a failed request starts over in full."""
    from ottla.broker.fetch_session import FetchSessionHandler

    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    handler = FetchSessionHandler()
    entries = {a: {"fetch_offset": 5}, b: {"fetch_offset": 7}}
    assert handler.build(entries) == (0, 0, entries, [])
    handler.handle_response(0, 1234)
    assert handler.build({a: {"fetch_offset": 9}, b: {"fetch_offset": 7}}) == \
        (1234, 1, {a: {"fetch_offset": 9}}, [])
    handler.handle_response(0, 1234)
    assert handler.build({a: {"fetch_offset": 9}, c: {"fetch_offset": 0}}) == \
        (1234, 2, {c: {"fetch_offset": 0}}, [b])
    handler.handle_response(ErrorCode.invalid_fetch_session_epoch, 0)
    again = {a: {"fetch_offset": 9}}
    assert handler.build(again) == (0, 0, again, [])
    handler.handle_response(0, 0)  # no room for a session at the leader: stay full
    assert handler.build(again) == (0, 0, again, [])


# --- MaxLag ----------------------------------------------------------------------------------

def max_lag_served(manager: ReplicaFetcherManager) -> float:
    """What /metrics shows of the manager's MaxLag, parsed back as Prometheus reads it."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ottla.server.metrics.broker_collectors import ReplicaFetcherManagerCollector

    registry = CollectorRegistry()
    registry.register(ReplicaFetcherManagerCollector(manager))
    (sample,) = [s for family in text_string_to_metric_families(
        generate_latest(registry).decode()) for s in family.samples]
    assert sample.name == "kafka_server_replicafetchermanager_maxlag"
    assert sample.labels == {"clientId": "Replica"}
    return sample.value


async def test_max_lag_is_the_leaders_high_watermark_past_the_followers_log_end(
        follower) -> None:
    """Kafka's FetcherLagMetrics: after each answer, the leader's high watermark less
    the offset the follower fetches next (never below 0); MaxLag is the largest of the
    partitions followed, 0 when there is none."""
    manager, partition = follower.manager, follower.partition
    assert max_lag_served(manager) == 0  # follows nothing
    follower.replicas.followers = manager
    manager.follow(partition, LEADER)
    state = fetched_state(manager, TP)
    assert max_lag_served(manager) == 0  # not answered yet
    manager.apply(state, answer(records=leader_batch(0, 0, b"a", b"b", b"c"),
                                high_watermark=10))
    assert partition.log.log_end_offset == 3
    assert max_lag_served(manager) == 7
    manager.apply(state, answer(error=ErrorCode.not_leader_or_follower))
    assert max_lag_served(manager) == 7  # an error answer says nothing of the lag
    manager.apply(state, answer(records=leader_batch(3, 0, *[b"x"] * 7), high_watermark=10))
    assert max_lag_served(manager) == 0  # caught up
    manager.apply(state, answer(high_watermark=12))  # the leader moved on, nothing sent
    assert max_lag_served(manager) == 2
    manager.unfollow(TP)  # a partition no longer followed no longer counts
    assert max_lag_served(manager) == 0


async def test_the_bytes_a_follower_gets_from_its_leader_are_replication_bytes_in(
        follower) -> None:
    """Kafka's ReplicationBytesInPerSec: the size of the records in each answer the
    follower appends from (a batch the leader's byte limit cut short included), counted
    once the broker counts (``topic_stats`` set with the node's metrics)."""
    from ottla.broker.topic_stats import BrokerTopicStats

    manager = follower.manager
    whole = leader_batch(0, 0, b"a" * 50)
    manager.apply(follower.state(), answer(records=whole, high_watermark=1))  # not counting
    stats = manager.topic_stats = BrokerTopicStats()
    first, cut = leader_batch(1, 0, b"b"), leader_batch(2, 0, b"c" * 100)[:40]
    manager.apply(follower.state(), answer(records=first + cut, high_watermark=3))
    assert stats.replication_bytes_in == len(first) + len(cut)
    manager.apply(follower.state(), answer(error=ErrorCode.not_leader_or_follower))
    manager.apply(follower.state(), answer(high_watermark=3))  # nothing new
    assert stats.replication_bytes_in == len(first) + len(cut)
    assert stats.all_topics.bytes_in == 0  # replication is not produce
