"""The Raft driver writes snapshots on a worker thread while its event loop runs on."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ottla.metadata import records as meta
from ottla.raft.file_log import FileRaftLog, SnapshotFiles, snapshot_file_name
from ottla.raft.messages import (
    BeginQuorumEpoch,
    Committed,
    FetchRequest,
    FetchResponse,
    FetchSnapshotResponse,
    Outgoing,
    Snapshot,
)
from ottla.raft.quorum import Role
from ottla.server.raft_driver import RaftDriver


class Listener:
    def __init__(self) -> None:
        self.committed: list[Committed] = []

    def on_committed(self, committed: Committed) -> None:
        self.committed.append(committed)

    def on_raft_state(self) -> None:
        pass


class SlowSnapshots:
    """``FileRaftLog.write_snapshot`` held until ``release``, noting its thread; and
    every fsync's thread, to show none runs on the loop while a snapshot is written."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = threading.Event()
        self.threads: list[int] = []
        self.fsync_threads: list[int] = []
        real_write = FileRaftLog.write_snapshot
        real_fsync = os.fsync

        def write(files: SnapshotFiles) -> None:
            self.threads.append(threading.get_ident())
            assert self.release.wait(10)
            real_write(files)

        def fsync(fd: int) -> None:
            self.fsync_threads.append(threading.get_ident())
            real_fsync(fd)
        monkeypatch.setattr(FileRaftLog, "write_snapshot", staticmethod(write))
        monkeypatch.setattr(os, "fsync", fsync)


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowSnapshots]:
    slow = SlowSnapshots(monkeypatch)
    yield slow
    slow.release.set()  # never leave a worker thread waiting


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def until(condition: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def record(n: int) -> meta.FeatureLevelRecord:
    return meta.FeatureLevelRecord(name=f"f{n}", feature_level=n)


async def test_a_snapshot_is_taken_on_a_worker_thread_while_the_loop_commits_on(
        tmp_path, slow) -> None:
    driver = RaftDriver(node_id=1, cluster_id="c", voters={1: ("127.0.0.1", closed_port())},
                        directory=str(tmp_path / "meta"))
    driver.start()
    try:
        for i in range(5):
            driver.propose([record(i)])
        await until(lambda: driver.high_watermark == 6)
        slow.fsync_threads.clear()
        assert driver.create_snapshot(6, b"state at 6")
        assert not driver.create_snapshot(6, b"again")  # one is being written
        await until(lambda: slow.threads)
        # The write is stuck on its thread; the loop goes on committing proposals.
        driver.propose([record(9)])
        await until(lambda: driver.high_watermark == 7)
        assert slow.threads[0] != threading.get_ident()
        assert (driver.log.start_offset, driver.log.snapshot) == (0, None)
        slow.release.set()
        await until(lambda: driver.log.start_offset == 6)
        assert driver.log.snapshot == Snapshot(6, 1, b"state at 6")
        assert os.path.exists(os.path.join(driver.directory, snapshot_file_name(6, 1)))
        assert threading.get_ident() not in slow.fsync_threads
    finally:
        await driver.stop()


async def test_a_follower_installs_a_snapshot_on_a_worker_thread_and_waits_for_it(
        tmp_path, slow) -> None:
    voters = {n: ("127.0.0.1", closed_port()) for n in (1, 2, 3)}
    driver = RaftDriver(node_id=2, cluster_id="c", voters=voters,
                        directory=str(tmp_path / "meta"))
    listener = Listener()
    driver.listeners.append(listener)
    sent: list[Outgoing] = []
    dispatch = driver._dispatch

    def note(out: Outgoing) -> None:
        sent.append(out)
        dispatch(out)
    driver._dispatch = note  # type: ignore[method-assign]
    driver.start()

    def deliver(message: Any) -> None:
        driver._advance(lambda: driver.replica.handle(1, message, driver.now_ms()))
    try:
        deliver(BeginQuorumEpoch(1, 1))
        deliver(FetchResponse(1, 1, 0, base_offset=0, snapshot_end_offset=5,
                              snapshot_epoch=1))
        slow.fsync_threads.clear()
        sent.clear()
        deliver(FetchSnapshotResponse(1, 1, Snapshot(5, 1, b"leader state")))
        await until(lambda: slow.threads)
        # Timers tick while the install is stuck on its thread: the follower must not
        # fetch meanwhile. Waited for as ticks counted, not as time slept.
        ticks: list[int] = []
        tick = driver.replica.tick

        def counted(now_ms: int) -> Any:
            ticks.append(now_ms)
            return tick(now_ms)
        driver.replica.tick = counted  # type: ignore[method-assign]
        await until(lambda: len(ticks) >= 5)
        assert slow.threads[0] != threading.get_ident()
        assert not [o for o in sent if isinstance(o.message, FetchRequest)]
        assert (driver.log.end_offset, driver.high_watermark) == (0, 0)
        slow.release.set()
        await until(lambda: driver.log.start_offset == 5)
        assert (driver.log.end_offset, driver.high_watermark) == (5, 5)
        assert [o.message.fetch_offset for o in sent
                if isinstance(o.message, FetchRequest)][:1] == [5]
        assert [c.snapshot for c in listener.committed] == [Snapshot(5, 1, b"leader state")]
        assert threading.get_ident() not in slow.fsync_threads
    finally:
        await driver.stop()


async def test_an_append_the_disk_refuses_halts_the_node(tmp_path, monkeypatch) -> None:
    """A proposal whose log append fails (a full disk) is a fatal fault, as an error in
    Kafka's Raft IO thread is: the node halts, nothing more is appended or answered."""
    faults: list[BaseException] = []
    driver = RaftDriver(node_id=1, cluster_id="c", voters={1: ("127.0.0.1", closed_port())},
                        directory=str(tmp_path / "meta"), on_fault=faults.append)
    driver.start()
    try:
        await until(lambda: driver.replica.is_leader and driver.high_watermark == 1)
        assert driver.propose([record(1)]) == 1

        def full(entries: Any) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(driver.log, "append", full)
        assert driver.propose([record(2)]) is None
        assert [type(f) for f in faults] == [OSError]
        assert faults[0].errno == errno.ENOSPC
        monkeypatch.undo()
        assert driver.propose([record(3)]) is None  # halted
        assert driver.log.end_offset == 2
    finally:
        await driver.stop()


async def test_a_step_of_the_wall_clock_leaves_a_follower_with_its_leader(tmp_path) -> None:
    """The replica's timers run on a steady clock: a follower whose wall clock jumps ten
    minutes ahead keeps its leader. Timed on the wall clock, its fetch timeout would have
    passed at the next tick, and it would go prospective (or, a leader, resign)."""
    voters = {n: ("127.0.0.1", closed_port()) for n in (1, 2, 3)}
    wall = [time.time()]
    driver = RaftDriver(node_id=2, cluster_id="c", voters=voters,
                        directory=str(tmp_path / "meta"), clock=lambda: wall[0])
    driver.start()
    try:
        driver._advance(lambda: driver.replica.handle(1, BeginQuorumEpoch(1, 1),
                                                      driver.now_ms()))
        assert (driver.replica.role, driver.replica.leader_id) == (Role.FOLLOWER, 1)
        wall[0] += 600
        ticks: list[int] = []
        tick = driver.replica.tick

        def counted(now_ms: int) -> Any:
            ticks.append(now_ms)
            return tick(now_ms)
        driver.replica.tick = counted  # type: ignore[method-assign]
        await until(lambda: len(ticks) >= 5)
        assert (driver.replica.role, driver.replica.leader_id) == (Role.FOLLOWER, 1)
        assert ticks[-1] - ticks[0] < 2000 and abs(ticks[0] / 1000 - time.time()) < 60
    finally:
        await driver.stop()
