"""One ``__transaction_state`` partition's transaction coordinator (Kafka's
TransactionCoordinator and TransactionStateManager), as a shard of the coordinator
runtime: operations read the transactional ids' state and return the
``__transaction_state`` record of the transition and the client's answer, released once
the record is committed.

The transaction markers are the driver's: every transactional id in PrepareCommit or
PrepareAbort has a ``MarkerJob`` (``pending_markers``); once the driver has written its
COMMIT or ABORT marker to every partition of the transaction (WriteTxnMarkers), it calls
``complete_transaction`` and the id moves to CompleteCommit or CompleteAbort. A shard
loaded after a failover finds the same jobs in the state it replayed, so markers are
sent again until written (they are idempotent on the partitions).

Timers, as Kafka's: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
the transactions open longer than their timeout are fenced (epoch bumped) and aborted;
every ``transaction.remove.expired.transaction.cleanup.interval.ms`` the ids idle for
``transactional.id.expiration.ms`` with no transaction open are removed (a tombstone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ottla.coordinator.runtime import CoordinatorResult, ShardContext
from ottla.coordinator.transaction.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    new_transaction,
)
from ottla.coordinator.transaction.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
S = TransactionState

ABORT_TIMER = "abort-timed-out-transactions"
EXPIRE_TIMER = "remove-expired-transactional-ids"


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    max_timeout_ms: int = 900_000
    """``transaction.max.timeout.ms``: a longer requested timeout is refused."""
    id_expiration_ms: int = 604_800_000
    """``transactional.id.expiration.ms``."""
    abort_interval_ms: int = 10_000
    """``transaction.abort.timed.out.transaction.cleanup.interval.ms``."""
    expire_interval_ms: int = 3_600_000
    """``transaction.remove.expired.transaction.cleanup.interval.ms``."""


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """A ``__transaction_state`` record; ``value is None`` is a tombstone. A record this
    shard writes also carries the metadata it was made from, which replay installs as
    it is: the epoch before the last bump is not in the log (as in Kafka, a loaded id
    has none)."""

    transactional_id: str
    value: TransactionLogValue | None
    metadata: TransactionMetadata | None = None


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """The answer of InitProducerId and EndTxn (and what a retrying producer expects)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write a COMMIT or ABORT marker for this producer to every partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


def encode_record(record: TransactionRecord, value_version: int) -> tuple[bytes, bytes | None]:
    """The record's key and value bytes; ``value_version`` is 0 until
    ``transaction.version`` 1 (Kafka's ``transactionLogValueVersion``), then 1."""
    return encode_key(record.transactional_id), encode_value(record.value, value_version)


def decode_record(key: bytes, value: bytes | None) -> TransactionRecord:
    return TransactionRecord(decode_key(key), decode_value(value))


def _record(md: TransactionMetadata) -> TransactionRecord:
    return TransactionRecord(md.transactional_id, md.to_value(), md)


class TransactionCoordinatorShard:
    def __init__(self, ctx: ShardContext, config: TransactionConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.transactions: dict[str, TransactionMetadata] = {}

    # --- the log -------------------------------------------------------------------------

    def replay(self, offset: int, record: TransactionRecord) -> None:
        if record.value is None:
            self.transactions.pop(record.transactional_id, None)
        elif record.metadata is not None:
            self.transactions[record.transactional_id] = record.metadata
        else:
            self.transactions[record.transactional_id] = TransactionMetadata.from_value(
                record.transactional_id, record.value)

    def on_written(self, end_offset: int) -> None: ...

    def on_committed(self, high_watermark: int) -> None: ...

    def on_loaded(self, now_ms: int) -> None:
        self.ctx.schedule(ABORT_TIMER, self.config.abort_interval_ms,
                          lambda shard, now: shard.abort_timed_out(now))
        self.ctx.schedule(EXPIRE_TIMER, self.config.expire_interval_ms,
                          lambda shard, now: shard.remove_expired(now))

    def on_unloaded(self) -> None: ...

    def pending_markers(self) -> list[MarkerJob]:
        """The markers still to write: one job per transaction being committed or
        aborted."""
        return [job for md in self.transactions.values()
                if (job := _marker_job(md)) is not None]

    def is_pending(self, job: MarkerJob) -> bool:
        """Whether ``job`` is still the transactional id's markers to write (a job read
        earlier may be done, and its id onto its next transaction)."""
        md = self.transactions.get(job.transactional_id)
        return md is not None and _marker_job(md) == job

    # --- InitProducerId ------------------------------------------------------------------

    def init_producer_id(self, now_ms: int, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None,
                         allocate_producer_id: Callable[[], int]) -> CoordinatorResult:
        """InitProducerId with a transactional id (Kafka's ``handleInitProducerId``):
        a new id gets a producer id at epoch 0; a known one its epoch bumped, fencing the
        previous producer; an open transaction is fenced and aborted first
        (CONCURRENT_TRANSACTIONS: the client retries once the abort is done)."""
        if not transactional_id:
            return _answer(ProducerIdAndEpoch(ErrorCode.invalid_request))
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return _answer(ProducerIdAndEpoch(ErrorCode.invalid_transaction_timeout))
        md = self.transactions.get(transactional_id)
        if md is None:
            md = new_transaction(transactional_id, allocate_producer_id(), timeout_ms, now_ms)
        if expected is not None and not (
                md.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == md.producer_id or
                (expected[0] == md.previous_producer_id and expected[1] >= MAX_EPOCH - 1)):
            return _answer(ProducerIdAndEpoch(ErrorCode.producer_fenced))
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return _answer(ProducerIdAndEpoch(ErrorCode.concurrent_transactions))
        if md.state is S.ONGOING:
            aborting = md.fence_epoch().prepare_end(
                commit=False, client_version=md.client_version,
                next_producer_id=NO_PRODUCER_ID, now_ms=now_ms)
            return _write(aborting, ProducerIdAndEpoch(ErrorCode.concurrent_transactions))
        if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
            nxt = md.rotate_producer_id(allocate_producer_id(), timeout_ms, now_ms,
                                        record_last_epoch=expected is not None)
        else:
            bumped = md.bump_epoch(timeout_ms, None if expected is None else expected[1],
                                   now_ms)
            if isinstance(bumped, ErrorCode):
                return _answer(ProducerIdAndEpoch(bumped))
            nxt = bumped
        answer = ProducerIdAndEpoch(ErrorCode.none, nxt.producer_id, nxt.producer_epoch)
        if nxt == md:
            return _answer(answer)  # a retry answered from the state as it is
        return _write(nxt, answer)

    # --- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------

    def add_partitions(self, now_ms: int, transactional_id: str, producer_id: int,
                       producer_epoch: int, partitions: frozenset[TopicPartition],
                       client_version: int = 0) -> CoordinatorResult:
        """Kafka's ``handleAddPartitionsToTransaction``: the answer is one error for every
        partition of the request. ``client_version`` 2 when a broker adds them for a
        transactions v2 producer (its EndTxn then bumps the epoch)."""
        md = self.transactions.get(transactional_id)
        if not transactional_id:
            return _answer(ErrorCode.invalid_request)
        if md is None or md.producer_id != producer_id:
            return _answer(ErrorCode.invalid_producer_id_mapping)
        if md.producer_epoch != producer_epoch:
            return _answer(ErrorCode.producer_fenced)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return _answer(ErrorCode.concurrent_transactions)
        if md.state is S.ONGOING and partitions <= md.partitions:
            return _answer(ErrorCode.none)
        return _write(md.add_partitions(partitions, now_ms, client_version), ErrorCode.none)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: frozenset[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with ``verify_only`` (KIP-890 part 1): whether each
        partition is in the ongoing transaction (a read)."""
        md = self.transactions.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return dict.fromkeys(partitions, ErrorCode.invalid_producer_id_mapping)
        if md.producer_epoch != producer_epoch:
            return dict.fromkeys(partitions, ErrorCode.producer_fenced)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(partitions, ErrorCode.concurrent_transactions)
        ongoing = md.state is S.ONGOING
        return {tp: ErrorCode.none if ongoing and tp in md.partitions
                else ErrorCode.transaction_abortable for tp in partitions}

    # --- EndTxn --------------------------------------------------------------------------

    def end_transaction(self, now_ms: int, transactional_id: str, producer_id: int,
                        producer_epoch: int, commit: bool, client_version: int,
                        allocate_producer_id: Callable[[], int]) -> CoordinatorResult:
        """EndTxn (Kafka's ``endTransaction`` from a client): PrepareCommit or
        PrepareAbort, whose markers the driver then writes; a retry of an end already
        done is answered NONE, one in progress CONCURRENT_TRANSACTIONS."""
        if not transactional_id:
            return _answer(ProducerIdAndEpoch(ErrorCode.invalid_request))
        md = self.transactions.get(transactional_id)
        if md is None:
            return _answer(ProducerIdAndEpoch(ErrorCode.invalid_producer_id_mapping))
        v2 = md.client_version >= 2
        retry_on_bump = v2 and md.producer_epoch == producer_epoch + 1  # endTxnEpochBumped
        retry_on_overflow = v2 and md.previous_producer_id == producer_id and \
            producer_epoch == MAX_EPOCH - 1 and md.producer_epoch == 0
        if v2:
            if md.state in (S.ONGOING, S.EMPTY):
                valid = producer_epoch == md.producer_epoch
            elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid = retry_on_bump
            else:
                valid = retry_on_bump or retry_on_overflow
        else:
            valid = producer_epoch == md.producer_epoch
        if md.producer_id != producer_id and not retry_on_overflow:
            return _answer(ProducerIdAndEpoch(ErrorCode.invalid_producer_id_mapping))
        if not valid:
            return _answer(ProducerIdAndEpoch(ErrorCode.producer_fenced))
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        running = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if md.state is done:
            return _answer(ProducerIdAndEpoch(ErrorCode.none, md.producer_id,
                                              md.producer_epoch))
        if md.state is running:
            return _answer(ProducerIdAndEpoch(ErrorCode.concurrent_transactions))
        if md.state is not S.ONGOING:
            log.debug("EndTxn(%s) of %s in state %s", "commit" if commit else "abort",
                      transactional_id, md.state.kafka_name)
            return _answer(ProducerIdAndEpoch(ErrorCode.invalid_txn_state))
        next_producer_id = allocate_producer_id() if client_version >= 2 and \
            md.epoch_exhausted else NO_PRODUCER_ID
        nxt = md.prepare_end(commit=commit, client_version=client_version,
                             next_producer_id=next_producer_id, now_ms=now_ms)
        return _write(nxt, ProducerIdAndEpoch(ErrorCode.none, nxt.producer_id,
                                              nxt.producer_epoch))

    def complete_transaction(self, now_ms: int, transactional_id: str, producer_id: int,
                             producer_epoch: int) -> CoordinatorResult:
        """Every marker of the transaction is written: CompleteCommit or CompleteAbort.
        A job that no longer matches (the id moved on) changes nothing."""
        md = self.transactions.get(transactional_id)
        if md is None or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or \
                (md.producer_id, md.producer_epoch) != (producer_id, producer_epoch):
            return CoordinatorResult()
        return CoordinatorResult([_record(md.complete(now_ms))])

    # --- timers --------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> CoordinatorResult:
        """Fence and abort every transaction open longer than its timeout (Kafka's
        ``abortTimedOutTransactions``)."""
        self.ctx.schedule(ABORT_TIMER, self.config.abort_interval_ms,
                          lambda shard, now: shard.abort_timed_out(now))
        records = []
        for md in list(self.transactions.values()):
            if md.state is S.ONGOING and md.start_ms + md.timeout_ms < now_ms:
                log.info("Aborting transaction of %s (producer %d, epoch %d): open longer "
                         "than its timeout of %d ms", md.transactional_id, md.producer_id,
                         md.producer_epoch, md.timeout_ms)
                records.append(_record(md.fence_epoch().prepare_end(
                    commit=False, client_version=md.client_version,
                    next_producer_id=NO_PRODUCER_ID, now_ms=now_ms)))
        return CoordinatorResult(records)

    def remove_expired(self, now_ms: int) -> CoordinatorResult:
        """Tombstones for ids idle for ``transactional.id.expiration.ms`` with nothing
        open (Kafka's ``removeExpiredTransactionalIds``)."""
        self.ctx.schedule(EXPIRE_TIMER, self.config.expire_interval_ms,
                          lambda shard, now: shard.remove_expired(now))
        expired = [md for md in self.transactions.values()
                   if md.state.expiration_allowed
                   and md.last_update_ms + self.config.id_expiration_ms <= now_ms]
        return CoordinatorResult([TransactionRecord(md.transactional_id, None)
                                  for md in expired])

    # --- reads ---------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata:
        md = self.transactions.get(transactional_id)
        if md is None:
            raise KafkaError(ErrorCode.transactional_id_not_found,
                             f"The transactionalId {transactional_id} was not found")
        return md


def _marker_job(md: TransactionMetadata) -> MarkerJob | None:
    if md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return None
    return MarkerJob(md.transactional_id, md.producer_id, md.producer_epoch,
                     md.state is S.PREPARE_COMMIT, md.partitions)


def _answer(response: object) -> CoordinatorResult:
    return CoordinatorResult([], response)


def _write(md: TransactionMetadata, response: object) -> CoordinatorResult:
    """``md`` written, ``response`` answered once it is committed or, as Kafka's append
    to the transaction log times out after the transaction's timeout, answered
    COORDINATOR_NOT_AVAILABLE then (the client retries)."""
    return CoordinatorResult([_record(md)], response, write_timeout_ms=md.timeout_ms)

