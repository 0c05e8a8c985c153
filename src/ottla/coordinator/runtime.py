"""The coordinator runtime: one state machine (a shard) per partition of an internal topic.

This is Kafka's CoordinatorRuntime (seed 000), sans-I/O. A write operation is a function
of the shard's state to records and a response; the runtime applies the records through
the shard's ``replay`` (the same path that loads a partition), appends them to the
partition as one batch, and releases the response only once the partition's high
watermark has passed them, so an acknowledged commit or join survives a coordinator
failover. Responses a shard completes later (a parked JoinGroup answered when the
rebalance barrier closes) are released the same way: at the log end of the event that
completed them.

Timers (session, rebalance, join, sync, expiration) are scheduled by shards and fire as
write operations on their shard. The runtime never reads the clock: its driver passes
``now_ms`` into every call and calls ``poll`` when the earliest deadline is due.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ottla.common.topics import TopicPartition
from ottla.coordinator.runtime_metrics import CoordinatorRuntimeMetrics
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

Reply = Callable[[Any], None]
S = TypeVar("S", bound="CoordinatorShard")
R = TypeVar("R")


DEFERRED: Any = object()
"""A write operation's response when the shard answers later, through ``respond``."""


class CoordinatorState(enum.Enum):
    LOADING = "LOADING"
    ACTIVE = "ACTIVE"
    FAILED = "FAILED"
    CLOSED = "CLOSED"


@dataclass(slots=True)
class CoordinatorResult(Generic[R]):
    """What a write operation produces: records, and the operation's answer (``R``;
    DEFERRED when the shard answers later, None from a timer, which answers no one).
    ``replay=False`` is for state the handler already changed in memory (Kafka's classic
    groups do this); the records are still written."""

    records: list[Any] = field(default_factory=list)
    response: R = None  # type: ignore[assignment]  # R is None where nothing is answered
    replay: bool = True
    write_timeout_ms: int | None = None
    """How long the answer may wait for the high watermark, where it is not the
    runtime's: Kafka's transaction coordinator gives each append its transaction's
    timeout."""


@dataclass(frozen=True, slots=True)
class TransactionalRecord:
    """A record written in a producer's transaction (a transactional offset commit):
    pending until that producer's COMMIT or ABORT marker."""

    producer_id: int
    producer_epoch: int
    record: Any


@dataclass(frozen=True, slots=True)
class TransactionMarker:
    """A COMMIT or ABORT marker in the partition, replayed to decide pending records."""

    producer_id: int
    producer_epoch: int
    commit: bool


class PartitionWriter(Protocol):
    """How the runtime reaches the partitions' logs (the replica manager, or a simulation)."""

    def append(self, tp: TopicPartition, records: list[Any], now_ms: int) -> int:
        """Append records as one batch; return the log end offset after them."""

    def high_watermark(self, tp: TopicPartition) -> int: ...

    def read(self, tp: TopicPartition) -> Iterable[tuple[int, Any]]:
        """Every (offset, record) in the partition, for loading."""


class CoordinatorShard(Protocol):
    def replay(self, offset: int, record: Any) -> None: ...

    def on_written(self, end_offset: int) -> None:
        """What the last replays (offset -1) wrote was appended, ending at ``end_offset``."""

    def on_committed(self, high_watermark: int) -> None:
        """Everything below ``high_watermark`` is committed: reads may show it."""

    def on_loaded(self, now_ms: int) -> None: ...

    def on_unloaded(self) -> None: ...


class ShardContext:
    """What a shard may ask of the runtime: timers and late responses."""

    def __init__(self, runtime: CoordinatorRuntime[Any], tp: TopicPartition) -> None:
        self._runtime = runtime
        self.tp = tp
        self._deferred: list[tuple[Reply, Any]] = []

    def respond(self, reply: Reply, response: Any) -> None:
        """Answer a parked request once what this event wrote is committed."""
        self._deferred.append((reply, response))

    def schedule(self, key: str, delay_ms: int, operation: Callable[[Any, int], Any]) -> None:
        """Run ``operation(shard, now_ms)`` as a write after ``delay_ms``; replaces a timer
        with the same key."""
        self._runtime._schedule(self.tp, key, delay_ms, operation)

    def cancel(self, key: str) -> None:
        self._runtime._cancel(self.tp, key)

    def is_scheduled(self, key: str) -> bool:
        return (self.tp, key) in self._runtime._timers


@dataclass(slots=True, eq=False)
class _Pending:
    """A response waiting for the high watermark to reach ``end``."""

    end: int
    reply: Reply
    response: Any
    since: int
    """On the timers' clock: its wait there is the event purgatory time."""
    deadline: int | None
    """On the timers' clock: then COORDINATOR_NOT_AVAILABLE. None: it waits."""


@dataclass(slots=True)
class _Context(Generic[S]):
    tp: TopicPartition
    state: CoordinatorState
    shard: S
    ctx: ShardContext
    pending: list[_Pending] = field(default_factory=list)
    """Responses waiting for the high watermark."""
    last_written: int = 0
    """The log end after this shard's last write; a response waits for it."""


class Loading:
    """One partition's load in progress: ``step`` replays up to ``max_records`` records
    and says whether the load is over (done, failed, or overtaken by an unload or a new
    load), so a driver can spread a large partition over many turns of its loop."""

    def __init__(self, runtime: CoordinatorRuntime[Any], context: _Context[Any],
                 started_ms: int) -> None:
        self.runtime = runtime
        self.context = context
        self.started_ms = started_ms
        """When the partition was taken on: its load time runs from here."""
        self.records = iter(runtime.writer.read(context.tp))
        self.count = 0

    @property
    def current(self) -> bool:
        return self.runtime.contexts.get(self.context.tp) is self.context and \
            self.context.state is CoordinatorState.LOADING

    def step(self, max_records: int, now_ms: int) -> bool:
        if not self.current:
            return True
        context = self.context
        replayed = 0
        try:
            for offset, record in itertools.islice(self.records, max_records):
                context.shard.replay(offset, record)
                context.last_written = offset + 1
                replayed += 1
        except Exception:
            log.exception("Loading coordinator partition %s-%d failed", *context.tp)
            context.state = CoordinatorState.FAILED
            return True
        self.count += replayed
        if replayed == max_records:
            return False  # perhaps more
        self.runtime._loaded(context, now_ms, self.count)
        self.runtime.metrics.partition_loaded(self.started_ms, now_ms)
        return True


class CoordinatorRuntime(Generic[S]):
    def __init__(self, writer: PartitionWriter, shard_factory: Callable[[ShardContext], S],
                 timer_ms: Callable[[], int] | None = None,
                 write_timeout_ms: int | None = None) -> None:
        self.writer = writer
        self.write_timeout_ms = write_timeout_ms
        """How long a response may wait for the high watermark (Kafka's write timeout,
        ``offsets.commit.timeout.ms`` for groups): then it is COORDINATOR_NOT_AVAILABLE,
        which clients retry, and the request no longer holds its connection. What was
        appended stays and takes effect if it commits. None: no limit."""
        self.shard_factory = shard_factory
        self.timer_ms = timer_ms
        """The clock timers run on, in ms: the driver gives a monotonic one, so that a
        step of the wall clock (``now_ms``) neither expires every session at once nor
        holds them all, as Kafka's coordinator runtime times them on a monotonic timer.
        None: ``now_ms``."""
        self.contexts: dict[TopicPartition, _Context[S]] = {}
        self._timers: dict[tuple[TopicPartition, str], tuple[int, int]] = {}
        self._heap: list[tuple[int, int, TopicPartition, str, Callable[[Any, int], Any]]] = []
        self._seq = itertools.count()
        self.now_ms = 0
        self.on_timer_change: Callable[[int], None] = lambda deadline: None
        """The driver's hook: the earliest deadline may have moved to ``deadline``."""
        self.metrics = CoordinatorRuntimeMetrics()

    # --- partitions coming and going ------------------------------------------------

    def load(self, tp: TopicPartition, now_ms: int) -> None:
        """Become the coordinator of ``tp``: build a fresh shard and replay the partition,
        all at once."""
        job = self.begin_load(tp, now_ms)
        while not job.step(1 << 62, now_ms):
            pass

    def begin_load(self, tp: TopicPartition, now_ms: int) -> Loading:
        """Become the coordinator of ``tp`` with a fresh shard in LOADING state (requests
        get COORDINATOR_LOAD_IN_PROGRESS) that the returned job replays the partition
        into, a slice at a time (Kafka's CoordinatorLoader)."""
        self.now_ms = max(self.now_ms, now_ms)
        self.unload(tp)
        ctx = ShardContext(self, tp)
        context = _Context(tp, CoordinatorState.LOADING, self.shard_factory(ctx), ctx)
        self.contexts[tp] = context
        return Loading(self, context, now_ms)

    def _loaded(self, context: _Context[S], now_ms: int, count: int) -> None:
        self.now_ms = max(self.now_ms, now_ms)
        context.state = CoordinatorState.ACTIVE
        context.shard.on_loaded(self.now_ms)
        self._release(context)
        log.debug("Loaded coordinator partition %s-%d (%d records)", *context.tp, count)

    def unload(self, tp: TopicPartition) -> None:
        context = self.contexts.pop(tp, None)
        if context is None:
            return
        context.state = CoordinatorState.CLOSED
        for key in [k for k in self._timers if k[0] == tp]:
            del self._timers[key]
        context.shard.on_unloaded()
        for p in context.pending:
            p.reply(KafkaError(ErrorCode.not_coordinator, "The coordinator moved"))
        context.pending.clear()

    def active(self, tp: TopicPartition) -> _Context[S]:
        context = self.contexts.get(tp)
        if context is None or context.state is CoordinatorState.CLOSED:
            raise KafkaError(ErrorCode.not_coordinator, "This is not the coordinator")
        if context.state is CoordinatorState.LOADING:
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             "The coordinator is loading")
        if context.state is CoordinatorState.FAILED:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             "The coordinator failed to load")
        return context

    # --- operations -------------------------------------------------------------------

    def write(self, tp: TopicPartition, operation: Callable[[S, int], CoordinatorResult],
              reply: Reply, now_ms: int) -> None:
        """Run a write operation; ``reply`` gets its response (or a KafkaError) once its
        records are committed. Raises KafkaError if ``tp`` is not an active shard."""
        context = self.active(tp)
        self.now_ms = max(self.now_ms, now_ms)
        self._run(context, operation, reply)

    def read(self, tp: TopicPartition, operation: Callable[[S], Any]) -> Any:
        """Run a read against the shard's state at once. Committed offsets are read as
        of the high watermark (the shard keeps what is above it apart,
        ``on_committed``); other state is live: use ``read_committed`` for it."""
        return operation(self.active(tp).shard)

    def read_committed(self, tp: TopicPartition, operation: Callable[[S], Any],
                       reply: Reply) -> None:
        """Run a read (a group's description, the list of groups) and release its answer
        only once the high watermark covers every write the shard had made when it ran:
        what a client is told then survives a failover of the coordinator, as Kafka's
        reads at the last committed offset do. Raises KafkaError if ``tp`` is not an
        active shard; an unload before the answer is released replies NOT_COORDINATOR."""
        context = self.active(tp)
        self._wait(context, context.last_written, reply, operation(context.shard))
        self._release(context)
        self._arm_write_timeout(context)

    def _run(self, context: _Context[S], operation: Callable[[S, int], Any],
             reply: Reply | None) -> None:
        shard = context.shard
        try:
            result = operation(shard, self.now_ms)
        except KafkaError as e:
            if reply is not None:
                reply(e)
            self._flush_deferred(context, context.last_written)
            return
        if result is None:
            result = CoordinatorResult()
        end = None
        if result.records:
            if result.replay:
                for record in result.records:
                    shard.replay(-1, record)
            try:
                end = self.writer.append(context.tp, result.records, self.now_ms)
                shard.on_written(end)
            except KafkaError as e:
                # The in-memory state may now be ahead of the log: rebuild it from the log.
                log.error("Coordinator write to %s-%d failed (%s); reloading", *context.tp,
                          e.message)
                if reply is not None:
                    reply(e)
                self.load(context.tp, self.now_ms)
                return
        if end is None:
            end = context.last_written  # what earlier writes appended must be committed
        context.last_written = end
        if reply is not None and result.response is not DEFERRED:
            self._wait(context, end, reply, result.response, result.write_timeout_ms)
        self._flush_deferred(context, end)
        self._release(context)
        self._arm_write_timeout(context)

    def _wait(self, context: _Context[S], end: int, reply: Reply, response: Any,
              timeout_ms: int | None = None) -> None:
        since = self._timer_now()
        timeout_ms = self.write_timeout_ms if timeout_ms is None else timeout_ms
        context.pending.append(_Pending(end, reply, response, since,
                                        None if timeout_ms is None else since + timeout_ms))

    def _flush_deferred(self, context: _Context[S], end: int) -> None:
        for reply, response in context.ctx._deferred:
            self._wait(context, end, reply, response)
        context.ctx._deferred.clear()

    def _release(self, context: _Context[S]) -> None:
        hw = self.writer.high_watermark(context.tp)
        context.shard.on_committed(hw)
        ready = [p for p in context.pending if p.end <= hw]
        if not ready:
            return
        context.pending = [p for p in context.pending if p.end > hw]
        now = self._timer_now()
        for p in ready:
            self.metrics.event_purgatory_time.record(now - p.since)
            p.reply(p.response)

    @staticmethod
    def _write_deadline(context: _Context[Any]) -> int | None:
        return min((p.deadline for p in context.pending if p.deadline is not None),
                   default=None)

    def _arm_write_timeout(self, context: _Context[S]) -> None:
        deadline = self._write_deadline(context)
        if deadline is not None:
            self.on_timer_change(deadline)

    def _expire_writes(self, due: int) -> None:
        """Answer COORDINATOR_NOT_AVAILABLE to every response that waited for the high
        watermark longer than the write timeout (Kafka's OperationTimeout, whose
        TimeoutException the group coordinator answers as COORDINATOR_NOT_AVAILABLE)."""
        for context in self.contexts.values():
            expired = [p for p in context.pending if p.deadline is not None
                       and p.deadline <= due]
            if not expired:
                continue
            context.pending = [p for p in context.pending if p.deadline is None
                               or p.deadline > due]
            for p in expired:
                p.reply(KafkaError(ErrorCode.coordinator_not_available,
                                   f"The write timed out after {p.deadline - p.since} ms: "
                                   "it was not replicated in time"))

    def on_high_watermark(self, tp: TopicPartition) -> None:
        """The partition's high watermark moved (replication): release what it covers."""
        context = self.contexts.get(tp)
        if context is not None:
            self._release(context)

    # --- timers -------------------------------------------------------------------------

    def _schedule(self, tp: TopicPartition, key: str, delay_ms: int,
                  operation: Callable[[Any, int], Any]) -> None:
        deadline = self._timer_now() + max(0, delay_ms)
        seq = next(self._seq)
        self._timers[(tp, key)] = (deadline, seq)
        heapq.heappush(self._heap, (deadline, seq, tp, key, operation))
        self.on_timer_change(deadline)

    def _cancel(self, tp: TopicPartition, key: str) -> None:
        self._timers.pop((tp, key), None)

    def _timer_now(self) -> int:
        return self.timer_ms() if self.timer_ms is not None else self.now_ms

    def next_deadline(self) -> int | None:
        """The earliest timer's or write timeout's deadline, on the timers' clock
        (``timer_ms``)."""
        deadlines = []
        while self._heap:
            deadline, seq, tp, key, _ = self._heap[0]
            if self._timers.get((tp, key)) == (deadline, seq):
                deadlines.append(deadline)
                break
            heapq.heappop(self._heap)  # cancelled or replaced
        deadlines += [d for d in map(self._write_deadline, self.contexts.values())
                      if d is not None]
        return min(deadlines, default=None)

    def poll(self, now_ms: int) -> None:
        """Fire every timer due on the timers' clock, each as a write on its shard at
        ``now_ms``."""
        self.now_ms = max(self.now_ms, now_ms)
        due = self._timer_now()
        while self._heap and self._heap[0][0] <= due:
            deadline, seq, tp, key, operation = heapq.heappop(self._heap)
            if self._timers.get((tp, key)) != (deadline, seq):
                continue
            del self._timers[(tp, key)]
            context = self.contexts.get(tp)
            if context is None or context.state is not CoordinatorState.ACTIVE:
                continue
            self._run(context, operation, None)
        self._expire_writes(due)
