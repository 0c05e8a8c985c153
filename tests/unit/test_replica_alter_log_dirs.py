"""Moving a replica between a broker's log dirs (AlterReplicaLogDirs), as Kafka's
``ReplicaManager.alterReplicaLogDirs`` and ``ReplicaAlterLogDirsThread`` do: the request's
errors, a future log ``<topic>-<partition>.<uuid>-future`` in the destination filled a
bounded chunk at a time while appends go on, the swap once caught up (the old log renamed
``-delete`` and removed), and a move a restart interrupted."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid

import pytest

from ottla.broker.replication.replica_alter_log_dirs import (
    MoveStep,
    ReplicaAlterLogDirsManager,
    copy_step,
)
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.replication.replication_quota import ByteRateQuota
from ottla.common.config import LONG_MAX
from ottla.common.features import IBP_3_7_IV2, METADATA_VERSION
from ottla.common.topics import TopicPartition
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode
from ottla.protocol.records import build_batch, scan_batches
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

BROKER = 1
TP = ("t", 0)


def image_with_topic(partitions: int = 1) -> tuple[MetadataImage, uuid.UUID]:
    image = MetadataImage()
    topic_id = uuid.uuid4()
    image.replay(r.TopicRecord(name="t", topic_id=topic_id))
    for index in range(partitions):
        image.replay(r.PartitionRecord(partition_id=index, topic_id=topic_id,
                                       replicas=(BROKER,), isr=(BROKER,), leader=BROKER,
                                       leader_epoch=3, partition_epoch=0))
    return image, topic_id


@pytest.fixture
def dirs(tmp_path) -> tuple[str, str]:
    return str(tmp_path / "a"), str(tmp_path / "b")


def replica_manager(dirs: tuple[str, str], started: bool = True) -> ReplicaManager:
    """Over a log manager that has found what is on disk (and, ``started``, is done
    loading it, as a node once its metadata is applied)."""
    logs = LogManager(list(dirs), now_ms=0)
    logs.discover()
    if started:
        logs.started()
    return ReplicaManager(BROKER, logs, lambda image: {"segment.bytes": 2048})


def produce(replicas: ReplicaManager, count: int, start: int = 0, producer_id: int = -1
            ) -> None:
    partition = replicas.partitions[TP]
    for i in range(start, start + count):
        batch = build_batch([(None, f"record-{i}".encode() * 10)], timestamp=i,
                            producer_id=producer_id,
                            producer_epoch=0 if producer_id >= 0 else -1,
                            base_sequence=i if producer_id >= 0 else -1)
        replicas.append(partition, batch, 1, i)


def batches(log_: Log) -> list[bytes]:
    """Every batch of the log as stored (offsets, epochs and all)."""
    out = []
    offset = log_.log_start_offset
    while offset < log_.log_end_offset:
        info = log_.read(offset, 1 << 20)
        assert info.records is not None
        data = info.records.read()
        for position, header in scan_batches(memoryview(data)):
            out.append(data[position:position + header.size])
            offset = header.last_offset + 1
    return out


def hosted(dirs: tuple[str, str]) -> tuple[ReplicaManager, MetadataImage, str, str]:
    """A replica manager hosting t-0, its image, and (its log dir, the other one)."""
    replicas = replica_manager(dirs)
    image, _ = image_with_topic()
    replicas.apply_metadata(image, 0)
    source = os.path.dirname(replicas.partitions[TP].log.dir)
    return replicas, image, source, next(d for d in dirs if d != source)


def test_the_request_errors_are_kafkas(dirs) -> None:
    replicas, image, source, destination = hosted(dirs)
    answer = replicas.alter_replica_log_dirs({TP: "/not/a/log/dir", ("t", 7): source}, image,
                                             0)
    # Not one of the broker's log dirs: LOG_DIR_NOT_FOUND; a partition the metadata does
    # not know: UNKNOWN_TOPIC_OR_PARTITION (Kafka 4.4, the oracle's scenario).
    assert answer == {TP: ErrorCode.log_dir_not_found,
                      ("t", 7): ErrorCode.unknown_topic_or_partition}
    assert replicas.alter_replica_log_dirs({TP: source}, image, 0) == {TP: ErrorCode.none}
    assert replicas.log_manager.futures == {}  # already there: nothing moves
    replicas.log_manager.mark_offline(destination)
    assert replicas.alter_replica_log_dirs({TP: destination}, image, 0) == \
        {TP: ErrorCode.kafka_storage_error}
    long_topic = ("x" * 240, 0)
    assert replicas.alter_replica_log_dirs({long_topic: source}, image, 0) == \
        {long_topic: ErrorCode.invalid_topic_exception}


def test_a_partition_not_hosted_yet_is_made_in_the_dir_asked_for(dirs) -> None:
    replicas = replica_manager(dirs)
    image, _ = image_with_topic()  # in the metadata, not made here yet
    # Without the request the new partition would go to the first (least loaded) dir.
    assert replicas.alter_replica_log_dirs({TP: dirs[1]}, image, 0) == \
        {TP: ErrorCode.replica_not_available}
    replicas.apply_metadata(image, 0)
    assert replicas.partitions[TP].log.dir == os.path.join(dirs[1], "t-0")


def test_a_move_copies_in_chunks_keeps_up_with_appends_and_swaps_in_one_step(dirs) -> None:
    replicas = replica_manager(dirs)
    ids = {d: uuid.uuid4() for d in dirs}
    replicas.log_manager.directory_ids.update(ids)
    image, _ = image_with_topic()
    image.replay(r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=IBP_3_7_IV2))
    replicas.apply_metadata(image, 0)
    source = os.path.dirname(replicas.partitions[TP].log.dir)
    destination = next(d for d in dirs if d != source)
    assigned: list[tuple[uuid.UUID, int, uuid.UUID]] = []
    replicas.assign_dir = lambda *a: assigned.append(a)
    produce(replicas, 40, producer_id=7)
    partition = replicas.partitions[TP]
    partition.log.delete_records_before(3)
    started: list[bool] = []
    replicas.on_move_started = lambda: started.append(True)
    assert replicas.alter_replica_log_dirs({TP: destination}, image, 0) == {TP: ErrorCode.none}
    assert started == [True]
    (future_name,) = [n for n in os.listdir(destination) if n.startswith("t-0")]
    assert re.fullmatch(r"t-0\.[0-9a-f]{32}-future", future_name)
    # Asked again for the same dir: the move goes on, none starts over.
    assert replicas.alter_replica_log_dirs({TP: destination}, image, 0) == {TP: ErrorCode.none}
    assert os.listdir(destination) == [future_name]
    original = partition.log
    steps = 0
    while TP in replicas.log_manager.futures:
        produce(replicas, 1, start=40 + steps, producer_id=7)
        before = batches(partition.log)
        replicas.move_step(TP, 600, 100)  # a few batches a step
        steps += 1
        assert steps < 200
    assert steps > 5  # it took many bounded steps, appends landing in between
    moved = partition.log
    assert moved is not original and replicas.log_manager.logs[TP] is moved
    assert moved.dir == os.path.join(destination, "t-0")
    assert not any(n.startswith("t-0") for n in os.listdir(source))  # removed
    assert batches(moved) == before  # the same batches, byte for byte
    assert moved.log_end_offset == 40 + steps
    assert moved.log_start_offset == 3
    assert moved.high_watermark == partition.high_watermark == moved.log_end_offset
    assert moved.leader_epoch_cache.entries == [(3, 3)]  # cut at the log start, as Kafka
    assert moved.producer_state.producers[7].last_seq == 40 + steps - 1
    # The controller hears where the replica is now.
    assert assigned == [(partition.topic_id, 0, ids[destination])]
    # Appends go to the moved log.
    produce(replicas, 1, start=40 + steps, producer_id=7)
    assert moved.log_end_offset == 41 + steps


def test_the_copy_is_cut_back_where_the_source_was_truncated(tmp_path) -> None:
    config = LogConfig.resolve({}, {})
    current = Log(str(tmp_path / "a" / "t-0"), "t", 0, config, now_ms=0)
    future = Log(str(tmp_path / "b" / "t-0.x-future"), "t", 0, config, now_ms=0)
    for i in range(10):
        epoch = 1 if i < 6 else 2
        current.append_as_follower(build_batch([(None, b"v")], base_offset=i,
                                               partition_leader_epoch=epoch), 0)
    current.high_watermark = 10
    caught_up, copied = copy_step(current, future, 1 << 20, 0)
    assert caught_up and copied == current.size
    assert future.log_end_offset == 10
    # The source diverged at offset 6 (a follower that lost epoch 2): it is cut back
    # and takes other records there; the copy follows.
    current.truncate_to(6)
    current.high_watermark = 6
    for i in range(6, 8):
        current.append_as_follower(build_batch([(None, b"w")], base_offset=i,
                                               partition_leader_epoch=3), 0)
    assert copy_step(current, future, 1 << 20, 0)[0]
    assert batches(future) == batches(current)
    assert future.leader_epoch_cache.entries == [(1, 0), (3, 6)]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_a_move_a_restart_interrupted_goes_on_and_is_never_the_partitions_log(
        dirs, clean: bool) -> None:
    replicas, image, source, destination = hosted(dirs)
    produce(replicas, 10)
    replicas.alter_replica_log_dirs({TP: destination}, image, 0)
    replicas.move_step(TP, 200, 0)  # part of it copied
    copied = replicas.log_manager.futures[TP].log_end_offset
    assert 0 < copied < 10
    expected = batches(replicas.partitions[TP].log)
    if clean:
        replicas.log_manager.shutdown()
    # else: as after kill -9, no clean-shutdown marker: both logs are recovered.

    again = replica_manager(dirs, started=False)
    assert again.log_manager.clean_shutdown == dict.fromkeys(again.log_manager.log_dirs, clean)
    resumed: list[bool] = []
    again.on_move_started = lambda: resumed.append(True)
    again.apply_metadata(image, 0)
    again.log_manager.started()
    # The partition's log is where it was; the copy goes on from where it stopped (as
    # Kafka's loadLogs keeps a future log and the broker restarts its mover).
    assert again.partitions[TP].log.dir == os.path.join(source, "t-0")
    assert resumed == [True]
    future = again.log_manager.futures[TP]
    assert os.path.dirname(future.dir) == destination
    assert future.log_end_offset == copied
    while again.moving():
        again.move_step(TP, 200, 0)
    assert again.partitions[TP].log.dir == os.path.join(destination, "t-0")
    assert batches(again.partitions[TP].log) == expected


def test_a_future_log_of_a_partition_no_longer_hosted_is_removed_at_start(dirs) -> None:
    replicas, image, _, destination = hosted(dirs)
    produce(replicas, 3)
    replicas.alter_replica_log_dirs({TP: destination}, image, 0)
    replicas.log_manager.shutdown()
    again = LogManager(list(dirs), now_ms=0)
    again.discover()
    again.delete_stray(set())
    again.started()
    assert not [n for d in dirs for n in os.listdir(d) if n.startswith("t-0")]


def test_a_crash_between_the_swaps_renames_keeps_the_copy_that_took_appends(dirs) -> None:
    """The swap renames the copy first: a crash before the old log is renamed leaves
    ``t-0`` in both dirs. The next start keeps the one that reaches further (the new one,
    which alone took appends since), here with the stale copy's dir read last."""
    replicas, image, source, destination = hosted(dirs)
    produce(replicas, 10)
    stale = os.path.join(str(source) + "-stale", "t-0")
    shutil.copytree(replicas.partitions[TP].log.dir, stale)  # the old log as it was
    replicas.alter_replica_log_dirs({TP: destination}, image, 0)
    while replicas.moving():
        replicas.move_step(TP, 1 << 20, 0)
    produce(replicas, 5, start=10)  # taken by the new log only
    expected = batches(replicas.partitions[TP].log)
    replicas.log_manager.shutdown()
    old = os.path.join(source, "t-0")
    assert not os.path.exists(old)
    os.rename(stale, old)  # as if its rename to -delete had not happened
    again = replica_manager((destination, source), started=False)
    again.apply_metadata(image, 0)
    again.log_manager.started()
    assert again.partitions[TP].log.dir == os.path.join(destination, "t-0")
    assert batches(again.partitions[TP].log) == expected
    assert not os.path.exists(old)


class FakeMoves:
    """Moves that need ``steps`` steps each; ``broken`` raises on its first step."""

    def __init__(self, steps: dict[TopicPartition, int], broken: TopicPartition | None = None
                 ) -> None:
        self.left = dict(steps)
        self.broken = broken
        self.calls: list[TopicPartition] = []
        self.aborted: list[TopicPartition] = []

    def moving(self) -> list[TopicPartition]:
        return list(self.left)

    def move_step(self, tp: TopicPartition, max_bytes: int, now_ms: int) -> MoveStep:
        self.calls.append(tp)
        if tp == self.broken:
            raise RuntimeError("boom")
        self.left[tp] -= 1
        if not self.left[tp]:
            del self.left[tp]
        return MoveStep(True, max_bytes)

    def abort_move(self, tp: TopicPartition) -> None:
        self.aborted.append(tp)
        del self.left[tp]


async def test_the_driver_takes_turns_between_moves_until_none_is_left() -> None:
    moves = FakeMoves({("t", 0): 3, ("t", 1): 1, ("t", 2): 5}, broken=("t", 2))
    driver = ReplicaAlterLogDirsManager(moves, lambda: 0)
    driver.started()
    driver.started()  # one task, however many moves start
    await asyncio.wait_for(driver._task, 5)  # type: ignore[arg-type]
    # One chunk of each per turn; a move that fails is given up, the others go on.
    assert moves.calls == [("t", 0), ("t", 1), ("t", 2), ("t", 0), ("t", 0)]
    assert moves.aborted == [("t", 2)] and moves.left == {}
    await driver.shutdown()


async def test_the_throttle_holds_the_copies_to_its_rate() -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second: over it, no move copies anything
    until the measured rate is back under it (the first burst is spread over all but one
    window, as Kafka's Rate spreads it)."""
    loop = asyncio.get_running_loop()
    clock = lambda: int(loop.time() * 1000)  # noqa: E731
    bound = 2_000_000
    quota = ByteRateQuota(lambda: bound, samples=2, window_ms=100)
    chunk, steps = 100_000, 10
    moves = FakeMoves({("t", 0): steps // 2, ("t", 1): steps // 2})
    driver = ReplicaAlterLogDirsManager(moves, clock, chunk_bytes=chunk, quota=quota)
    start = loop.time()
    driver.started()
    await asyncio.wait_for(driver._task, 30)  # type: ignore[arg-type]
    elapsed = loop.time() - start
    assert moves.left == {}
    # Without the throttle this takes a few milliseconds. With it, the 1 MB copied may
    # run ahead of the rate by one window's allowance and the chunk that crossed it.
    allowance = bound * 0.1 + chunk
    assert elapsed >= (chunk * steps - allowance) / bound
    await driver.shutdown()


async def test_without_a_bound_the_copies_are_not_held() -> None:
    quota = ByteRateQuota(lambda: LONG_MAX, samples=2, window_ms=100)
    moves = FakeMoves({("t", 0): 50})
    driver = ReplicaAlterLogDirsManager(moves, lambda: 0, chunk_bytes=10**9, quota=quota)
    driver.started()
    await asyncio.wait_for(driver._task, 5)  # type: ignore[arg-type]
    assert moves.left == {} and quota.rate.measure(0) == 50 * 10**9 / 0.1
    await driver.shutdown()
