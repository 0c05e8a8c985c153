"""Malformed frames, unknown APIs, bad versions, oversized frames and corrupt batches get
Kafka's error code or a closed connection, never a crash or lost data."""

from __future__ import annotations

import os
import random
import socket
import struct
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.protocol.records import build_batch
from tests.helpers import WireClient


def connection_closed(client: WireClient, timeout: float = 10.0) -> bool:
    client.sock.settimeout(timeout)
    try:
        return client.sock.recv(1) == b""
    except ConnectionResetError:
        return True


def seed_data(node) -> list[bytes]:
    producer = Producer({"bootstrap.servers": node.bootstrap})
    values = [f"keep-{i}".encode() for i in range(100)]
    for v in values:
        producer.produce("precious", v, partition=0)
    assert producer.flush(10) == 0
    return values


def stored(node) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition("precious", 0, OFFSET_BEGINNING)])
    values = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "the broker stopped answering"
        if msg.error():
            break
        values.append(msg.value())
    consumer.close()
    return values


@pytest.fixture
def node(ottla):
    with WireClient(ottla.bootstrap) as c:
        assert c.create_topic("precious").topics[0].error_code == 0
    ottla.values = seed_data(ottla)
    yield ottla
    with WireClient(ottla.bootstrap) as healthy:
        assert healthy.api_versions().error_code == 0
    assert stored(ottla) == ottla.values


def metadata_frame(version: int = 9, api_key: int = ApiKey.METADATA) -> bytes:
    body = build(request_schema(ApiKey.METADATA, 9),
                 {"topics": None, "allow_auto_topic_creation": False,
                  "include_topic_authorized_operations": False,
                  "include_cluster_authorized_operations": False})
    frame = bytearray(encode_request(ApiKey.METADATA, 9, 1, "bad", body))
    struct.pack_into(">hh", frame, 4, api_key, version)
    return bytes(frame)


TRUNCATED = metadata_frame()[:-3]  # the size prefix promises three more bytes


@pytest.mark.parametrize("payload", [
    pytest.param(metadata_frame(api_key=9999), id="unknown-api-key"),
    pytest.param(metadata_frame(version=99), id="unsupported-version"),
    pytest.param(struct.pack(">i", 6) + b"\x00\x03\x00\x09\x00\x00", id="header-cut-short"),
    pytest.param(TRUNCATED, id="truncated-frame-then-eof"),
    pytest.param(struct.pack(">i", 200 * 1024 * 1024), id="oversized-frame"),
    pytest.param(struct.pack(">i", -5), id="negative-size"),
    pytest.param(struct.pack(">i", 40) + os.urandom(40), id="random-bytes"),
])
def test_bad_frames_close_only_that_connection(node, payload: bytes) -> None:
    with WireClient(node.bootstrap) as bystander, WireClient(node.bootstrap) as attacker:
        assert bystander.api_versions().error_code == 0
        attacker.send_raw(payload)
        if payload == TRUNCATED:
            attacker.sock.shutdown(socket.SHUT_WR)
        assert connection_closed(attacker)
        assert bystander.api_versions().error_code == 0


def test_produce_is_advertised_from_v0_but_v0_to_v2_close_the_connection(node) -> None:
    """KAFKA-18659: older librdkafka compresses only if Produce is listed from v0; the
    versions Kafka 4 removed are still refused."""
    with WireClient(node.bootstrap) as client:
        keys = {k.api_key: (k.min_version, k.max_version)
                for k in client.api_versions().api_keys}
        assert keys[ApiKey.PRODUCE][0] == 0
        frame = bytearray(encode_request(ApiKey.PRODUCE, 3, 5, "old", build(
            request_schema(ApiKey.PRODUCE, 3),
            {"transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": []})))
        struct.pack_into(">h", frame, 6, 2)  # claim version 2
        client.send_raw(bytes(frame))
        assert connection_closed(client)


def test_too_new_api_versions_gets_the_v0_error_response(node) -> None:
    with WireClient(node.bootstrap) as client:
        frame = bytearray(encode_request(ApiKey.API_VERSIONS, 3, 77, "new-client", build(
            request_schema(ApiKey.API_VERSIONS, 3),
            {"client_software_name": "x", "client_software_version": "1"})))
        struct.pack_into(">h", frame, 6, 42)
        client.send_raw(bytes(frame))
        correlation_id, response = decode_response(ApiKey.API_VERSIONS, 0, client.recv_frame())
        assert correlation_id == 77
        assert response.error_code == ErrorCode.unsupported_version
        keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert keys[ApiKey.API_VERSIONS] == (0, 4)
        assert ApiKey.PRODUCE in keys


def produce_error(client: WireClient, records: bytes, topic: str = "precious",
                  partition: int = 0, acks: int = 1) -> int:
    response = client.produce(topic, partition, records, acks=acks)
    return response.responses[0].partition_responses[0].error_code


def test_corrupt_batches_get_kafka_error_codes(node) -> None:
    good = build_batch([(b"k", b"v")], timestamp=int(time.time() * 1000))
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    old_magic = bytearray(good)
    old_magic[16] = 1
    big = build_batch([(None, b"x" * 2_000_000)])
    with WireClient(node.bootstrap) as client:
        assert produce_error(client, bytes(flipped)) == ErrorCode.corrupt_message
        assert produce_error(client, bytes(old_magic)) == ErrorCode.invalid_record
        assert produce_error(client, good + good) == ErrorCode.invalid_record
        assert produce_error(client, good[:-4]) == ErrorCode.corrupt_message
        assert produce_error(client, big) == ErrorCode.message_too_large
        assert produce_error(client, good, topic="no-such-topic") == \
            ErrorCode.unknown_topic_or_partition
        assert produce_error(client, good, partition=7) == ErrorCode.unknown_topic_or_partition
        assert produce_error(client, good, acks=5) == ErrorCode.invalid_required_acks
        stale = build_batch([(b"k", b"v")], timestamp=1000)
        assert produce_error(client, stale) == ErrorCode.none  # before.max.ms is unbounded
        future = build_batch([(b"k", b"v")], timestamp=int(time.time() * 1000) + 86_400_000)
        assert produce_error(client, future) == ErrorCode.invalid_timestamp
    node.values.append(b"v")  # the stale but valid batch was stored


def test_failed_acks_0_produce_closes_the_connection(node) -> None:
    with WireClient(node.bootstrap) as client:
        client.send(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 0, "timeout": 1000,
            "topic_data": [{"name": "precious", "partition_data": [
                {"index": 0, "records": b"\x00" * 70}]}]})
        assert connection_closed(client)


def test_random_mutations_of_valid_requests(node) -> None:
    """A bounded fuzz run: every mutated frame is answered or its connection closed."""
    rng = random.Random(20261122)
    batch = build_batch([(b"k", b"v" * 50)])
    body = build(request_schema(ApiKey.PRODUCE, 9), {
        "transactional_id": None, "acks": 1, "timeout": 1000,
        "topic_data": [{"name": "fuzz", "partition_data": [{"index": 0, "records": batch}]}]})
    templates = [encode_request(ApiKey.PRODUCE, 9, 1, "fuzz", body), metadata_frame()]
    with WireClient(node.bootstrap) as c:
        c.create_topic("fuzz")
    outcomes = {"answered": 0, "closed": 0}
    for _ in range(150):
        frame = bytearray(rng.choice(templates))
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(4, len(frame))
            frame[pos] = rng.randrange(256)
        if rng.random() < 0.2:
            cut = rng.randrange(8, len(frame))
            frame = frame[:cut]
            struct.pack_into(">i", frame, 0, cut - 4)
        with WireClient(node.bootstrap, timeout=10) as client:
            client.send_raw(bytes(frame))
            try:
                client.recv_frame()
                outcomes["answered"] += 1
            except (ConnectionError, OSError):
                outcomes["closed"] += 1
    assert sum(outcomes.values()) == 150
    assert outcomes["closed"] > 0
