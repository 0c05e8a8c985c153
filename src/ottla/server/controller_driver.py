"""Drives the sans-I/O QuorumController on the metadata quorum (seed 003).

Standby: every committed batch is replayed into the controller as it commits, so a
standby is always a warm copy of the active controller up to the high watermark.

Active: when this node's Raft replica leads an epoch and everything up to that epoch's
leader-change entry is committed and replayed here, the controller claims the epoch. An
operation then runs against the controller's latest state, its records are appended as
one batch and replayed at once (so the next operation sees them), and the caller waits
in the purgatory until the high watermark passes the batch. When the replica stops
leading (a newer epoch, a resignation), the controller renounces: it reverts to the
committed offset and fails the waiting callers with NOT_CONTROLLER. The bookkeeping
(timeline snapshots, what to replay) is the sans-I/O ``controller.offset_control``.

Only the active controller runs the periodic tasks: fencing brokers whose heartbeats
stopped, moving leaderships back to preferred replicas, removing expired delegation
tokens (every ``delegation.token.expiry.check.interval.ms``), and a NoOpRecord when the log
has been idle for ``metadata.max.idle.interval.ms`` (so observers see it advance). On
claiming, it first aborts a metadata transaction its predecessor left open, and on an
empty log writes the bootstrap records ``storage format`` prepared (in a transaction,
as Kafka does). An operation with more than 10,000 records is written as several
batches inside a transaction.

What Kafka's QuorumControllerMetrics counts of its event queue is counted here of the
operations and of the Raft events (a committed batch, a change of leader or role), as
Kafka's queue runs both: each one started (``EventQueueOperationsStartedCount``), the
time each that succeeded took (``EventQueueProcessingTimeMs``, in fractions of a
millisecond: an operation's run and append, not the wait for its commit), and the
epochs this controller saw a leader of (``NewActiveControllersCount``). There is no
queue in front of the controller (an operation runs on the event loop when submitted,
never waits for another), hence no EventQueueTimeMs, and no operation has a deadline to
time out on, hence no EventQueueOperationsTimedOutCount nor
TimedOutBrokerHeartbeatCount.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ottla.common.features import METADATA_VERSION
from ottla.controller.activation import elr_safety_records
from ottla.controller.offset_control import OffsetControl
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import ControllerResult, NotControllerError
from ottla.metadata import records as r
from ottla.raft.messages import Committed
from ottla.server.metrics.log_flush_stats import Reservoir
from ottla.server.raft_driver import RaftDriver

log = logging.getLogger(__name__)

MAX_RECORDS_PER_BATCH = 10000
"""Kafka's cap on the records of one metadata batch; more go in a transaction."""

MIN_CHECK_S = 0.01
"""The shortest wait between two periodic turns, so a fencing that fails cannot spin."""


class ControllerDriver:
    def __init__(self, controller: QuorumController, raft: RaftDriver, *,
                 bootstrap_records: Callable[[], list[Any]],
                 session_timeout_ms: int = 9000, leader_balance_interval_s: float | None = None,
                 max_idle_interval_ms: int = 500,
                 token_sweep_interval_ms: int | None = None,
                 on_fault: Callable[[BaseException], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 perf_counter: Callable[[], float] = time.perf_counter) -> None:
        self.controller = controller
        self.offsets = OffsetControl(controller)
        self.raft = raft
        self.bootstrap_records = bootstrap_records
        self.session_timeout_ms = session_timeout_ms
        self.leader_balance_interval_s = leader_balance_interval_s
        self.max_idle_interval_ms = max_idle_interval_ms
        self.token_sweep_interval_ms = token_sweep_interval_ms
        """``delegation.token.expiry.check.interval.ms``; None: tokens are disabled."""
        self.on_fault = on_fault
        self.clock = clock
        self.monotonic = monotonic
        self._purgatory: list[tuple[int, asyncio.Future[Any], Any]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._last_write = time.monotonic()
        self.perf_counter = perf_counter
        self.operations_started = 0
        """Operations submitted (run or refused: not active) and Raft events handled."""
        self.processing_time_ms = Reservoir()
        """Milliseconds each of those that succeeded took."""
        self.new_active_controllers = 0
        """Metadata quorum epochs this controller saw with a leader (itself or another)."""
        self._leader_seen: tuple[int, int] | None = None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def session_ms(self) -> int:
        """The clock of broker sessions: monotonic, as Kafka's BrokerHeartbeatManager
        keeps them, so that a step of this node's wall clock fences no broker (forward)
        nor keeps a silent one (back). Heartbeats are stamped with the same clock
        (``ControllerServices.session_ms``)."""
        return int(self.monotonic() * 1000)

    @property
    def is_active(self) -> bool:
        return self.offsets.claim_epoch == self.raft.epoch and self.offsets.claimed \
            and self.raft.is_leader

    def next_offset(self) -> int:
        """The offset the next appended record gets (a registration's broker epoch)."""
        return self.raft.end_offset

    # --- operations -------------------------------------------------------------------

    async def submit(self, op: Callable[[QuorumController], ControllerResult]) -> Any:
        """Run ``op`` as the active controller; its response once its records commit
        (and no metadata transaction holds back the stable offset)."""
        self.operations_started += 1
        if not self.is_active:
            raise NotControllerError()
        start = self.perf_counter()
        result = op(self.controller)
        records = result.records
        if not records:
            if not self._purgatory:
                self.processing_time_ms.record((self.perf_counter() - start) * 1000)
                return result.response
            end = self._purgatory[-1][0]  # a read waits out the writes before it
        elif len(records) <= MAX_RECORDS_PER_BATCH:
            end = self._append(records)
        else:
            # Too many for one batch: several, made atomic by a metadata transaction.
            end = self._append([r.BeginTransactionRecord(name=f"{len(records)} records")])
            for i in range(0, len(records), MAX_RECORDS_PER_BATCH):
                end = self._append(records[i:i + MAX_RECORDS_PER_BATCH])
            end = self._append([r.EndTransactionRecord()])
        self.processing_time_ms.record((self.perf_counter() - start) * 1000)
        future = asyncio.get_running_loop().create_future()
        self._purgatory.append((end, future, result.response))
        return await future

    def _append(self, records: list[Any]) -> int:
        base = self.raft.end_offset
        self.offsets.before_append(base)
        if self.raft.propose(records) != base:
            self.offsets.cancel_append(base)
            raise NotControllerError("The metadata quorum has no leader here")
        try:
            self.offsets.replay_appended(records, base, self.now_ms())
        except Exception as e:  # a record we cannot apply is a bug: stop, do not spread it
            self._fault(e)
            raise
        self._last_write = time.monotonic()
        return base + len(records)

    # --- RaftListener ------------------------------------------------------------------

    def on_committed(self, committed: Committed) -> None:
        self.operations_started += 1
        start = self.perf_counter()
        try:
            self.offsets.on_committed(committed)
        except Exception as e:
            self._fault(e)
            return
        end = self.offsets.stable_end
        while self._purgatory and self._purgatory[0][0] <= end:
            _, future, response = self._purgatory.pop(0)
            if not future.done():
                future.set_result(response)
        self._maybe_claim()
        self.processing_time_ms.record((self.perf_counter() - start) * 1000)

    def on_raft_state(self) -> None:
        self.operations_started += 1
        start = self.perf_counter()
        leader = self.raft.leader_id
        if leader is not None and self._leader_seen != (self.raft.epoch, leader):
            self._leader_seen = (self.raft.epoch, leader)
            self.new_active_controllers += 1
        if self.offsets.claimed and not self.is_active:
            self._renounce()
        self._maybe_claim()
        self.processing_time_ms.record((self.perf_counter() - start) * 1000)

    # --- claim and renounce --------------------------------------------------------------

    def _maybe_claim(self) -> None:
        raft = self.raft
        if not self.offsets.can_claim(raft.is_leader, raft.epoch,
                                      raft.replica.epoch_start_offset):
            return
        self.offsets.claim(raft.epoch)
        log.info("Active controller for epoch %d (committed offset %d)", raft.epoch,
                 self.offsets.committed_end)
        self._tasks.append(asyncio.get_running_loop().create_task(self._activate()))

    def _renounce(self) -> None:
        log.info("No longer the active controller (epoch %d)", self.offsets.claim_epoch)
        self.offsets.renounce()
        purgatory, self._purgatory = self._purgatory, []
        for _, future, _ in purgatory:
            if not future.done():
                future.set_exception(NotControllerError())
        for task in self._tasks:
            task.cancel()
        self._tasks = []

    def _fault(self, error: BaseException) -> None:
        log.critical("Controller fault: %s", error, exc_info=error)
        if self.on_fault is not None:
            self.on_fault(error)

    # --- what the active controller does on its own ----------------------------------------

    async def _activate(self) -> None:
        """First, before anything else: abort a metadata transaction a crashed leader
        left open, or write the bootstrap records on an empty log; then the periodic
        tasks."""
        try:
            if self.offsets.transaction_start >= 0:
                log.info("Aborting the metadata transaction open since offset %d",
                         self.offsets.transaction_start)
                await self.submit(lambda c: ControllerResult([r.AbortTransactionRecord(
                    reason="a new active controller took over")]))
            if METADATA_VERSION not in self.controller.image.features:
                bootstrap = self.bootstrap_records()
                records = [*bootstrap, *elr_safety_records(
                    bootstrap, self.controller.replication.default_min_insync_replicas)]
                await self.submit(lambda c: ControllerResult([
                    r.BeginTransactionRecord(name="Bootstrap records"), *records,
                    r.EndTransactionRecord()]))
                log.info("Wrote the bootstrap metadata: %s", records)
        except NotControllerError:
            return
        await self._periodic()

    def _until_next_check(self, step: float) -> float:
        """Seconds to the next periodic turn: ``step``, or sooner when a broker's session
        runs out before (just past it: a session expires once exceeded)."""
        expiry = self.controller.cluster.next_session_expiry_ms(self.session_timeout_ms)
        if expiry is None:
            return step
        return min(step, max((expiry + 1 - self.session_ms()) / 1000, MIN_CHECK_S))

    async def _periodic(self) -> None:
        """Fence silent brokers (when the first session runs out, and at least 8 checks
        per session timeout), balance leaders, remove expired delegation tokens, and keep
        an idle log moving with NoOpRecords."""
        fence_every = self.session_timeout_ms / 8000
        last_balance = last_sweep = time.monotonic()
        idle_s = self.max_idle_interval_ms / 1000 if self.max_idle_interval_ms > 0 else None
        sweep_s = self.token_sweep_interval_ms / 1000 \
            if self.token_sweep_interval_ms is not None else None
        step = min(fence_every, idle_s or fence_every, sweep_s or fence_every)
        while True:
            await asyncio.sleep(self._until_next_check(step))
            try:
                fenced = await self.submit(lambda c: c.cluster.fence_stale_brokers(
                    self.session_ms(), self.session_timeout_ms))
                for broker_id in fenced or ():
                    log.info("Fenced broker %d: no heartbeat for %d ms", broker_id,
                             self.session_timeout_ms)
                mono = time.monotonic()
                interval = self.leader_balance_interval_s
                if interval is not None and mono - last_balance >= interval:
                    last_balance = mono
                    moved = await self.submit(lambda c: c.replication.balance_partition_leaders())
                    if moved:
                        log.info("Moved %d leaderships back to preferred replicas", len(moved))
                if sweep_s is not None and time.monotonic() - last_sweep >= sweep_s:
                    last_sweep = time.monotonic()
                    swept = await self.submit(
                        lambda c: c.delegation_tokens.sweep_expired_tokens(self.now_ms()))
                    for token_id in swept or ():
                        log.info("Removed expired delegation token %s", token_id)
                if idle_s is not None and time.monotonic() - self._last_write >= idle_s:
                    await self.submit(lambda c: ControllerResult([r.NoOpRecord()]))
            except NotControllerError:
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("A periodic controller task failed")
