"""Simulated transactions: transactional producers, a transaction coordinator and the
partitions it writes markers to, under seeded faults.

What runs is the real code wherever it is sans-I/O:

* the coordinator is a real ``CoordinatorRuntime`` with real ``TransactionCoordinatorShard``s,
  one per ``__transaction_state`` partition (``TXN_PARTITIONS`` of them, transactional ids
  hashed with the service's ``partition_for``): InitProducerId, AddPartitionsToTxn, EndTxn,
  the verification of KIP-890 part 1 (``verify_partitions``), ``complete_transaction``, the
  ``abort_timed_out`` timer. The runtime replays a write's records into the shard before
  appending them and releases the answer only once the partition's high watermark passes
  them, as it does on a broker. Records are encoded with ``encode_record`` (the seed picks
  value version 0, as the service writes, or 1) and a reloading coordinator decodes them;
* each partition leader keeps its producer state in a real ``ProducerStateManager``
  (``check`` for data batches, ``check_marker`` / ``end_transaction`` for markers,
  ``first_unstable_offset`` for the last stable offset) and its aborted transactions in the
  real ``TransactionIndex`` (held in memory, ``MemoryTxnIndex``), whose ``collect`` answers a
  read_committed fetch.

What is modelled is the glue, mirroring the broker's drivers:

* ``SimCoordinator`` is ``TransactionCoordinatorService``: the scanner (``read_committed`` on
  every shard, gathered, then a sender per marker job not already being sent; kicked after
  InitProducerId and EndTxn are answered and after a load, else every ``MARKER_SCAN_S``), the
  senders (WriteTxnMarkers to each partition's leader one after the other, answers in
  ``_DONE`` or ``_GIVE_UP`` count as written, the rest retried every ``MARKER_RETRY_S``, then
  ``complete_transaction``), the coordinator epoch (the ``__transaction_state`` partition's
  leader epoch). A continuation (an awaited answer resuming its task) runs in the same or
  a later millisecond, so independent tasks interleave as the event loop lets them
  (asyncio resumes a task awaiting ``gather`` a turn later than one awaiting the future
  itself);
* ``TxnLog`` is a ``__transaction_state`` partition: the runtime's ``PartitionWriter``, a list
  of encoded records whose high watermark follows the appends after a replication delay.
  A coordinator crash loses every in-memory thing (shards, pending answers, timers,
  senders, the scanner); the new leader's log is the old one cut at a batch boundary
  between the high watermark and the log end (what a follower had), so committed records
  always survive and uncommitted ones may; the new coordinator, with the next coordinator
  epoch, loads every shard from it;
* ``SimPartition`` is a partition leader: ``Log.append_as_leader`` (offsets, producer state,
  the aborted index entry with the last stable offset after the marker, as
  ``Log._end_transaction``), the produce handler (``_verify_transaction`` with the
  coordinator unless the producer's transaction is already open here at that epoch,
  ``_VERIFY_ERRORS``, then acks=all: answered once the high watermark passes the batch),
  the WriteTxnMarkers handler (the marker answered once replicated), and
  ``Partition.last_stable_offset``. A log is a list of ``SimBatch`` (offset, producer id,
  epoch, sequence, control, abort, coordinator epoch, values). A crash cuts the log as for
  the coordinator, and the new leader rebuilds its producer state by replaying the
  batches (``Log._rebuild_producer_state``: with the aborted index rebuilt from the
  markers, as an unclean restart does, or cut at the new end, as ``Log.truncate_to``);
* ``SimProducer`` is a transactional producer as the Java client before transactions v2
  (transaction version 0: the epoch stays from one transaction to the next): InitProducerId;
  then transactions of AddPartitionsToTxn (before the first batch to a partition),
  idempotent batches (sequence numbers per partition, one batch in flight per partition,
  retried with the same sequence; failed at ``DELIVERY_TIMEOUT_MS`` even with a request in
  flight, as ``Sender.getExpiredInflightBatches``), and EndTxn commit or abort once no
  batch is in flight. An abortable error (a batch that failed or whose fate is unknown)
  aborts and then bumps the epoch with InitProducerId and the current producer id and
  epoch (KIP-360); PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and INVALID_PRODUCER_ID_MAPPING
  are fatal: the instance stops. One request to the coordinator at a time, retried on
  CONCURRENT_TRANSACTIONS, a coordinator error or a timeout. Under faults an instance
  sometimes dies mid-transaction (a new instance with the same transactional id starts
  later and fences it), waits past its transaction timeout before committing, or produces
  nothing for that long after its first batch and then goes on with its old epoch (the
  coordinator's timer aborts the transaction; the late batches and the commit are fenced).

Faults come from one ``random.Random(seed)``: message loss, delay (messages of different
connections overtake each other, one connection stays in order, as TCP), slow messages
(held up for most of a request timeout, with what follows on their connection),
duplication (a message delivered twice in a row on its connection: a request processed
again, an answer read twice), slow replication (high watermarks lag), coordinator crashes
and partition leader crashes (at a random time, or right after an append, before it is
replicated).

``VERIFICATION_GUARD`` and ``SCAN_RECHECKS`` are True, as the broker is since the two races
this simulation found were fixed; False brings each race back (see their docstrings).

Invariants (a ``Violation``, an ``AssertionError`` naming the ``Invariant`` that broke; the
test adds the last steps of the run):

1. read_committed: after every step, each partition is read up to its last stable offset
   as a consumer does (a fetch from the last position, the aborted transactions from
   ``collect``, batches of an aborted producer skipped from its first offset to its ABORT
   marker). Every data batch below the last stable offset is visible if and only if the
   coordinator transaction it was written in has a COMMIT decision in the committed
   ``__transaction_state`` log (a PrepareCommit record below the high watermark), and is
   hidden if and only if that decision is ABORT; a batch undecided there must not be below
   the last stable offset. What a reader was shown never changes (re-read from the start
   after a leader crash and at the end, with random fetch boundaries). A data batch of a
   coordinator transaction is never appended to a partition after that transaction's
   marker (it would be outside the transaction its records belong to). A transaction is
   completed (CompleteCommit / CompleteAbort committed) only once each of its partitions has
   its marker (or refused it). A producer told its commit (or abort) succeeded has that
   decision committed, at its epoch.
2. the last stable offset: the producer state's open transactions are exactly those the
   log holds (a producer's transactional batches after its last marker), and the last
   stable offset is at most the first offset of each, and at most the high watermark.
3. fencing: a data batch is never appended with an epoch older than one the partition's
   log already has for its producer id (the fencing bump reached it), and EndTxn is only
   accepted with the epoch the decision was taken at (checked with 1).
4. after healing (no faults, every node up, producers finishing their transaction and
   starting none) the cluster becomes quiet within a bound: no coordinator transaction
   open or preparing, no marker job, every partition's producer state without an open
   transaction and its last stable offset at its log end; every coordinator transaction
   that began is decided, and wholly visible or wholly hidden on every partition; every
   transaction a producer was told committed has each acknowledged batch visible exactly
   once.
5. replay: after every append to ``__transaction_state`` the live shard equals a shard that
   replayed the decoded log (``describe`` of every transactional id, less what the log does
   not store: the epoch before the last bump, and with value version 0 the previous and
   next producer ids and the client version); after each coordinator restart the loaded
   shards equal it too, and at the end so do shards a new runtime loads from the log.
"""

from __future__ import annotations

import bisect
import collections
import enum
import heapq
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ottla.broker.coordinators.coordinator_service import partition_for
from ottla.broker.coordinators.transaction_markers import (
    _DONE,
    _GIVE_UP,
    MARKER_RETRY_S,
    MARKER_SCAN_S,
)
from ottla.coordinator.runtime import CoordinatorResult, CoordinatorRuntime, ShardContext
from ottla.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
)
from ottla.coordinator.transaction.shard import (
    MarkerJob,
    ProducerIdAndEpoch,
    TransactionConfig,
    TransactionCoordinatorShard,
    TransactionRecord,
    decode_record,
    encode_record,
)
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import CONTROL_FLAG, NO_SEQUENCE, TRANSACTIONAL_FLAG, BatchHeader
from ottla.storage.producer_state import ProducerStateManager
from ottla.storage.transaction_index import AbortedTxn, TransactionIndex

S = TransactionState
TOPIC = "orders"
PARTITIONS = 4
TXN_TOPIC = "__transaction_state"
TXN_PARTITIONS = 2
TXN_TPS = tuple((TXN_TOPIC, i) for i in range(TXN_PARTITIONS))
TRANSACTIONAL_IDS = ("payments", "billing", "shipping", "invoices")
"""Two on each ``__transaction_state`` partition."""

RPC_TIMEOUT_MS = 500
"""Every request's timeout (request.timeout.ms, the broker's verification and marker
requests, the marker's wait for replication), scaled down as the rest."""
MARKER_RETRY_MS = round(MARKER_RETRY_S * 1000)
MARKER_SCAN_MS = round(MARKER_SCAN_S * 1000)
TXN_TIMEOUT_MS = 2_500
"""transaction.timeout.ms of every producer."""
CONFIG = TransactionConfig(max_timeout_ms=900_000, id_expiration_ms=604_800_000,
                           abort_interval_ms=200, expire_interval_ms=3_600_000)
DELIVERY_TIMEOUT_MS = 1_500
"""delivery.timeout.ms: a batch not acknowledged by then has failed (its fate unknown)."""
BACKOFF_MS = (10, 50)
"""retry.backoff.ms, drawn."""
TRACE_LENGTH = 200

CTxn = tuple[str, int, int]
"""A coordinator transaction: (transactional id, producer id, start ms). The start
timestamp the coordinator stores when a transaction begins tells apart the transactions
one producer runs at one epoch (a v1 client keeps its epoch from one to the next)."""
Local = tuple[str, int, int]
"""A producer's transaction: (transactional id, producer instance, its number there)."""
Node = tuple[Any, ...]

VERIFICATION_GUARD = True
"""The broker's VerificationGuard (``produce.py``'s ``_check_guard``, Kafka's): a leader
takes the producer's guard when it asks the coordinator to verify a batch, and appends
the verified batch only if nothing of that producer (its marker above all) was appended
meanwhile or the batch joins a transaction already open there; else
TRANSACTION_ABORTABLE. False models the bug this simulation found (seed 147): a marker
written while the verification was on the wire did not stop the append, which opened a
transaction nobody ended. (The model has changed since: no seed of 1..700 fails with it
False any more, so no mutation test holds the checker to this race.)"""
SCAN_RECHECKS = True
"""``TransactionCoordinatorService._scan_forever``: the scanner starts a sender for a job of
its committed read only if the live shard still has it pending (``is_pending``). False
models the bug this simulation found (seed 20): a read released after the job's sender
completed it started the job again, and its markers ended the id's next transaction."""

RETRIABLE = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out, ErrorCode.not_enough_replicas,
    ErrorCode.not_leader_or_follower})
FATAL = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch,
                   ErrorCode.invalid_producer_id_mapping})

VERIFY_ERRORS = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.network_exception: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
}
"""``ottla.broker.handlers.produce._VERIFY_ERRORS`` (what a failed verification answers the
producer), copied so that this module imports none of the request handlers; a test
checks the copy."""


# --- what the checker checks ---------------------------------------------------------------


class Invariant(enum.Enum):
    """The rules a run is held to (numbered as in the module's docstring), one member per
    rule, so that a test can tell which rule caught a run."""

    READ_COMMITTED = "1. below the last stable offset, shown iff decided COMMIT"
    SHOWN_STAYS = "1. what a reader was shown never changes"
    WRITE_IN_TRANSACTION = "1. a data batch is appended after its partition is added, " \
                           "before its marker"
    ONE_DECISION = "1. a transaction is decided once and completed as decided"
    MARKERS_BEFORE_COMPLETE = "1. a transaction completes once each partition has its marker"
    ANSWERS_COMMITTED = "1, 3. what a producer is answered (added, ended) is committed, " \
                        "at its epoch"
    OPEN_TRANSACTIONS = "2. the producer state's open transactions are the log's"
    LAST_STABLE_OFFSET = "2. the last stable offset is at most the first open transaction " \
                         "and the high watermark"
    FENCED = "3. no batch is appended with an epoch older than its producer's there"
    QUIET = "4. after healing the cluster is quiet within a bound"
    ALL_OR_NOTHING = "4. every transaction decided, wholly shown or hidden, its acknowledged " \
                     "writes seen once"
    REPLAY = "5. the live shards equal the log's replay"


class Violation(AssertionError):
    """A broken invariant: the message starts with ``[NAME]`` of its ``invariant``, which a
    mutation test compares with the rule its mutation breaks (a catch by another rule, or
    by the healing bound only, is not the checker seeing the bug)."""

    def __init__(self, invariant: Invariant, detail: str) -> None:
        super().__init__(f"[{invariant.name}] {detail}")
        self.invariant = invariant


# --- messages ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitProducerId:
    rid: int
    tid: str
    timeout_ms: int
    expected: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class AddPartitions:
    rid: int
    tid: str
    producer_id: int
    epoch: int
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class EndTxn:
    rid: int
    tid: str
    producer_id: int
    epoch: int
    commit: bool


@dataclass(frozen=True, slots=True)
class CoordinatorAnswer:
    rid: int
    answer: Any
    """The shard's response, or the ErrorCode of a request that failed."""


@dataclass(frozen=True, slots=True)
class Produce:
    rid: int
    tid: str
    producer_id: int
    epoch: int
    sequence: int
    values: tuple[str, ...]
    local: Local


@dataclass(frozen=True, slots=True)
class ProduceAnswer:
    rid: int
    error: ErrorCode
    offset: int = -1


@dataclass(frozen=True, slots=True)
class Verify:
    """AddPartitionsToTxn ``verify_only`` (v4+), from a partition leader."""

    rid: int
    tid: str
    producer_id: int
    epoch: int
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class VerifyAnswer:
    rid: int
    answers: dict[tuple[str, int], ErrorCode] | ErrorCode


@dataclass(frozen=True, slots=True)
class WriteTxnMarkers:
    rid: int
    producer_id: int
    epoch: int
    commit: bool
    coordinator_epoch: int
    partition: int
    ctxn: CTxn
    """The checker's note of the coordinator transaction; the partition ignores it."""


@dataclass(frozen=True, slots=True)
class MarkersAnswer:
    rid: int
    error: ErrorCode


@dataclass
class Faults:
    loss: float = 0.0
    duplicate: float = 0.0
    slow: float = 0.0
    """How often a message is held up for most of a request timeout (a retransmission,
    a stalled connection), and what follows it on its connection with it."""
    max_delay_ms: int = 10
    replication_ms: int = 10


@dataclass
class Stats:
    transactions: int = 0
    commits: int = 0
    aborts: int = 0
    coordinator_crashes: int = 0
    partition_crashes: int = 0
    lost: int = 0
    duplicated: int = 0
    markers_lost: int = 0
    """WriteTxnMarkers requests or answers lost, or timed out."""
    markers_written: int = 0
    markers_refused: int = 0
    """Markers a partition refused (``_GIVE_UP``: an older producer or coordinator epoch)."""
    timed_out: int = 0
    """Transactions the coordinator's timer fenced and aborted."""
    fence_aborts: int = 0
    """Open transactions a new producer instance's InitProducerId fenced and aborted."""
    fenced: int = 0
    """Producer instances stopped by a fencing error."""
    deaths: int = 0
    stalls: int = 0
    epoch_bumps: int = 0
    verify_refused: int = 0
    fenced_writes_refused: int = 0
    """Data batches a partition refused for an old epoch (the coordinator's verification
    or its producer state fenced them)."""
    txn_records_cut: int = 0
    """Uncommitted ``__transaction_state`` records a coordinator failover lost."""
    markers_truncated: int = 0
    """Markers a leader crash cut (above the high watermark: the coordinator writes them
    again)."""
    lso_regressions: int = 0
    """A leader crash lowered a last stable offset (a marker above the high watermark cut)."""
    reads: int = 0
    stale_jobs: int = 0
    """Marker jobs the scanner started for a transaction no longer preparing (the checker's
    count: the service does not look)."""


# --- the network and the event loop ------------------------------------------------------


Event = tuple[int, int, Callable[..., None], tuple[Any, ...]]
"""(at, sequence, function, arguments): the sequence orders events of one millisecond."""


# --- __transaction_state -----------------------------------------------------------------


class TxnLog:
    """One ``__transaction_state`` partition: encoded records, the batch boundaries, the high
    watermark and the leader epoch (the coordinator epoch of its shard)."""

    def __init__(self, tp: tuple[str, int]) -> None:
        self.tp = tp
        self.entries: list[tuple[bytes, bytes | None]] = []
        self.decoded: list[TransactionRecord] = []
        self.batch_ends: list[int] = []
        self.hw = 0
        self.leader_epoch = 0
        self.checked = 0
        """How far the checker has taken decisions from (committed records only)."""

    @property
    def end(self) -> int:
        return len(self.entries)

    def truncate(self, end: int) -> None:
        del self.entries[end:]
        del self.decoded[end:]
        self.batch_ends = [e for e in self.batch_ends if e <= end]


class TxnLogs:
    """The coordinator runtime's ``PartitionWriter`` over the ``TxnLog``s."""

    def __init__(self, sim: TransactionCluster) -> None:
        self.sim = sim
        self.logs = {tp: TxnLog(tp) for tp in TXN_TPS}
        self.mirrors = {tp: self.fresh_shard(tp) for tp in TXN_TPS}
        """A shard fed the decoded records as they are appended (invariant 5)."""

    @staticmethod
    def fresh_shard(tp: tuple[str, int]) -> TransactionCoordinatorShard:
        runtime: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
            EmptyWriter(), lambda ctx: TransactionCoordinatorShard(ctx, CONFIG))
        return TransactionCoordinatorShard(ShardContext(runtime, tp), CONFIG)

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        sim = self.sim
        log = self.logs[tp]
        for record in records:
            key, value = encode_record(record, sim.value_version)
            decoded = decode_record(key, value)
            log.entries.append((key, value))
            log.decoded.append(decoded)
            self.mirrors[tp].replay(-1, decoded)
            sim.note_record(tp, decoded)
        log.batch_ends.append(log.end)
        sim.check_replay(tp)
        sim.replicate_txn_log(log)
        if "coordinator" in sim.crash_after_append:
            sim.crash_after_append.discard("coordinator")
            sim.after(0, sim.crash_coordinator)
        return log.end

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return self.logs[tp].hw

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        log = self.logs[tp]
        for offset, (key, value) in enumerate(list(log.entries)):
            yield offset, decode_record(key, value)

    def rebuild_mirror(self, tp: tuple[str, int]) -> None:
        mirror = self.mirrors[tp] = self.fresh_shard(tp)
        for offset, record in self.read(tp):
            mirror.replay(offset, record)


class EmptyWriter:
    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        raise AssertionError("the checker's shards write nothing")

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return 0

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        return iter(())


def stored(md: TransactionMetadata, value_version: int) -> TransactionMetadata:
    """What of ``md`` the log keeps (``TransactionMetadata.from_value``)."""
    md = replace(md, last_producer_epoch=NO_PRODUCER_EPOCH)
    if value_version == 0:
        md = replace(md, previous_producer_id=NO_PRODUCER_ID, next_producer_id=NO_PRODUCER_ID,
                     client_version=0)
    return md


# --- the coordinator ---------------------------------------------------------------------


class Sender:
    """``TransactionCoordinatorService._send`` for one marker job."""

    def __init__(self, coordinator: SimCoordinator, tp: tuple[str, int], job: MarkerJob,
                 ctxn: CTxn) -> None:
        self.coordinator = coordinator
        self.sim = coordinator.sim
        self.tp = tp
        self.job = job
        self.ctxn = ctxn
        self.key = (job.transactional_id, job.producer_id, job.producer_epoch)
        self.remaining = set(job.partitions)
        self.queue: list[tuple[str, int]] = []
        self.done: set[tuple[str, int]] = set()
        self.epoch = 0

    def finish(self) -> None:
        if self.coordinator.sending.get(self.key) is self:
            del self.coordinator.sending[self.key]

    def round(self) -> None:
        coordinator = self.coordinator
        if not coordinator.alive:
            return
        if self.tp not in coordinator.runtime.contexts:
            self.finish()
            return
        self.epoch = self.sim.txn_logs.logs[self.tp].leader_epoch
        self.sim.note("coordinator: sending the {} markers of {} to {}",
                      "COMMIT" if self.job.commit else "ABORT", self.ctxn,
                      sorted(p for _, p in self.remaining))
        self.queue = sorted(self.remaining)
        self.sim.rng.shuffle(self.queue)  # a set's order
        self.done = set()
        self.next_request()

    def next_request(self) -> None:
        coordinator, sim = self.coordinator, self.sim
        if not coordinator.alive:
            return
        while self.queue:
            tp = self.queue.pop(0)
            partition = sim.partitions[tp[1]]
            if not partition.alive:
                continue  # no leader: left for the next round
            rid = sim.rid()
            coordinator.calls[rid] = lambda answer, tp=tp: self.answered(tp, answer)
            sim.send(coordinator.node, partition.node, "markers", WriteTxnMarkers(
                rid, self.job.producer_id, self.job.producer_epoch, self.job.commit,
                self.epoch, tp[1], self.ctxn))
            sim.after(RPC_TIMEOUT_MS, self.timed_out, rid)
            return
        self.remaining -= self.done
        if self.remaining:
            sim.after(MARKER_RETRY_MS, self.round)
        else:
            self.complete()

    def timed_out(self, rid: int) -> None:
        if self.coordinator.alive and self.coordinator.calls.pop(rid, None) is not None:
            self.sim.stats.markers_lost += 1
            self.next_request()

    def answered(self, tp: tuple[str, int], answer: MarkersAnswer) -> None:
        if answer.error in _DONE or answer.error in _GIVE_UP:
            self.done.add(tp)
            if answer.error in _GIVE_UP:
                self.sim.stats.markers_refused += 1
                self.sim.note("coordinator: marker of {} for {} refused: {}", self.ctxn, tp,
                              answer.error.name)
        self.sim.resume(self.next_request)

    def complete(self) -> None:
        coordinator, job = self.coordinator, self.job

        def reply(response: Any) -> None:
            self.sim.resume(self.completed, response)

        try:
            coordinator.runtime.write(self.tp, lambda shard, now: shard.complete_transaction(
                now, job.transactional_id, job.producer_id, job.producer_epoch), reply,
                self.sim.now)
        except KafkaError:
            self.finish()

    def completed(self, response: Any) -> None:
        if self.coordinator.alive:
            self.sim.note("coordinator: markers of {} written ({})", self.ctxn, response)
            self.finish()


class SimCoordinator:
    """One incarnation of the broker leading every ``__transaction_state`` partition."""

    def __init__(self, sim: TransactionCluster, incarnation: int) -> None:
        self.sim = sim
        self.incarnation = incarnation
        self.node: Node = ("coordinator", incarnation)
        self.alive = True
        self.runtime: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
            sim.txn_logs, lambda ctx: TransactionCoordinatorShard(ctx, CONFIG))
        self.sending: dict[tuple[str, int, int], Sender] = {}
        self.calls: dict[int, Callable[[Any], None]] = {}
        self.scanner = "idle"
        """idle, scanning (a read of every shard awaited), waiting (for a kick or the next
        round), or scheduled (about to scan)."""
        self.wake = False
        self.wait_token = 0
        self.scan_started = 0
        self.in_timer = False
        self.poll_at: int | None = None

    def start(self) -> None:
        self.runtime.on_timer_change = self.deadline_changed
        for tp in TXN_TPS:
            self.runtime.load(tp, self.sim.now)
            self.kick()  # on_loaded

    def deadline_changed(self, deadline: int) -> None:
        """The service's ``DeadlineTimer``: poll the runtime at its earliest deadline."""
        if self.poll_at is None or deadline < self.poll_at:
            self.poll_at = deadline
            self.sim.after(max(0, deadline - self.sim.now), self.poll, deadline)

    def poll(self, deadline: int) -> None:
        if not self.alive or self.poll_at != deadline:
            return
        self.poll_at = None
        self.in_timer = True
        try:
            self.runtime.poll(self.sim.now)
        finally:
            self.in_timer = False
        following = self.runtime.next_deadline()
        if following is not None:
            self.deadline_changed(following)

    # --- requests -----------------------------------------------------------------------

    def receive(self, source: Node, message: Any) -> None:
        sim = self.sim
        if isinstance(message, MarkersAnswer):
            call = self.calls.pop(message.rid, None)
            if call is not None:
                call(message)
            return
        tp = (TXN_TOPIC, partition_for(message.tid, TXN_PARTITIONS))
        if isinstance(message, Verify):
            try:
                answers: Any = self.runtime.read(tp, lambda shard: shard.verify_partitions(
                    message.tid, message.producer_id, message.epoch, message.partitions))
            except KafkaError as e:
                answers = e.code
            sim.send(self.node, source, "verify", VerifyAnswer(message.rid, answers))
            return
        operation: Callable[[TransactionCoordinatorShard, int], CoordinatorResult]
        if isinstance(message, InitProducerId):
            operation = lambda shard, now: self.init_producer_id(shard, now, message)  # noqa: E731
        elif isinstance(message, AddPartitions):
            operation = lambda shard, now: self.add_partitions(shard, now, message)  # noqa: E731
        else:
            operation = lambda shard, now: shard.end_transaction(  # noqa: E731
                now, message.tid, message.producer_id, message.epoch, message.commit, 0,
                sim.allocate_producer_id)
        kick = not isinstance(message, AddPartitions)

        def reply(response: Any) -> None:
            sim.resume(self.answer, source, message.rid, response, kick)

        try:
            self.runtime.write(tp, operation, reply, sim.now)
        except KafkaError as e:
            reply(e)

    def answer(self, source: Node, rid: int, response: Any, kick: bool) -> None:
        if not self.alive:
            return
        if isinstance(response, KafkaError):
            response = response.code
        elif kick:
            self.kick()  # the service kicks once the write's answer is released
        self.sim.send(self.node, source, "client", CoordinatorAnswer(rid, response))

    def init_producer_id(self, shard: TransactionCoordinatorShard, now: int,
                         message: InitProducerId) -> CoordinatorResult:
        result = shard.init_producer_id(now, message.tid, message.timeout_ms,
                                        message.expected, self.sim.allocate_producer_id)
        if any(r.value is not None and r.value.transaction_status == S.PREPARE_ABORT
               for r in result.records):
            self.sim.stats.fence_aborts += 1
            self.sim.note("coordinator: InitProducerId of {} fences its open transaction",
                          message.tid)
        return result

    @staticmethod
    def add_partitions(shard: TransactionCoordinatorShard, now: int, message: AddPartitions
                       ) -> CoordinatorResult:
        """The shard's answer, with the start of the transaction the partitions are now in
        (for the checker: the client does not see it)."""
        result = shard.add_partitions(now, message.tid, message.producer_id, message.epoch,
                                      message.partitions)
        md = result.records[-1].metadata if result.records else \
            shard.transactions.get(message.tid)
        return CoordinatorResult(result.records, (result.response,
                                                  -1 if md is None else md.start_ms),
                                 result.replay)

    # --- the marker scanner ---------------------------------------------------------------

    def kick(self) -> None:
        self.wake = True
        if self.scanner in ("idle", "waiting"):
            self.scanner = "scheduled"
            self.wait_token += 1
            self.sim.resume(self.scan)

    def scan(self) -> None:
        if not self.alive:
            return
        self.scanner = "scanning"
        self.wake = False
        tps = list(self.runtime.contexts)
        results: dict[tuple[str, int], Any] = {}
        outstanding = set(tps)

        def operation(shard: TransactionCoordinatorShard) -> list[tuple[Any, ...]]:
            return [(shard.ctx.tp, job, shard.transactions[job.transactional_id])
                    for job in shard.pending_markers()]

        def reply(tp: tuple[str, int], answer: Any) -> None:
            results[tp] = answer
            outstanding.discard(tp)
            if not outstanding:
                self.sim.resume(self.scanned, tps, results)

        for tp in tps:
            try:
                self.runtime.read_committed(tp, operation,
                                            lambda answer, tp=tp: reply(tp, answer))
            except KafkaError as e:
                reply(tp, e)
        self.scan_started = self.sim.now

    def scanned(self, tps: list[tuple[str, int]], results: dict[tuple[str, int], Any]
                ) -> None:
        if not self.alive:
            return
        for tp in tps:
            answer = results[tp]
            if isinstance(answer, KafkaError):
                continue
            for shard_tp, job, md in answer:
                key = (job.transactional_id, job.producer_id, job.producer_epoch)
                if key in self.sending:
                    continue
                ctxn = (job.transactional_id, job.producer_id, md.start_ms)
                shard = self.runtime.contexts[shard_tp].shard
                current = shard.transactions.get(job.transactional_id)
                if not shard.is_pending(job):
                    self.sim.stats.stale_jobs += 1
                    self.sim.note("coordinator: the scan of {} ms finds {} to send, which is "
                                  "{} now", self.scan_started, ctxn,
                                  None if current is None else current.state.kafka_name)
                    if SCAN_RECHECKS:
                        continue
                sender = self.sending[key] = Sender(self, shard_tp, job, ctxn)
                self.sim.resume(sender.round)
        if self.wake:
            self.scanner = "scheduled"
            self.sim.resume(self.scan)
        else:
            self.scanner = "waiting"
            self.wait_token += 1
            self.sim.after(MARKER_SCAN_MS, self.scan_due, self.wait_token)

    def scan_due(self, token: int) -> None:
        if self.alive and self.scanner == "waiting" and token == self.wait_token:
            self.scanner = "scheduled"
            self.scan()


# --- a partition leader ------------------------------------------------------------------


class MemoryTxnIndex(TransactionIndex):
    """The real aborted-transaction index (``collect``, ``truncate_to``, ``reset``) held in
    memory: ``append`` keeps the entries without the file, with the same ordering rule."""

    def __init__(self) -> None:  # no file
        self.path = ""
        self.base_offset = 0
        self.entries: list[AbortedTxn] = []

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and self.entries[-1].last_offset >= txn.last_offset:
            raise ValueError(f"the last offset of aborted transactions must increase: "
                             f"{txn.last_offset} after {self.entries[-1].last_offset}")
        self.entries.append(txn)


@dataclass(frozen=True, slots=True)
class SimBatch:
    offset: int
    count: int
    producer_id: int
    epoch: int
    sequence: int
    timestamp: int
    control: bool = False
    abort: bool = False
    coordinator_epoch: int = -1
    values: tuple[str, ...] = ()
    local: Local | None = None
    """A data batch's producer transaction (the checker's note)."""
    ctxn: CTxn | None = None
    """A marker's coordinator transaction (the checker's note)."""

    @property
    def last_offset(self) -> int:
        return self.offset + self.count - 1

    @property
    def header(self) -> BatchHeader:
        attributes = TRANSACTIONAL_FLAG | (CONTROL_FLAG if self.control else 0)
        return BatchHeader(self.offset, 0, 0, 2, 0, attributes, self.count - 1, self.timestamp,
                           self.timestamp, self.producer_id, self.epoch, self.sequence,
                           self.count)


@dataclass(slots=True)
class Waiting:
    """An append waiting for the high watermark (acks=all, or a marker)."""

    required: int
    source: Node
    channel: str
    answer: Any
    timeout: Any


def read_committed(batches: list[SimBatch], aborted: list[AbortedTxn]) -> dict[int, bool]:
    """Whether a read_committed consumer shows each data batch of one fetch (Kafka's
    ``CompletedFetch``): the aborted transactions by first offset, a producer among the
    aborted from its first offset until its ABORT marker."""
    queue = sorted(aborted, key=lambda t: t.first_offset)
    aborted_ids: set[int] = set()
    i = 0
    shown: dict[int, bool] = {}
    for batch in batches:
        while i < len(queue) and queue[i].first_offset <= batch.last_offset:
            aborted_ids.add(queue[i].producer_id)
            i += 1
        if batch.control:
            if batch.abort:
                aborted_ids.discard(batch.producer_id)
            continue
        shown[batch.offset] = batch.producer_id not in aborted_ids
    return shown


class SimPartition:
    def __init__(self, sim: TransactionCluster, index: int) -> None:
        self.sim = sim
        self.index = index
        self.tp = (TOPIC, index)
        self.log: list[SimBatch] = []
        self.offsets: list[int] = []
        self.hw = 0
        self.producer_state = ProducerStateManager()
        self.txn_index = MemoryTxnIndex()
        self.incarnation = 0
        self.alive = True
        self.waiting: list[Waiting] = []
        self.verifying: dict[int, tuple[Node, Produce, int]] = {}
        # The checker's own view of the log.
        self.open: dict[int, int] = {}
        """Producer id -> first offset of its open transaction, from the batches."""
        self.max_epoch: dict[int, int] = {}
        self.marked: set[CTxn] = set()
        """The coordinator transactions whose marker the log has."""
        self.refused: set[CTxn] = set()
        """The coordinator transactions whose marker this partition refused (``_GIVE_UP``)."""
        self.read_position = 0
        self.shown: dict[int, bool] = {}
        """Data batch offset -> what a read_committed reader was shown."""

    @property
    def node(self) -> Node:
        return ("partition", self.index, self.incarnation)

    @property
    def end(self) -> int:
        return self.log[-1].last_offset + 1 if self.log else 0

    @property
    def last_stable_offset(self) -> int:
        """``Partition.last_stable_offset``."""
        unstable = self.producer_state.unstable_below(self.hw)
        return self.hw if unstable is None else min(unstable, self.hw)

    # --- appends (Log.append_as_leader) ------------------------------------------------

    def _add(self, batch: SimBatch) -> None:
        self.log.append(batch)
        self.offsets.append(batch.offset)
        self._observe(batch)
        self.sim.replicate_partition(self)
        if self.index in self.sim.crash_after_append:
            self.sim.crash_after_append.discard(self.index)
            self.sim.after(0, self.sim.crash_partition, self)

    def _observe(self, batch: SimBatch) -> None:
        pid = batch.producer_id
        self.max_epoch[pid] = max(self.max_epoch.get(pid, -1), batch.epoch)
        if batch.control:
            self.open.pop(pid, None)
            if batch.ctxn is not None:
                self.marked.add(batch.ctxn)
        elif pid not in self.open:
            self.open[pid] = batch.offset

    def append_data(self, request: Produce) -> tuple[int, int]:
        sim = self.sim
        batch = SimBatch(self.end, len(request.values), request.producer_id, request.epoch,
                         request.sequence, sim.now, values=request.values,
                         local=request.local)
        duplicate = self.producer_state.check(batch.header)
        if duplicate is not None:
            return duplicate.first_offset, duplicate.last_offset
        sim.check_data_append(self, batch)
        sim.note("partition {}: {} (producer {} epoch {} seq {}) at {}", self.index,
                 batch.values[0], batch.producer_id, batch.epoch, batch.sequence, batch.offset)
        self._add(batch)
        self.producer_state.update(batch.header, batch.offset, batch.last_offset)
        sim.check_partition(self)
        return batch.offset, batch.last_offset

    def append_marker(self, request: WriteTxnMarkers) -> SimBatch:
        self.producer_state.check_marker(request.producer_id, request.epoch,
                                         request.coordinator_epoch)
        batch = SimBatch(self.end, 1, request.producer_id, request.epoch, NO_SEQUENCE,
                         self.sim.now, control=True, abort=not request.commit,
                         coordinator_epoch=request.coordinator_epoch, ctxn=request.ctxn)
        self.sim.note("partition {}: {} marker of producer {} epoch {} ({}) at {}", self.index,
                      "ABORT" if batch.abort else "COMMIT", batch.producer_id, batch.epoch,
                      batch.ctxn, batch.offset)
        self._add(batch)
        self._end_transaction(batch, reindex=True)
        self.sim.check_partition(self)
        return batch

    def _end_transaction(self, batch: SimBatch, reindex: bool) -> None:
        """``Log._end_transaction``."""
        completed = self.producer_state.end_transaction(batch.header, batch.offset,
                                                        batch.abort, batch.coordinator_epoch)
        if batch.abort and reindex:
            unstable = self.producer_state.first_unstable_offset()
            self.txn_index.append(AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset,
                completed.last_offset + 1 if unstable is None else unstable))

    def rebuild(self, reindex: bool) -> None:
        """``Log._rebuild_producer_state`` over the whole log."""
        self.producer_state.truncate()
        if reindex:
            self.txn_index.reset()
        for batch in self.log:
            if batch.producer_id < 0:
                continue
            if batch.control:
                self._end_transaction(batch, reindex)
            else:
                self.producer_state.update(batch.header, batch.offset, batch.last_offset)

    def truncate(self, end: int) -> None:
        cut = bisect.bisect_left(self.offsets, end)
        del self.log[cut:]
        del self.offsets[cut:]
        self.open, self.max_epoch, self.marked = {}, {}, set()
        for batch in self.log:
            self._observe(batch)

    def fetch(self, start: int, end: int) -> list[SimBatch]:
        return self.log[bisect.bisect_left(self.offsets, start):
                        bisect.bisect_left(self.offsets, end)]

    # --- requests -------------------------------------------------------------------------

    def receive(self, source: Node, message: Any) -> None:
        if isinstance(message, Produce):
            self.produce(source, message)
        elif isinstance(message, WriteTxnMarkers):
            self.write_marker(source, message)
        elif isinstance(message, VerifyAnswer):
            self.verified(message)

    def produce(self, source: Node, request: Produce) -> None:
        """``handle_produce`` with ``_verify_transaction``: the batch would open the
        producer's transaction here unless it is open at this epoch already."""
        sim = self.sim
        state = self.producer_state.producers.get(request.producer_id)
        if state is not None and state.current_txn_first_offset is not None and \
                state.producer_epoch == request.epoch:
            self.append_and_wait(source, request)
            return
        coordinator = sim.coordinator
        if coordinator is None:
            self.answer_produce(source, request.rid,
                                VERIFY_ERRORS[ErrorCode.coordinator_not_available])
            return
        rid = sim.rid()
        sim.note("partition {}: verifying {} (producer {} epoch {})", self.index,
                 request.values[0], request.producer_id, request.epoch)
        guard = self.producer_state.verification_guard(request.producer_id)
        self.verifying[rid] = (source, request, guard)
        sim.send(self.node, coordinator.node, "verify", Verify(
            rid, request.tid, request.producer_id, request.epoch, frozenset({self.tp})))
        sim.after(RPC_TIMEOUT_MS, self.verify_timed_out, rid, self.incarnation)

    def verify_timed_out(self, rid: int, incarnation: int) -> None:
        if incarnation == self.incarnation and rid in self.verifying:
            source, request, _ = self.verifying.pop(rid)
            self.answer_produce(source, request.rid,
                                VERIFY_ERRORS[ErrorCode.coordinator_not_available])

    def verified(self, answer: VerifyAnswer) -> None:
        found = self.verifying.pop(answer.rid, None)
        if found is None:
            return
        source, request, guard = found
        if isinstance(answer.answers, ErrorCode):
            error = answer.answers
        else:
            error = answer.answers.get(self.tp, ErrorCode.invalid_txn_state)
        if error != ErrorCode.none:
            self.sim.stats.verify_refused += 1
            self.answer_produce(source, request.rid, VERIFY_ERRORS.get(error, error))
            return
        self.sim.note("partition {}: {} verified", self.index, request.values[0])
        # produce.py's _check_guard over the real ProducerStateManager.
        if VERIFICATION_GUARD and not self.producer_state.has_ongoing(request.producer_id) \
                and not self.producer_state.guard_holds(request.producer_id, guard):
            self.sim.stats.verify_refused += 1
            self.answer_produce(source, request.rid, ErrorCode.transaction_abortable)
            return
        self.append_and_wait(source, request)

    def append_and_wait(self, source: Node, request: Produce) -> None:
        try:
            first, last = self.append_data(request)
        except KafkaError as e:
            self.answer_produce(source, request.rid, e.code)
            return
        self.wait(last + 1, source, "client", ProduceAnswer(request.rid, ErrorCode.none, first),
                  ProduceAnswer(request.rid, ErrorCode.request_timed_out))

    def answer_produce(self, source: Node, rid: int, error: ErrorCode) -> None:
        if error == ErrorCode.invalid_producer_epoch:
            self.sim.stats.fenced_writes_refused += 1
        self.sim.send(self.node, source, "client", ProduceAnswer(rid, error))

    def write_marker(self, source: Node, request: WriteTxnMarkers) -> None:
        """``handle_write_txn_markers`` for this partition."""
        try:
            batch = self.append_marker(request)
        except KafkaError as e:
            if e.code in _GIVE_UP:
                self.refused.add(request.ctxn)
            self.sim.send(self.node, source, "markers", MarkersAnswer(request.rid, e.code))
            return
        self.sim.stats.markers_written += 1
        self.wait(batch.offset + 1, source, "markers",
                  MarkersAnswer(request.rid, ErrorCode.none),
                  MarkersAnswer(request.rid, ErrorCode.request_timed_out))

    def wait(self, required: int, source: Node, channel: str, answer: Any, timeout: Any
             ) -> None:
        if self.hw >= required:
            self.sim.send(self.node, source, channel, answer)
            return
        waiting = Waiting(required, source, channel, answer, timeout)
        self.waiting.append(waiting)
        self.sim.after(RPC_TIMEOUT_MS, self.wait_timed_out, waiting, self.incarnation)

    def wait_timed_out(self, waiting: Waiting, incarnation: int) -> None:
        if incarnation == self.incarnation and waiting in self.waiting:
            self.waiting.remove(waiting)
            self.sim.send(self.node, waiting.source, waiting.channel, waiting.timeout)

    def replicated(self, incarnation: int, target: int) -> None:
        if incarnation != self.incarnation or not self.alive or target <= self.hw:
            return
        self.hw = min(target, self.end)
        ready = [w for w in self.waiting if w.required <= self.hw]
        self.waiting = [w for w in self.waiting if w.required > self.hw]
        for w in ready:
            self.sim.send(self.node, w.source, w.channel, w.answer)
        self.sim.check_partition(self)


# --- a producer --------------------------------------------------------------------------


@dataclass(slots=True)
class InFlight:
    sequence: int
    values: tuple[str, ...]
    first_sent: int
    rid: int | None = None
    """None while backing off before a retry."""


@dataclass(slots=True)
class LocalTxn:
    local: Local
    plan: dict[int, int]
    """Partition -> batches to write."""
    groups: list[tuple[int, ...]]
    """The AddPartitionsToTxn requests, in order."""
    commit: bool
    stall_ms: int
    """The application waits this long before committing."""
    pause_ms: int
    """The application produces nothing for this long after its first batch is
    acknowledged, then goes on with its epoch (the batches it produces then are new: their
    delivery timeout starts then)."""
    added: set[int] = field(default_factory=set)
    next_group: int = 0
    ctxn: CTxn | None = None
    written: dict[int, int] = field(default_factory=dict)
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    failed: bool = False
    add_attempted: bool = False
    ending: bool = False


class SimProducer:
    def __init__(self, sim: TransactionCluster, tid: str, instance: int) -> None:
        self.sim = sim
        self.tid = tid
        self.instance = instance
        self.node: Node = ("producer", tid, instance)
        self.alive = True
        self.producer_id = NO_PRODUCER_ID
        self.epoch = NO_PRODUCER_EPOCH
        self.sequences: dict[int, int] = {}
        self.request: tuple[int, str, Any] | None = None
        """The one coordinator request in flight: (rid, kind, what to send again)."""
        self.txn: LocalTxn | None = None
        self.count = 0
        self.bump = False
        """An abortable error happened: InitProducerId bumps the epoch after the abort."""
        self.paused_until = 0

    def __repr__(self) -> str:
        return f"{self.tid}#{self.instance}"

    # --- the coordinator ----------------------------------------------------------------

    def ask(self, kind: str, payload: Any) -> None:
        sim = self.sim
        rid = sim.rid()
        self.request = (rid, kind, payload)
        if self.paused_until > sim.now:
            sim.after(self.paused_until - sim.now, self.resend, rid)
            return
        if sim.coordinator is None:  # FindCoordinator fails: try again shortly
            sim.after(sim.rng.randint(*BACKOFF_MS), self.answered, rid,
                      ErrorCode.coordinator_not_available)
            return
        if kind == "init":
            message: Any = InitProducerId(rid, self.tid, TXN_TIMEOUT_MS, payload)
        elif kind == "add":
            message = AddPartitions(rid, self.tid, self.producer_id, self.epoch,
                                    frozenset((TOPIC, p) for p in payload))
        else:
            message = EndTxn(rid, self.tid, self.producer_id, self.epoch, payload)
        sim.send(self.node, sim.coordinator.node, "client", message)
        sim.after(RPC_TIMEOUT_MS, self.answered, rid, ErrorCode.request_timed_out)

    def again(self, kind: str, payload: Any) -> None:
        rid = self.sim.rid()
        self.request = (rid, kind, payload)
        self.sim.after(self.sim.rng.randint(*BACKOFF_MS), self.resend, rid)

    def resend(self, rid: int) -> None:
        if self.alive and self.request is not None and self.request[0] == rid:
            self.ask(self.request[1], self.request[2])

    def answered(self, rid: int, answer: Any) -> None:
        if not self.alive or self.request is None or self.request[0] != rid:
            return
        _, kind, payload = self.request
        self.request = None
        if isinstance(answer, ProducerIdAndEpoch):
            error = answer.error
        elif isinstance(answer, tuple):
            error = answer[0]
        else:
            error = answer
        if error in RETRIABLE:
            self.again(kind, payload)
        elif error in FATAL:
            self.die(f"{kind}: {error.name}", fenced=True)
        elif kind == "init":
            self.initialized(error, answer)
        elif kind == "add":
            self.added(error, payload, answer)
        else:
            self.ended(error, payload)

    def init(self, expected: tuple[int, int] | None) -> None:
        self.ask("init", expected)

    def initialized(self, error: ErrorCode, answer: Any) -> None:
        if error != ErrorCode.none:
            self.die(f"init: {error.name}")
            return
        if (answer.producer_id, answer.producer_epoch) != (self.producer_id, self.epoch):
            self.sequences = {}
        if self.bump:
            self.sim.stats.epoch_bumps += 1
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
        self.bump = False
        self.sim.note("{}: producer id {} epoch {}", self, self.producer_id, self.epoch)
        self.sim.after(self.sim.rng.randint(0, 30), self.begin)

    # --- a transaction ------------------------------------------------------------------

    def begin(self) -> None:
        sim = self.sim
        if not self.alive or self.txn is not None or sim.stopping:
            return
        if sim.chaos:
            if sim.op_interval_ms is not None:
                if sim.now < sim.next_operation_ms:  # not yet: it waits its turn
                    sim.after(sim.next_operation_ms - sim.now, self.begin)
                    return
                sim.next_operation_ms = sim.now + sim.op_interval_ms
            sim.operations += 1
        rng = sim.rng
        self.count += 1
        partitions = sorted(rng.sample(range(PARTITIONS), rng.randint(1, 3)))
        plan = {p: rng.randint(1, 3) for p in partitions}
        split = rng.randint(1, len(partitions))
        groups = [tuple(partitions[:split])] + ([tuple(partitions[split:])]
                                                if split < len(partitions) else [])
        commit = rng.random() < 0.7
        stall = pause = 0
        if sim.chaos and rng.random() < 0.08:
            if rng.random() < 0.5 and commit:
                stall = TXN_TIMEOUT_MS + rng.randint(300, 1500)
            else:
                pause = TXN_TIMEOUT_MS + rng.randint(300, 1500)
        txn = self.txn = LocalTxn((self.tid, self.instance, self.count), plan, groups, commit,
                                  stall, pause, written=dict.fromkeys(partitions, 0))
        sim.stats.transactions += 1
        if sim.chaos and rng.random() < 0.06:
            sim.after(rng.randint(0, 1500), self.die_in, txn)
        self.next_group()

    def die_in(self, txn: LocalTxn) -> None:
        if self.alive and self.txn is txn:
            self.die("dies mid-transaction")

    def next_group(self) -> None:
        txn = self.txn
        if txn is None or self.request is not None:
            return
        if not txn.failed and txn.next_group < len(txn.groups):
            txn.add_attempted = True
            self.ask("add", txn.groups[txn.next_group])
        else:
            self.maybe_end()

    def added(self, error: ErrorCode, group: tuple[int, ...], answer: Any) -> None:
        txn = self.txn
        assert txn is not None
        if error != ErrorCode.none:
            self.sim.note("{}: AddPartitionsToTxn {}: {}", self, group, error.name)
            txn.failed = True
            self.maybe_end()
            return
        self.sim.transaction_joined(self, txn, answer[1])
        txn.added.update(group)
        txn.next_group += 1
        self.pump()
        self.next_group()

    def pump(self) -> None:
        txn = self.txn
        if txn is None or txn.failed:
            return
        if self.paused_until > self.sim.now:  # the application produces nothing meanwhile
            self.sim.after(self.paused_until - self.sim.now, self.resume_pump, txn)
            return
        for p in sorted(txn.added):
            if p not in txn.in_flight and txn.written[p] < txn.plan[p]:
                sequence = self.sequences.get(p, 0)
                n = self.sim.rng.randint(1, 3)
                k = txn.written[p]
                values = tuple(f"{self.tid}#{self.instance}.{self.count}/p{p}.b{k}.r{j}"
                               for j in range(n))
                flight = txn.in_flight[p] = InFlight(sequence, values, self.sim.now)
                self.sim.after(DELIVERY_TIMEOUT_MS, self.expire, txn, p, flight)
                self.send_batch(p)

    def send_batch(self, p: int) -> None:
        sim = self.sim
        txn = self.txn
        assert txn is not None
        flight = txn.in_flight[p]
        rid = flight.rid = sim.rid()
        partition = sim.partitions[p]
        if not partition.alive:  # no leader in the metadata
            sim.after(sim.rng.randint(*BACKOFF_MS), self.produced, rid,
                      ErrorCode.not_leader_or_follower)
            return
        sim.send(self.node, partition.node, "client", Produce(
            rid, self.tid, self.producer_id, self.epoch, flight.sequence, flight.values,
            txn.local))
        sim.after(RPC_TIMEOUT_MS, self.produced, rid, ErrorCode.request_timed_out)

    def produced(self, rid: int, error: ErrorCode) -> None:
        txn = self.txn
        if not self.alive or txn is None:
            return
        found = [p for p, f in txn.in_flight.items() if f.rid == rid]
        if not found:
            return
        p = found[0]
        flight = txn.in_flight[p]
        sim = self.sim
        if error == ErrorCode.none:
            del txn.in_flight[p]
            txn.written[p] += 1
            if txn.pause_ms:
                self.paused_until = sim.now + txn.pause_ms
                txn.pause_ms = 0
                sim.stats.stalls += 1
                sim.note("{}: pauses {} ms in the middle of {}", self, self.paused_until
                         - sim.now, txn.local)
            self.sequences[p] = flight.sequence + len(flight.values)
            sim.acknowledged(txn.local, p, flight.values)
            self.pump()
            self.maybe_end()
        elif error in FATAL:
            self.die(f"produce to {p}: {error.name}", fenced=True)
        elif error in RETRIABLE and not txn.failed and \
                sim.now - flight.first_sent < DELIVERY_TIMEOUT_MS:
            flight.rid = None
            sim.after(sim.rng.randint(*BACKOFF_MS), self.retry_batch, txn, p, flight)
        else:
            sim.note("{}: batch to {} failed: {}", self, p, error.name)
            del txn.in_flight[p]
            txn.failed = True
            self.bump = True
            self.maybe_end()

    def resume_pump(self, txn: LocalTxn) -> None:
        if self.alive and self.txn is txn:
            self.pump()
            self.next_group()

    def expire(self, txn: LocalTxn, p: int, flight: InFlight) -> None:
        """``delivery.timeout.ms`` passed: the batch fails even with a request in flight
        (the Java client's ``Sender.getExpiredInflightBatches``), its fate unknown."""
        if self.alive and self.txn is txn and txn.in_flight.get(p) is flight:
            self.sim.note("{}: batch to {} expired", self, p)
            del txn.in_flight[p]
            txn.failed = True
            self.bump = True
            self.maybe_end()

    def retry_batch(self, txn: LocalTxn, p: int, flight: InFlight) -> None:
        if self.alive and self.txn is txn and txn.in_flight.get(p) is flight:
            self.send_batch(p)

    def maybe_end(self) -> None:
        txn = self.txn
        if txn is None or txn.ending or self.request is not None:
            return
        if txn.failed:
            if txn.in_flight:
                if all(f.rid is None for f in txn.in_flight.values()):
                    txn.in_flight.clear()  # backing off: not sent again
                else:
                    return  # the client waits for what is in flight
            self.end(False)
            return
        if txn.next_group < len(txn.groups) or \
                any(txn.written[p] < txn.plan[p] for p in txn.plan):
            return
        if txn.stall_ms:
            txn.ending = True
            self.sim.stats.stalls += 1
            self.sim.note("{}: stalls {} ms before committing", self, txn.stall_ms)
            self.sim.after(txn.stall_ms, self.after_stall, txn)
            return
        self.end(txn.commit)

    def after_stall(self, txn: LocalTxn) -> None:
        if self.alive and self.txn is txn:
            self.ask("end", True)

    def end(self, commit: bool) -> None:
        txn = self.txn
        assert txn is not None
        txn.ending = True
        if not txn.add_attempted:
            self.finished()
            return
        self.ask("end", commit)

    def ended(self, error: ErrorCode, commit: bool) -> None:
        txn = self.txn
        assert txn is not None
        if error == ErrorCode.none:
            self.sim.end_accepted(self, txn, commit)
        elif error == ErrorCode.invalid_txn_state and not commit:
            self.sim.note("{}: nothing to abort", self)
        else:
            self.die(f"EndTxn: {error.name}")
            return
        self.finished()

    def finished(self) -> None:
        self.txn = None
        if self.bump:
            self.init((self.producer_id, self.epoch))
        else:
            self.sim.after(self.sim.rng.randint(0, 50), self.begin)

    def die(self, why: str, fenced: bool = False) -> None:
        sim = self.sim
        self.alive = False
        sim.nodes.pop(self.node, None)
        if fenced:
            sim.stats.fenced += 1
        else:
            sim.stats.deaths += 1
        sim.note("{}: stops ({})", self, why)
        sim.producer_stopped(self)

    def receive(self, source: Node, message: Any) -> None:
        if isinstance(message, CoordinatorAnswer):
            self.answered(message.rid, message.answer)
        elif isinstance(message, ProduceAnswer):
            self.produced(message.rid, message.error)


# --- the cluster -------------------------------------------------------------------------


class TransactionCluster:
    FAULT_KINDS = ("loss", "delay", "duplicate", "slow", "replication", "coordinator-crash",
                   "partition-crash")
    faults_off: frozenset[str] = frozenset()
    """Fault kinds not injected: a fault drawn of one of them is skipped (the shrinker's
    knob; the run stays a function of the seed and this set)."""
    op_interval_ms: int | None = None
    """The least time between two transactions begun under chaos, over all the producers
    (the shrinker's other knob: a producer whose next transaction is due sooner waits;
    its requests within a transaction, retries and timeouts go as they do)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.injected: collections.Counter[str] = collections.Counter()
        self.operations = 0
        """Transactions begun under chaos."""
        self.next_operation_ms = 0
        self.rng = random.Random(seed)
        self.now = 0
        self.chaos = False
        self.stopping = False
        self.faults = Faults()
        self.events: list[Event] = []
        self.seq = itertools.count()
        self.last_delivery: dict[tuple[Node, Node, str], int] = {}
        self.rids = itertools.count(1)
        self.producer_ids = itertools.count(1000)
        self.stats = Stats()
        self.trace: collections.deque[tuple[int, str, tuple[Any, ...]]] = \
            collections.deque(maxlen=TRACE_LENGTH)
        self.value_version = self.rng.choice((0, 1))
        self.nodes: dict[Node, Any] = {}
        self.crash_after_append: set[Any] = set()
        """Nodes to crash right after their next append, before it is replicated."""
        self.txn_logs = TxnLogs(self)
        self.partitions = [SimPartition(self, i) for i in range(PARTITIONS)]
        for partition in self.partitions:
            self.nodes[partition.node] = partition
        self.coordinator: SimCoordinator | None = None
        self.coordinator_incarnation = 0
        self.instances = dict.fromkeys(TRANSACTIONAL_IDS, 0)
        self.producers: dict[str, SimProducer | None] = dict.fromkeys(TRANSACTIONAL_IDS)
        # What the checker knows, beside the system.
        self.ctxn_of: dict[Local, CTxn] = {}
        self.started: dict[CTxn, int] = {}
        """Coordinator transactions begun in the committed log -> the offset."""
        self.decisions: dict[CTxn, tuple[bool, int]] = {}
        """From the committed log: (commit, epoch) of each PrepareCommit / PrepareAbort."""
        self.decided_partitions: dict[CTxn, list[int]] = {}
        self.acked: dict[Local, dict[int, list[str]]] = {}
        self.told_committed: list[Local] = []

        self.start_coordinator()
        for tid in TRANSACTIONAL_IDS:
            self.after(self.rng.randint(0, 100), self.start_producer, tid)
        self.after(self.rng.randint(300, 1200), self.inject_fault)

    # --- the event loop ---------------------------------------------------------------

    def note(self, text: str, *args: Any) -> None:
        self.trace.append((self.now, text, args))

    def history(self) -> str:
        """The last notable steps, one a line."""
        steps = "\n".join(f"{at:>7} ms  {text.format(*args)}" for at, text, args in self.trace)
        return f"(__transaction_state values at version {self.value_version})\n{steps}"

    def rid(self) -> int:
        return next(self.rids)

    def allocate_producer_id(self) -> int:
        return next(self.producer_ids)

    def after(self, delay: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.events, (self.now + delay, next(self.seq), fn, args))

    def resume(self, fn: Callable[..., None], *args: Any) -> None:
        """A task resuming on an answer: in this or a later turn of the event loop."""
        self.after(self.rng.randint(0, 1), fn, *args)

    def send(self, source: Node, dest: Node, channel: str, message: Any) -> None:
        """Lost, or delivered after a random delay; in order on one connection
        (source, dest, channel), perhaps twice in a row."""
        faults = self.faults
        if faults.loss and self.rng.random() < faults.loss:
            self.stats.lost += 1
            if isinstance(message, (WriteTxnMarkers, MarkersAnswer)):
                self.stats.markers_lost += 1
            return
        at = self.now + self.rng.randint(1, faults.max_delay_ms)
        if faults.slow and self.rng.random() < faults.slow:
            at += self.rng.randint(RPC_TIMEOUT_MS // 2, RPC_TIMEOUT_MS)
        key = (source, dest, channel)
        at = max(at, self.last_delivery.get(key, 0))
        self.last_delivery[key] = at
        heapq.heappush(self.events, (at, next(self.seq), self.deliver,
                                     (dest, source, message)))
        if faults.duplicate and self.rng.random() < faults.duplicate:
            self.stats.duplicated += 1
            heapq.heappush(self.events, (at, next(self.seq), self.deliver,
                                         (dest, source, message)))

    def deliver(self, dest: Node, source: Node, message: Any) -> None:
        node = self.nodes.get(dest)
        if node is not None:
            node.receive(source, message)

    def run_until(self, end_ms: int, chaos: bool | None = None) -> None:
        if chaos is not None:
            self.chaos = chaos
        events = self.events
        while events and events[0][0] <= end_ms:
            at, _, fn, args = heapq.heappop(events)
            self.now = at
            fn(*args)
        self.now = max(self.now, end_ms)

    # --- nodes coming and going ---------------------------------------------------------

    def start_coordinator(self) -> None:
        self.coordinator_incarnation += 1
        coordinator = self.coordinator = SimCoordinator(self, self.coordinator_incarnation)
        self.nodes[coordinator.node] = coordinator
        for log in self.txn_logs.logs.values():
            self.replicate_txn_log(log)  # what the new leader has beyond the high watermark
        coordinator.start()
        for tp in TXN_TPS:
            self.check_loaded(tp)
        self.note("coordinator {} up, epochs {}", coordinator.incarnation,
                  [log.leader_epoch for log in self.txn_logs.logs.values()])

    def crash_coordinator(self) -> None:
        coordinator = self.coordinator
        if coordinator is None:
            return
        coordinator.alive = False
        self.nodes.pop(coordinator.node, None)
        self.coordinator = None
        self.stats.coordinator_crashes += 1
        cuts = []
        for tp, log in self.txn_logs.logs.items():
            end = self.rng.choice([log.hw] + [e for e in log.batch_ends if e > log.hw])
            cuts.append((log.hw, end, log.end))
            self.stats.txn_records_cut += log.end - end
            log.truncate(end)
            log.leader_epoch += 1
            self.txn_logs.rebuild_mirror(tp)
        self.note("coordinator {} crashes; __transaction_state (hw, kept, end): {}",
                  coordinator.incarnation, cuts)
        self.after(self.rng.randint(100, 800), self.restart_coordinator)

    def restart_coordinator(self) -> None:
        if self.coordinator is None:
            self.start_coordinator()

    def crash_partition(self, partition: SimPartition) -> None:
        if not partition.alive:
            return
        partition.alive = False
        self.nodes.pop(partition.node, None)
        partition.waiting = []
        partition.verifying = {}
        self.stats.partition_crashes += 1
        self.note("partition {} crashes (hw {}, end {})", partition.index, partition.hw,
                  partition.end)
        self.after(self.rng.randint(50, 500), self.restart_partition, partition)

    def restart_partition(self, partition: SimPartition) -> None:
        if partition.alive:
            return
        ends = [partition.hw] + [b.last_offset + 1 for b in partition.log
                                 if b.last_offset + 1 > partition.hw]
        end = self.rng.choice(ends)
        before = partition.last_stable_offset
        self.stats.markers_truncated += sum(1 for b in partition.log
                                            if b.control and b.offset >= end)
        partition.truncate(end)
        reindex = self.rng.random() < 0.5
        if not reindex:
            partition.txn_index.truncate_to(end)  # Log.truncate_to
        partition.rebuild(reindex)  # an unclean restart reindexes
        partition.incarnation += 1
        partition.alive = True
        self.nodes[partition.node] = partition
        self.replicate_partition(partition)
        after = partition.last_stable_offset
        if after < before:
            self.stats.lso_regressions += 1
        self.note("partition {} back with its log cut at {} (reindexed: {}); last stable "
                  "offset {} -> {}", partition.index, end, reindex, before, after)
        self.check_partition(partition)
        self.check_reread(partition)

    def start_producer(self, tid: str) -> None:
        if self.stopping:
            return
        self.instances[tid] += 1
        producer = SimProducer(self, tid, self.instances[tid])
        self.producers[tid] = producer
        self.nodes[producer.node] = producer
        self.note("{}: starts", producer)
        producer.init(None)

    def producer_stopped(self, producer: SimProducer) -> None:
        if not self.stopping:
            self.after(self.rng.randint(100, 1500), self.start_producer, producer.tid)

    # --- replication --------------------------------------------------------------------

    def replication_delay(self) -> int:
        return self.rng.randint(1, self.faults.replication_ms)

    def replicate_txn_log(self, log: TxnLog) -> None:
        self.after(self.replication_delay(), self.txn_log_replicated, log, log.leader_epoch,
                   log.end)

    def txn_log_replicated(self, log: TxnLog, epoch: int, target: int) -> None:
        if epoch != log.leader_epoch or target <= log.hw:
            return
        log.hw = min(target, log.end)
        self.take_decisions(log)
        if self.coordinator is not None:
            self.coordinator.runtime.on_high_watermark(log.tp)

    def replicate_partition(self, partition: SimPartition) -> None:
        self.after(self.replication_delay(), partition.replicated, partition.incarnation,
                   partition.end)

    # --- faults -------------------------------------------------------------------------

    def inject_fault(self) -> None:
        if not self.chaos:
            return
        rng = self.rng
        faults = self.faults
        choice = rng.random()
        kind = "loss" if choice < 0.15 else "delay" if choice < 0.3 else \
            ("duplicate" if rng.random() < 0.5 else "slow") if choice < 0.4 else \
            "replication" if choice < 0.5 else "coordinator-crash" if choice < 0.65 else \
            "partition-crash" if choice < 0.85 else None
        if kind in self.faults_off:
            self.after(rng.randint(200, 1200), self.inject_fault)
            return
        if kind == "loss":
            faults.loss = rng.choice([0.0, 0.02, 0.1, 0.3])
        elif kind == "delay":
            faults.max_delay_ms = rng.choice([5, 20, 100, 300])
        elif kind == "duplicate":
            faults.duplicate = rng.choice([0.0, 0.05, 0.2])
        elif kind == "slow":
            faults.slow = rng.choice([0.0, 0.01, 0.05])
        elif kind == "replication":
            faults.replication_ms = rng.choice([5, 30, 150, 400])
        elif kind == "coordinator-crash":
            if rng.random() < 0.5:
                self.crash_coordinator()
            else:
                self.crash_after_append.add("coordinator")
        elif kind == "partition-crash":
            partition = rng.choice(self.partitions)
            if rng.random() < 0.5:
                self.crash_partition(partition)
            else:
                self.crash_after_append.add(partition.index)
        else:
            self.faults = Faults()
        if kind is not None:
            self.injected[kind] += 1
            if kind not in ("coordinator-crash", "partition-crash"):
                self.note("faults {}", self.faults)
        self.after(rng.randint(200, 1200), self.inject_fault)

    def heal(self) -> None:
        """No more faults, every node up; producers finish their transaction and start no
        new one (nor new instances)."""
        self.chaos = False
        self.stopping = True
        self.faults = Faults()
        self.crash_after_append = set()
        if self.coordinator is None:
            self.start_coordinator()
        for partition in self.partitions:
            self.restart_partition(partition)
        self.note("healed")

    # --- the checker: the coordinator's log ---------------------------------------------

    def note_record(self, tp: tuple[str, int], record: TransactionRecord) -> None:
        value = record.value
        if value is None:
            return
        state = S(value.transaction_status)
        if state is S.PREPARE_ABORT and self.coordinator is not None and \
                self.coordinator.in_timer:
            self.stats.timed_out += 1
            self.note("coordinator: {} timed out, aborting at epoch {}",
                      record.transactional_id, value.producer_epoch)

    def take_decisions(self, log: TxnLog) -> None:
        """Read the newly committed records of ``log``: the decisions that count."""
        while log.checked < log.hw:
            offset = log.checked
            record = log.decoded[offset]
            log.checked += 1
            value = record.value
            if value is None:
                continue
            state = S(value.transaction_status)
            ctxn = (record.transactional_id, value.producer_id, value.start_timestamp_ms)
            if state is S.ONGOING:
                self.started.setdefault(ctxn, offset)
            elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                decision = (state is S.PREPARE_COMMIT, value.producer_epoch)
                before = self.decisions.get(ctxn)
                if before is not None and before != decision:
                    raise Violation(Invariant.ONE_DECISION, f"{ctxn} decided {decision} at offset "
                                                            f"{offset} of {log.tp} after {before}")
                self.decisions[ctxn] = decision
                self.decided_partitions[ctxn] = sorted(
                    p for topic, ps in (value.partitions or {}).items() if topic == TOPIC
                    for p in ps)
                self.note("decided: {} {} at epoch {}", ctxn,
                          "COMMIT" if decision[0] else "ABORT", decision[1])
            elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                decision = self.decisions.get(ctxn)
                if decision is None or decision[0] != (state is S.COMPLETE_COMMIT):
                    raise Violation(Invariant.ONE_DECISION,
                                    f"{ctxn} {state.kafka_name} at offset {offset} of {log.tp} "
                                    f"after decision {decision}")
                unmarked = [p for p in self.decided_partitions[ctxn]
                            if ctxn not in self.partitions[p].marked
                            and ctxn not in self.partitions[p].refused]
                if unmarked:
                    raise Violation(Invariant.MARKERS_BEFORE_COMPLETE,
                                    f"{ctxn} is {state.kafka_name} (offset {offset} of {log.tp}) "
                                    f"but its partitions {unmarked} have no marker of it: their "
                                    f"records stay open, for the producer's next transaction "
                                    f"to end")

    def check_replay(self, tp: tuple[str, int]) -> None:
        """Invariant 5 after an append: the live shard (records replayed before the
        append) equals the mirror that replayed the decoded log."""
        coordinator = self.coordinator
        if coordinator is None or tp not in coordinator.runtime.contexts:
            return
        self.compare_shards(tp, coordinator.runtime.contexts[tp].shard,
                            self.txn_logs.mirrors[tp], "after an append")

    def compare_shards(self, tp: tuple[str, int], live: TransactionCoordinatorShard,
                       replayed: TransactionCoordinatorShard, when: str) -> None:
        version = self.value_version
        mine = {tid: stored(live.describe(tid), version) for tid in live.transactions}
        theirs = {tid: stored(replayed.describe(tid), version) for tid in replayed.transactions}
        if mine != theirs:
            raise Violation(Invariant.REPLAY, f"replay ({when}) of {tp}: the live shard has "
                                              f"{mine}, the log's replay {theirs}")

    def check_loaded(self, tp: tuple[str, int]) -> None:
        coordinator = self.coordinator
        assert coordinator is not None
        self.compare_shards(tp, coordinator.runtime.contexts[tp].shard,
                            self.txn_logs.mirrors[tp], "after a load")

    def check_fresh_load(self) -> None:
        """Invariant 5 at the end: a new runtime loading the log builds the live shards."""
        coordinator = self.coordinator
        assert coordinator is not None
        fresh: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
            self.txn_logs, lambda ctx: TransactionCoordinatorShard(ctx, CONFIG))
        for tp in TXN_TPS:
            fresh.load(tp, self.now)
            self.compare_shards(tp, coordinator.runtime.contexts[tp].shard,
                                fresh.contexts[tp].shard, "by a fresh runtime")

    # --- the checker: producers ---------------------------------------------------------

    def transaction_joined(self, producer: SimProducer, txn: LocalTxn, start_ms: int) -> None:
        """AddPartitionsToTxn answered NONE: the transaction ``txn`` is in."""
        ctxn = (producer.tid, producer.producer_id, start_ms)
        if ctxn not in self.started:
            raise Violation(Invariant.ANSWERS_COMMITTED,
                            f"{producer}'s AddPartitionsToTxn was answered for {ctxn}, which the "
                            f"committed log does not have begun")
        if txn.ctxn not in (None, ctxn):
            raise Violation(Invariant.ANSWERS_COMMITTED,
                            f"{producer}'s transaction {txn.local} is in {txn.ctxn} and then "
                            f"in {ctxn}")
        txn.ctxn = ctxn
        self.ctxn_of[txn.local] = ctxn

    def acknowledged(self, local: Local, p: int, values: tuple[str, ...]) -> None:
        self.acked.setdefault(local, {}).setdefault(p, []).extend(values)

    def end_accepted(self, producer: SimProducer, txn: LocalTxn, commit: bool) -> None:
        """EndTxn answered NONE (invariants 1 and 3): the decision is committed, as asked,
        at the producer's epoch."""
        word = "commit" if commit else "abort"
        if commit:
            self.stats.commits += 1
            self.told_committed.append(txn.local)
        else:
            self.stats.aborts += 1
        self.note("{}: {} of {} ({}) accepted", producer, word, txn.local, txn.ctxn)
        if txn.ctxn is None:
            if commit:
                raise Violation(Invariant.ANSWERS_COMMITTED,
                                f"{producer} committed {txn.local} without partitions")
            return
        decision = self.decisions.get(txn.ctxn)
        if decision != (commit, producer.epoch):
            raise Violation(Invariant.ANSWERS_COMMITTED,
                            f"{producer} (epoch {producer.epoch}) was told its {word} of "
                            f"{txn.local} succeeded, but the committed decision of {txn.ctxn} "
                            f"is {decision}")

    # --- the checker: partitions --------------------------------------------------------

    def check_data_append(self, partition: SimPartition, batch: SimBatch) -> None:
        """Invariants 3 and 1 as a data batch is appended."""
        pid = batch.producer_id
        newest = partition.max_epoch.get(pid, -1)
        if batch.epoch < newest:
            raise Violation(Invariant.FENCED,
                            f"partition {partition.index} appended {batch.values[0]} of producer "
                            f"{pid} at epoch {batch.epoch}, after epoch {newest} fenced it there")
        assert batch.local is not None
        ctxn = self.ctxn_of.get(batch.local)
        if ctxn is None:
            raise Violation(Invariant.WRITE_IN_TRANSACTION,
                            f"{batch.values[0]} written before its partition was added")
        if ctxn in partition.marked:
            raise Violation(Invariant.WRITE_IN_TRANSACTION,
                            f"partition {partition.index} appended {batch.values[0]} of {ctxn} "
                            f"at offset {batch.offset}, after that transaction's marker "
                            f"(decision {self.decisions.get(ctxn)}): a late write opens a "
                            f"transaction nobody will end")

    def check_partition(self, partition: SimPartition) -> None:
        """Invariants 2 and 1 after a step: the open transactions and the last stable
        offset, then what a read_committed reader is shown up to it."""
        if not partition.alive:
            return
        ongoing = partition.producer_state.ongoing
        if ongoing != partition.open:
            raise Violation(Invariant.OPEN_TRANSACTIONS,
                            f"partition {partition.index}: the producer state has open "
                            f"transactions {ongoing}, the log {partition.open}")
        lso = partition.last_stable_offset
        if not lso <= partition.hw <= partition.end:
            raise Violation(Invariant.LAST_STABLE_OFFSET,
                            f"partition {partition.index}: last stable offset {lso}, high "
                            f"watermark {partition.hw}, end {partition.end}")
        first_open = min(partition.open.values(), default=lso)
        if lso > first_open:
            raise Violation(Invariant.LAST_STABLE_OFFSET,
                            f"partition {partition.index}: the last stable offset {lso} passed "
                            f"the open transaction at {first_open}")
        if lso > partition.read_position:
            shown = self.read(partition, partition.read_position, lso, one_fetch=True)
            partition.shown.update(shown)
            partition.read_position = lso
            self.stats.reads += 1

    def read(self, partition: SimPartition, start: int, lso: int, one_fetch: bool
             ) -> dict[int, bool]:
        """Read [start, lso) as a read_committed consumer, in one fetch or many; check each
        data batch against its transaction's committed decision."""
        shown: dict[int, bool] = {}
        position = start
        while position < lso:
            batches = partition.fetch(position, lso)
            if not one_fetch:
                batches = batches[:self.rng.randint(1, 6)]
            aborted, _ = partition.txn_index.collect(position, lso)
            shown.update(read_committed(batches, aborted))
            position = batches[-1].last_offset + 1
        for offset, visible in shown.items():
            batch = partition.log[bisect.bisect_left(partition.offsets, offset)]
            assert batch.local is not None
            ctxn = self.ctxn_of[batch.local]
            decision = self.decisions.get(ctxn)
            what = "shows" if visible else "hides"
            if decision is None:
                raise Violation(Invariant.READ_COMMITTED,
                                f"partition {partition.index} (last stable offset {lso}) {what} "
                                f"{batch.values[0]} at {offset} of {ctxn}, which is not decided")
            if decision[0] != visible:
                raise Violation(Invariant.READ_COMMITTED,
                                f"partition {partition.index} (last stable offset {lso}) {what} "
                                f"{batch.values[0]} at {offset}, but {ctxn} was decided "
                                f"{'COMMIT' if decision[0] else 'ABORT'}")
        return shown

    def check_reread(self, partition: SimPartition) -> None:
        """What a reader was shown never changes: read from the start again."""
        lso = partition.last_stable_offset
        shown = self.read(partition, 0, lso, one_fetch=False)
        for offset, visible in shown.items():
            before = partition.shown.get(offset)
            if before is not None and before != visible:
                raise Violation(Invariant.SHOWN_STAYS,
                                f"partition {partition.index}: the batch at {offset} was "
                                f"{'shown' if before else 'hidden'} and is now "
                                f"{'shown' if visible else 'hidden'}")

    # --- healing ------------------------------------------------------------------------

    def convergence_problem(self) -> str | None:
        coordinator = self.coordinator
        if coordinator is None:
            return "no coordinator"
        for tp, log in self.txn_logs.logs.items():
            if log.hw != log.end:
                return f"{tp}: high watermark {log.hw} below its end {log.end}"
            shard = coordinator.runtime.contexts[tp].shard
            for tid, md in shard.transactions.items():
                if md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                    return f"{tid} is {md.state.kafka_name} ({md.partitions})"
        if coordinator.sending:
            return f"markers still being sent: {sorted(coordinator.sending)}"
        for partition in self.partitions:
            if partition.producer_state.ongoing:
                return f"partition {partition.index} has open transactions " \
                       f"{partition.producer_state.ongoing} (end {partition.end})"
            if partition.last_stable_offset != partition.end:
                return f"partition {partition.index}: last stable offset " \
                       f"{partition.last_stable_offset}, end {partition.end}"
        for producer in self.producers.values():
            if producer is not None and producer.alive and \
                    (producer.txn is not None or producer.request is not None):
                return f"{producer} is still busy"
        return None

    def check_final(self) -> None:
        """Invariants 4 and 5 once quiet."""
        self.check_fresh_load()
        for tp in TXN_TPS:
            self.check_replay(tp)
        for partition in self.partitions:
            self.check_partition(partition)
            self.check_reread(partition)
        undecided = [c for c in self.started if c not in self.decisions]
        if undecided:
            raise Violation(Invariant.ALL_OR_NOTHING,
                            f"coordinator transactions never decided: {undecided}")
        # Every coordinator transaction wholly shown or wholly hidden, everywhere.
        shown: dict[CTxn, set[bool]] = {}
        values: dict[Local, dict[int, list[str]]] = {}
        for partition in self.partitions:
            for batch in partition.log:
                if batch.control:
                    continue
                assert batch.local is not None
                visible = partition.shown[batch.offset]
                shown.setdefault(self.ctxn_of[batch.local], set()).add(visible)
                if visible:
                    values.setdefault(batch.local, {}).setdefault(
                        partition.index, []).extend(batch.values)
        for ctxn, seen in shown.items():
            if len(seen) != 1:
                raise Violation(Invariant.ALL_OR_NOTHING,
                                f"{ctxn} is partly shown and partly hidden")
        for local in self.told_committed:
            acked = self.acked.get(local, {})
            if values.get(local, {}) != acked:
                raise Violation(Invariant.ALL_OR_NOTHING,
                                f"{local} was committed with {acked} acknowledged, readers see "
                                f"{values.get(local, {})}")
