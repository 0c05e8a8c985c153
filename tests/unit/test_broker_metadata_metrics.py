"""Kafka's ``broker-metadata-metrics`` from the metadata publisher (the last offset
applied, its batch's append time and the lag behind it, the errors met loading and
publishing), and the metadata log's side of other groups: its segment fsyncs timed in
LogFlushStats, raft-metrics' observers forgotten after five minutes without a fetch
(Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS) and ``uncommitted-voter-change``."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ottla.metadata import records as r
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot
from ottla.metadata.image import MetadataImage
from ottla.protocol.records import build_batch
from ottla.raft.file_log import FileRaftLog, entries_of
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Committed, Entry, FetchRequest, Snapshot
from ottla.raft.quorum import OBSERVER_SESSION_TIMEOUT_MS, RaftReplica
from ottla.raft.voter_set import VoterNode
from ottla.server.metadata_publisher import MetadataPublisher
from ottla.server.metrics.broker_metadata_collector import BrokerMetadataMetricsCollector
from ottla.server.metrics.log_flush_stats import LogFlushStats
from ottla.server.metrics.metadata_batch_stats import MetadataBatchStats
from ottla.server.metrics.raft_collector import RaftMetricsCollector
from tests.unit.test_raft_voter_changes import Quorum, key

PREFIX = "kafka_server_broker_metadata_metrics_"


class NoRaft:
    leader_id: int | None = None
    high_watermark = 0

    def create_snapshot(self, end_offset: int, data: Any) -> bool:
        return False


def scrape(collector: Any) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def metadata(publisher: MetadataPublisher, now_ms: int) -> dict[str, float]:
    values = scrape(BrokerMetadataMetricsCollector(publisher, lambda: now_ms))
    return {name.removeprefix(PREFIX): v for name, v in values.items()
            if name.startswith(PREFIX)}


def batch(base_offset: int, timestamp: int, *records: Any) -> Entry:
    """An entry as a broker reads it from its metadata log: the leader's batch."""
    raw = build_batch([(None, r.encode(record)) for record in records],
                      base_offset=base_offset, timestamp=timestamp)
    [entry] = entries_of(raw, r)
    return entry


def topic(name: str, topic_id: uuid.UUID) -> r.TopicRecord:
    return r.TopicRecord(name=name, topic_id=topic_id)


def test_nothing_applied_yet_is_kafkas_empty_provenance() -> None:
    values = metadata(MetadataPublisher(MetadataImage(), NoRaft()), 5_000)  # type: ignore[arg-type]
    assert values == {"last_applied_record_offset": -1, "last_applied_record_timestamp": -1,
                      "last_applied_record_lag_ms": 5_001, "metadata_load_error_count": 0,
                      "metadata_apply_error_count": 0}


def test_the_last_applied_offset_and_its_batchs_append_time() -> None:
    publisher = MetadataPublisher(MetadataImage(), NoRaft())  # type: ignore[arg-type]
    publisher.on_committed(Committed(0, [
        batch(0, 1_000, topic("orders", uuid.UUID(int=1))),
        batch(1, 1_200, topic("payments", uuid.UUID(int=2)), r.NoOpRecord())]))
    values = metadata(publisher, 1_700)
    assert values["last_applied_record_offset"] == 2  # the last record of the last batch
    assert values["last_applied_record_timestamp"] == 1_200
    assert values["last_applied_record_lag_ms"] == 500
    # Nothing new committed: the lag grows, as Kafka's now - timestamp does.
    assert metadata(publisher, 9_200)["last_applied_record_lag_ms"] == 8_000


def test_a_snapshot_loaded_gives_its_end_and_its_last_contained_log_timestamp() -> None:
    data = encode_snapshot([topic("orders", uuid.UUID(int=1))], 4_321)
    assert decode_snapshot(data).last_contained_log_timestamp == 4_321
    publisher = MetadataPublisher(MetadataImage(), NoRaft())  # type: ignore[arg-type]
    publisher.on_committed(Committed(10, [], Snapshot(10, 1, data)))
    values = metadata(publisher, 5_000)
    assert (values["last_applied_record_offset"], values["last_applied_record_timestamp"],
            values["last_applied_record_lag_ms"]) == (9, 4_321, 679)


def unknown_partition_change() -> r.PartitionChangeRecord:
    return r.PartitionChangeRecord(topic_id=uuid.UUID(int=99), partition_id=0, leader=1)


def test_a_broker_counts_and_skips_a_record_it_cannot_replay() -> None:
    image = MetadataImage()
    publisher = MetadataPublisher(image, NoRaft(),  # type: ignore[arg-type]
                                  fatal_load_errors=False)
    publisher.on_committed(Committed(0, [
        batch(0, 1_000, unknown_partition_change(), topic("orders", uuid.UUID(int=1)))]))
    values = metadata(publisher, 1_000)
    assert values["metadata_load_error_count"] == 1
    assert values["last_applied_record_offset"] == 1
    assert "orders" in image.topics_by_name  # the records after it are applied


def test_a_controller_stops_on_a_record_it_cannot_replay() -> None:
    publisher = MetadataPublisher(MetadataImage(), NoRaft())  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        publisher.on_committed(Committed(0, [batch(0, 1_000, unknown_partition_change())]))


def test_a_publisher_failing_is_counted_and_the_next_delta_applied() -> None:
    seen: list[int] = []

    def on_change(delta: Any) -> None:
        seen.append(publisher.applied_offset)
        if len(seen) == 1:
            raise RuntimeError("a publisher failed")

    publisher = MetadataPublisher(MetadataImage(), NoRaft(),  # type: ignore[arg-type]
                                  on_change=on_change)
    publisher.on_committed(Committed(0, [batch(0, 1_000, topic("a", uuid.UUID(int=1)))]))
    publisher.on_committed(Committed(1, [batch(1, 1_100, topic("b", uuid.UUID(int=2)))]))
    assert seen == [0, 1]
    values = metadata(publisher, 1_100)
    assert values["metadata_apply_error_count"] == 1
    assert values["metadata_load_error_count"] == 0


# --- the metadata log's fsyncs in LogFlushStats -----------------------------------------------

def test_each_metadata_log_segment_fsync_is_timed(tmp_path) -> None:
    """Kafka's metadata log is a UnifiedLog: LogSegment.flush times each segment it
    fsyncs, the directory's fsync after a roll apart."""
    ticks = iter(range(0, 1000, 2))
    stats = LogFlushStats(clock=lambda: next(ticks) / 1000)
    log = FileRaftLog(str(tmp_path / "__cluster_metadata-0"), 1, [1], r)
    log.append([Entry(1, (r.NoOpRecord(),))])
    token = log.begin_flush()
    assert token.segments == 1
    log.fsync(token, stats.time)
    log.end_flush(token)
    assert stats.snapshot() == (1, 2.0, [2.0])
    token = log.begin_flush()  # nothing new: no segment to fsync
    log.fsync(token, stats.time)
    log.end_flush(token)
    assert stats.count == 1


# --- raft-metrics ---------------------------------------------------------------------------

class Raft:
    def __init__(self, replica: RaftReplica, now_ms: int) -> None:
        self.replica = replica
        self.log = replica.log
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


def raft(replica: RaftReplica, now_ms: int) -> dict[str, float]:
    prefix = "kafka_server_raft_metrics_"
    values = scrape(RaftMetricsCollector(Raft(replica, now_ms)))  # type: ignore[arg-type]
    return {n.removeprefix(prefix): v for n, v in values.items() if n.startswith(prefix)}


def test_an_observer_silent_for_five_minutes_is_no_longer_counted() -> None:
    assert OBSERVER_SESSION_TIMEOUT_MS == 300_000  # Kafka 4.4's LeaderState
    leader = RaftReplica(1, {1}, MemoryLog(), random.Random(0))
    leader.start(0)
    leader.handle(4, FetchRequest(4, leader.epoch, 0, 0), 1_000)
    leader.handle(5, FetchRequest(5, leader.epoch, 0, 0), 2_000)
    assert raft(leader, 300_999)["number_of_observers"] == 2
    assert raft(leader, 301_000)["number_of_observers"] == 1  # 4: 300 s without a fetch
    # DescribeQuorum's view forgets it as well; fetching again, it is back.
    assert [k.id for k, *_ in leader.replica_states(301_000)[1]] == [5]
    leader.handle(4, FetchRequest(4, leader.epoch, 0, 0), 301_500)
    assert raft(leader, 301_500)["number_of_observers"] == 2


def test_a_voter_change_is_uncommitted_from_its_append_until_it_commits() -> None:
    q = Quorum([1, 2, 3], [1, 2, 3, 4])
    leader = q.leader()
    q.run_until(lambda: q.nodes[4].log.end_offset == leader.log.end_offset)
    assert raft(leader, q.now)["uncommitted_voter_change"] == 0
    assert leader.add_voter(7, VoterNode(key(4)), q.now) is None
    assert raft(leader, q.now)["uncommitted_voter_change"] == 1
    follower = next(n for n in q.nodes.values() if not n.is_leader and n.is_voter)
    assert "uncommitted_voter_change" not in raft(follower, q.now)  # the leader's only
    q.result(7)
    assert raft(leader, q.now)["uncommitted_voter_change"] == 0


def test_each_batch_applied_is_measured_in_the_broker_metadata_listener_histograms() -> None:
    """Kafka's MetadataLoader records each batch's records (a control batch's none) in
    MetadataBatchSizes and its replay time in MetadataBatchProcessingTimeUs."""
    publisher = MetadataPublisher(MetadataImage(), NoRaft())  # type: ignore[arg-type]
    publisher.batch_stats = MetadataBatchStats()
    publisher.on_committed(Committed(0, [
        Entry(1, None),  # the leader-change control record
        batch(1, 1_000, topic("a", uuid.UUID(int=1)), r.NoOpRecord(), r.NoOpRecord())]))
    registry = CollectorRegistry()
    registry.register(BrokerMetadataMetricsCollector(publisher, lambda: 1_000))
    text = generate_latest(registry).decode()
    samples = {(s.name, tuple(s.labels.items())): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    sizes = "kafka_server_brokermetadatalistener_metadatabatchsizes"
    assert samples[(sizes + "_count", ())] == 2
    assert samples[(sizes + "_sum", ())] == 3
    assert samples[(sizes, (("quantile", "0.999"),))] == 3
    times = "kafka_server_brokermetadatalistener_metadatabatchprocessingtimeus"
    assert samples[(times + "_count", ())] == 2
    assert samples[(times + "_sum", ())] > 0


def test_a_node_without_metrics_measures_no_batch() -> None:
    publisher = MetadataPublisher(MetadataImage(), NoRaft())  # type: ignore[arg-type]
    publisher.on_committed(Committed(0, [batch(0, 1_000, r.NoOpRecord())]))
    assert publisher.batch_stats is None
    assert not any(name.startswith("kafka_server_brokermetadatalistener")
                   for name in scrape(BrokerMetadataMetricsCollector(publisher, lambda: 0)))
