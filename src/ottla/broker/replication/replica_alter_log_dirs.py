"""Moving a replica between this broker's log dirs (AlterReplicaLogDirs; Kafka's
``ReplicaAlterLogDirsManager`` and ``ReplicaAlterLogDirsThread``).

The destination gets a future log, which ``copy_step`` fills from the partition's log a
bounded chunk at a time, the way a follower copies its leader: the same batches,
offsets and epochs, cut back where the source was truncated below what was copied, its
start moved up where the source's was. The driver here runs one chunk per partition per
turn of the event loop, so a large log moves without holding the loop for long, and
appends keep landing in the partition's log meanwhile; the replica manager swaps the
future log in, in one step, on the turn that finds it caught up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import NamedTuple, Protocol

from ottla.broker.replication.replication_quota import ByteRateQuota
from ottla.common.tasks import cancel_and_wait
from ottla.common.topics import TopicPartition
from ottla.storage.leader_epoch import UNDEFINED_OFFSET, epoch_end_offset
from ottla.storage.log import Log

log = logging.getLogger(__name__)

COPY_CHUNK_BYTES = 1024 * 1024
"""Read per partition per turn: the broker passes ``replica.fetch.max.bytes`` (1 MiB by
default), what Kafka's alter-log-dirs thread fetches; it is also how far one turn may run
past the throttle."""


def copy_step(current: Log, future: Log, max_bytes: int, now_ms: int) -> tuple[bool, int]:
    """Copy up to ``max_bytes`` more of ``current`` into ``future``: whether ``future``
    now holds everything ``current`` does (the same log end offset), and the bytes
    copied."""
    copied = 0
    if future.log_end_offset > future.log_start_offset:
        # The source truncated below what was copied (a follower that diverged from its
        # leader): cut the copy back to where its last epoch ends in the source.
        _, end = epoch_end_offset(current.leader_epoch_cache.entries,
                                  future.leader_epoch_cache.latest_epoch,
                                  current.log_end_offset)
        if end == UNDEFINED_OFFSET:
            end = current.log_end_offset
        end = max(min(end, current.log_end_offset), future.log_start_offset)
        if end < future.log_end_offset:
            future.truncate_to(end)
    if current.log_start_offset > future.log_end_offset:
        # Retention or DeleteRecords passed everything copied so far.
        future.truncate_fully_and_start_at(current.log_start_offset, now_ms)
    future.high_watermark = min(current.high_watermark, future.log_end_offset)
    if future.log_start_offset < current.log_start_offset <= future.high_watermark:
        future.delete_records_before(current.log_start_offset)
    if future.log_end_offset < current.log_end_offset:
        info = current.read(future.log_end_offset, max_bytes)
        if info.records is not None:
            data = info.records.read()
            future.append_as_follower(data, now_ms)
            copied = len(data)
        future.high_watermark = min(current.high_watermark, future.log_end_offset)
    return future.log_end_offset == current.log_end_offset, copied


IDLE_BACKOFF_S = 0.01
"""How long the driver waits after a turn in which no move progressed."""

THROTTLED_BACKOFF_S = 0.1
"""How long the driver waits before looking at its throttle again once it is exceeded."""


class MoveStep(NamedTuple):
    """What one step of a move did."""

    progressed: bool
    """Something changed: bytes copied, the copy swapped in, or the move given up."""
    copied: int
    """Bytes copied, what the throttle counts."""


class LogDirMoves(Protocol):
    """What the driver asks of the replica manager."""

    def moving(self) -> list[TopicPartition]: ...

    def move_step(self, tp: TopicPartition, max_bytes: int, now_ms: int) -> MoveStep: ...

    def abort_move(self, tp: TopicPartition) -> None: ...


class ReplicaAlterLogDirsManager:
    """Runs the moves: one task while any is in progress, one chunk of each per turn,
    none while the throttle (``replica.alter.log.dirs.io.max.bytes.per.second``) is
    exceeded."""

    def __init__(self, moves: LogDirMoves, now_ms: Callable[[], int],
                 chunk_bytes: int = COPY_CHUNK_BYTES,
                 quota: ByteRateQuota | None = None) -> None:
        self._moves = moves
        self._now_ms = now_ms
        self._chunk_bytes = chunk_bytes
        self._quota = quota
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def started(self) -> None:
        """A move began: run them (if not running already)."""
        if self._closed or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self._closed:
            moving = self._moves.moving()
            if not moving:
                return
            if self._quota is not None and self._quota.is_exceeded(self._now_ms()):
                await asyncio.sleep(THROTTLED_BACKOFF_S)
                continue
            progress = False
            for tp in moving:
                try:
                    step = self._moves.move_step(tp, self._chunk_bytes, self._now_ms())
                    progress |= step.progressed
                    if self._quota is not None:
                        self._quota.record(step.copied, self._now_ms())
                except Exception:
                    log.exception("Moving %s-%d between log dirs failed", *tp)
                    self._moves.abort_move(tp)
                    progress = True
                await asyncio.sleep(0)  # requests between chunks
            if not progress:  # nothing to copy this turn: do not spin
                await asyncio.sleep(IDLE_BACKOFF_S)

    async def shutdown(self) -> None:
        self._closed = True
        if self._task is not None:
            await cancel_and_wait(self._task)
