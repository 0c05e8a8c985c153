"""A log dir that cannot take a new log (ENOSPC) goes offline instead of failing the
caller; the log is made in another online dir, or refused with KAFKA_STORAGE_ERROR.

And what the broker does about it (KIP-858): a new log goes to the dir the metadata
assigns; a failed dir's partitions stop and answer KAFKA_STORAGE_ERROR whatever the
metadata says later; the broker tells the controller where it put each replica
(AssignmentsManager, here against a real QuorumController) and, at once, which dirs are
offline (BrokerLifecycle's heartbeats)."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from ottla.broker.replication.assignments_manager import AssignmentsManager
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.common.backoff import ExponentialBackoff
from ottla.common.topics import NewTopic
from ottla.common.uuids import kafka_uuid_text
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.replication_control import DirectoryAssignment
from ottla.controller.results import ControllerError
from ottla.metadata import directory_id
from ottla.metadata import records as r
from ottla.metadata.delta import MetadataDelta
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from ottla.server.broker_lifecycle import BrokerLifecycle
from ottla.storage import log as log_module
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager
from ottla.storage.meta_properties import MetaProperties

TOPIC_ID = uuid.UUID(int=7)


@pytest.fixture
def full_dir(monkeypatch, tmp_path) -> str:
    """``tmp_path/full`` refuses every partition.metadata write, as a full disk does."""
    full = str(tmp_path / "full")
    real = log_module.Log._write_partition_metadata

    def write(self, topic_id):
        if os.path.dirname(self.dir) == full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, topic_id)
    monkeypatch.setattr(log_module.Log, "_write_partition_metadata", write)
    return full


def test_a_new_log_goes_to_another_dir_when_its_dir_is_full(tmp_path, full_dir) -> None:
    other = str(tmp_path / "other")
    manager = LogManager([full_dir, other], now_ms=1000)
    lg = manager.load_log(("t", 0), LogConfig.resolve(), TOPIC_ID, 1000)
    assert os.path.dirname(lg.dir) == other and not lg.offline
    assert manager.offline_dirs == {full_dir}
    assert os.listdir(full_dir) == []  # nothing half made for the next start to load


def test_with_every_dir_offline_a_new_log_is_refused(full_dir) -> None:
    manager = LogManager([full_dir], now_ms=1000)
    with pytest.raises(KafkaError) as refused:
        manager.load_log(("t", 0), LogConfig.resolve(), TOPIC_ID, 1000)
    assert refused.value.code == ErrorCode.kafka_storage_error
    assert manager.offline_dirs == {full_dir} and not manager.logs


# --- the broker's side of KIP-858 ------------------------------------------------------

BROKER = 1


def formatted(tmp_path, *names: str) -> tuple[list[str], dict[str, uuid.UUID]]:
    """Log dirs with meta.properties; their ids."""
    dirs, ids = [], {}
    for name in names:
        d = str(tmp_path / name)
        directory = uuid.UUID(int=(len(dirs) + 1) << 64 | 0xD1)
        MetaProperties("cluster", BROKER, kafka_uuid_text(directory)).write(d)
        dirs.append(d)
        ids[d] = directory
    return dirs, ids


def test_a_new_log_goes_to_the_dir_the_metadata_assigns(tmp_path) -> None:
    (a, b), ids = formatted(tmp_path, "a", "b")
    manager = LogManager([a, b], now_ms=0)
    assert manager.directory_ids == ids
    first = manager.load_log(("t", 0), LogConfig.resolve(), TOPIC_ID, 0, ids[b])
    second = manager.load_log(("t", 1), LogConfig.resolve(), TOPIC_ID, 0, ids[b])
    third = manager.load_log(("t", 2), LogConfig.resolve(), TOPIC_ID, 0,
                             directory_id.UNASSIGNED)  # the least loaded, then
    assert [os.path.dirname(lg.dir) for lg in (first, second, third)] == [b, b, a]
    assert manager.directory_id_of(("t", 0)) == ids[b]


def test_a_failed_dir_is_reported_and_its_open_logs_are_refused(tmp_path) -> None:
    (a, b), ids = formatted(tmp_path, "a", "b")
    manager = LogManager([a, b], now_ms=0)
    reported: list[str] = []
    manager.on_dir_offline = reported.append
    manager.load_log(("t", 0), LogConfig.resolve(), TOPIC_ID, 0, ids[b])
    manager.mark_offline(b)
    manager.mark_offline(b)
    assert reported == [b]
    with pytest.raises(KafkaError) as refused:
        manager.load_log(("t", 0), LogConfig.resolve(), TOPIC_ID, 0, ids[b])
    assert refused.value.code == ErrorCode.kafka_storage_error
    # Assigned to the offline dir, a new log goes to the online one.
    made = manager.load_log(("t", 1), LogConfig.resolve(), TOPIC_ID, 0, ids[b])
    assert os.path.dirname(made.dir) == a


def controller_with_broker(dirs: list[uuid.UUID]) -> tuple[QuorumController, int]:
    c = QuorumController(1, rng=random.Random(3))
    for rec in [*c.features.bootstrap_records()]:
        c.replay(r.decode(r.encode(rec)))
    epoch = 5
    for rec in c.cluster.register_broker(BROKER, uuid.uuid4(), [("PLAINTEXT", "h", 9092, 0)],
                                         None, epoch, unfence=False, log_dirs=dirs).records:
        c.replay(r.decode(r.encode(rec)))
    for rec in c.cluster.broker_heartbeat(BROKER, epoch, 10**9, False, False, 0).records:
        c.replay(r.decode(r.encode(rec)))
    return c, epoch


class Controller:
    """The controller side of AssignReplicasToDirs and BrokerHeartbeat: a real
    QuorumController whose records are replayed at once (the broker's image is the
    controller's), answering through the real response schemas."""

    def __init__(self, c: QuorumController) -> None:
        self.c = c
        self.requests: list[tuple[int, dict[str, Any]]] = []
        self.fail = 0
        """How many calls to fail as a whole (the controller unreachable)."""
        self.answered = asyncio.Event()

    def apply(self, records: list[Any]) -> None:
        for rec in records:
            self.c.replay(r.decode(r.encode(rec)))

    async def call(self, api_key: int, version: int, body: dict[str, Any],
                   timeout: float = 30.0) -> Any:
        self.requests.append((api_key, body))
        req = build(request_schema(api_key, version), body)
        if self.fail:
            self.fail -= 1
            raise ConnectionError("the controller is away")
        try:
            if api_key == ApiKey.ASSIGN_REPLICAS_TO_DIRS:
                result = self.c.replication.assign_replicas_to_dirs(
                    req.broker_id, req.broker_epoch,
                    [DirectoryAssignment(d.id_, [(t.topic_id, [p.partition_index
                                                               for p in t.partitions])
                                                 for t in d.topics])
                     for d in req.directories])
                self.apply(result.records)
                return build(response_schema(api_key, version), {
                    "throttle_time": 0, "error_code": 0, "directories": [
                        {"id_": d.directory, "topics": [
                            {"topic_id": t, "partitions": [
                                {"partition_index": p, "error_code": e} for p, e in answers]}
                            for t, answers in d.topics]} for d in result.response]})
            result = self.c.cluster.broker_heartbeat(
                req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
                req.want_shut_down, 0, list(req.offline_log_dirs))
            self.apply(result.records)
            return build(response_schema(api_key, version), {
                "throttle_time": 0, "error_code": 0,
                "is_caught_up": result.response.is_caught_up,
                "is_fenced": result.response.is_fenced,
                "should_shut_down": result.response.should_shut_down})
        except ControllerError as e:
            return build(response_schema(api_key, version), {
                "throttle_time": 0, "error_code": e.code, "directories": [],
                "is_caught_up": False, "is_fenced": True, "should_shut_down": False})
        finally:
            self.answered.set()


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.005)
    await asyncio.wait_for(poll(), timeout)


async def test_a_broker_with_two_dirs_tells_the_controller_where_its_replicas_are(
        tmp_path) -> None:
    (a, b), ids = formatted(tmp_path, "a", "b")
    c, epoch = controller_with_broker([ids[a], ids[b]])
    controller = Controller(c)
    logs = LogManager([a, b], now_ms=0)
    logs.discover()
    replicas = ReplicaManager(BROKER, logs, lambda image: {})
    assignments = AssignmentsManager(BROKER, lambda: epoch, controller.call, lambda: c.image)
    replicas.assign_dir = assignments.on_assignment
    controller.apply(c.replication.create_topics(
        [NewTopic("t", assignments={p: [BROKER] for p in range(4)})]).records)
    topic = c.image.topics_by_name["t"]
    assert {p.directory(BROKER) for p in topic.partitions.values()} == \
        {directory_id.UNASSIGNED}  # two dirs: the broker decides
    replicas.apply_metadata(c.image, 0)
    placed = {p: logs.directory_id_of(("t", p)) for p in range(4)}
    assert sorted(placed.values()).count(ids[a]) == 2  # spread over both dirs
    await eventually(lambda: assignments.pending == 0)
    assert [k for k, _ in controller.requests] == [ApiKey.ASSIGN_REPLICAS_TO_DIRS]  # batched
    assert {p: part.directory(BROKER) for p, part in topic.partitions.items()} == placed
    # The metadata now agrees with the disk: a full pass asks for nothing more.
    replicas.apply_metadata(c.image, 0)
    assert assignments.pending == 0 and len(controller.requests) == 1
    await assignments.close()


async def test_assignments_are_sent_again_after_a_failure_and_dropped_when_moot() -> None:
    c, epoch = controller_with_broker([uuid.UUID(int=7 << 64), uuid.UUID(int=8 << 64)])
    controller = Controller(c)
    controller.apply(c.replication.create_topics(
        [NewTopic("t", assignments={0: [BROKER], 1: [BROKER]})]).records)
    topic_id = c.image.topics_by_name["t"].topic_id
    assignments = AssignmentsManager(BROKER, lambda: epoch, controller.call, lambda: c.image,
                                     backoff=ExponentialBackoff(10, 40))
    controller.fail = 2
    assignments.on_assignment(topic_id, 0, uuid.UUID(int=7 << 64))
    assignments.on_assignment(topic_id, 1, uuid.UUID(int=8 << 64))
    assignments.on_assignment(uuid.UUID(int=99), 0, uuid.UUID(int=8 << 64))  # no such topic
    await eventually(lambda: assignments.pending == 0)
    assert len(controller.requests) == 3 and assignments.global_failures == 0
    partitions = c.image.topics_by_name["t"].partitions
    assert [partitions[p].directory(BROKER) for p in (0, 1)] == \
        [uuid.UUID(int=7 << 64), uuid.UUID(int=8 << 64)]
    sent = controller.requests[-1][1]
    assert sent["broker_epoch"] == epoch
    assert {t["topic_id"] for d in sent["directories"] for t in d["topics"]} == {topic_id}
    await assignments.close()


def test_a_failed_dirs_partitions_stay_offline_whatever_the_metadata_says(tmp_path) -> None:
    (a, b), ids = formatted(tmp_path, "a", "b")
    c, epoch = controller_with_broker([ids[a], ids[b]])
    for broker in (2,):
        for rec in c.cluster.register_broker(broker, uuid.uuid4(), [("PLAINTEXT", "h", 9093, 0)],
                                             None, 6, log_dirs=[uuid.UUID(int=9 << 64)]).records:
            c.replay(r.decode(r.encode(rec)))
    controller = Controller(c)
    controller.apply(c.replication.create_topics(
        [NewTopic("t", assignments={0: [BROKER, 2], 1: [BROKER, 2]})]).records)
    logs = LogManager([a, b], now_ms=0)
    logs.discover()
    replicas = ReplicaManager(BROKER, logs, lambda image: {})
    replicas.apply_metadata(c.image, 0)
    on_b = [p for p in (0, 1) if logs.directory_id_of(("t", p)) == ids[b]]
    assert len(on_b) == 1
    failed = on_b[0]
    topic_id = c.image.topics_by_name["t"].topic_id
    controller.apply(c.replication.assign_replicas_to_dirs(BROKER, epoch, [
        DirectoryAssignment(logs.directory_id_of(("t", p)), [(topic_id, [p])])
        for p in (0, 1)]).records)

    logs.mark_offline(b)
    assert replicas.on_dir_offline(b, 0) == [("t", failed)]
    with pytest.raises(KafkaError) as offline:
        replicas.require("t", failed, c.image)
    assert offline.value.code == ErrorCode.kafka_storage_error
    # The controller learns of it and moves the leadership; the broker follows the
    # metadata for the other partition and keeps the failed one offline.
    controller.apply(c.cluster.broker_heartbeat(BROKER, epoch, 10**9, False, False, 0,
                                                [ids[b]]).records)
    part = c.image.topics_by_name["t"].partitions[failed]
    assert (part.leader, part.isr) == (2, [2])
    replicas.apply_delta(c.image, MetadataDelta(partitions={(topic_id, 0), (topic_id, 1)}), 0)
    assert ("t", failed) not in replicas.partitions
    with pytest.raises(KafkaError) as still:
        replicas.require("t", failed, c.image)
    assert still.value.code == ErrorCode.kafka_storage_error
    assert replicas.require("t", 1 - failed, c.image).is_leader
    # The topic is deleted: nothing is left of it here.
    c.replay(r.RemoveTopicRecord(topic_id=topic_id))
    replicas.apply_delta(c.image, MetadataDelta(removed_topics={topic_id: "t"}), 0)
    assert not replicas.offline and not replicas.partitions


async def test_an_offline_dir_is_heartbeated_at_once_and_in_every_heartbeat_after() -> None:
    dirs = [uuid.UUID(int=7 << 64), uuid.UUID(int=8 << 64)]
    c, epoch = controller_with_broker(dirs)
    controller = Controller(c)
    broker = SimpleNamespace(node_id=BROKER, cluster_id="cluster", broker_epoch=-1)
    fatal: list[str] = []
    lifecycle = BrokerLifecycle(
        broker=broker, channel=controller, applied_offset=lambda: 10**9, endpoints=[],
        rack=None, heartbeat_interval_ms=60_000, session_timeout_ms=9000,
        directory_ids=dirs, log_dir_failure_timeout_ms=60_000, on_fatal=fatal.append)
    lifecycle.epoch = epoch
    lifecycle.fenced = False
    lifecycle.start()
    await eventually(lambda: len(controller.requests) == 1)  # the first heartbeat
    assert controller.requests[0][1]["offline_log_dirs"] == []
    lifecycle.propagate_directory_failure(dirs[1])
    await eventually(lambda: len(controller.requests) == 2)  # not 60 s later: now
    assert controller.requests[1][1]["offline_log_dirs"] == [dirs[1]]
    await eventually(lambda: lifecycle.offline_dirs == {dirs[1]: True})
    assert c.image.brokers[BROKER].directories == (dirs[0],)
    lifecycle.propagate_directory_failure(dirs[1])  # known: nothing new
    await asyncio.sleep(0.05)
    assert len(controller.requests) == 2 and not fatal
    await lifecycle.stop()
    assert controller.requests[-1][1]["offline_log_dirs"] == [dirs[1]]


async def test_a_broker_that_cannot_report_an_offline_dir_shuts_down() -> None:
    dirs = [uuid.UUID(int=7 << 64), uuid.UUID(int=8 << 64)]
    c, epoch = controller_with_broker(dirs)
    controller = Controller(c)
    controller.fail = 10**6
    broker = SimpleNamespace(node_id=BROKER, cluster_id="cluster", broker_epoch=-1)
    fatal: list[str] = []
    lifecycle = BrokerLifecycle(
        broker=broker, channel=controller, applied_offset=lambda: 10**9, endpoints=[],
        rack=None, heartbeat_interval_ms=60_000, session_timeout_ms=9000,
        directory_ids=dirs, log_dir_failure_timeout_ms=100, on_fatal=fatal.append)
    lifecycle.epoch = epoch
    lifecycle.start()
    lifecycle.propagate_directory_failure(dirs[0])
    await eventually(lambda: bool(fatal))
    assert "log directory" in fatal[0]
    await lifecycle.stop()
