"""Drives the sans-I/O QuorumController on the metadata quorum (seed 003).

Standby: every committed batch is replayed into the controller as it commits, so a
standby is always a warm copy of the active controller up to the high watermark.

Active: when this node's Raft replica leads an epoch and everything up to that epoch's
leader-change entry is committed and replayed here, the controller claims the epoch. An
operation then runs against the controller's latest state, its records are appended as
one batch and replayed at once (so the next operation sees them), and the caller waits
in the purgatory until the high watermark passes the batch. Before each batch a
timeline snapshot is taken at its base offset; commits delete the snapshots below the
committed offset. When the replica stops leading (a newer epoch, a resignation), the
controller renounces: it reverts to the snapshot at the committed offset, dropping
exactly the appended-but-uncommitted records, and fails the waiting callers with
NOT_CONTROLLER. Should those records commit after all (the next leader kept them), they
come back as committed batches and are replayed like any others.

Only the active controller runs the periodic tasks: fencing brokers whose heartbeats
stopped, moving leaderships back to preferred replicas, and a NoOpRecord when the log
has been idle for ``metadata.max.idle.interval.ms`` (so observers see it advance). On
claiming an empty log it writes the bootstrap records ``storage format`` prepared.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from ottla.controller.quorum_controller import (
    ControllerResult,
    NotControllerError,
    QuorumController,
)
from ottla.metadata import records as meta
from ottla.metadata.bootstrap import METADATA_VERSION, decode_snapshot
from ottla.raft.messages import Committed
from ottla.server.raft_driver import RaftDriver

log = logging.getLogger(__name__)


class ControllerDriver:
    def __init__(self, controller: QuorumController, raft: RaftDriver, *,
                 bootstrap_records: Callable[[], list[Any]],
                 session_timeout_ms: int = 9000, leader_balance_interval_s: float | None = None,
                 max_idle_interval_ms: int = 500,
                 on_fault: Callable[[BaseException], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if controller.registry is None:
            raise ValueError("the controller's image must live on a SnapshotRegistry")
        self.controller = controller
        self.registry = controller.registry
        self.raft = raft
        self.bootstrap_records = bootstrap_records
        self.session_timeout_ms = session_timeout_ms
        self.leader_balance_interval_s = leader_balance_interval_s
        self.max_idle_interval_ms = max_idle_interval_ms
        self.on_fault = on_fault
        self.clock = clock
        self.claim_epoch = -1
        self.committed_end = 0
        """Offsets below this are committed and replayed here."""
        self.replayed_end = 0
        """Offsets below this are replayed here (more than committed on the active one)."""
        self._purgatory: list[tuple[int, asyncio.Future[Any], Any]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._last_write = time.monotonic()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def is_active(self) -> bool:
        return self.claim_epoch >= 0 and self.claim_epoch == self.raft.epoch \
            and self.raft.is_leader

    def next_offset(self) -> int:
        """The offset the next appended record gets (a registration's broker epoch)."""
        return self.raft.end_offset

    # --- operations -------------------------------------------------------------------

    async def submit(self, op: Callable[[QuorumController], ControllerResult]) -> Any:
        """Run ``op`` as the active controller; its response once its records commit."""
        if not self.is_active:
            raise NotControllerError()
        result = op(self.controller)
        if not result.records:
            if not self._purgatory:
                return result.response
            end = self._purgatory[-1][0]  # a read waits out the writes before it
        else:
            end = self._append(result.records)
        future = asyncio.get_running_loop().create_future()
        self._purgatory.append((end, future, result.response))
        return await future

    def _append(self, records: list[Any]) -> int:
        base = self.raft.end_offset
        self.registry.get_or_create_snapshot(base)
        if self.raft.propose(records) != base:
            self.registry.revert_to_snapshot(base)
            raise NotControllerError("The metadata quorum has no leader here")
        try:
            for i, record in enumerate(records):
                self.controller.replay(record, base + i)
        except Exception as e:  # a record we cannot apply is a bug: stop, do not spread it
            self._fault(e)
            raise
        self.replayed_end = base + len(records)
        self._last_write = time.monotonic()
        return self.replayed_end

    # --- RaftListener ------------------------------------------------------------------

    def on_committed(self, committed: Committed) -> None:
        if committed.snapshot is not None:
            if self.is_active:
                self._fault(RuntimeError("the active controller was asked to load a snapshot"))
                return
            image = self.controller.image
            image.clear()
            records = decode_snapshot(committed.snapshot.data).records
            end = committed.snapshot.end_offset
            for record in records:
                image.replay(record, end - 1)
            self.committed_end = self.replayed_end = end
        offset = committed.base_offset
        for entry in committed.entries:
            end = offset + entry.count
            if entry.payload is not None and end > self.replayed_end:
                for i, record in enumerate(entry.payload):
                    self.controller.replay(record, offset + i)
            offset = end
        self.committed_end = offset
        self.replayed_end = max(self.replayed_end, offset)
        if self.is_active:
            self.registry.delete_snapshots_up_to(self.committed_end)
        self._complete_up_to(self.committed_end)
        self._maybe_claim()

    def on_raft_state(self) -> None:
        if self.claim_epoch >= 0 and not self.is_active:
            self._renounce()
        self._maybe_claim()

    # --- claim and renounce --------------------------------------------------------------

    def _maybe_claim(self) -> None:
        raft = self.raft
        if not raft.is_leader or self.claim_epoch == raft.epoch or \
                self.committed_end <= raft.replica.epoch_start_offset:
            return
        self.claim_epoch = raft.epoch
        self.controller.last_heartbeat_ms.clear()
        log.info("Active controller for epoch %d (committed offset %d)", raft.epoch,
                 self.committed_end)
        loop = asyncio.get_running_loop()
        if METADATA_VERSION not in self.controller.image.features:
            self._tasks.append(loop.create_task(self._bootstrap()))
        self._tasks.append(loop.create_task(self._periodic()))

    def _renounce(self) -> None:
        log.info("No longer the active controller (epoch %d)", self.claim_epoch)
        self.claim_epoch = -1
        if self.replayed_end > self.committed_end:
            self.registry.revert_to_snapshot(self.committed_end)
        self.registry.delete_snapshots_up_to(sys.maxsize)
        self.replayed_end = self.committed_end
        purgatory, self._purgatory = self._purgatory, []
        for _, future, _ in purgatory:
            if not future.done():
                future.set_exception(NotControllerError())
        for task in self._tasks:
            task.cancel()
        self._tasks = []

    def _complete_up_to(self, end: int) -> None:
        while self._purgatory and self._purgatory[0][0] <= end:
            _, future, response = self._purgatory.pop(0)
            if not future.done():
                future.set_result(response)

    def _fault(self, error: BaseException) -> None:
        log.critical("Controller fault: %s", error, exc_info=error)
        if self.on_fault is not None:
            self.on_fault(error)

    # --- what the active controller does on its own ----------------------------------------

    async def _bootstrap(self) -> None:
        records = self.bootstrap_records()
        try:
            await self.submit(lambda c: ControllerResult(records))
            log.info("Wrote the bootstrap metadata: %s", records)
        except NotControllerError:
            pass

    async def _periodic(self) -> None:
        """Fence silent brokers (8 checks per session timeout), balance leaders, and keep
        an idle log moving with NoOpRecords."""
        fence_every = self.session_timeout_ms / 8000
        last_balance = time.monotonic()
        idle_s = self.max_idle_interval_ms / 1000 if self.max_idle_interval_ms > 0 else None
        step = min(fence_every, idle_s or fence_every)
        while True:
            await asyncio.sleep(step)
            try:
                fenced = await self.submit(lambda c: c.fence_stale_brokers(
                    self.now_ms(), self.session_timeout_ms))
                for broker_id in fenced or ():
                    log.info("Fenced broker %d: no heartbeat for %d ms", broker_id,
                             self.session_timeout_ms)
                mono = time.monotonic()
                interval = self.leader_balance_interval_s
                if interval is not None and mono - last_balance >= interval:
                    last_balance = mono
                    moved = await self.submit(lambda c: c.balance_partition_leaders())
                    if moved:
                        log.info("Moved %d leaderships back to preferred replicas", len(moved))
                if idle_s is not None and time.monotonic() - self._last_write >= idle_s:
                    await self.submit(lambda c: ControllerResult([meta.NoOpRecord()]))
            except NotControllerError:
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("A periodic controller task failed")
