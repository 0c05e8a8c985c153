"""The metrics a node serves on prometheus.listener (``ottla.server.metrics``): Kafka's
names as the JMX exporter's rules give them, each collector's series from known state
(parsed back from the text exposition, as Prometheus reads it), what the connections
record per request, and the HTTP endpoint's answers to good and bad requests."""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from kio.index import load_request_schema
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ottla.broker.purgatory.delayed_operation import DelayedOperation, DelayedOperationPurgatory
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.coordinator.group.classic import ClassicGroup, ClassicState
from ottla.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.group_store import GroupStore
from ottla.coordinator.group.share_group import ShareGroup, ShareMember
from ottla.coordinator.runtime import CoordinatorState
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.api import ApiKey, request_name, request_schema, response_schema
from ottla.protocol.codec import encode_request
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.fetch_response import encode_fetch_response
from ottla.protocol.messages import build
from ottla.protocol.produce_response import encode_produce_response
from ottla.protocol.records import build_batch, read_header
from ottla.protocol.requests import ApiSpec, ApiTable
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import FetchRequest
from ottla.raft.quorum import RaftReplica, Role
from ottla.server.metrics import endpoint as endpoint_module
from ottla.server.metrics.broker_collectors import (
    BrokerTopicMetricsCollector,
    LogCollector,
    LogFlushStatsCollector,
    PartitionCollector,
    PurgatoryCollector,
    ReplicaManagerCollector,
)
from ottla.server.metrics.controller_collector import KafkaControllerCollector
from ottla.server.metrics.endpoint import MetricsEndpoint
from ottla.server.metrics.error_counts import error_counts
from ottla.server.metrics.event_loop_idle import WINDOW, EventLoopIdle
from ottla.server.metrics.group_coordinator_collector import GroupCoordinatorCollector
from ottla.server.metrics.jmx_names import (
    gauge,
    group_metric,
    histogram,
    meter,
    yammer_quantile,
)
from ottla.server.metrics.log_flush_stats import LogFlushStats, Reservoir
from ottla.server.metrics.node_metrics import node_registry
from ottla.server.metrics.raft_collector import RaftMetricsCollector
from ottla.server.metrics.request_collector import (
    EventLoopIdleCollector,
    RequestMetricsCollector,
    SocketServerCollector,
)
from ottla.server.metrics.request_metrics import RESERVOIR, RequestChannelMetrics
from ottla.server.network import KafkaServer
from ottla.server.request_dispatcher import RequestDispatcher
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager
from tests.unit.test_network import METADATA_V12, ask

BROKER = 1

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(*collectors: Any) -> Samples:
    """Every sample the collectors give, as Prometheus reads the exposition:
    (name, sorted labels) -> value."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


# --- names ----------------------------------------------------------------------------------

def test_names_follow_the_jmx_exporter_rules() -> None:
    assert meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec") == \
        "kafka_server_brokertopicmetrics_messagesin"  # the counter family adds _total
    assert meter("kafka.network", "RequestMetrics", "RequestsPerSec") == \
        "kafka_network_requestmetrics_requests"
    assert gauge("kafka.server", "ReplicaManager", "UnderReplicatedPartitions") == \
        "kafka_server_replicamanager_underreplicatedpartitions"
    assert gauge("kafka.controller", "KafkaController", "ActiveControllerCount") == \
        "kafka_controller_kafkacontroller_activecontrollercount"
    assert gauge("kafka.log", "Log", "LogEndOffset") == "kafka_log_log_logendoffset"
    assert gauge("kafka.coordinator.group", "GroupMetadataManager", "NumGroups") == \
        "kafka_coordinator_group_groupmetadatamanager_numgroups"
    assert gauge("kafka.log", "LogCleanerManager", "time-since-last-run-ms") == \
        "kafka_log_logcleanermanager_time_since_last_run_ms"  # dashes: underscores
    assert group_metric("raft-metrics", "high-watermark") == \
        "kafka_server_raft_metrics_high_watermark"  # kafka.server:type=raft-metrics
    assert histogram("kafka.network", "RequestMetrics", "TotalTimeMs") == \
        "kafka_network_requestmetrics_totaltimems"
    with pytest.raises(ValueError):
        meter("kafka.server", "ReplicaManager", "PartitionCount")


def test_request_names_are_kafkas_api_names() -> None:
    """Kafka's ``ApiKeys.name`` is the message name without ``Request``: the name of each
    kio request schema, for every API."""
    assert request_name(ApiKey.PRODUCE) == "Produce"
    assert request_name(ApiKey.OFFSET_COMMIT) == "OffsetCommit"
    assert request_name(ApiKey.DESCRIBE_TOPIC_PARTITIONS) == "DescribeTopicPartitions"
    for key in ApiKey:
        for version in range(20):
            try:
                schema = load_request_schema(key, version)
            except Exception:
                continue
            assert request_name(key) == schema.__name__.removesuffix("Request")
            break


def test_quantiles_interpolate_as_yammer_snapshots_do() -> None:
    values = [float(v) for v in range(1, 11)]  # 1..10
    assert yammer_quantile([], 0.5) == 0.0
    assert yammer_quantile(values, 0.5) == 5.5  # position 5.5: between 5 and 6
    assert yammer_quantile(values, 0.75) == pytest.approx(8.25)
    assert yammer_quantile(values, 0.99) == 10.0  # past the last: the largest
    assert yammer_quantile(values, 0.01) == 1.0


# --- BrokerTopicMetrics -------------------------------------------------------------------

def image_with(*topics: str) -> MetadataImage:
    image = MetadataImage()
    for name in topics:
        image.replay(r.TopicRecord(name=name, topic_id=uuid.uuid4()))
    return image


def test_broker_topic_metrics_per_topic_and_for_all_topics() -> None:
    stats = BrokerTopicStats()
    stats.produced("orders", ErrorCode.none, 10, 1000)
    stats.produced("orders", ErrorCode.invalid_record, 0, 50)
    stats.produced("audit", ErrorCode.none, 1, 70)
    stats.fetched("orders", ErrorCode.none)
    stats.sent("orders", 600)
    samples = scrape(BrokerTopicMetricsCollector(stats, image_with("orders", "audit")))
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(samples, messages, topic="orders") == 10
    assert value(samples, messages, topic="audit") == 1
    assert value(samples, messages) == 11  # the topic-less bean: all topics
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total") == 1070
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total",
                 topic="orders") == 600
    assert value(samples, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                 topic="orders") == 2
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic="orders") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_totalfetchrequests_total") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_failedfetchrequests_total") == 0


def test_replication_bytes_are_served_for_all_topics_only() -> None:
    """Kafka registers ReplicationBytesIn/OutPerSec on the topic-less bean alone."""
    stats = BrokerTopicStats()
    stats.produced("orders", ErrorCode.none, 1, 100)
    stats.replication_bytes_in += 300
    stats.replication_bytes_out += 700
    samples = scrape(BrokerTopicMetricsCollector(stats, image_with("orders")))
    assert value(samples, "kafka_server_brokertopicmetrics_replicationbytesin_total") == 300
    assert value(samples, "kafka_server_brokertopicmetrics_replicationbytesout_total") == 700
    assert not [name for name, labels in samples
                if "replicationbytes" in name and labels]


def test_a_deleted_topics_series_go_but_the_totals_keep_its_counts() -> None:
    stats = BrokerTopicStats()
    stats.produced("gone", ErrorCode.none, 5, 500)
    stats.produced("kept", ErrorCode.none, 1, 100)
    samples = scrape(BrokerTopicMetricsCollector(stats, image_with("kept")))
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert (messages, (("topic", "gone"),)) not in samples
    assert value(samples, messages, topic="kept") == 1
    assert value(samples, messages) == 6


# --- ReplicaManager -------------------------------------------------------------------------

def hosted(tmp_path: Any, *partitions: tuple[str, int, list[int], list[int], int]
           ) -> tuple[ReplicaManager, MetadataImage]:
    """A replica manager of broker 1 hosting ``partitions``: (topic, leader, replicas,
    ISR, min.insync.replicas)."""
    image = MetadataImage()
    for topic, leader, replicas, isr, min_isr in partitions:
        topic_id = uuid.uuid4()
        image.replay(r.TopicRecord(name=topic, topic_id=topic_id))
        image.replay(r.PartitionRecord(partition_id=0, topic_id=topic_id,
                                       replicas=tuple(replicas), isr=tuple(isr),
                                       leader=leader, leader_epoch=0, partition_epoch=0))
        image.replay(r.ConfigRecord(resource_type=ConfigResourceType.TOPIC,
                                    resource_name=topic, name="min.insync.replicas",
                                    value=str(min_isr)))
    logs = LogManager([str(tmp_path / "logs")], now_ms=0)
    logs.discover()
    logs.started()
    manager = ReplicaManager(BROKER, logs, lambda image: {})
    manager.apply_metadata(image, 0)
    return manager, image


def test_replica_manager_gauges_count_as_kafkas_partitions_do(tmp_path) -> None:
    manager, image = hosted(
        tmp_path,
        ("healthy", 1, [1, 2, 3], [1, 2, 3], 2),
        ("at-min", 1, [1, 2, 3], [1, 2], 2),       # under-replicated, at min ISR
        ("below-min", 1, [1, 2, 3], [1], 2),       # under-replicated, under min ISR
        ("followed", 2, [1, 2, 3], [2], 2),        # led elsewhere: no leader gauge counts it
        ("single", 1, [1], [1], 2))                # min ISR capped at the replicas: at min
    samples = scrape(ReplicaManagerCollector(manager, image))
    name = "kafka_server_replicamanager_{}".format
    assert value(samples, name("partitioncount")) == 5
    assert value(samples, name("leadercount")) == 4
    assert value(samples, name("underreplicatedpartitions")) == 2
    assert value(samples, name("underminisrpartitioncount")) == 1
    assert value(samples, name("atminisrpartitioncount")) == 2
    assert value(samples, name("offlinereplicacount")) == 0
    assert value(samples, name("isrshrinks_total")) == 0


def test_the_partition_gauges_are_the_leaders_and_zero_on_a_follower(tmp_path) -> None:
    """Kafka's kafka.cluster:type=Partition gauges per hosted partition: a leader's
    ISR, replicas and min-ISR state; a follower's are 0 (Kafka computes them only as
    leader); no open transaction: no LastStableOffsetLag."""
    manager, image = hosted(
        tmp_path,
        ("at-min", 1, [1, 2, 3], [1, 2], 2),
        ("below-min", 1, [1, 2, 3], [1], 2),
        ("followed", 2, [1, 2, 3], [2], 2))
    replicas = ReplicaManagerCollector(manager, image)
    samples = scrape(PartitionCollector(manager, replicas))

    def gauges(topic: str) -> list[float]:
        return [value(samples, f"kafka_cluster_partition_{name}", topic=topic, partition="0")
                for name in ("underreplicated", "insyncreplicascount", "replicascount",
                             "underminisr", "atminisr", "laststableoffsetlag")]
    assert gauges("at-min") == [1, 2, 3, 0, 1, 0]
    assert gauges("below-min") == [1, 1, 3, 1, 0, 0]
    assert gauges("followed") == [0, 0, 0, 0, 0, 0]


class Parked(DelayedOperation):
    """An operation that completes only when told to."""

    def __init__(self) -> None:
        super().__init__(deadline_ms=60_000)
        self.ready = False

    def try_complete(self, now_ms: int) -> bool:
        return self.ready and self.force_complete()

    def on_complete(self) -> None:
        pass


def test_the_purgatory_gauges_count_parked_operations_and_their_keys() -> None:
    """Kafka's DelayedOperationPurgatory gauges: NumDelayedOperations the operations
    parked, PurgatorySize each once per key it waits on; a completed one leaves both."""
    produce: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("Produce")
    fetch: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("Fetch")
    three, one = Parked(), Parked()
    produce.try_complete_else_watch(three, [("t", 0), ("t", 1), ("t", 2)], 0)
    produce.try_complete_else_watch(one, [("t", 0)], 0)
    collector = PurgatoryCollector(lambda: (produce, fetch))
    name = "kafka_server_delayedoperationpurgatory_{}".format
    samples = scrape(collector)
    assert value(samples, name("purgatorysize"), delayedOperation="Produce") == 4
    assert value(samples, name("numdelayedoperations"), delayedOperation="Produce") == 2
    assert value(samples, name("numdelayedoperations"), delayedOperation="Fetch") == 0
    three.ready = True
    assert produce.check_and_complete(("t", 1), 0) == 1
    samples = scrape(collector)
    assert value(samples, name("purgatorysize"), delayedOperation="Produce") == 1
    assert value(samples, name("numdelayedoperations"), delayedOperation="Produce") == 1


def test_isr_changes_the_controller_accepted_are_counted(tmp_path) -> None:
    manager, image = hosted(tmp_path, ("orders", 1, [1, 2, 3], [1, 2, 3], 1))
    partition = manager.partitions[("orders", 0)]
    partition.replication.pending_isr = [1, 2]
    manager.isr_answered(partition, [1, 2], 1, 0)
    partition.replication.pending_isr = [1, 2, 3]
    manager.isr_answered(partition, [1, 2, 3], 2, 0)
    partition.replication.pending_isr = [1, 3]
    manager.isr_answered(partition, None, -1, 0)  # refused: nothing changed
    samples = scrape(ReplicaManagerCollector(manager, image))
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 1
    assert value(samples, "kafka_server_replicamanager_isrexpands_total") == 1


def test_refused_isr_changes_are_failed_isr_updates(tmp_path) -> None:
    manager, image = hosted(tmp_path, ("orders", 1, [1, 2, 3], [1, 2, 3], 1))
    partition = manager.partitions[("orders", 0)]
    name = "kafka_server_replicamanager_failedisrupdates_total"
    assert value(scrape(ReplicaManagerCollector(manager, image)), name) == 0
    manager.isr_update_failed(partition)
    manager.isr_update_failed(partition)
    assert value(scrape(ReplicaManagerCollector(manager, image)), name) == 2


def test_producer_id_count_is_the_producer_ids_the_hosted_logs_keep(tmp_path) -> None:
    """Kafka's ProducerIdCount: the producer ids in each hosted partition's producer
    state, summed; records of no producer id (a plain producer) keep none."""
    manager, image = hosted(tmp_path, ("orders", 1, [1], [1], 1),
                            ("events", 2, [1, 2], [1, 2], 1))  # followed: counts too
    for tp, producer_ids in ((("orders", 0), (7, 8, 7, -1)), (("events", 0), (7,))):
        log = manager.partitions[tp].log
        sequences: dict[int, int] = {}
        for producer_id in producer_ids:
            idempotent = producer_id >= 0
            sequence = sequences[producer_id] = sequences.get(producer_id, -1) + 1
            batch = bytearray(build_batch(
                [(None, b"v")], timestamp=1000, producer_id=producer_id,
                producer_epoch=0 if idempotent else -1,
                base_sequence=sequence if idempotent else -1,
                base_offset=log.log_end_offset))
            log.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
    samples = scrape(ReplicaManagerCollector(manager, image))
    assert value(samples, "kafka_server_replicamanager_produceridcount") == 3


def test_each_hosted_partitions_log_has_kafkas_log_gauges(tmp_path) -> None:
    """kafka.log:type=Log,name=...,topic=T,partition=P, as the exporter's rules name a
    gauge with two more keys: the keys become labels."""
    manager, _ = hosted(tmp_path, ("orders", 1, [1], [1], 1), ("empty", 1, [1], [1], 1))
    log = manager.partitions[("orders", 0)].log
    for values in ([b"a", b"b", b"c"], [b"d", b"e"]):
        batch = bytearray(build_batch([(None, v) for v in values], timestamp=1000))
        log.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
        log.roll(1000)
    log.high_watermark = log.log_end_offset
    log.delete_records_before(3)  # DeleteRecords: the first segment goes
    samples = scrape(LogCollector(manager))
    orders = {"topic": "orders", "partition": "0"}
    assert value(samples, "kafka_log_log_logendoffset", **orders) == 5
    assert value(samples, "kafka_log_log_logstartoffset", **orders) == 3
    assert value(samples, "kafka_log_log_numlogsegments", **orders) == 2  # 3-4 and 5-
    assert value(samples, "kafka_log_log_size", **orders) == log.size > 0
    empty = {"topic": "empty", "partition": "0"}
    assert value(samples, "kafka_log_log_logendoffset", **empty) == 0
    assert value(samples, "kafka_log_log_numlogsegments", **empty) == 1
    assert value(samples, "kafka_log_log_size", **empty) == 0


# --- LogFlushStats --------------------------------------------------------------------------

def test_each_segment_flush_is_timed_by_the_timer_the_log_manager_gives(tmp_path) -> None:
    """Kafka's LogSegment.flush marks LogFlushRateAndTimeMs once per segment fsynced: a
    flush reaching two segments with unflushed records is two; one with nothing new is
    none."""
    ticks = iter(range(0, 1000, 3))  # each reading 3 ms after the last
    stats = LogFlushStats(clock=lambda: next(ticks) / 1000)
    logs = LogManager([str(tmp_path / "logs")], now_ms=0)
    logs.flush_timer = stats.time
    logs.discover()
    logs.started()
    log = logs.load_log(("orders", 0), LogConfig.resolve(), None, 0)
    for value_ in (b"a", b"b"):
        batch = bytearray(build_batch([(None, value_)], timestamp=1000))
        log.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
        log.roll(1000)
    log.flush()
    log.flush()  # nothing new
    # The two rolled segments; the new active one holds nothing yet.
    assert (stats.count, stats.total) == (2, pytest.approx(6.0))
    samples = scrape(LogFlushStatsCollector(stats))
    name = "kafka_log_logflushstats_logflushrateandtimems"
    assert value(samples, name + "_count") == 2
    assert value(samples, name + "_sum") == pytest.approx(6.0)
    assert value(samples, name, quantile="0.99") == pytest.approx(3.0)
    logs.shutdown()


def test_a_failed_flush_is_timed_too() -> None:
    """As a Yammer timer's ``time``: the time is recorded whatever the flush raised."""
    ticks = iter([0.0, 0.005])
    stats = LogFlushStats(clock=lambda: next(ticks))

    def broken() -> None:
        raise OSError("the disk is gone")

    with pytest.raises(OSError):
        stats.time(broken)
    assert stats.snapshot() == (1, 5.0, [5.0])


def test_no_flush_yet_serves_zeros() -> None:
    samples = scrape(LogFlushStatsCollector(LogFlushStats()))
    name = "kafka_log_logflushstats_logflushrateandtimems"
    assert value(samples, name + "_count") == 0
    assert value(samples, name, quantile="0.50") == 0


# --- raft-metrics ---------------------------------------------------------------------------

class Raft:
    """What the collector reads of a RaftDriver."""

    def __init__(self, replica: RaftReplica, now_ms: int = 0) -> None:
        self.replica = replica
        self.log = replica.log
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


def raft_samples(replica: RaftReplica, now_ms: int = 0) -> tuple[str, dict[str, float]]:
    """The current-state label and the other raft-metrics by attribute."""
    samples = scrape(RaftMetricsCollector(Raft(replica, now_ms)))  # type: ignore[arg-type]
    states = [dict(labels)["state"] for (name, labels), v in samples.items()
              if name == "kafka_server_raft_metrics_current_state" and v == 1]
    assert len(states) == 1
    prefix = "kafka_server_raft_metrics_"
    return states[0], {name.removeprefix(prefix): v for (name, _), v in samples.items()
                       if name.startswith(prefix) and name != prefix + "current_state"}


def test_raft_metrics_of_a_leader() -> None:
    leader = RaftReplica(1, {1}, MemoryLog(), random.Random(0))
    leader.start(0)  # the only voter: elected at once, its leader-change entry committed
    state, values = raft_samples(leader, now_ms=1000)
    assert state == "leader"
    assert {k: v for k, v in values.items() if not math.isnan(v)} == {
        "current_leader": 1, "current_epoch": 1, "current_vote": 1, "high_watermark": 1,
        "log_end_offset": 1, "log_end_epoch": 1, "number_unknown_voter_connections": 0,
        "number_of_voters": 1, "number_of_observers": 0, "uncommitted_voter_change": 0,
        # Nothing drove the replica (the node's driver reports its waits): the default.
        "poll_idle_ratio_avg": 1.0,
        # The leader-change record, committed as it was appended; over Kafka's floor of
        # one whole 30 s window.
        "commit_latency_avg": 0, "commit_latency_max": 0,
        "append_records_rate": pytest.approx(1 / 31), "fetch_records_rate": 0}
    # Elected without a campaign: no election to measure (NaN, as Kafka's Avg and Max).
    assert math.isnan(values["election_latency_avg"])
    assert math.isnan(values["election_latency_max"])


def test_raft_metrics_before_a_leader_is_known_and_as_follower_or_observer() -> None:
    voter = RaftReplica(1, {1, 2, 3}, MemoryLog(), random.Random(0))
    voter.start(0)
    state, values = raft_samples(voter)
    assert state == "unattached"
    assert values["current_leader"] == -1 and values["current_vote"] == -1
    voter.voted_for = 2
    state, values = raft_samples(voter)
    assert (state, values["current_vote"]) == ("voted", 2)
    voter.role, voter.leader_id, voter.voted_for = Role.FOLLOWER, 2, None
    state, values = raft_samples(voter)
    assert (state, values["current_leader"]) == ("follower", 2)
    broker = RaftReplica(4, {1, 2, 3}, MemoryLog(), random.Random(0))
    broker.role, broker.leader_id = Role.FOLLOWER, 2  # as a Fetch answered by 2 makes it
    state, values = raft_samples(broker)
    assert (state, values["current_leader"], values["current_vote"]) == ("observer", 2, -1)


def test_every_replica_counts_the_voters_and_only_the_leader_its_observers() -> None:
    """Kafka's ``number-of-voters`` follows the voter set on every replica;
    ``number-of-observers`` is registered only while leading, counting the replicas that
    fetched from it without being voters."""
    leader = RaftReplica(1, {1}, MemoryLog(), random.Random(0))
    leader.start(0)
    for broker in (4, 5, 4):  # a broker fetching again is still one observer
        leader.handle(broker, FetchRequest(broker, leader.epoch, 0, 0), 10)
    _, values = raft_samples(leader, now_ms=10)
    assert (values["number_of_voters"], values["number_of_observers"]) == (1, 2)
    follower = RaftReplica(2, {1, 2, 3}, MemoryLog(), random.Random(0))
    follower.role, follower.leader_id = Role.FOLLOWER, 1
    _, values = raft_samples(follower)
    assert values["number_of_voters"] == 3 and "number_of_observers" not in values
    broker = RaftReplica(4, {1, 2, 3}, MemoryLog(), random.Random(0))
    broker.role, broker.leader_id = Role.FOLLOWER, 1
    _, values = raft_samples(broker)
    assert values["number_of_voters"] == 3 and "number_of_observers" not in values


# --- group coordinator ----------------------------------------------------------------------

class CommittedOffsets:
    def __init__(self, *rows: tuple[str, str, int, int]) -> None:
        self.rows = rows

    def committed_offsets(self) -> Iterable[tuple[str, str, int, int]]:
        return iter(self.rows)


class Shard:
    def __init__(self, groups: GroupStore, offsets: CommittedOffsets) -> None:
        self.groups = groups
        self.offset_metadata = offsets


class Context:
    def __init__(self, state: CoordinatorState, shard: Shard) -> None:
        self.state = state
        self.shard = shard


class Runtime:
    def __init__(self, *contexts: Context) -> None:
        self.contexts = {("__consumer_offsets", i): c for i, c in enumerate(contexts)}


class Coordinator:
    """What the collector reads of a GroupCoordinatorService: its shards and counts."""

    def __init__(self, *contexts: Context) -> None:
        self.runtime = Runtime(*contexts)
        self.metrics = GroupCoordinatorMetrics()


def store(*groups: Any) -> GroupStore:
    result = GroupStore()
    for group in groups:
        result.put(group)
    return result


def test_group_coordinator_gauges_count_the_groups_of_the_active_shards() -> None:
    reconciling = ConsumerGroup("reconciling", group_epoch=2, assignment_epoch=2)
    reconciling.members["m"] = ConsumerMember("m", member_epoch=1)
    stable = ConsumerGroup("stable", group_epoch=1, assignment_epoch=1)
    stable.members["m"] = ConsumerMember("m", member_epoch=1)
    sharing = ShareGroup("sharing")
    sharing.members["m"] = ShareMember("m")
    active = Context(CoordinatorState.ACTIVE, Shard(store(
        ClassicGroup("c1", ClassicState.STABLE), ClassicGroup("c2", ClassicState.EMPTY),
        ClassicGroup("c3", ClassicState.PREPARING_REBALANCE), reconciling, stable,
        ConsumerGroup("idle"), sharing),
        CommittedOffsets(("c1", "t", 0, 5), ("c1", "t", 1, 7), ("stable", "t", 0, 3))))
    loading = Context(CoordinatorState.LOADING, Shard(
        store(ClassicGroup("elsewhere", ClassicState.STABLE)), CommittedOffsets(("x", "t", 0, 1))))
    coordinator = Coordinator(active, loading)
    samples = scrape(GroupCoordinatorCollector(coordinator))  # type: ignore[arg-type]
    legacy = "kafka_coordinator_group_groupmetadatamanager_{}".format
    assert value(samples, legacy("numgroups")) == 3  # classic groups only, as in Kafka
    assert value(samples, legacy("numgroupsstable")) == 1
    assert value(samples, legacy("numgroupsempty")) == 1
    assert value(samples, legacy("numgroupspreparingrebalance")) == 1
    assert value(samples, legacy("numgroupscompletingrebalance")) == 0
    assert value(samples, legacy("numgroupsdead")) == 0
    assert value(samples, legacy("numoffsets")) == 3
    metric = "kafka_server_group_coordinator_metrics_{}".format
    assert value(samples, metric("offset_count")) == 3
    assert value(samples, metric("group_count"), protocol="classic") == 3
    assert value(samples, metric("group_count"), protocol="consumer") == 3
    assert value(samples, metric("group_count"), protocol="share") == 1
    consumer = metric("consumer_group_count")
    assert {state: value(samples, consumer, state=state) for state in
            ("Empty", "Assigning", "Reconciling", "Stable", "Dead")} == \
        {"Empty": 1, "Assigning": 0, "Reconciling": 1, "Stable": 1, "Dead": 0}
    assert value(samples, metric("classic_group_count"), state="PreparingRebalance") == 1
    assert value(samples, metric("share_group_count"), state="Stable") == 1
    assert value(samples, metric("share_group_count"), state="Empty") == 0
    coordinator.metrics.offset_deletions, coordinator.metrics.offset_expirations = 2, 5
    samples = scrape(GroupCoordinatorCollector(coordinator))  # type: ignore[arg-type]
    assert value(samples, metric("offset_deletion_count")) == 2
    assert value(samples, metric("offset_expiration_count")) == 5


# --- KafkaController ----------------------------------------------------------------------

class Offsets:
    replayed_end = 42
    committed_end = 40
    last_applied_timestamp = 9_000


class Driver:
    """What the collector reads of a ControllerDriver."""

    def __init__(self, active: bool) -> None:
        self.is_active = active
        self.offsets = Offsets()
        self.operations_started = 7
        self.new_active_controllers = 2
        self.processing_time_ms = Reservoir()

    def now_ms(self) -> int:
        return 10_000


def test_controller_gauges_from_the_image() -> None:
    image = MetadataImage()
    for broker_id, fenced in ((101, False), (102, False), (103, True)):
        image.replay(r.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=5,
            end_points=(), rack=None, fenced=fenced))
    for name, leaders in (("a", [101, 102]), ("b", [-1, 101, 103])):
        topic_id = uuid.uuid4()
        image.replay(r.TopicRecord(name=name, topic_id=topic_id))
        for index, leader in enumerate(leaders):
            image.replay(r.PartitionRecord(
                partition_id=index, topic_id=topic_id, replicas=(101, 102, 103),
                isr=(101,), leader=leader, leader_epoch=0, partition_epoch=0))
    name = "kafka_controller_kafkacontroller_{}".format
    active_driver = Driver(True)
    active = scrape(KafkaControllerCollector(active_driver, image))  # type: ignore[arg-type]
    assert value(active, name("activecontrollercount")) == 1
    assert value(active, name("globaltopiccount")) == 2
    assert value(active, name("globalpartitioncount")) == 5
    assert value(active, name("offlinepartitionscount")) == 1
    assert value(active, name("preferredreplicaimbalancecount")) == 3  # led by 102, 103, -1
    assert value(active, name("fencedbrokercount")) == 1
    assert value(active, name("activebrokercount")) == 2
    assert value(active, name("lastappliedrecordoffset")) == 41
    assert value(active, name("lastcommittedrecordoffset")) == 39
    assert value(active, name("lastappliedrecordtimestamp")) == 9_000
    assert value(active, name("lastappliedrecordlagms")) == 1_000  # now less it, as Kafka's
    assert value(active, name("eventqueueoperationsstartedcount")) == 7
    assert value(active, name("newactivecontrollerscount")) == 2
    times = "kafka_controller_controllereventmanager_eventqueueprocessingtimems"
    assert value(active, times + "_count") == 0
    for ms in (1.0, 3.0):
        active_driver.processing_time_ms.record(ms)
    timed = scrape(KafkaControllerCollector(active_driver, image))  # type: ignore[arg-type]
    assert value(timed, times + "_count") == 2 and value(timed, times + "_sum") == 4.0
    assert value(timed, times, quantile="0.50") == 2.0  # Yammer's, between the two
    standby = scrape(KafkaControllerCollector(Driver(False), image))  # type: ignore[arg-type]
    assert value(standby, name("activecontrollercount")) == 0


# --- RequestMetrics, recorded by the connections -----------------------------------------

def test_fetches_count_as_fetch_and_by_who_fetched_and_verification_apart() -> None:
    metrics = RequestChannelMetrics()

    class Request:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(fields)

    class State:
        replica_id = 102

    metrics.record(ApiKey.FETCH, 16, Request(replica_state=None, replica_id=-1),
                   0.0, 0.001, 0.501, 0.502)
    metrics.record(ApiKey.FETCH, 17, Request(replica_state=State()), 0.0, 0.0, 0.0, 0.0)
    metrics.record(ApiKey.FETCH, 10, Request(replica_id=103), 0.0, 0.0, 0.0, 0.0)
    verify = Request(transactions=[Request(verify_only=True)])
    metrics.record(ApiKey.ADD_PARTITIONS_TO_TXN, 5, verify, 0.0, 0.0, 0.0, 0.0)
    samples = scrape(RequestMetricsCollector(metrics))
    requests = "kafka_network_requestmetrics_requests_total"
    assert value(samples, requests, request="Fetch", version="16") == 1
    assert value(samples, requests, request="Fetch", version="17") == 1
    assert value(samples, requests, request="FetchConsumer", version="16") == 1
    assert value(samples, requests, request="FetchFollower", version="17") == 1
    assert value(samples, requests, request="FetchFollower", version="10") == 1
    assert value(samples, requests, request="AddPartitionsToTxnVerification",
                 version="5") == 1
    assert not any(labels and dict(labels).get("request") == "AddPartitionsToTxn"
                   for _, labels in samples)
    consumer = dict(request="FetchConsumer")
    total = "kafka_network_requestmetrics_totaltimems"
    assert value(samples, total, quantile="0.50", **consumer) == pytest.approx(502.0)
    assert value(samples, total + "_count", **consumer) == 1
    assert value(samples, total + "_sum", **consumer) == pytest.approx(502.0)
    assert value(samples, "kafka_network_requestmetrics_localtimems", quantile="0.99",
                 **consumer) == pytest.approx(1.0)
    assert value(samples, "kafka_network_requestmetrics_remotetimems", quantile="0.75",
                 **consumer) == pytest.approx(500.0)
    assert value(samples, "kafka_network_requestmetrics_responsesendtimems", quantile="0.95",
                 **consumer) == pytest.approx(1.0)


def test_the_histograms_keep_the_latest_requests() -> None:
    metrics = RequestChannelMetrics()
    for i in range(RESERVOIR + 100):
        slow = i >= 100  # the first 100 fall out of the reservoir
        metrics.record(ApiKey.METADATA, 12, None, 0.0, 0.0, 0.0, 1.0 if slow else 0.0)
    samples = scrape(RequestMetricsCollector(metrics))
    total = "kafka_network_requestmetrics_totaltimems"
    assert value(samples, total, request="Metadata", quantile="0.50") == 1000.0
    assert value(samples, total + "_count", request="Metadata") == RESERVOIR + 100


def failing(services: Any, ctx: Any, req: Any) -> Any:
    raise TypeError("a bug")


async def waiting(services: Any, ctx: Any, req: Any) -> Any:
    await asyncio.sleep(0.05)
    raise KafkaError(ErrorCode.group_authorization_failed, "no")


async def test_connections_taken_and_closed_are_counted_per_listener() -> None:
    """Kafka's connection-creation-total and connection-close-total of
    socket-server-metrics: two connections taken, one closed, one still open."""
    server = KafkaServer(RequestDispatcher(ApiTable("broker", None, [])), "PLAINTEXT",
                         "127.0.0.1", 0, 1 << 20)
    await server.start()
    writers = []
    try:
        for _ in range(2):
            writers.append((await asyncio.open_connection("127.0.0.1", server.port))[1])
        writers[0].close()

        async def settled() -> None:
            while not (server.connections_created == 2 and server.connections_closed == 1):
                await asyncio.sleep(0.001)
        await asyncio.wait_for(settled(), 5)
        samples = scrape(SocketServerCollector(lambda: [server]))
    finally:
        writers[-1].close()
        await server.stop()
    prefix = "kafka_server_socket_server_metrics_"
    assert value(samples, prefix + "connection_creation_total", listener="PLAINTEXT") == 2
    assert value(samples, prefix + "connection_close_total", listener="PLAINTEXT") == 1
    assert value(samples, prefix + "connection_count", listener="PLAINTEXT") == 1


async def test_each_answered_request_is_recorded_with_its_times() -> None:
    metrics = RequestChannelMetrics()
    table = ApiTable("broker", None, [ApiSpec(ApiKey.METADATA, 0, 12, failing),
                                      ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, waiting)])
    server = KafkaServer(RequestDispatcher(table), "PLAINTEXT", "127.0.0.1", 0, 1 << 20,
                         request_metrics=metrics)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        for i in range(3):  # answered UNKNOWN_SERVER_ERROR, recorded all the same
            await ask(reader, writer, ApiKey.METADATA, 12, METADATA_V12, i)
        await ask(reader, writer, ApiKey.METADATA, 9, {
            **METADATA_V12, "include_cluster_authorized_operations": False}, 3)
        await ask(reader, writer, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": ["g"], "include_authorized_operations": False}, 4)
        samples = scrape(RequestMetricsCollector(metrics), SocketServerCollector(
            lambda: [server]))
    finally:
        writer.close()
        await server.stop()
    requests = "kafka_network_requestmetrics_requests_total"
    assert value(samples, requests, request="Metadata", version="12") == 3
    assert value(samples, requests, request="Metadata", version="9") == 1
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count",
                 request="Metadata") == 4
    # The waiting handler's 50 ms are remote time (waiting), not local; its refusal is
    # an answer like any other.
    group = dict(request="DescribeGroups", quantile="0.50")
    assert value(samples, "kafka_network_requestmetrics_remotetimems", **group) >= 45
    assert value(samples, "kafka_network_requestmetrics_localtimems", **group) < 45
    assert value(samples, "kafka_network_requestmetrics_totaltimems", **group) >= 45
    assert value(samples, "kafka_server_socket_server_metrics_connection_count",
                 listener="PLAINTEXT") == 1
    # ErrorsPerSec: Kafka's MetadataRequest.getErrorResponse names each requested topic
    # (two) with the error, DescribeGroups' each group; RequestBytes: each body.
    errors = "kafka_network_requestmetrics_errors_total"
    assert value(samples, errors, request="Metadata", error="UNKNOWN_SERVER_ERROR") == 8
    assert value(samples, errors, request="DescribeGroups",
                 error="GROUP_AUTHORIZATION_FAILED") == 1
    assert (errors, (("error", "NONE"), ("request", "Metadata"))) not in samples
    header = 2 + 2 + 4 + 2 + len("t") + 1  # flexible header v2, client id "t"
    bodies = [len(encode_request(ApiKey.METADATA, 12, 0, "t", build(
        request_schema(ApiKey.METADATA, 12), METADATA_V12))) - 4 - header] * 3
    bodies.append(len(encode_request(ApiKey.METADATA, 9, 0, "t", build(
        request_schema(ApiKey.METADATA, 9), {
            **METADATA_V12, "include_cluster_authorized_operations": False}))) - 4 - header)
    request_bytes = "kafka_network_requestmetrics_requestbytes"
    assert value(samples, request_bytes + "_count", request="Metadata") == 4
    assert value(samples, request_bytes + "_sum", request="Metadata") == sum(bodies)
    assert value(samples, "kafka_network_requestmetrics_throttletimems_sum",
                 request="Metadata") == 0


# --- ErrorsPerSec: Kafka's AbstractResponse.errorCounts ----------------------------------

NONE, UNKNOWN_TOPIC = int(ErrorCode.none), int(ErrorCode.unknown_topic_or_partition)
NOT_LEADER = int(ErrorCode.not_leader_or_follower)


def produce_partition(index: int, error: ErrorCode) -> dict[str, Any]:
    return {"index": index, "error_code": error, "base_offset": -1, "log_append_time": None,
            "log_start_offset": -1, "record_errors": [], "error_message": None}


@pytest.mark.parametrize("version", [3, 9, 13])
def test_a_produce_response_counts_each_partitions_error(version: int) -> None:
    """ProduceResponse.errorCounts: one count per partition, NONE included; no top-level
    error."""
    body = encode_produce_response(version, {"throttle_time": 25, "responses": [
        {"name": "a", "topic_id": uuid.uuid4(), "partition_responses": [
            produce_partition(0, ErrorCode.none), produce_partition(1, ErrorCode.none),
            produce_partition(2, ErrorCode.not_leader_or_follower)]},
        {"name": "b", "topic_id": uuid.uuid4(), "partition_responses": [
            produce_partition(0, ErrorCode.unknown_topic_or_partition)]}]})
    assert error_counts(ApiKey.PRODUCE, body) == {NONE: 2, NOT_LEADER: 1, UNKNOWN_TOPIC: 1}
    assert body.throttle_ms == 25


def fetch_partition(index: int, error: ErrorCode) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": 0,
            "last_stable_offset": 0, "log_start_offset": 0, "aborted_transactions": [],
            "preferred_read_replica": -1, "records": b""}


@pytest.mark.parametrize("version", [4, 12, 17])
def test_a_fetch_response_counts_its_top_level_error_and_each_partitions(version: int
                                                                         ) -> None:
    """FetchResponse.errorCounts: the top-level error (its data object has one below v7
    too: NONE) and each partition's."""
    body = encode_fetch_response(version, {
        "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": [
            {"topic": "a", "topic_id": uuid.uuid4(), "partitions": [
                fetch_partition(0, ErrorCode.none),
                fetch_partition(1, ErrorCode.offset_out_of_range),
                fetch_partition(2, ErrorCode.offset_out_of_range)]}]})
    assert error_counts(ApiKey.FETCH, body) == {
        NONE: 2, int(ErrorCode.offset_out_of_range): 2}


METADATA_RESPONSE = {"throttle_time": 0, "brokers": [], "cluster_id": "c", "controller_id": 1,
                     "topics": [
    {"error_code": ErrorCode.unknown_topic_or_partition, "name": "missing", "topic_id": None,
     "is_internal": False, "partitions": [], "topic_authorized_operations": -1},
    {"error_code": ErrorCode.none, "name": "there", "topic_id": None, "is_internal": False,
     "topic_authorized_operations": -1, "partitions": [
         {"error_code": ErrorCode.none, "partition_index": i, "leader_id": 1,
          "leader_epoch": 0, "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3],
          "offline_replicas": []} for i in range(2)]}]}


def test_a_metadata_response_counts_each_topics_and_partitions_error() -> None:
    """MetadataResponse.errorCounts: each topic's error and each of its partitions'; the
    same whether the handler's dict or the kio entity built from it is counted."""
    expected = {NONE: 3, UNKNOWN_TOPIC: 1}
    assert error_counts(ApiKey.METADATA, METADATA_RESPONSE) == expected
    entity = build(response_schema(ApiKey.METADATA, 12), METADATA_RESPONSE)
    assert error_counts(ApiKey.METADATA, entity) == expected


def test_apis_kafka_counts_otherwise_are_counted_as_kafka_does() -> None:
    unknown_member = int(ErrorCode.unknown_member_id)
    # OffsetCommitResponse: each partition's error.
    assert error_counts(ApiKey.OFFSET_COMMIT, {"throttle_time": 0, "topics": [
        {"name": "t", "partitions": [
            {"partition_index": i, "error_code": ErrorCode.unknown_member_id}
            for i in range(3)]}]}) == {unknown_member: 3}
    # FindCoordinatorResponse v4+: each coordinator's error, not the top-level one.
    coordinator = {"key": "g", "node_id": 1, "host": "h", "port": 1, "error_message": None}
    assert error_counts(ApiKey.FIND_COORDINATOR, {
        "throttle_time": 0, "error_code": ErrorCode.none, "coordinators": [
            {**coordinator, "error_code": ErrorCode.none},
            {**coordinator, "error_code": ErrorCode.coordinator_not_available}]}) == {
        NONE: 1, int(ErrorCode.coordinator_not_available): 1}
    assert error_counts(ApiKey.FIND_COORDINATOR, {
        "throttle_time": 0, "error_code": ErrorCode.coordinator_not_available,
        "coordinators": []}) == {int(ErrorCode.coordinator_not_available): 1}
    # AddPartitionsToTxnResponse: PartitionErrorCode; v0-3 have no top-level error.
    v3 = {"throttle_time": 0, "error_code": ErrorCode.none,
          "results_by_topic_v3_and_below": [{"name": "t", "results_by_partition": [
              {"partition_index": 0, "partition_error_code": ErrorCode.none},
              {"partition_index": 1,
               "partition_error_code": ErrorCode.invalid_producer_epoch}]}]}
    assert error_counts(ApiKey.ADD_PARTITIONS_TO_TXN, v3) == {
        NONE: 1, int(ErrorCode.invalid_producer_epoch): 1}
    v4 = {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_topic_v3_and_below":
          [], "results_by_transaction": [{"transactional_id": "x", "topic_results": [
              {"name": "t", "results_by_partition": [
                  {"partition_index": 0, "partition_error_code": ErrorCode.none}]}]}]}
    assert error_counts(ApiKey.ADD_PARTITIONS_TO_TXN, v4) == {NONE: 2}
    # DeleteAclsResponse: each filter result's error, not each matching ACL's.
    assert error_counts(ApiKey.DELETE_ACLS, {"throttle_time": 0, "filter_results": [
        {"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None}] * 3}]}) == {NONE: 1}
    # OffsetFetchResponse v8+: each group's error and each partition's.
    assert error_counts(ApiKey.OFFSET_FETCH, {
        "throttle_time": 0, "error_code": ErrorCode.none, "topics": [], "groups": [
            {"group_id": "g", "error_code": ErrorCode.group_id_not_found, "topics": []},
            {"group_id": "h", "error_code": ErrorCode.none, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                              "error_code": ErrorCode.none}]}]}]}) == {
        int(ErrorCode.group_id_not_found): 1, NONE: 2}


def test_errors_are_counted_under_the_apis_own_name_as_kafka_names_them() -> None:
    """RequestChannel.updateErrorMetrics marks ``metrics(apiKey.name)``: a consumer's
    Fetch's errors are Fetch's, not FetchConsumer's; the error tag is Errors.name(), an
    unknown code UNKNOWN_SERVER_ERROR (Errors.forCode)."""
    metrics = RequestChannelMetrics()

    class Request:
        replica_state = None
        replica_id = -1

    fetch = encode_fetch_response(12, {
        "throttle_time": 40, "error_code": ErrorCode.none, "session_id": 0, "responses": [
            {"topic": "a", "partitions": [
                fetch_partition(0, ErrorCode.not_leader_or_follower)]}]})
    metrics.record(ApiKey.FETCH, 12, Request(), 0.0, 0.0, 0.0, 0.0, response=fetch,
                   request_bytes=100)
    metrics.record(ApiKey.METADATA, 12, None, 0.0, 0.0, 0.0, 0.0,
                   response={"throttle_time": 0, "topics": [
                       {"name": "x", "error_code": 32767, "partitions": []}]})
    samples = scrape(RequestMetricsCollector(metrics))
    errors = "kafka_network_requestmetrics_errors_total"
    assert value(samples, errors, request="Fetch", error="NONE") == 1
    assert value(samples, errors, request="Fetch", error="NOT_LEADER_OR_FOLLOWER") == 1
    assert not any(name == errors and dict(labels)["request"] == "FetchConsumer"
                   for name, labels in samples)
    assert value(samples, errors, request="Metadata", error="UNKNOWN_SERVER_ERROR") == 1
    for request in ("Fetch", "FetchConsumer"):
        assert value(samples, "kafka_network_requestmetrics_throttletimems", quantile="0.50",
                     request=request) == 40
        assert value(samples, "kafka_network_requestmetrics_requestbytes_sum",
                     request=request) == 100


def test_the_idle_share_is_the_loops_time_not_running() -> None:
    """1 - the loop thread's CPU time over the wall time of the last WINDOW samples (the
    network's), or of all since the first (the request handlers')."""
    now = {"wall": 0.0, "cpu": 0.0}
    idle = EventLoopIdle(wall=lambda: now["wall"], cpu=lambda: now["cpu"])
    name = "kafka_network_socketserver_networkprocessoravgidlepercent"
    assert value(scrape(EventLoopIdleCollector(idle)), name) == 1.0  # nothing measured
    idle.sample()
    for _ in range(WINDOW):  # busy a quarter of each second
        now["wall"] += 1.0
        now["cpu"] += 0.25
        idle.sample()
    assert value(scrape(EventLoopIdleCollector(idle)), name) == pytest.approx(0.75)
    for _ in range(WINDOW):  # then flat out: the busy seconds leave the window
        now["wall"] += 1.0
        now["cpu"] += 1.0
        idle.sample()
    assert value(scrape(EventLoopIdleCollector(idle)), name) == 0.0
    # The request handlers' idle share (Kafka's meter's MeanRate) is since the start.
    mean = "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"
    assert value(scrape(EventLoopIdleCollector(idle)), mean) == pytest.approx(0.375)


async def test_the_idle_sampler_runs_on_the_loop() -> None:
    idle = EventLoopIdle()
    idle.start(asyncio.get_running_loop())
    try:
        assert 0.0 <= idle.ratio() <= 1.0
        assert len(idle.samples) == 1
    finally:
        idle.stop()


# --- the node's registry and the endpoint ---------------------------------------------------

def test_each_node_has_a_registry_of_its_own() -> None:
    """Two nodes in one process: each registry has its own process collector (the
    default registry would refuse the second) and its own request metrics."""
    first = node_registry(image=MetadataImage(), requests=RequestChannelMetrics(),
                          servers=list, broker=None, controller=None)
    second_metrics = RequestChannelMetrics()
    second_metrics.record(ApiKey.API_VERSIONS, 3, None, 0.0, 0.0, 0.0, 0.0)
    second = node_registry(image=MetadataImage(), requests=second_metrics, servers=list,
                           broker=None, controller=None)
    assert b"process_cpu_seconds_total" in generate_latest(first)
    assert b"ApiVersions" not in generate_latest(first)
    assert b'request="ApiVersions"' in generate_latest(second)


async def http(port: int, data: bytes, close_after: bool = False) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    if close_after:
        writer.write_eof()
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


def head(response: bytes) -> tuple[str, dict[str, str], bytes]:
    top, _, body = response.partition(b"\r\n\r\n")
    status, *lines = top.decode().split("\r\n")
    return status, dict(line.split(": ", 1) for line in lines), body


class Constant:
    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily
        yield GaugeMetricFamily("ottla_test_value", "a constant", value=7)


class Broken:
    def collect(self) -> Iterable[Any]:
        raise RuntimeError("a bug")


async def test_the_endpoint_serves_metrics_and_refuses_everything_else(monkeypatch) -> None:
    registry = CollectorRegistry()
    registry.register(Constant())
    endpoint = MetricsEndpoint(registry, "127.0.0.1", 0)
    await endpoint.start()
    port = endpoint.port
    try:
        status, headers, body = head(await http(port, b"GET /metrics HTTP/1.1\r\n"
                                                      b"Host: x\r\n\r\n"))
        assert status == "HTTP/1.1 200 OK"
        assert headers["Content-Type"] == CONTENT_TYPE_LATEST
        assert int(headers["Content-Length"]) == len(body)
        assert b"ottla_test_value 7.0" in body
        status, _, body = head(await http(port, b"GET /metrics?name=x HTTP/1.0\r\n\r\n"))
        assert status.endswith("200 OK") and b"ottla_test_value" in body
        status, _, body = head(await http(port, b"HEAD /metrics HTTP/1.1\r\n\r\n"))
        assert status.endswith("200 OK") and body == b""
        status, _, _ = head(await http(port, b"GET / HTTP/1.1\r\n\r\n"))
        assert status == "HTTP/1.1 404 Not Found"
        status, headers, _ = head(await http(port, b"DELETE /metrics HTTP/1.1\r\n\r\n"))
        assert status == "HTTP/1.1 405 Method Not Allowed"
        assert headers["Allow"] == "GET, HEAD"
        for bad in (b"nonsense\r\n\r\n", b"GET /metrics SMTP\r\n\r\n", b"\xff\xfe\r\n\r\n"):
            status, _, _ = head(await http(port, bad))
            assert status == "HTTP/1.1 400 Bad Request"
        # Cut short, or more head than allowed: closed without an answer.
        assert await http(port, b"GET /metrics HTTP/1.1\r\n", close_after=True) == b""
        assert await http(port, b"GET /" + b"x" * 20000) == b""
        monkeypatch.setattr(endpoint_module, "READ_TIMEOUT_S", 0.1)
        assert await http(port, b"GET /metrics") == b""  # never finished: timed out
        # A collector that fails makes the scrape fail, not the node.
        broken = Broken()
        registry.register(broken)
        status, _, _ = head(await http(port, b"GET /metrics HTTP/1.1\r\n\r\n"))
        assert status == "HTTP/1.1 500 Internal Server Error"
        registry.unregister(broken)
        # Still serving after all that.
        status, _, _ = head(await http(port, b"GET /metrics HTTP/1.1\r\n\r\n"))
        assert status.endswith("200 OK")
    finally:
        await endpoint.stop()


# --- FetchSessionCache ---------------------------------------------------------------------

def test_fetch_session_cache_gauges_and_evictions() -> None:
    from collections import OrderedDict

    from ottla.broker.fetch_session import EVICTION_IDLE_MS, CachedPartition, FetchSessionCache
    from ottla.server.metrics.fetch_session_cache_collector import FetchSessionCacheCollector

    def partitions(topic: str, count: int) -> OrderedDict[tuple[Any, int], CachedPartition]:
        return OrderedDict(((topic, p), CachedPartition(topic, None, p, 0, 1 << 20))
                           for p in range(count))

    cache = FetchSessionCache(max_slots=2, rng=random.Random(3))
    collector = FetchSessionCacheCollector(cache)
    name = "kafka_server_fetchsessioncache_{}".format
    empty = scrape(collector)
    assert value(empty, name("numincrementalfetchsessions")) == 0
    assert value(empty, name("numincrementalfetchpartitionscached")) == 0
    assert value(empty, name("incrementalfetchsessionevictions_total")) == 0
    first = cache.create(partitions("a", 3), True, now_ms=1000)
    cache.create(partitions("b", 2), True, now_ms=2000)
    full = scrape(collector)
    assert value(full, name("numincrementalfetchsessions")) == 2
    assert value(full, name("numincrementalfetchpartitionscached")) == 5
    # Full, and no session idle long enough to give way: the new one is not cached.
    assert cache.create(partitions("c", 4), True, now_ms=3000) == 0
    assert value(scrape(collector), name("incrementalfetchsessionevictions_total")) == 0
    # The least recently used session, idle past the eviction time, gives way.
    cache.create(partitions("c", 4), True, now_ms=1000 + EVICTION_IDLE_MS)
    assert cache.get(first) is None
    evicted = scrape(collector)
    assert value(evicted, name("numincrementalfetchsessions")) == 2
    assert value(evicted, name("numincrementalfetchpartitionscached")) == 6
    assert value(evicted, name("incrementalfetchsessionevictions_total")) == 1
