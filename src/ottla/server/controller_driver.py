"""Drives the sans-I/O QuorumController on the event loop.

An operation runs against the controller, its records are appended to the metadata log
and replayed into the controller's state at once (so the next operation sees them), and
the caller is answered only when they are committed: fsynced, in the one-voter quorum.
fsyncs run off the event loop and are shared by every operation waiting on them (group
commit). Committed records are then published, in order, to the broker's image.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ottla.controller.quorum_controller import QuorumController
from ottla.raft.description import QuorumDescription
from ottla.raft.single_voter import SingleVoterRaft

log = logging.getLogger(__name__)


class ControllerDriver:
    def __init__(self, controller: QuorumController, raft: SingleVoterRaft,
                 publish: Callable[[list[tuple[int, Any]]], None],
                 on_fault: Callable[[BaseException], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.controller = controller
        self.raft = raft
        self.publish = publish
        self.on_fault = on_fault
        self.clock = clock
        self._uncommitted: list[tuple[int, Any]] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._flushing = False
        self._flush_task: asyncio.Future[None] | None = None
        self.directory_id: str | None = None
        """The metadata log dir's directory.id; set by the node."""
        self.endpoints: list[tuple[str, str, int]] = []
        """This voter's controller listeners (name, host, port); set by the node."""

    def next_offset(self) -> int:
        """The offset the next appended record gets (a registration's broker epoch)."""
        return self.raft.end_offset

    def describe_quorum(self) -> QuorumDescription:
        """DescribeQuorum's view of the metadata partition."""
        return self.raft.describe(self.directory_id, self.endpoints, int(self.clock() * 1000))

    async def submit(self, op: Callable[[QuorumController], Any]) -> Any:
        result = op(self.controller)
        if not result.records:
            return result.response
        try:
            last = self.raft.append(result.records, int(self.clock() * 1000))
        except Exception as e:
            self.on_fault(e)
            raise
        base = last - len(result.records) + 1
        for i, record in enumerate(result.records):
            self.controller.replay(record, base + i)
            self._uncommitted.append((base + i, record))
        await self._wait_committed(last + 1)
        return result.response

    async def _wait_committed(self, end: int) -> None:
        if self.raft.high_watermark >= end:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((end, future))
        if not self._flushing:
            self._flushing = True
            self._flush_task = asyncio.ensure_future(self._flush_loop())
        await future

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiters:
                durable = await loop.run_in_executor(None, self.raft.flush)
                self.raft.commit(durable)
                committed = [(o, r) for o, r in self._uncommitted if o < durable]
                self._uncommitted = [(o, r) for o, r in self._uncommitted if o >= durable]
                if committed:
                    self.publish(committed)
                still = []
                for end, future in self._waiters:
                    if end <= durable:
                        if not future.done():
                            future.set_result(None)
                    else:
                        still.append((end, future))
                self._waiters = still
        except Exception as e:
            log.exception("The metadata log cannot be written")
            for _, future in self._waiters:
                if not future.done():
                    future.set_exception(e)
            self._waiters = []
            self.on_fault(e)
        finally:
            self._flushing = False
