"""Idempotent producer state of one partition: the last batches of each producer id.

For each producer id the log remembers its epoch and the sequence ranges and offsets of
its last five batches (``max.in.flight.requests.per.connection`` is at most 5 with
idempotence). That is enough to answer a retried batch with its original offsets instead
of writing it twice, and to reject a gap with OUT_OF_ORDER_SEQUENCE_NUMBER. The state is
rebuilt from the batch headers of the log on load (headers only, no record decoding).

Transactions (KIP-98): a producer's first transactional batch opens its transaction at
that batch's offset, and its COMMIT or ABORT marker closes it (``end_transaction``). The
first offset of the oldest open transaction bounds the last stable offset, below which
``read_committed`` consumers may read.
"""

from __future__ import annotations

import collections
from collections import deque
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

MAX_CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed: from its first batch to the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(slots=True)
class VerificationState:
    """Kafka's VerificationStateEntry: a producer's transactional batches are being, or
    were, verified with its transaction coordinator. It lives until one of the
    producer's transactional batches is appended (or ``producer.id.expiration.ms``), not
    until the verification answers: a batch whose verification failed and will be
    retried keeps later batches out, which would otherwise be appended before it and
    leave a gap it cannot fill."""

    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool
    """Transactions v2 (Produce v12+): the first batch where the producer has no state
    must start at sequence 0."""
    created_ms: int

    def update(self, sequence: int, epoch: int) -> None:
        """Kafka's maybeUpdateLowestSequenceAndEpoch."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}
        """Producer id -> the first offset of its open transaction."""
        self.unreplicated: collections.deque[CompletedTxn] = collections.deque()
        """Transactions whose marker may be above the high watermark (Kafka's
        ``unreplicatedTxns``): they count as open for the last stable offset until the
        high watermark passes their marker, which a new leader could otherwise lack."""
        self._appends: dict[int, int] = {}
        """Producer id -> how many of its batches and markers were appended (the
        verification guard: see ``verification_guard``)."""
        self._verifying: dict[int, VerificationState] = {}
        """Producer id -> its verification state (``begin_verification``)."""

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a batch from a client before it is appended.

        Returns the metadata of the original batch if this one is a retried duplicate,
        ``None`` if it should be appended; raises ``KafkaError`` if it must be rejected.
        """
        entry = self.producers.get(header.producer_id)
        if entry is None:
            if header.base_sequence != NO_SEQUENCE:
                self._check_verifying(header, has_batches=False)
            return None  # a producer we know nothing of may start at any sequence
        if header.producer_epoch < entry.producer_epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"Epoch {header.producer_epoch} of producer {header.producer_id} "
                             f"is older than the last seen epoch {entry.producer_epoch}")
        if header.base_sequence == NO_SEQUENCE:
            return None  # a coordinator's batch (TxnOffsetCommit): fenced, not sequenced
        duplicate = entry.find_duplicate(header)
        if duplicate is not None:
            return duplicate
        self._check_verifying(header, has_batches=bool(entry.batches))
        if header.producer_epoch != entry.producer_epoch:
            if header.base_sequence != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(ErrorCode.out_of_order_sequence_number,
                                 f"Invalid sequence number {header.base_sequence} for the new "
                                 f"epoch {header.producer_epoch} of producer "
                                 f"{header.producer_id}; expected 0")
        else:
            # Kafka's checkSequence: an entry with no batch left of its epoch (a
            # transactions-v2 marker bumped the epoch and cleared them) expects sequence 0;
            # only a producer of unknown epoch may start anywhere.
            last = entry.last_seq if entry.batches else NO_SEQUENCE
            if entry.producer_epoch != NO_PRODUCER_EPOCH and \
                    not in_sequence(last, header.base_sequence):
                raise KafkaError(ErrorCode.out_of_order_sequence_number,
                                 f"Out of order sequence number for producer "
                                 f"{header.producer_id}: found {header.base_sequence}, "
                                 f"expected {last + 1}")
        return None

    def _check_verifying(self, header: BatchHeader, has_batches: bool) -> None:
        """Kafka's checkSequence against the verification state: a batch after one of
        the producer's being (or failed to be) verified is out of order, since appended
        it would leave a gap the earlier batch cannot fill; with transactions v2 a
        producer with no batch here starts at sequence 0."""
        verifying = self._verifying.get(header.producer_id)
        if verifying is None:
            return
        if verifying.supports_epoch_bump and header.base_sequence != 0 and not has_batches:
            raise KafkaError(ErrorCode.out_of_order_sequence_number,
                             f"Invalid sequence number {header.base_sequence} for producer "
                             f"{header.producer_id}: expected sequence 0 for a transactions "
                             f"v2 producer with no existing state")
        if header.base_sequence > verifying.lowest_sequence:
            raise KafkaError(ErrorCode.out_of_order_sequence_number,
                             f"Out of order sequence number for producer "
                             f"{header.producer_id}: found {header.base_sequence}, earliest "
                             f"seen sequence {verifying.lowest_sequence}")

    def begin_verification(self, producer_id: int, first_sequence: int, epoch: int,
                           supports_epoch_bump: bool, now_ms: int) -> None:
        """A transactional batch of the producer from ``first_sequence`` is verified with
        its coordinator before it may open a transaction here (Kafka's
        maybeCreateVerificationStateEntry)."""
        state = self._verifying.get(producer_id)
        if state is None:
            self._verifying[producer_id] = VerificationState(
                first_sequence, epoch, supports_epoch_bump, now_ms)
        else:
            state.update(first_sequence, epoch)

    def _verified_batch_appended(self, header: BatchHeader) -> None:
        """A transactional batch or marker of the producer was appended: its verification
        state goes (Kafka's updateProducers), unless a transactions-v2 marker of the
        epoch the state is for, whose next transaction's verification already began."""
        state = self._verifying.get(header.producer_id)
        if state is not None and not (state.supports_epoch_bump and header.is_control
                                      and header.producer_epoch == state.epoch):
            del self._verifying[header.producer_id]

    def verification_guard(self, producer_id: int) -> int:
        """Taken before a leader asks the coordinator whether a batch may open a
        transaction (KIP-890, Kafka's VerificationGuard): the answer is only good while
        nothing of the producer was appended meanwhile (``guard_holds``). A marker
        written while the answer was on the wire ends the transaction it verified."""
        return self._appends.get(producer_id, 0)

    def guard_holds(self, producer_id: int, guard: int) -> bool:
        return self._appends.get(producer_id, 0) == guard

    def has_ongoing(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def update(self, header: BatchHeader, first_offset: int, last_offset: int) -> None:
        """Record an appended batch (from a client, a follower fetch or log recovery)."""
        if header.producer_id < 0:
            return
        if header.is_transactional:
            self._verified_batch_appended(header)
        self._appends[header.producer_id] = self._appends.get(header.producer_id, 0) + 1
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        if header.base_sequence != NO_SEQUENCE and not header.is_control:
            entry.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                               first_offset, last_offset, header.max_timestamp))
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        if header.is_transactional and not header.is_control and \
                entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self.ongoing[header.producer_id] = first_offset

    def check_marker(self, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int) -> None:
        """A COMMIT or ABORT marker from the transaction coordinator (WriteTxnMarkers):
        refused if the producer has moved to a newer epoch, or another coordinator with a
        newer epoch has written for it (Kafka's ``appendEndTxnMarker`` checks)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"Marker epoch {producer_epoch} of producer {producer_id} is "
                             f"older than the last seen epoch {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.transaction_coordinator_fenced,
                             f"Marker coordinator epoch {coordinator_epoch} for producer "
                             f"{producer_id} is older than {entry.coordinator_epoch}")

    def end_transaction(self, header: BatchHeader, offset: int, aborted: bool,
                        coordinator_epoch: int) -> CompletedTxn:
        """A marker at ``offset`` was appended: the producer's transaction is closed (one
        with no batch here closes at the marker itself)."""
        self._verified_batch_appended(header)
        self._appends[header.producer_id] = self._appends.get(header.producer_id, 0) + 1
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        self.ongoing.pop(header.producer_id, None)
        completed = CompletedTxn(header.producer_id, offset if first is None else first,
                                 offset, aborted)
        self.unreplicated.append(completed)
        return completed

    def unstable_below(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction not decided for good: open, or
        closed by a marker at or above ``high_watermark`` (which a new leader could lack);
        the last stable offset cannot pass it (Kafka's ``firstUnstableOffset``)."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()
        firsts = [t.first_offset for t in unreplicated]
        unstable = self.first_unstable_offset()
        if unstable is not None:
            firsts.append(unstable)
        return min(firsts, default=None)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction: the last stable offset cannot
        pass it."""
        return min(self.ongoing.values()) if self.ongoing else None

    def truncate(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        """Forget producers idle longer than ``producer.id.expiration.ms``."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None
                   and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        for pid in [pid for pid, v in self._verifying.items()
                    if now_ms - v.created_ms >= expiration_ms]:
            del self._verifying[pid]
