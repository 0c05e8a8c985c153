"""Fetch, ListOffsets, idempotent produce and the other partition APIs, seen from the wire
and from real clients."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.records import build_batch, decode_any
from tests.helpers import WireClient, wait_until


def now_ms() -> int:
    return int(time.time() * 1000)


def partition_data(response, index: int = 0):
    return response.responses[0].partitions[index]


def offsets_of(records: bytes) -> list[int]:
    """The base offset of each batch in a fetched record set."""
    return [batch[0].offset for _, batch in decode_any(records)]


def values_of(records: bytes) -> list[bytes]:
    return [r.value for _, batch in decode_any(records) for r in batch]


@pytest.fixture
def topic(ottla):
    with WireClient(ottla.bootstrap) as c:
        assert c.create_topic("reads", partitions=2).topics[0].error_code == 0
    return "reads"


def test_long_poll_waits_for_max_wait_then_returns_empty(ottla, topic) -> None:
    """An empty fetch is parked for its max_wait, then answered empty. The lower bound is
    the point (a broker that answers at once fails it; a slow machine cannot); the
    client's 10 s timeout only keeps a broker that never answers from hanging the test."""
    with WireClient(ottla.bootstrap, timeout=10) as client:
        started = time.monotonic()
        response = client.fetch(topic, 0, 0, max_wait_ms=800)
        waited = time.monotonic() - started
    assert partition_data(response).error_code == ErrorCode.none
    assert partition_data(response).records in (b"", None)
    assert waited >= 0.8, f"an empty fetch with max_wait 800 ms answered after {waited:.2f} s"


def test_long_poll_is_woken_by_new_data(ottla, topic) -> None:
    """A fetch parked for 10 minutes is answered with the record produced meanwhile: an
    answer at all, within the poller's 30 s timeout, is the fetch woken by the data."""
    with WireClient(ottla.bootstrap, timeout=30) as poller, \
            WireClient(ottla.bootstrap) as writer:
        correlation_id = poller.send_fetch(topic, 1, 0, max_wait_ms=600_000)
        # A round trip on another connection after the fetch was sent: the node has read
        # the fetch (its bytes were waiting first) and, finding nothing, parked it.
        assert writer.api_versions().error_code == 0
        batch = build_batch([(b"k", b"wake up")], timestamp=now_ms())
        assert writer.produce(topic, 1, batch).responses[0].partition_responses[0] \
            .error_code == 0
        response = poller.receive(ApiKey.FETCH, 11, correlation_id)
    assert values_of(partition_data(response).records) == [b"wake up"]


def test_fetch_reports_watermarks_and_out_of_range(ottla, topic) -> None:
    with WireClient(ottla.bootstrap) as client:
        for i in range(3):
            client.produce(topic, 0, build_batch([(None, b"%d" % i)] * 2, timestamp=now_ms()))
        data = partition_data(client.fetch(topic, 0, 0))
        assert (data.high_watermark, data.log_start_offset) == (6, 0)
        assert offsets_of(data.records) == [0, 2, 4]
        data = partition_data(client.fetch(topic, 0, 4))
        assert offsets_of(data.records) == [4]
        data = partition_data(client.fetch(topic, 0, 6))
        assert data.error_code == ErrorCode.none and not data.records
        data = partition_data(client.fetch(topic, 0, 7))
        assert data.error_code == ErrorCode.offset_out_of_range
        # As Kafka 4.4: no watermarks with an error (the client asks ListOffsets).
        assert (data.high_watermark, data.last_stable_offset, data.log_start_offset) == \
            (-1, -1, -1)
        data = partition_data(client.fetch("nowhere", 0, 0))
        assert data.error_code == ErrorCode.unknown_topic_or_partition


def test_max_bytes_limits_but_always_returns_one_whole_batch(ottla, topic) -> None:
    big = build_batch([(None, b"x" * 5000)], timestamp=now_ms())
    with WireClient(ottla.bootstrap) as client:
        for p in (0, 1):
            for _ in range(3):
                client.produce(topic, p, big)
        both = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for p in (0, 1)]

        def fetch(max_bytes: int, partition_max: int = 1 << 20):
            for p in both:
                p["partition_max_bytes"] = partition_max
            return client.request(ApiKey.FETCH, 11, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": both}]})

        # Smaller limits than one batch still return that batch (KIP-74), and only it.
        response = fetch(max_bytes=100)
        assert offsets_of(partition_data(response, 0).records) == [0]
        assert not partition_data(response, 1).records
        # A per-partition limit applies to each partition.
        response = fetch(max_bytes=1 << 20, partition_max=len(big) * 2)
        assert offsets_of(partition_data(response, 0).records) == [0, 1]
        assert offsets_of(partition_data(response, 1).records) == [0, 1]
        # The response limit is shared: the second partition gets what the first left.
        response = fetch(max_bytes=len(big) * 4)
        assert offsets_of(partition_data(response, 0).records) == [0, 1, 2]
        assert offsets_of(partition_data(response, 1).records) == [0]


def test_a_consumer_with_limits_below_every_batch_still_reads_every_partition(
        ottla, topic) -> None:
    """librdkafka with max.partition.fetch.bytes and fetch.max.bytes smaller than each
    batch: every fetch returns one whole batch of the first partition with data and
    nothing of the others (Kafka's firstEntryIncomplete), and the consumer still reads
    every record of both partitions."""
    with WireClient(ottla.bootstrap) as client:
        for i in range(3):
            for p in (0, 1):
                client.produce(topic, p, build_batch([(None, b"%d-%d:" % (p, i) + b"x" * 5000)],
                                                     timestamp=now_ms()))
    consumer = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": "limits",
                         "enable.auto.commit": False, "max.partition.fetch.bytes": 1000,
                         "fetch.max.bytes": 1000, "message.max.bytes": 1000,
                         "receive.message.max.bytes": 1 << 20})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        seen: list[bytes] = []

        def read_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value().split(b":")[0])
            return len(seen) == 6
        wait_until(read_all, 30, 0, lambda: f"read {seen}")
        assert sorted(seen) == [b"%d-%d" % (p, i) for p in (0, 1) for i in range(3)]
    finally:
        consumer.close()


def session_fetch(client: WireClient, topic: str, session_id: int, epoch: int,
                  partitions: list[tuple[int, int]], forget: list[int] = (),
                  max_wait_ms: int = 0):
    return client.request(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "rack_id": "",
        "forgotten_topics_data": [{"topic": topic, "partitions": list(forget)}] if forget
        else [],
        "topics": [{"topic": topic, "partitions": [{
            "partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20} for p, offset in partitions]}]
        if partitions else []})


def returned(response) -> dict[int, list[bytes]]:
    return {p.partition_index: values_of(p.records or b"")
            for t in response.responses for p in t.partitions}


def test_incremental_fetch_sessions(ottla, topic) -> None:
    with WireClient(ottla.bootstrap) as client, WireClient(ottla.bootstrap) as writer:
        writer.produce(topic, 0, build_batch([(None, b"a")], timestamp=now_ms()))
        full = session_fetch(client, topic, 0, 0, [(0, 0), (1, 0)])
        assert full.error_code == ErrorCode.none and full.session_id != 0
        assert returned(full) == {0: [b"a"], 1: []}
        session = full.session_id

        # Nothing changed: an incremental fetch names no partitions and gets none back.
        quiet = session_fetch(client, topic, session, 1, [(0, 1)], max_wait_ms=200)
        assert quiet.error_code == ErrorCode.none and returned(quiet) == {}

        # New data on partition 1 only: only partition 1 comes back.
        writer.produce(topic, 1, build_batch([(None, b"b")], timestamp=now_ms()))
        news = session_fetch(client, topic, session, 2, [])
        assert returned(news) == {1: [b"b"]}

        # Forgotten partitions are no longer fetched.
        session_fetch(client, topic, session, 3, [(1, 1)], forget=[0])
        writer.produce(topic, 0, build_batch([(None, b"c")], timestamp=now_ms()))
        after_forget = session_fetch(client, topic, session, 4, [], max_wait_ms=200)
        assert 0 not in returned(after_forget)

        stale = session_fetch(client, topic, session, 2, [])
        assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
        unknown = session_fetch(client, topic, session + 1000, 1, [])
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found
        # A full fetch with the final epoch closes the session.
        closing = session_fetch(client, topic, session, -1, [(0, 0)])
        assert closing.session_id == 0
        gone = session_fetch(client, topic, session, 5, [])
        assert gone.error_code == ErrorCode.fetch_session_id_not_found


def list_offset(client: WireClient, topic: str, timestamp: int, partition: int = 0,
                version: int = 8):
    response = client.request(ApiKey.LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [{
            "partition_index": partition, "current_leader_epoch": -1,
            "timestamp": timestamp}]}]})
    result = response.topics[0].partitions[0]
    return result.error_code, result.offset, result.timestamp


def test_list_offsets_by_timestamp_and_max_timestamp(ottla, topic) -> None:
    base = now_ms() - 60_000
    stamps = [base + i * 1000 for i in range(10)]
    stamps[4] = base + 20_000  # the largest timestamp sits in the middle of the log
    producer = Producer({"bootstrap.servers": ottla.bootstrap})
    for i, ts in enumerate(stamps):
        producer.produce(topic, b"%d" % i, partition=0, timestamp=ts)
        producer.flush(10)  # one batch per record, so every record is indexed exactly
    admin_consumer = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": "times",
                               "enable.auto.commit": False})
    found = [admin_consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)[0]
             for ts in (base + 2500, base, base + 999_999)]
    admin_consumer.close()
    # The first offset whose timestamp is >= the target; none (-1) past the end.
    assert [tp.offset for tp in found] == [3, 0, -1]

    with WireClient(ottla.bootstrap) as client:
        assert list_offset(client, topic, -2) == (ErrorCode.none, 0, -1)
        assert list_offset(client, topic, -1) == (ErrorCode.none, 10, -1)
        assert list_offset(client, topic, -3) == (ErrorCode.none, 4, base + 20_000)
        assert list_offset(client, topic, base + 5500)[:2] == (ErrorCode.none, 4)
        assert list_offset(client, topic, -1, partition=9)[0] == \
            ErrorCode.unknown_topic_or_partition


def init_producer_id(client: WireClient) -> tuple[int, int]:
    response = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
        "producer_epoch": -1})
    assert response.error_code == ErrorCode.none
    return response.producer_id, response.producer_epoch


def test_idempotent_produce_deduplicates_and_checks_sequences(ottla, topic) -> None:
    with WireClient(ottla.bootstrap) as client:
        pid, epoch = init_producer_id(client)
        assert pid >= 0

        def send(seq: int, values: list[bytes]):
            batch = build_batch([(None, v) for v in values], timestamp=now_ms(),
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq)
            r = client.produce(topic, 0, batch, acks=-1).responses[0].partition_responses[0]
            return r.error_code, r.base_offset

        assert send(0, [b"a", b"b"]) == (ErrorCode.none, 0)
        assert send(2, [b"c"]) == (ErrorCode.none, 2)
        # A retried batch is answered with its original offset and not written again.
        assert send(0, [b"a", b"b"]) == (ErrorCode.none, 0)
        assert send(2, [b"c"]) == (ErrorCode.none, 2)
        assert send(7, [b"gap"])[0] == ErrorCode.out_of_order_sequence_number
        assert send(3, [b"d"]) == (ErrorCode.none, 3)
        data = partition_data(client.fetch(topic, 0, 0))
        assert values_of(data.records) == [b"a", b"b", b"c", b"d"]

        described = client.request(ApiKey.DESCRIBE_PRODUCERS, 0, {
            "topics": [{"name": topic, "partition_indexes": [0]}]})
        state = described.topics[0].partitions[0]
        assert state.error_code == ErrorCode.none
        assert [(p.producer_id, p.producer_epoch, p.last_sequence)
                for p in state.active_producers] == [(pid, epoch, 3)]


def test_confluent_idempotent_producer_writes_each_record_once(ottla, topic) -> None:
    producer = Producer({"bootstrap.servers": ottla.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(2000):
        producer.produce(topic, b"%d" % i, partition=1)
    assert producer.flush(30) == 0
    with WireClient(ottla.bootstrap) as client:
        assert list_offset(client, topic, -1, partition=1)[1] == 2000
        described = client.request(ApiKey.DESCRIBE_PRODUCERS, 0, {
            "topics": [{"name": topic, "partition_indexes": [1]}]})
        assert described.topics[0].partitions[0].active_producers[0].last_sequence == 1999


def test_offset_for_leader_epoch_answers_the_log_end(ottla, topic) -> None:
    with WireClient(ottla.bootstrap) as client:
        client.produce(topic, 0, build_batch([(None, b"x")] * 3, timestamp=now_ms()))
        response = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": -1, "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        result = response.topics[0].partitions[0]
        assert (result.error_code, result.leader_epoch, result.end_offset) == \
            (ErrorCode.none, 0, 3)


def test_delete_records_moves_the_log_start_and_survives_restart(ottla, topic) -> None:
    producer = Producer({"bootstrap.servers": ottla.bootstrap})
    for i in range(50):
        producer.produce(topic, b"%d" % i, partition=0)
    assert producer.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": ottla.bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, 30)])
    deleted = futures[TopicPartition(topic, 0)].result(10)
    assert deleted.low_watermark == 30

    with WireClient(ottla.bootstrap) as client:
        assert partition_data(client.fetch(topic, 0, 10)).error_code == \
            ErrorCode.offset_out_of_range
    ottla.stop()
    ottla.start()
    with WireClient(ottla.bootstrap) as client:
        assert list_offset(client, topic, -2)[:2] == (ErrorCode.none, 30)
        data = wait_until(lambda: partition_data(client.fetch(topic, 0, 30)), 10)
        assert data.log_start_offset == 30
        # Whole batches come back; the first record at or after the start is offset 30.
        first = next(r for _, batch in decode_any(data.records) for r in batch
                     if r.offset >= 30)
        assert first.value == b"30"


def test_large_fetch_responses_are_byte_exact(ottla) -> None:
    """A response larger than the socket buffer leaves from a mapping of the page cache
    as the socket drains: pipelined requests get their answers whole and in order,
    exactly the stored batches."""
    import os as _os

    batches = [build_batch([(b"k%d" % i, _os.urandom(200 * 1024)) for _ in range(4)],
                           timestamp=now_ms())
               for i in range(24)]  # 24 batches of 800 KiB
    topic = "large"  # all in one segment: a fetch reads from one segment
    with WireClient(ottla.bootstrap, timeout=30) as client:
        created = client.create_topic(topic, 1, {"segment.bytes": str(64 << 20)})
        assert created.topics[0].error_code == 0
        for batch in batches:
            response = client.produce(topic, 0, batch)
            assert response.responses[0].partition_responses[0].error_code == 0
        expected = [r.value for b in batches for _, recs in decode_any(b) for r in recs]
        for _ in range(2):
            response = client.fetch(topic, 0, 0, max_bytes=64 << 20)
            records = partition_data(response).records
            assert len(records) == sum(len(b) for b in batches)
            assert values_of(records) == expected
            assert offsets_of(records) == [4 * i for i in range(24)]
        # Three requests sent before reading: a fetch of everything, a metadata request
        # and a fetch from the middle; the answers come whole and in order.
        body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 64 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 64 << 20}]}]}
        middle = {**body, "topics": [{"topic": topic, "partitions": [{
            **body["topics"][0]["partitions"][0], "fetch_offset": 48}]}]}
        ids = [client.send(ApiKey.FETCH, 11, body),
               client.send(ApiKey.METADATA, 12, {"topics": None,
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False}),
               client.send(ApiKey.FETCH, 11, middle)]
        whole = partition_data(client.receive(ApiKey.FETCH, 11, ids[0])).records
        assert values_of(whole) == expected
        assert topic in {t.name for t in client.receive(ApiKey.METADATA, 12, ids[1]).topics}
        half = partition_data(client.receive(ApiKey.FETCH, 11, ids[2])).records
        assert values_of(half) == expected[48:]
