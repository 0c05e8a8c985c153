"""The transaction coordinator shard on the coordinator runtime, without a network: the
answers of InitProducerId, AddPartitionsToTxn and EndTxn as Kafka gives them, the marker
jobs left for the driver, the timers that abort and expire, and a failover that reloads
the state from the bytes of ``__transaction_state``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.coordinator.transaction.metadata import TransactionState
from ottla.coordinator.transaction.shard import (
    MarkerJob,
    ProducerIdAndEpoch,
    TransactionConfig,
    TransactionCoordinatorShard,
    decode_record,
    encode_record,
)
from ottla.protocol.errors import ErrorCode

TP = ("__transaction_state", 7)
T0 = 1_700_000_000_000
S = TransactionState
CONFIG = TransactionConfig(max_timeout_ms=900_000, id_expiration_ms=3_600_000,
                           abort_interval_ms=10_000, expire_interval_ms=60_000)


class Log:
    """__transaction_state as bytes, every write committed at once."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        self.entries += [encode_record(r, 1) for r in records]
        return len(self.entries)

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return len(self.entries)

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        for offset, (key, value) in enumerate(self.entries):
            yield offset, decode_record(key, value)


class Coordinator:
    def __init__(self, log: Log | None = None) -> None:
        self.log = log or Log()
        self.runtime: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
            self.log, lambda ctx: TransactionCoordinatorShard(ctx, CONFIG))
        self.runtime.load(TP, T0)
        self.ids = itertools.count(1000)

    def call(self, operation: Any, now: int = T0) -> Any:
        answers: list[Any] = []
        self.runtime.write(TP, operation, answers.append, now)
        assert len(answers) == 1
        return answers[0]

    def init(self, tid: str, expected: tuple[int, int] | None = None, timeout: int = 60_000,
             now: int = T0) -> ProducerIdAndEpoch:
        return self.call(lambda shard, n: shard.init_producer_id(
            n, tid, timeout, expected, lambda: next(self.ids)), now)

    def add(self, tid: str, pid: int, epoch: int, *tps: tuple[str, int], now: int = T0,
            version: int = 0) -> ErrorCode:
        return self.call(lambda shard, n: shard.add_partitions(n, tid, pid, epoch,
                                                               frozenset(tps), version), now)

    def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 0,
            now: int = T0) -> ProducerIdAndEpoch:
        return self.call(lambda shard, n: shard.end_transaction(
            n, tid, pid, epoch, commit, version, lambda: next(self.ids)), now)

    def complete(self, job: MarkerJob, now: int = T0) -> None:
        self.call(lambda shard, n: shard.complete_transaction(
            n, job.transactional_id, job.producer_id, job.producer_epoch), now)

    @property
    def shard(self) -> TransactionCoordinatorShard:
        return self.runtime.active(TP).shard

    def state(self, tid: str) -> TransactionState:
        return self.shard.transactions[tid].state


def test_a_transaction_from_init_to_commit_with_kafkas_answers() -> None:
    c = Coordinator()
    first = c.init("payments")
    assert first == ProducerIdAndEpoch(ErrorCode.none, 1000, 0)
    pid = first.producer_id
    assert c.add("payments", pid, 0, ("orders", 0), ("orders", 1)) == ErrorCode.none
    assert c.state("payments") is S.ONGOING
    entries = len(c.log.entries)
    assert c.add("payments", pid, 0, ("orders", 1)) == ErrorCode.none
    assert len(c.log.entries) == entries  # already in: nothing written
    assert c.end("payments", pid, 0, commit=True) == ProducerIdAndEpoch(ErrorCode.none, pid, 0)
    (job,) = c.shard.pending_markers()
    assert job == MarkerJob("payments", pid, 0, True, frozenset({("orders", 0), ("orders", 1)}))
    assert c.end("payments", pid, 0, commit=True).error == ErrorCode.concurrent_transactions
    assert c.add("payments", pid, 0, ("orders", 2)) == ErrorCode.concurrent_transactions
    c.complete(job)
    assert c.state("payments") is S.COMPLETE_COMMIT and not c.shard.pending_markers()
    assert c.end("payments", pid, 0, commit=True).error == ErrorCode.none  # a retry
    assert c.end("payments", pid, 0, commit=False).error == ErrorCode.invalid_txn_state


def test_bad_requests_get_kafkas_errors_and_write_nothing() -> None:
    c = Coordinator()
    pid = c.init("payments").producer_id
    written = len(c.log.entries)
    assert c.init("payments", timeout=900_001).error == ErrorCode.invalid_transaction_timeout
    assert c.init("").error == ErrorCode.invalid_request
    assert c.add("nobody", pid, 0, ("t", 0)) == ErrorCode.invalid_producer_id_mapping
    assert c.add("payments", pid + 1, 0, ("t", 0)) == ErrorCode.invalid_producer_id_mapping
    assert c.add("payments", pid, 5, ("t", 0)) == ErrorCode.producer_fenced
    assert c.end("payments", pid, 0, commit=True).error == ErrorCode.invalid_txn_state  # Empty
    assert c.end("payments", pid, 1, commit=True).error == ErrorCode.producer_fenced
    assert len(c.log.entries) == written


def test_a_new_producer_instance_fences_the_old_one_and_aborts_its_transaction() -> None:
    c = Coordinator()
    pid = c.init("payments").producer_id
    assert c.add("payments", pid, 0, ("orders", 0)) == ErrorCode.none
    assert c.init("payments").error == ErrorCode.concurrent_transactions
    assert c.state("payments") is S.PREPARE_ABORT
    (job,) = c.shard.pending_markers()
    assert (job.commit, job.producer_epoch) == (False, 1)  # markers fence epoch 0
    assert c.add("payments", pid, 0, ("orders", 1)) == ErrorCode.producer_fenced
    assert c.init("payments").error == ErrorCode.concurrent_transactions  # still aborting
    c.complete(job)
    assert c.init("payments") == ProducerIdAndEpoch(ErrorCode.none, pid, 2)


def test_kip_360_a_producer_recovers_its_epoch_and_a_retry_gets_the_same_answer() -> None:
    c = Coordinator()
    pid = c.init("payments").producer_id
    bumped = c.init("payments", expected=(pid, 0))
    assert bumped == ProducerIdAndEpoch(ErrorCode.none, pid, 1)
    written = len(c.log.entries)
    assert c.init("payments", expected=(pid, 0)) == bumped  # the retry
    assert len(c.log.entries) == written
    assert c.init("payments", expected=(pid + 7, 1)).error == ErrorCode.producer_fenced


def test_transactions_v2_bump_the_epoch_when_the_transaction_ends() -> None:
    c = Coordinator()
    pid = c.init("payments").producer_id
    c.add("payments", pid, 0, ("orders", 0))
    assert c.end("payments", pid, 0, commit=False, version=2) == \
        ProducerIdAndEpoch(ErrorCode.none, pid, 1)
    assert c.end("payments", pid, 0, commit=False, version=2).error == \
        ErrorCode.concurrent_transactions  # a retry, with the epoch it had
    (job,) = c.shard.pending_markers()
    c.complete(job)
    assert c.end("payments", pid, 0, commit=False, version=2) == \
        ProducerIdAndEpoch(ErrorCode.none, pid, 1)


def test_an_open_transaction_past_its_timeout_is_aborted_by_the_timer() -> None:
    c = Coordinator()
    pid = c.init("payments", timeout=5_000).producer_id
    c.add("payments", pid, 0, ("orders", 0), now=T0 + 1_000)
    c.runtime.poll(T0 + 10_000)  # opened 9 s ago: past 5 s
    assert c.state("payments") is S.PREPARE_ABORT
    (job,) = c.shard.pending_markers()
    assert (job.commit, job.producer_epoch) == (False, 1)
    assert c.add("payments", pid, 0, ("orders", 1), now=T0 + 10_001) == \
        ErrorCode.producer_fenced


def test_an_idle_transactional_id_expires_and_comes_back_with_a_new_producer_id() -> None:
    c = Coordinator()
    pid = c.init("payments").producer_id
    c.runtime.poll(T0 + 60_000)
    assert "payments" in c.shard.transactions  # idle 1 minute of 1 hour
    c.runtime.poll(T0 + 3_600_000)
    assert "payments" not in c.shard.transactions
    assert c.log.entries[-1][1] is None  # a tombstone
    assert c.init("payments", now=T0 + 3_600_001).producer_id != pid


def test_a_new_coordinator_reloads_the_state_and_the_markers_still_to_write() -> None:
    c = Coordinator()
    pid = c.init("payments").producer_id
    c.add("payments", pid, 0, ("orders", 0), ("audit", 3))
    c.end("payments", pid, 0, commit=True)
    other = c.init("billing").producer_id
    failover = Coordinator(c.log)
    assert failover.state("billing") is S.EMPTY
    assert failover.shard.pending_markers() == c.shard.pending_markers()
    (job,) = failover.shard.pending_markers()
    failover.complete(job)
    assert failover.state("payments") is S.COMPLETE_COMMIT
    assert failover.init("billing", expected=(other, 0)) == \
        ProducerIdAndEpoch(ErrorCode.none, other, 1)



def test_a_transactions_v2_producer_moves_epoch_by_epoch_and_keeps_it_across_a_failover(
        ) -> None:
    """KIP-890 part 2: partitions join when the producer's batches reach them (a broker
    adds them, client version 2), each EndTxn v5 answers the next epoch, a batch for the
    next transaction waits while the markers of the last are written, and the epoch an
    EndTxn retry expects survives a new coordinator reading the log."""
    c = Coordinator()
    pid = c.init("payments").producer_id
    assert c.add("payments", pid, 0, ("orders", 0), version=2) == ErrorCode.none
    assert c.shard.transactions["payments"].client_version == 2
    assert c.end("payments", pid, 0, commit=True, version=2) == \
        ProducerIdAndEpoch(ErrorCode.none, pid, 1)
    (job,) = c.shard.pending_markers()
    assert (job.producer_epoch, job.commit) == (1, True)  # markers carry the new epoch
    assert c.add("payments", pid, 1, ("orders", 1), version=2) == \
        ErrorCode.concurrent_transactions  # the next transaction waits for the markers
    assert c.add("payments", pid, 0, ("orders", 1), version=2) == ErrorCode.producer_fenced
    c.complete(job)
    failover = Coordinator(c.log)
    assert failover.shard.transactions["payments"].client_version == 2
    assert failover.end("payments", pid, 0, commit=True, version=2) == \
        ProducerIdAndEpoch(ErrorCode.none, pid, 1)  # a retry of the EndTxn it answered
    assert failover.add("payments", pid, 1, ("orders", 1), version=2) == ErrorCode.none
    assert failover.state("payments") is S.ONGOING
    assert failover.end("payments", pid, 0, commit=False, version=2).error == \
        ErrorCode.producer_fenced  # the old epoch cannot end the new transaction
    assert failover.end("payments", pid, 1, commit=False, version=2) == \
        ProducerIdAndEpoch(ErrorCode.none, pid, 2)


def test_verification_says_which_partitions_are_not_in_the_transaction() -> None:
    c = Coordinator()
    pid = c.init("payments").producer_id
    c.add("payments", pid, 0, ("orders", 0))
    verify = c.shard.verify_partitions
    assert verify("payments", pid, 0, frozenset({("orders", 0), ("orders", 1)})) == {
        ("orders", 0): ErrorCode.none, ("orders", 1): ErrorCode.transaction_abortable}
    assert verify("payments", pid, 1, frozenset({("orders", 0)})) == {
        ("orders", 0): ErrorCode.producer_fenced}
    c.end("payments", pid, 0, commit=True)
    assert verify("payments", pid, 0, frozenset({("orders", 0)})) == {
        ("orders", 0): ErrorCode.concurrent_transactions}


class StalledLog(Log):
    """A log whose high watermark stops where it is once ``stall`` is set (its
    followers gone quiet)."""

    def __init__(self) -> None:
        super().__init__()
        self.stalled_at: int | None = None

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return len(self.entries) if self.stalled_at is None else self.stalled_at


def test_a_write_not_replicated_within_the_transactions_timeout_is_retriable() -> None:
    """As Kafka's append to the transaction log times out after the transaction's own
    timeout: a write held by replication for that long is answered
    COORDINATOR_NOT_AVAILABLE (the producer retries); what it wrote stays."""
    log = StalledLog()
    clock = [0]
    runtime: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
        log, lambda ctx: TransactionCoordinatorShard(ctx, CONFIG), timer_ms=lambda: clock[0])
    runtime.load(TP, T0)
    answers: list[Any] = []
    runtime.write(TP, lambda shard, n: shard.init_producer_id(
        n, "payments", 20_000, None, lambda: 7), answers.append, T0)
    assert answers == [ProducerIdAndEpoch(ErrorCode.none, 7, 0)]
    log.stalled_at = len(log.entries)
    runtime.write(TP, lambda shard, n: shard.add_partitions(
        n, "payments", 7, 0, frozenset({("orders", 0)})), answers.append, T0)
    clock[0] = 19_999
    runtime.poll(T0 + 19_999)
    assert answers[1:] == []
    clock[0] = 20_000
    runtime.poll(T0 + 20_000)
    assert [a.code for a in answers[1:]] == [ErrorCode.coordinator_not_available]
    log.stalled_at = None
    runtime.on_high_watermark(TP)
    assert len(answers) == 2
    assert runtime.active(TP).shard.transactions["payments"].partitions == {("orders", 0)}
