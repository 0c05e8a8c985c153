"""GET /metrics on prometheus.listener, as a Kafka user reads it: a real node, records
produced and consumed with confluent-kafka, the endpoint scraped over HTTP and parsed as
Prometheus parses it, and the series named as the JMX exporter names Kafka's. Then
clusters: a broker killed with SIGKILL shows as under-replicated partitions on the
surviving leader, and records produced with acks=all show as replication bytes on the
leader and its followers, whose lag is 0 once they caught up."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from ottla.protocol.api import ApiKey
from ottla.protocol.records import build_batch
from tests.helpers import KRaftCluster, OttlaProcess, WireClient, free_port, wait_until
from tests.integration.test_quorum import create
from tests.integration.test_replication import full_isr, partitions

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of the node's /metrics: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == CONTENT_TYPE_LATEST
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples that carry ``labels`` (the unlabelled series if none
    are given); a series not (yet) served fails."""
    found = [v for (n, have), v in samples.items() if n == name and (
        set(labels.items()) <= set(have) if labels else not have)]
    assert found, f"no {name}{labels or ''} in the scrape"
    return sum(found)


def total_or_zero(samples: Samples, name: str, **labels: str) -> float:
    """As ``total``, 0 for a series not served yet (a request name first seen later)."""
    return sum(v for (n, have), v in samples.items()
               if n == name and set(labels.items()) <= set(have))


class Metered(NamedTuple):
    node: OttlaProcess
    port: int
    """Where it serves /metrics."""


@pytest.fixture(scope="module")
def metered(tmp_path_factory) -> Iterator[Metered]:
    """A combined node serving its metrics (the module's tests share it)."""
    port = free_port()
    node = OttlaProcess(str(tmp_path_factory.mktemp("metrics") / "data"), overrides={
        "prometheus.listener": f"127.0.0.1:{port}", "offsets.topic.num.partitions": "3"})
    node.start()
    yield Metered(node, port)
    node.stop()


RECORDS = 60
VALUE = 200


def test_produce_and_consume_show_as_kafka_would_count_them(metered: Metered) -> None:
    node, port = metered
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("metered", 3, 1)])["metered"].result(15)
    before = scrape(port)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                         "linger.ms": 5})
    produced = 0
    for i in range(RECORDS):
        key, value = b"key-%d" % i, bytes([i % 256]) * VALUE
        produced += len(key) + len(value)
        producer.produce("metered", key=key, value=value, partition=i % 3)
    assert producer.flush(15) == 0
    after_produce = scrape(port)
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert total(after_produce, messages, topic="metered") == RECORDS
    # The all-topics count, less what coordinators appended to internal topics meanwhile
    # (Kafka counts those too).
    assert total(after_produce, messages) - internal(after_produce, messages) - (
        total(before, messages) - internal(before, messages)) == RECORDS
    assert total(after_produce, "kafka_server_brokertopicmetrics_bytesin_total",
                 topic="metered") >= produced
    assert total(after_produce, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                 topic="metered") >= 3  # every partition had a batch
    assert total(after_produce,
                 "kafka_server_brokertopicmetrics_failedproducerequests_total") == 0
    requests = "kafka_network_requestmetrics_requests_total"
    assert total(after_produce, requests, request="Produce") > \
        total_or_zero(before, requests, request="Produce")
    assert total(after_produce, "kafka_network_requestmetrics_totaltimems_count",
                 request="Produce") == total(after_produce, requests, request="Produce")

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "metered-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("metered", p, 0) for p in range(3)])
    consumed = 0
    deadline = time.monotonic() + 20
    try:
        while consumed < RECORDS and time.monotonic() < deadline:
            consumed += sum(1 for m in consumer.consume(100, 0.5) if m.error() is None)
    finally:
        consumer.close()
    assert consumed == RECORDS
    after_consume = scrape(port)
    bytes_out = "kafka_server_brokertopicmetrics_bytesout_total"
    assert total(after_consume, bytes_out, topic="metered") >= produced
    assert total(after_consume, bytes_out) > total(after_produce, bytes_out)
    assert total(after_consume, "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                 topic="metered") >= 3
    for request in ("Fetch", "FetchConsumer"):
        assert total(after_consume, requests, request=request) > \
            total_or_zero(after_produce, requests, request=request)
    assert ("kafka_network_requestmetrics_totaltimems",
            (("quantile", "0.99"), ("request", "Fetch"))) in after_consume

    # The replica manager and the controller, against what Metadata lists.
    def gauges_match() -> bool:
        listed = admin.list_topics(timeout=5).topics
        partition_count = sum(len(t.partitions) for t in listed.values())
        samples = scrape(port)
        return (total(samples, "kafka_server_replicamanager_partitioncount")
                == total(samples, "kafka_server_replicamanager_leadercount")
                == total(samples, "kafka_controller_kafkacontroller_globalpartitioncount")
                == partition_count) and \
            total(samples, "kafka_controller_kafkacontroller_globaltopiccount") == len(listed)
    wait_until(gauges_match, 10, 0.2, lambda: f"partition and topic gauges matching "
               f"Metadata: {scrape(port)}")
    final = scrape(port)
    assert "metered" in admin.list_topics(timeout=5).topics
    assert total(final, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert total(final, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert total(final, "kafka_controller_kafkacontroller_activebrokercount") == 1
    assert total(final, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert total(final, "kafka_controller_kafkacontroller_lastappliedrecordoffset") > 0
    assert total(final, "process_resident_memory_bytes") > 0
    assert total(final, "process_open_fds") > 0
    assert total(final, "kafka_server_socket_server_metrics_connection_count",
                 listener="PLAINTEXT") >= 1  # the admin client's


def test_the_broker_state_log_dirs_and_the_controllers_applied_time(metered: Metered
                                                                     ) -> None:
    """Kafka's KafkaServer BrokerState (3, RUNNING, once the broker is unfenced and
    serves), LogManager's offline log dirs (none, and the node's one dir listed as not
    offline) and the active controller's LastAppliedRecordTimestamp, which it sets when
    it appends: it writes a no-op record every metadata.max.idle.interval.ms (500 ms),
    so the lag (now less that timestamp) stays below a few seconds."""
    node, port = metered
    before_ms = time.time() * 1000
    samples = scrape(port)
    after_ms = time.time() * 1000
    assert total(samples, "kafka_server_kafkaserver_brokerstate") == 3
    assert total(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert series(samples, "kafka_log_logmanager_logdirectoryoffline",
                  logDirectory=os.path.abspath(node.data_dir)) == 0
    applied = total(samples, "kafka_controller_kafkacontroller_lastappliedrecordtimestamp")
    lag = total(samples, "kafka_controller_kafkacontroller_lastappliedrecordlagms")
    assert before_ms - 10_000 < applied <= after_ms
    assert 0 <= lag < 10_000
    assert abs((applied + lag) - (before_ms + after_ms) / 2) <= (after_ms - before_ms) / 2 + 1


CONTROLLER = "kafka_controller_kafkacontroller_"
PROCESSING = "kafka_controller_controllereventmanager_eventqueueprocessingtimems"


def test_the_controllers_operations_are_counted_and_timed(metered: Metered) -> None:
    """QuorumControllerMetrics on a one-node quorum: one leader seen
    (NewActiveControllersCount), and every operation and Raft event started counted
    (EventQueueOperationsStartedCount) and, when it succeeded, timed
    (EventQueueProcessingTimeMs): a CreateTopics adds at least its operation and the
    commit of its records."""
    node, port = metered
    before = scrape(port)
    assert total(before, CONTROLLER + "newactivecontrollerscount") == 1
    started = total(before, CONTROLLER + "eventqueueoperationsstartedcount")
    timed = total(before, PROCESSING + "_count")
    assert 0 < timed <= started
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("controlled", 1, 1)])["controlled"].result(15)
    after = scrape(port)
    assert total(after, CONTROLLER + "eventqueueoperationsstartedcount") >= started + 2
    assert total(after, PROCESSING + "_count") >= timed + 2
    assert total(after, PROCESSING + "_sum") > total(before, PROCESSING + "_sum")
    assert total(after, PROCESSING, quantile="0.99") >= total(after, PROCESSING,
                                                              quantile="0.50") > 0


def test_a_partitions_log_shows_its_offsets_segments_and_size(metered: Metered) -> None:
    """kafka.log:type=Log,name=LogEndOffset|LogStartOffset|NumLogSegments|Size of each
    partition: after N records to a one-partition topic its log ends at N."""
    node, port = metered
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("logged", 1, 1)])["logged"].result(15)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce("logged", value=b"record-%d" % i)
    assert producer.flush(15) == 0
    samples = scrape(port)
    logged = {"topic": "logged", "partition": "0"}
    assert total(samples, "kafka_log_log_logendoffset", **logged) == RECORDS
    assert total(samples, "kafka_log_log_logstartoffset", **logged) == 0
    assert total(samples, "kafka_log_log_numlogsegments", **logged) >= 1
    assert total(samples, "kafka_log_log_size", **logged) > RECORDS * len(b"record-0")


SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
SESSION_PARTITIONS = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def test_a_java_consumer_fetches_in_a_session_librdkafka_without(make_ottla) -> None:
    """kafka.server:type=FetchSessionCache while consumers fetch from a one-node cluster.
    librdkafka (confluent-kafka) fetches without a session (session id 0, epoch -1),
    for which Kafka caches nothing; Kafka's Java consumer opens one incremental fetch
    session (KIP-227) holding the partitions it fetches, here all three of the topic."""
    from tests.java_clients import started

    port = free_port()
    node = make_ottla(**{"prometheus.listener": f"127.0.0.1:{port}"})
    topic = "in-sessions"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, value=b"record-%d" % i, partition=i % 3)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "librdkafka",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        seen = []

        def consumed() -> bool:
            seen.extend(m for m in consumer.consume(100, 0.5) if m.error() is None)
            return len(seen) >= RECORDS
        wait_until(consumed, 30, 0, lambda: f"librdkafka to read {RECORDS} ({len(seen)})")
        consumer.consume(10, 1.0)  # still fetching, at the end of each partition
        samples = scrape(port)
        assert total(samples, SESSIONS) == 0
        assert total(samples, SESSION_PARTITIONS) == 0
        with started({"op": "consume", "bootstrap": node.bootstrap, "topics": [topic],
                      "group": "java", "count": RECORDS + 1, "timeout_ms": 90_000}) as java:
            java.wait_for(lambda c: len(c.records()) >= RECORDS, 60,
                          "the Java consumer reading the topic")
            wait_until(lambda: total(scrape(port), SESSION_PARTITIONS) == 3, 15, 0.1,
                       lambda: f"the Java consumer's session holding its 3 partitions "
                               f"({scrape(port).get((SESSION_PARTITIONS, ()))})")
            assert total(scrape(port), SESSIONS) == 1
    finally:
        consumer.close()


CLEANER = "kafka_log_logcleaner_"
CLEANER_MANAGER = "kafka_log_logcleanermanager_"


def test_the_cleaner_gauges_follow_a_compaction(make_ottla) -> None:
    """kafka.log:type=LogCleaner and LogCleanerManager while a compacted topic with
    hour-old records (past its max.compaction.lag.ms of a minute) is cleaned: the last
    pass took some time and wrote back part of what it read, the log it chose was about
    an hour less a minute overdue, no log is dirty once the cleaner has caught up, and
    the time of its last look for work (now less time-since-last-run-ms) moves on every
    log.cleaner.backoff.ms."""
    port = free_port()
    node = make_ottla(**{"prometheus.listener": f"127.0.0.1:{port}",
                         "log.cleaner.backoff.ms": "200"})
    topic = "compacted"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01", "max.compaction.lag.ms": "60000"})])[topic] \
        .result(15)
    started_ms = time.time() * 1000
    old = int(started_ms) - 3_600_000
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    for i in range(RECORDS):  # about five batches to a 1 KiB segment
        producer.produce(topic, b"v" * 100, key=b"k%d" % (i % 5), timestamp=old + i)
        assert producer.flush(10) == 0

    def cleaned() -> Samples | None:
        samples = scrape(port)
        return samples if total(samples, CLEANER + "max_clean_time_secs") > 0 and \
            total(samples, CLEANER_MANAGER + "max_dirty_percent") == 0 else None
    samples = wait_until(cleaned, 30, 0.1, "a compaction, and nothing dirty left")
    assert total(samples, CLEANER + "max_clean_time_secs") < 30
    assert 0 < total(samples, CLEANER + "cleaner_recopy_percent") < 100
    delay_s = total(samples, CLEANER + "max_compaction_delay_secs")
    earliest_due = old + 60_000 + RECORDS  # the latest record's due time: the least delay
    assert (started_ms - earliest_due) / 1000 <= delay_s <= \
        (time.time() * 1000 - old - 60_000) / 1000

    def last_look_ms() -> tuple[float, float]:
        """When the cleaner last looked: between the two bounds."""
        before = time.time() * 1000
        since = total(scrape(port), CLEANER_MANAGER + "time_since_last_run_ms")
        return before - since, time.time() * 1000 - since
    first = last_look_ms()
    assert first[1] >= started_ms  # it looked after the records came
    wait_until(lambda: last_look_ms()[0] > first[1], 30, 0.1,
               "the cleaner to look for work again")


def test_idempotent_producer_ids_and_log_flushes_are_counted(metered: Metered) -> None:
    """ReplicaManager ProducerIdCount: an idempotent producer's id is kept in the producer
    state of the partition it wrote. LogFlushStats LogFlushRateAndTimeMs: a topic with
    ``flush.messages=1`` fsyncs its segment after every append, each flush timed."""
    node, port = metered
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("flushed", 1, 1, config={"flush.messages": "1"})]
                        )["flushed"].result(15)
    before = scrape(port)
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce("flushed", value=b"record-%d" % i)
    assert producer.flush(15) == 0
    after = scrape(port)
    flushes = FLUSHES
    assert total(after, flushes + "_count") >= total(before, flushes + "_count") + 1
    assert total(after, flushes + "_sum") > total(before, flushes + "_sum")
    assert (flushes, (("quantile", "0.99"),)) in after
    ids = "kafka_server_replicamanager_produceridcount"
    assert total(after, ids) == total(before, ids) + 1


FLUSHES = "kafka_log_logflushstats_logflushrateandtimems"
METADATA = "kafka_server_broker_metadata_metrics_"
TXN = "kafka_server_transaction_coordinator_metrics_"
MARKERS = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"


def test_transactions_count_their_markers_and_the_coordinators_load(metered: Metered
                                                                    ) -> None:
    """A transactional producer (confluent-kafka) commits one transaction and aborts
    another on a one-partition topic. As Kafka's appendToLocalLog counts every local
    append, each transaction's marker is a MessagesIn of the topic besides its records,
    and its bytes are BytesIn. The coordinator loaded the ``__transaction_state``
    partitions it leads when the first InitProducerId created the topic, within the
    last 30 to 60 s its partition-load-time covers; no marker waits for a leader and no
    completion for a retry once both transactions are over."""
    node, port = metered
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("txn-orders", 1, 1)])["txn-orders"].result(15)
    before = scrape(port)
    producer = Producer({"bootstrap.servers": node.bootstrap,
                         "transactional.id": "metrics-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("txn-orders", value=b"committed-%d" % i)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn-orders", value=b"aborted-%d" % i)
    producer.flush(15)
    # The open transaction's 3 records hold read_committed consumers back: Kafka's
    # kafka.cluster:type=Partition LastStableOffsetLag (high watermark less LSO).
    lag = "kafka_cluster_partition_laststableoffsetlag"
    wait_until(lambda: series(scrape(port), lag, topic="txn-orders", partition="0") == 3,
               10, 0.2, lambda: f"{lag} 3 (is "
               f"{series(scrape(port), lag, topic='txn-orders', partition='0')})")
    producer.abort_transaction(30)
    # EndTxn is answered once the Prepare state is committed; the markers follow.
    wait_until(lambda: total_or_zero(scrape(port), MESSAGES_IN, topic="txn-orders")
               >= 5 + 3 + 2, 30, 0.2, "both markers counted as MessagesIn")
    after = scrape(port)
    assert total(after, MESSAGES_IN, topic="txn-orders") == 5 + 3 + 2
    assert series(after, lag, topic="txn-orders", partition="0") == 0
    assert total_or_zero(before, MESSAGES_IN, topic="txn-orders") == 0
    # Two record batches and two marker batches (a marker batch is 78 bytes).
    assert total(after, BYTES_IN, topic="txn-orders") > 2 * 78
    # The coordinator's own appends count too (as before this change).
    assert total(after, MESSAGES_IN, topic="__transaction_state") > \
        total_or_zero(before, MESSAGES_IN, topic="__transaction_state")
    load_max = total(after, TXN + "partition_load_time_max")
    load_avg = total(after, TXN + "partition_load_time_avg")
    assert 0 <= load_avg <= load_max < 60_000
    assert total(after, MARKERS + "unknowndestinationqueuesize") == 0
    assert total(after, MARKERS + "logappendretryqueuesize") == 0


def test_the_broker_metadata_metrics_follow_what_it_applied(metered: Metered) -> None:
    """broker-metadata-metrics: creating a topic commits metadata records, which the
    node applies: the last applied offset moves up to the quorum's high watermark, its
    timestamp is the batch's append time (now-ish) and the lag now less that. The
    metadata log fsyncs what it appends, so LogFlushStats counts more flushes (Kafka's
    metadata log is a UnifiedLog whose segments LogSegment.flush times), and each batch
    applied is measured in BrokerMetadataListener's histograms."""
    node, port = metered
    before = scrape(port)
    started_ms = time.time() * 1000
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("metadata-applied", 3, 1)])["metadata-applied"].result(15)

    def applied(samples: Samples) -> float:
        return total(samples, METADATA + "last_applied_record_offset")

    wait_until(lambda: applied(scrape(port)) > applied(before), 15, 0.1,
               "the topic's records applied")
    after = scrape(port)
    assert applied(after) <= total(after, "kafka_server_raft_metrics_high_watermark") - 1
    timestamp = total(after, METADATA + "last_applied_record_timestamp")
    assert started_ms - 1_000 <= timestamp <= time.time() * 1000
    assert 0 <= total(after, METADATA + "last_applied_record_lag_ms") < 60_000
    assert total(after, METADATA + "metadata_load_error_count") == 0
    assert total(after, METADATA + "metadata_apply_error_count") == 0
    assert total(after, FLUSHES + "_count") > total(before, FLUSHES + "_count")
    # BrokerMetadataListener's histograms: one more sample per batch applied.
    listener = "kafka_server_brokermetadatalistener_{}_count".format
    for name in ("metadatabatchsizes", "metadatabatchprocessingtimeus"):
        assert total(after, listener(name)) > total(before, listener(name))


def state(samples: Samples) -> str:
    """raft-metrics' current-state, from the one ``..._current_state`` series."""
    states = [dict(labels)["state"] for (name, labels), v in samples.items()
              if name == "kafka_server_raft_metrics_current_state" and v == 1]
    assert len(states) == 1, states
    return states[0]


def test_the_raft_metrics_show_the_leader_and_its_epoch(metered: Metered) -> None:
    """kafka.server:type=raft-metrics: the combined node is the quorum's only voter,
    hence its leader, in an epoch >= 1, with its metadata log committed to its end."""
    node, port = metered
    samples = scrape(port)
    raft = "kafka_server_raft_metrics_{}".format
    assert state(samples) == "leader"
    assert total(samples, raft("current_leader")) == node.node_id
    assert total(samples, raft("current_epoch")) >= 1
    assert total(samples, raft("current_vote")) == node.node_id
    assert total(samples, raft("log_end_epoch")) == total(samples, raft("current_epoch"))
    assert 0 < total(samples, raft("high_watermark")) <= total(samples, raft("log_end_offset"))


def test_the_raft_metrics_time_commits_and_count_appended_records(metered: Metered) -> None:
    """raft-metrics' sampled stats on the lone voter: creating a topic appends metadata
    records to the leader's log, committed (commit-latency) and counted
    (append-records-rate); it fetches from no one and never campaigned (it was elected
    at once), so fetch-records-rate is 0 and the election latency NaN, as Kafka's."""
    node, port = metered
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("raft-timed", 2, 1)])["raft-timed"].result(15)
    samples = scrape(port)
    raft = "kafka_server_raft_metrics_{}".format
    assert total(samples, raft("append_records_rate")) > 0
    assert total(samples, raft("fetch_records_rate")) == 0
    average = total(samples, raft("commit_latency_avg"))
    assert 0 <= average <= total(samples, raft("commit_latency_max")) < 10_000
    assert math.isnan(total(samples, raft("election_latency_avg")))
    assert math.isnan(total(samples, raft("election_latency_max")))
    assert total(samples, raft("number_unknown_voter_connections")) == 0


def test_the_raft_poll_idle_ratio_shows_a_quiet_voter_mostly_idle(metered: Metered) -> None:
    """raft-metrics' poll-idle-ratio-avg, as Kafka's: the share of the time since the
    previous read that the replica waited between pieces of work (1.0, the default, over
    an interval with fewer than two). A lone voter that only ticks and writes the
    controller's no-op records waits nearly all the time."""
    _, port = metered
    name = "kafka_server_raft_metrics_poll_idle_ratio_avg"
    seen: list[float] = []

    def measured() -> bool:
        seen.append(total(scrape(port), name))
        return seen[-1] < 1.0
    wait_until(measured, 10, 0.5, lambda: f"{name} below 1.0 (seen {seen})")
    assert 0.5 < seen[-1] < 1.0
    assert all(0.5 < v <= 1.0 for v in seen), seen


def series(samples: Samples, name: str, **labels: str) -> float | None:
    """The value of the one series with exactly ``labels``, None if it is not served."""
    return samples.get((name, tuple(sorted(labels.items()))))


GROUPS = "kafka_server_group_coordinator_metrics_{}"


def test_the_coordinator_runtimes_partitions_and_load_times(metered: Metered) -> None:
    """Kafka's CoordinatorRuntimeMetrics: the node leads all three ``__consumer_offsets``
    partitions (offsets.topic.num.partitions=3), active once a group used them, none
    loading or failed, each loaded within the windows' minute; the share coordinator
    has loaded none before a share group asks for one."""
    node, port = metered
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "loaders",
                         "enable.auto.commit": False})
    try:
        consumer.list_topics(timeout=15)
        consumer.committed([TopicPartition("loaders-topic", 0)], timeout=30)
    finally:
        consumer.close()
    partitions_by_state = GROUPS.format("num_partitions")
    wait_until(lambda: total(scrape(port), partitions_by_state, state="active") == 3, 30,
               0.2, lambda: f"3 active: {scrape(port).get((partitions_by_state, ()))}")
    samples = scrape(port)
    assert total(samples, partitions_by_state, state="loading") == 0
    assert total(samples, partitions_by_state, state="failed") == 0
    shares = "kafka_server_share_coordinator_metrics_num_partitions"
    assert total(samples, shares, state="active") >= 0
    load_max = total(samples, GROUPS.format("partition_load_time_max"))
    assert math.isnan(load_max) or 0 <= load_max < 60_000


def test_committed_offsets_count_one_per_partition(metered: Metered) -> None:
    """Kafka's offset-commit-count (group-coordinator-metrics) grows by the partitions
    each OffsetCommit writes: 3, then 2 more."""
    node, port = metered
    topic, count = "committed", "kafka_server_group_coordinator_metrics_offset_commit_count"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    before = total_or_zero(scrape(port), count)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "committers",
                         "enable.auto.commit": False})
    # The commits are records the coordinator appends to __consumer_offsets: Kafka's
    # appendToLocalLog counts them as MessagesIn of that topic, one per partition, and
    # each commit's batch as one TotalProduceRequests (a Kafka 4.4 node with the same
    # two commits shows Count 3 then 5, and 1 then 2, on JMX).
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    produces = "kafka_server_brokertopicmetrics_totalproducerequests_total"
    first = scrape(port)
    offsets_in = total_or_zero(first, messages, topic="__consumer_offsets")
    produced = total_or_zero(first, produces, topic="__consumer_offsets")
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 5) for p in range(3)],
                        asynchronous=False)
        samples = scrape(port)
        assert total(samples, count) - before == 3
        assert total(samples, messages, topic="__consumer_offsets") - offsets_in == 3
        assert total(samples, produces, topic="__consumer_offsets") - produced == 1
        consumer.commit(offsets=[TopicPartition(topic, p, 9) for p in range(2)],
                        asynchronous=False)
        samples = scrape(port)
        assert total(samples, count) - before == 5
        assert total(samples, messages, topic="__consumer_offsets") - offsets_in == 5
        assert total(samples, produces, topic="__consumer_offsets") - produced == 2
        assert total(samples, "kafka_server_brokertopicmetrics_bytesin_total",
                     topic="__consumer_offsets") > 0
    finally:
        consumer.close()


@pytest.mark.parametrize(("protocol", "metric"), [
    ("classic", "group_completed_rebalance_count"),
    ("consumer", "consumer_group_rebalance_count")])
def test_a_groups_rebalance_is_counted(metered: Metered, protocol: str, metric: str) -> None:
    """Kafka's group-completed-rebalance-count grows by one when a classic group's first
    member joins and syncs (the group becomes Stable); consumer-group-rebalance-count
    when a KIP-848 group's first member's heartbeat bumps the group epoch."""
    node, port = metered
    topic = f"rebalanced-{protocol}"
    count = f"kafka_server_group_coordinator_metrics_{metric}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    before = total_or_zero(scrape(port), count)
    consumer = Consumer({"bootstrap.servers": node.bootstrap,
                         "group.id": f"rebalancers-{protocol}", "group.protocol": protocol,
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        assert total(scrape(port), count) - before == 1
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_groups_lag_is_served_as_kafka_exporter_names_it(metered: Metered,
                                                           protocol: str) -> None:
    """kafka_exporter's series, from the group coordinator's state: a consumer that read
    and committed K of N records lags N - K, and 0 once it has read and committed the
    rest."""
    node, port = metered
    topic, group, produced, read_first = f"lagging-{protocol}", f"laggards-{protocol}", 40, 15
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for i in range(produced):
        producer.produce(topic, value=b"record-%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                         "group.protocol": protocol, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    labels = {"consumergroup": group, "topic": topic, "partition": "0"}
    try:
        consumer.subscribe([topic])
        consumed: list = []
        deadline = time.monotonic() + 30
        while len(consumed) < read_first and time.monotonic() < deadline:
            consumed += [m for m in consumer.consume(read_first - len(consumed), 0.5)
                         if m.error() is None]
        assert len(consumed) == read_first
        consumer.commit(message=consumed[-1], asynchronous=False)
        lag = "kafka_consumergroup_lag"
        wait_until(lambda: series(scrape(port), lag, **labels) == produced - read_first, 10,
                   0.2, lambda: f"lag {produced - read_first} in {scrape(port)}")
        samples = scrape(port)
        assert series(samples, "kafka_consumergroup_current_offset", **labels) == read_first
        assert series(samples, "kafka_consumergroup_lag_sum", consumergroup=group,
                      topic=topic) == produced - read_first
        assert series(samples, "kafka_consumergroup_members", consumergroup=group) == 1
        # group-coordinator-metrics: the group is counted, as Stable while its member
        # consumes (other tests' groups on the shared node may be counted too)
        assert (series(samples, GROUPS.format("group_count"), protocol=protocol) or 0) >= 1
        wait_until(lambda: (series(scrape(port), GROUPS.format(f"{protocol}_group_count"),
                                   state="Stable") or 0) >= 1, 10, 0.2,
                   lambda: f"a stable {protocol} group in {scrape(port)}")
        if protocol == "classic":  # the Yammer gauges count classic groups only
            assert (series(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups")
                    or 0) >= 1
        assert series(samples, "kafka_topic_partition_current_offset", topic=topic,
                      partition="0") == produced
        assert series(samples, "kafka_topic_partition_oldest_offset", topic=topic,
                      partition="0") == 0

        while len(consumed) < produced and time.monotonic() < deadline:
            consumed += [m for m in consumer.consume(produced - len(consumed), 0.5)
                         if m.error() is None]
        assert len(consumed) == produced
        consumer.commit(message=consumed[-1], asynchronous=False)
        wait_until(lambda: series(scrape(port), lag, **labels) == 0, 10, 0.2,
                   lambda: f"lag 0 in {scrape(port)}")
    finally:
        consumer.close()
    assert series(scrape(port), "kafka_consumergroup_current_offset", **labels) == produced


def client_metrics(node: OttlaProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ottla", "client-metrics",
                           "--bootstrap-server", node.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def internal(samples: Samples, name: str) -> float:
    """The sum of ``name``'s per-topic samples of internal topics (``__*``)."""
    return sum(v for (n, labels), v in samples.items() if n == name and any(
        key == "topic" and value.startswith("__") for key, value in labels))


def pushed(samples: Samples, client_id: str) -> dict[str, float]:
    """The series a client pushed (KIP-714), by name."""
    return {name: v for (name, labels), v in samples.items()
            if ("client_id", client_id) in labels and name.startswith("org_apache_kafka_")}


def producing(node: OttlaProcess, client_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": node.bootstrap, "client.id": client_id,
                         "linger.ms": 5})
    producer.produce("telemetry", value=b"hello")
    assert producer.flush(15) == 0
    return producer


def test_client_telemetry_is_pushed_once_a_subscription_matches(metered: Metered) -> None:
    """KIP-714 with confluent-kafka (librdkafka pushes by default): a producer no
    subscription matches asks for one and pushes nothing; after ``ottla client-metrics
    --alter`` subscribes producers to ``org.apache.kafka.producer.`` every second, a new
    producer's pushed metrics appear on /metrics labelled with its client id."""
    node, port = metered
    requests = "kafka_network_requestmetrics_requests_total"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("telemetry", 1, 1)])["telemetry"].result(15)
    before = total_or_zero(scrape(port), requests, request="GetTelemetrySubscriptions")
    unsubscribed = producing(node, "unsubscribed-producer")
    try:
        wait_until(lambda: total_or_zero(scrape(port), requests,
                                         request="GetTelemetrySubscriptions") > before,
                   15, 0.2, "the producer asking for its telemetry subscription")
        samples = scrape(port)
        assert total_or_zero(samples, requests, request="PushTelemetry") == 0
        assert not pushed(samples, "unsubscribed-producer")
    finally:
        unsubscribed.flush(5)

    altered = client_metrics(node, "--alter", "--name", "producers", "--metrics",
                             "org.apache.kafka.producer.", "--interval", "1000",
                             "--match", "client_id=telemetry-.*")
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == "Altered client metrics config for producers.\n"
    described = client_metrics(node, "--describe", "--name", "producers")
    assert described.stdout.splitlines() == [
        "Client metrics configs for producers are:", "  interval.ms=1000",
        "  match=client_id=telemetry-.*", "  metrics=org.apache.kafka.producer."], \
        described.stderr
    assert client_metrics(node, "--list").stdout == "producers\n"
    refused = client_metrics(node, "--alter", "--name", "bad", "--interval", "50")
    assert refused.returncode == 1
    assert "interval must be between 100 and 3600000 (1 hour)" in refused.stdout

    producer = producing(node, "telemetry-producer")
    try:
        def metrics_pushed() -> dict[str, float]:
            producer.produce("telemetry", value=b"more")
            producer.poll(0)
            return pushed(scrape(port), "telemetry-producer")
        found = wait_until(metrics_pushed, 30, 0.5,
                           lambda: f"telemetry-producer's metrics in {scrape(port)}")
        assert all(name.startswith("org_apache_kafka_producer_") for name in found), found
        assert total(scrape(port), requests, request="PushTelemetry") >= 1
        assert not pushed(scrape(port), "unsubscribed-producer")
    finally:
        producer.flush(5)

    deleted = client_metrics(node, "--delete", "--name", "producers")
    assert deleted.stdout == "Deleted client metrics config for producers.\n", deleted.stderr
    assert client_metrics(node, "--list").stdout == "\n"
    assert client_metrics(node, "--describe", "--name", "producers").stdout == \
        "The client metric resource producers doesn't exist and doesn't have dynamic config.\n"


def test_kafkas_java_producer_pushes_its_telemetry_too(metered: Metered) -> None:
    """KafkaProducer 4.4 (``enable.metrics.push`` on by default), matched on its software
    name, pushes under its client id (at Kafka's shortest interval, 100 ms, its first push
    50 to 150 ms after it has the subscription: the producer sends for two seconds, as
    its terminal push on close is not sent when the sender stops first); what it pushed
    stays on /metrics for a minute after it closed."""
    from tests.java_clients import run

    node, port = metered
    altered = client_metrics(node, "--alter", "--name", "java", "--metrics",
                             "org.apache.kafka.producer.", "--interval", "100",
                             "--match", "client_software_name=apache-kafka-java")
    assert altered.returncode == 0, altered.stderr
    # The alter is answered once the controller committed it; the broker applies it a
    # moment later. A producer that asked before would be told "nothing, for five
    # minutes" (Kafka's default interval) and never push in its short life.
    wait_until(lambda: "  interval.ms=100" in client_metrics(
        node, "--describe", "--name", "java").stdout.splitlines(), 30, 0.2,
        "the broker applying the subscription")
    try:
        events = run({"op": "produce", "bootstrap": node.bootstrap, "topic": "telemetry",
                      "count": 40, "pace_ms": 50,
                      "config": {"client.id": "java-telemetry"}})
        assert next(e for e in events if e["event"] == "produced")["errors"] == []
        found = pushed(scrape(port), "java-telemetry")
        assert found and all(n.startswith("org_apache_kafka_producer_") for n in found), \
            found
    finally:
        client_metrics(node, "--delete", "--name", "java")


def test_other_paths_are_not_found(metered: Metered) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{metered.port}/nope", timeout=5)
    assert refused.value.code == 404


@pytest.mark.slow
def test_a_killed_broker_shows_as_under_replicated_on_the_surviving_leader(
        tmp_path) -> None:
    cluster = KRaftCluster(str(tmp_path), controllers=1, brokers=3,
                           controller_props={"broker.session.timeout.ms": "2000"},
                           broker_props={"broker.heartbeat.interval.ms": "300",
                                         "replica.fetch.backoff.ms": "200"})
    ports = {}
    for node_id, node in cluster.nodes.items():
        ports[node_id] = free_port()
        with open(node.config_file or "", "a", encoding="utf-8") as f:
            f.write(f"prometheus.listener=127.0.0.1:{ports[node_id]}\n")
    cluster.start()
    try:
        create(cluster, [NewTopic("tripled", 1, 3)])
        wait_until(lambda: full_isr(cluster, "tripled"), 30, 0.2, "three in-sync replicas")
        leader, replicas, _ = partitions(cluster, "tripled")[0]
        under = "kafka_server_replicamanager_underreplicatedpartitions"
        assert total(scrape(ports[leader]), under) == 0
        follower = next(r for r in replicas if r != leader)
        cluster.nodes[follower].kill9()
        wait_until(lambda: total(scrape(ports[leader]), under) > 0, 30, 0.2,
                   lambda: f"broker {leader} reporting the partition under-replicated "
                           f"after {follower} died: {partitions(cluster, 'tripled')}")
        controller = scrape(ports[cluster.controller_ids[0]])
        assert total(controller, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total(controller, "kafka_controller_kafkacontroller_fencedbrokercount") == 1
        assert total(controller, "kafka_controller_kafkacontroller_activebrokercount") == 2
        assert state(controller) == "leader"
        epoch = total(controller, "kafka_server_raft_metrics_current_epoch")
        observer = scrape(ports[leader])  # a broker follows the quorum without a vote
        assert state(observer) == "observer"
        assert total(observer, "kafka_server_raft_metrics_current_leader") == \
            cluster.controller_ids[0]
        assert total(observer, "kafka_server_raft_metrics_current_epoch") == epoch
        # The observer fetched the metadata log (the topic's records among it); the
        # controller appended it, as the leader.
        assert total(observer, "kafka_server_raft_metrics_fetch_records_rate") > 0
        assert total(observer, "kafka_server_raft_metrics_append_records_rate") == 0
        assert total(controller, "kafka_server_raft_metrics_append_records_rate") > 0
        assert total(controller, "kafka_server_raft_metrics_commit_latency_max") >= 0
        # Every broker fetched from the quorum leader; Kafka forgets an observer only
        # after minutes without a fetch, so the killed one still counts.
        voters = len(cluster.controller_ids)
        assert total(controller, "kafka_server_raft_metrics_number_of_voters") == voters
        assert total(controller, "kafka_server_raft_metrics_number_of_observers") == \
            len(cluster.broker_ids)
        assert total(observer, "kafka_server_raft_metrics_number_of_voters") == voters
        assert not any(name == "kafka_server_raft_metrics_number_of_observers"
                       for name, _ in observer)  # registered on the leader only
        assert total(controller, "kafka_server_raft_metrics_uncommitted_voter_change") == 0
        assert not any(name == "kafka_server_raft_metrics_uncommitted_voter_change"
                       for name, _ in observer)
        # The controller fsyncs its metadata log, timed as Kafka's UnifiedLog is.
        assert total(controller, FLUSHES + "_count") > 0
        # broker-metadata-metrics: a broker's, as Kafka registers them with that role.
        applied = total(observer, METADATA + "last_applied_record_offset")
        assert 0 < applied < total(observer, "kafka_server_raft_metrics_high_watermark")
        assert total(observer, METADATA + "metadata_load_error_count") == 0
        assert not any(name.startswith(METADATA) for name, _ in controller)
        for survivor in (b for b in cluster.broker_ids if b not in (leader, follower)):
            assert total(scrape(ports[survivor]), under) == 0  # it leads nothing
    finally:
        cluster.stop()


REPLICATION_IN = "kafka_server_brokertopicmetrics_replicationbytesin_total"
REPLICATION_OUT = "kafka_server_brokertopicmetrics_replicationbytesout_total"
MAX_LAG = "kafka_server_replicafetchermanager_maxlag"


@pytest.mark.slow
def test_followers_replicate_acks_all_records_and_catch_up(tmp_path) -> None:
    """Three brokers and a topic on all of them: records produced with acks=all reach
    both followers, so each follower's ReplicationBytesIn grows by at least the bytes
    the leader took in (BytesIn) and the leader's ReplicationBytesOut by at least twice
    that, and once the followers caught up every broker's MaxLag is 0. Offsets
    committed to a ``__consumer_offsets`` on the three wait for both followers in the
    coordinator's purgatory."""
    cluster = KRaftCluster(str(tmp_path), controllers=1, brokers=3,
                           broker_props={"offsets.topic.replication.factor": "3"})
    ports = {}
    for node_id in cluster.broker_ids:
        ports[node_id] = free_port()
        node = cluster.nodes[node_id]
        with open(node.config_file or "", "a", encoding="utf-8") as f:
            f.write(f"prometheus.listener=127.0.0.1:{ports[node_id]}\n")
    cluster.start()
    try:
        create(cluster, [NewTopic("replicated", 1, 3)])
        wait_until(lambda: full_isr(cluster, "replicated"), 30, 0.2, "three in-sync replicas")
        leader, replicas, _ = partitions(cluster, "replicated")[0]
        followers = [b for b in replicas if b != leader]
        before = {b: scrape(ports[b]) for b in cluster.broker_ids}
        assert {b: total(s, MAX_LAG, clientId="Replica") for b, s in before.items()} == \
            dict.fromkeys(cluster.broker_ids, 0)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 5})
        failures: list[KafkaError] = []
        for i in range(RECORDS):
            producer.produce("replicated", b"v" * VALUE, key=str(i).encode(),
                             on_delivery=lambda err, _msg: err and failures.append(err))
        assert producer.flush(30) == 0 and not failures
        bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
        produced = total(scrape(ports[leader]), bytes_in, topic="replicated")
        assert produced >= RECORDS * VALUE

        def grown(broker: int, name: str) -> float:
            return total(scrape(ports[broker]), name) - total(before[broker], name)

        # acks=all answered: both followers have every record; the leader has sent them.
        for follower in followers:
            assert grown(follower, REPLICATION_IN) >= produced
        assert grown(leader, REPLICATION_OUT) >= 2 * produced
        assert grown(leader, REPLICATION_IN) == 0  # the leader follows nothing
        wait_until(lambda: all(total(scrape(ports[b]), MAX_LAG, clientId="Replica") == 0
                               for b in cluster.broker_ids), 15, 0.2,
                   lambda: "every broker caught up: " + str(
                       {b: total(scrape(ports[b]), MAX_LAG, clientId="Replica")
                        for b in cluster.broker_ids}))
        # An offset commit is answered once both followers of its __consumer_offsets
        # partition have it: the wait is Kafka's event-purgatory-time-ms of the group
        # coordinator's runtime, served since the previous scrape (over a second ago).
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "waiters",
                             "enable.auto.commit": False})
        try:
            for offset in range(1, 6):
                consumer.commit(offsets=[TopicPartition("replicated", 0, offset)],
                                asynchronous=False)
        finally:
            consumer.close()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept: in use
        coordinator = admin.describe_consumer_groups(["waiters"])["waiters"] \
            .result(30).coordinator.id
        purgatory = GROUPS.format("event_purgatory_time_ms_")
        seen: list[Samples] = []

        def renewed() -> bool:  # a snapshot is renewed at most once a second
            seen.append(scrape(ports[coordinator]))
            return total(seen[-1], purgatory + "max") > 0

        wait_until(renewed, 10, 0.3, lambda: f"the commits' waits in {purgatory}max")
        waited = {q: total(seen[-1], purgatory + q) for q in ("p50", "p99", "max")}
        assert 0 < waited["max"] < 60_000 and waited["p50"] <= waited["p99"] <= \
            waited["max"], waited
    finally:
        cluster.stop()


ERRORS = "kafka_network_requestmetrics_errors_total"


def test_errors_request_sizes_and_the_loops_idle_share(metered: Metered) -> None:
    """ErrorsPerSec as Kafka counts it (every error code of each response, NONE
    included), RequestBytes and ThrottleTimeMs per request, from what real clients do:
    each Produce to a one-partition topic is one NONE; Metadata for a topic that does not
    exist (auto-creation not asked for) one UNKNOWN_TOPIC_OR_PARTITION; an OffsetCommit
    outside the generation to a group with a member (Kafka's ClassicGroup
    .validateOffsetCommit) one UNKNOWN_MEMBER_ID per partition. The idle share is a
    fraction."""
    node, port = metered
    topic, group = "erring", "erring-group"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    before = scrape(port)

    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                         "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=bytes([i % 256]) * VALUE)
    assert producer.flush(15) == 0
    after_produce = scrape(port)

    def grew(name: str, **labels: str) -> float:
        return total_or_zero(after_produce, name, **labels) - \
            total_or_zero(before, name, **labels)

    produces = grew("kafka_network_requestmetrics_requests_total", request="Produce")
    assert produces >= 1
    assert grew(ERRORS, request="Produce", error="NONE") == produces
    sizes = "kafka_network_requestmetrics_requestbytes"
    assert grew(sizes + "_count", request="Produce") == produces
    assert grew(sizes + "_sum", request="Produce") >= RECORDS * VALUE  # records in bodies
    assert grew("kafka_network_requestmetrics_throttletimems_count",
                request="Produce") == produces
    assert grew("kafka_network_requestmetrics_throttletimems_sum", request="Produce") == 0
    assert not any(n == ERRORS and dict(labels)["request"] == "Produce" and
                   dict(labels)["error"] != "NONE" for n, labels in after_produce)

    unknown_topic = dict(request="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION")
    asker = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "askers",
                      "allow.auto.create.topics": False})
    try:
        listed = asker.list_topics("never-created", timeout=10)
    finally:
        asker.close()
    assert listed.topics["never-created"].error is not None
    assert total(scrape(port), ERRORS, **unknown_topic) - \
        total_or_zero(before, ERRORS, **unknown_topic) >= 1

    member = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                       "group.protocol": "classic", "enable.auto.commit": False})
    outsider = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    unknown_member = dict(request="OffsetCommit", error="UNKNOWN_MEMBER_ID")
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment()
        before_commit = total_or_zero(scrape(port), ERRORS, **unknown_member)
        with pytest.raises(KafkaException) as refused:
            outsider.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID
        assert total(scrape(port), ERRORS, **unknown_member) - before_commit == 1
    finally:
        outsider.close()
        member.close()

    idle = total(scrape(port), "kafka_network_socketserver_networkprocessoravgidlepercent")
    assert 0.0 <= idle <= 1.0


def test_a_failed_acks_0_produce_counts_the_errors_of_the_response_it_never_got(
        metered: Metered) -> None:
    """An acks=0 Produce that fails is answered by closing the connection; Kafka's
    RequestChannel.closeConnection still counts the request and the errors of the response
    it did not send: here NONE for the partition that took the batch and
    UNKNOWN_TOPIC_OR_PARTITION for the one that does not exist."""
    node, port = metered
    topic = "closing"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    unknown = dict(request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION")
    produced = dict(request="Produce", error="NONE")
    before = scrape(port)
    batch = build_batch([(b"k", b"v")])
    with WireClient(node.bootstrap) as client:
        client.send(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 0, "timeout": 1000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": batch}, {"index": 7, "records": batch}]}]})
        client.sock.settimeout(10)
        assert client.sock.recv(1) == b"", "the connection was not closed"

    def counted() -> bool:
        after = scrape(port)
        return (total_or_zero(after, ERRORS, **unknown)
                - total_or_zero(before, ERRORS, **unknown)) == 1
    wait_until(counted, 10, 0.2, "the closed Produce's UNKNOWN_TOPIC_OR_PARTITION")
    after = scrape(port)
    assert total_or_zero(after, ERRORS, **produced) - total_or_zero(before, ERRORS,
                                                                     **produced) == 1
    requests = "kafka_network_requestmetrics_requests_total"
    assert total(after, requests, request="Produce") - total_or_zero(
        before, requests, request="Produce") == 1
