"""A transactional id's state (Kafka's ``TransactionMetadata``), as an immutable value and
the transitions the coordinator may make from it.

Each transition is a pure function from the current value to the next one, refusing a
target state that may not follow the current one (``VALID_PREVIOUS``, Kafka's
``validPreviousStates``): the coordinator writes the result to ``__transaction_state``
and its shard replays it, so the log alone decides the state after a failover.

Epochs follow KIP-360 and KIP-890. A producer's InitProducerId bumps the epoch (and
fences whoever held the id before); one that retries with the epoch it had gets the
same answer again, one with an older epoch is fenced. With transactions v2 (client
transaction version 2) every EndTxn bumps the epoch too, and a producer whose epoch
would overflow moves to the next producer id once its markers are written.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from ottla.common.topics import TopicPartition
from ottla.coordinator.transaction.records import TransactionLogValue
from ottla.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TransactionState(enum.IntEnum):
    """Kafka's states, with the ids ``__transaction_state`` stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def expiration_allowed(self) -> bool:
        return self in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)

    @property
    def pending(self) -> bool:
        """A transaction is open (its partitions may hold undecided records)."""
        return self in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT)


S = TransactionState

VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """A transition the state machine does not allow: a coordinator bug, never a client's
    error (clients get error codes before a transition is attempted)."""


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    last_update_ms: int
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """The epoch before the last bump: a retried InitProducerId or EndTxn is answered
    from it instead of fencing its own producer."""
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_version: int = 0
    """The client's transaction version: 2 bumps the epoch on every EndTxn (KIP-890)."""

    @property
    def epoch_exhausted(self) -> bool:
        """Kafka's ``isEpochExhausted``: one epoch is kept for fencing."""
        return self.producer_epoch >= MAX_EPOCH - 1

    # --- transitions ---------------------------------------------------------------------

    def _to(self, state: TransactionState, **changes: object) -> TransactionMetadata:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"transactional id {self.transactional_id}: "
                                    f"{self.state.kafka_name} -> {state.kafka_name}")
        nxt = replace(self, state=state, **changes)  # type: ignore[arg-type]
        if nxt.producer_id < 0:
            raise IllegalTransition(f"illegal producer id {nxt.producer_id}")
        if state is not S.DEAD and nxt.producer_epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {nxt.producer_epoch}")
        return nxt

    def bump_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int
                   ) -> TransactionMetadata | ErrorCode:
        """InitProducerId for a known id (Kafka's ``prepareIncrementProducerEpoch``):
        Empty with the epoch bumped, the same answer again for a retry (the expected
        epoch is the one before the last bump), or PRODUCER_FENCED."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"producer id {self.producer_id} has no epoch left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._to(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                        timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                        last_update_ms=now_ms, previous_producer_id=self.producer_id)

    def rotate_producer_id(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                           record_last_epoch: bool) -> TransactionMetadata:
        """A new producer id at epoch 0, when the old one has no epoch left (Kafka's
        ``prepareProducerIdRotation``)."""
        if self.state.pending:
            raise IllegalTransition("cannot rotate producer ids with a transaction open")
        return self._to(S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                        last_producer_epoch=self.producer_epoch if record_last_epoch
                        else NO_PRODUCER_EPOCH,
                        previous_producer_id=self.producer_id, timeout_ms=timeout_ms,
                        partitions=frozenset(), start_ms=-1, last_update_ms=now_ms)

    def add_partitions(self, partitions: frozenset[TopicPartition], now_ms: int,
                       client_version: int = 0) -> TransactionMetadata:
        """AddPartitionsToTxn (client version 0) or a transactions v2 Produce or
        TxnOffsetCommit (2): Ongoing, the transaction starting now if none was open."""
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) \
            else self.start_ms
        return self._to(S.ONGOING, partitions=self.partitions | partitions, start_ms=start,
                        last_update_ms=now_ms, client_version=client_version)

    def prepare_end(self, *, commit: bool, client_version: int, next_producer_id: int,
                    now_ms: int) -> TransactionMetadata:
        """EndTxn: PrepareCommit or PrepareAbort; transactions v2 bump the epoch here
        (Kafka's ``prepareAbortOrCommit``)."""
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if client_version >= 2:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        return self._to(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                        producer_epoch=epoch, last_producer_epoch=last,
                        next_producer_id=next_producer_id, client_version=client_version,
                        last_update_ms=now_ms)

    def fence_epoch(self) -> TransactionMetadata:
        """An expired or superseded transaction: bump the epoch so its producer is
        fenced, then abort (Kafka's ``prepareFenceProducerEpoch``)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition("cannot fence a producer at the highest epoch")
        return self._to(S.PREPARE_EPOCH_FENCE, producer_epoch=self.producer_epoch + 1,
                        last_producer_epoch=NO_PRODUCER_EPOCH)

    def complete(self, now_ms: int) -> TransactionMetadata:
        """Every marker written: CompleteCommit or CompleteAbort, the partitions cleared;
        a v2 producer whose epoch overflowed moves to its next producer id."""
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        producer_id, epoch = self.producer_id, self.producer_epoch
        previous = self.previous_producer_id
        if self.client_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch, previous = self.next_producer_id, 0, self.producer_id
        return self._to(state, producer_id=producer_id, producer_epoch=epoch,
                        last_producer_epoch=self.producer_epoch, previous_producer_id=previous,
                        next_producer_id=NO_PRODUCER_ID, partitions=frozenset(),
                        last_update_ms=now_ms)

    def dead(self) -> TransactionMetadata:
        """``transactional.id.expiration.ms`` passed: the id is removed (a tombstone)."""
        return self._to(S.DEAD, partitions=frozenset())

    # --- the log ------------------------------------------------------------------------

    def to_value(self) -> TransactionLogValue:
        """What ``__transaction_state`` stores (Empty stores no partition list)."""
        partitions: dict[str, tuple[int, ...]] | None = None
        if self.state is not S.EMPTY:
            by_topic: dict[str, list[int]] = {}
            for topic, index in self.partitions:
                by_topic.setdefault(topic, []).append(index)
            partitions = {t: tuple(sorted(ps)) for t, ps in by_topic.items()}
        return TransactionLogValue(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms, transaction_status=int(self.state),
            partitions=partitions, last_update_timestamp_ms=self.last_update_ms,
            start_timestamp_ms=self.start_ms, previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_version)

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue
                   ) -> TransactionMetadata:
        """As Kafka's ``readTxnRecordValue``: the last epoch is not stored."""
        state = S(value.transaction_status)
        partitions = frozenset() if state is S.EMPTY or value.partitions is None else \
            frozenset((t, p) for t, ps in value.partitions.items() for p in ps)
        return cls(transactional_id=transactional_id, producer_id=value.producer_id,
                   producer_epoch=value.producer_epoch,
                   timeout_ms=value.transaction_timeout_ms, state=state,
                   last_update_ms=value.last_update_timestamp_ms, partitions=partitions,
                   start_ms=value.start_timestamp_ms,
                   previous_producer_id=value.previous_producer_id,
                   next_producer_id=value.next_producer_id,
                   client_version=value.client_transaction_version)


def new_transaction(transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
                    ) -> TransactionMetadata:
    """A transactional id seen for the first time: Empty, no epoch yet (the first
    InitProducerId bumps it to 0)."""
    return TransactionMetadata(transactional_id=transactional_id, producer_id=producer_id,
                               producer_epoch=NO_PRODUCER_EPOCH, timeout_ms=timeout_ms,
                               state=S.EMPTY, last_update_ms=now_ms)
