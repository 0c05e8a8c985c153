"""A share-partition's in-flight records (KIP-932, Kafka's SharePartition, seed 001): the
state of every record between the share-partition start offset (SPSO) and the end of
what was fetched, for one share group on the partition's leader.

Records are leased to members under acquisition locks, acknowledged one by one (ACCEPT,
RELEASE, REJECT, or a gap), redelivered when released or when a lock expires, and
archived after ``group.share.delivery.count.limit`` deliveries. State is kept per fetched
batch and split into per-offset state only when a batch is acknowledged in parts, so
the common whole-batch path stays one entry. The SPSO advances over the contiguous
prefix of terminal records (acknowledged or archived), which is what the durable state
and lag are counted from.

Sans-I/O: callers pass ``now_ms`` and the batches the log returned; acquisition-lock
deadlines are data, fired by ``expire_locks``. What must be made durable is returned as
state batches for the share coordinator. Acknowledgements follow seed 001's persist-
before-commit rule: ``begin_acknowledge`` moves the records tentatively and returns the
``PendingUpdate`` to write; its records cannot be acquired or acknowledged again until
the driver calls ``commit`` (the write succeeded: the start offset moves) or
``rollback`` (it failed: the records are as they were, still leased, and a lease that
ran out meanwhile ends at the next ``expire_locks``). A leader builds the partition
again from the durable state with ``from_state``. With a dead-letter queue (KIP-1191)
records that use up their deliveries or are rejected wait in ARCHIVING (persisted as
such, so a new leader resumes them) until the driver has produced them to the queue
and calls ``archived``. Not here yet: compacted-topic gaps.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from ottla.coordinator.share.state import PersisterStateBatch
from ottla.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids, as persisted in state batches."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(enum.IntEnum):
    """What a ShareFetch/ShareAcknowledge acknowledgement byte means (0 is a gap)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4
    """KIP-1222: keep the records, with a fresh acquisition lock."""


ACK_TARGET = {AcknowledgeType.GAP: RecordState.ARCHIVED,
              AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
              AcknowledgeType.RELEASE: RecordState.AVAILABLE,
              AcknowledgeType.REJECT: RecordState.ARCHIVED}

NO_MEMBER = ""


class InvalidRecordState(Exception):
    """An acknowledgement Kafka refuses with INVALID_RECORD_STATE."""

    code = ErrorCode.invalid_record_state


class PastAcquiredRecords(InvalidRecordState):
    """An acknowledgement reaching past the last record fetched: Kafka's INVALID_REQUEST
    ("Batch record not found")."""

    code = ErrorCode.invalid_request


DELIVERY_COUNT_EXCEEDED = "Delivery count exceeded"
REJECTED = "Record rejected by the consumer"
RESTORED = "Archiving resumed after a leader change"
"""Why a record goes to the dead-letter queue (its ``__dlq.errors.message`` header)."""


@dataclass(slots=True)
class InFlightState:
    state: RecordState
    delivery_count: int
    member_id: str = NO_MEMBER
    lock_deadline_ms: int = -1
    cause: str = ""
    """Why it is ARCHIVING (for the dead-letter queue)."""

    def copy(self) -> InFlightState:
        return InFlightState(self.state, self.delivery_count, self.member_id,
                             self.lock_deadline_ms, self.cause)

    def move(self, target: RecordState, max_delivery_count: int,
             dead_letter: bool = False) -> None:
        """Kafka's InFlightState.tryUpdateState: terminal states are sinks, AVAILABLE only
        goes to ACQUIRED, and a record made AVAILABLE that has used its deliveries is
        archived instead. With a dead-letter queue (KIP-1191) a record archived that way,
        or rejected, goes ARCHIVING first: it is archived once the queue has it."""
        if self.state.terminal or target == self.state or \
                self.state is RecordState.ARCHIVING or \
                (self.state is RecordState.AVAILABLE and target is not RecordState.ACQUIRED):
            raise InvalidRecordState(f"cannot move a record from {self.state.name} to "
                                     f"{target.name}")
        cause = REJECTED
        if target is RecordState.AVAILABLE and self.delivery_count >= max_delivery_count:
            target, cause = RecordState.ARCHIVED, DELIVERY_COUNT_EXCEEDED
        if target is RecordState.ARCHIVED and dead_letter:
            target, self.cause = RecordState.ARCHIVING, cause
        self.state = target
        if target is not RecordState.ACQUIRED:
            self.member_id = NO_MEMBER
            self.lock_deadline_ms = -1


@dataclass(slots=True)
class InFlightBatch:
    """A fetched batch's offsets: one state for all (``state``) or, once acknowledged in
    parts, one per offset (``offsets``)."""

    first_offset: int
    last_offset: int
    state: InFlightState | None
    offsets: dict[int, InFlightState] | None = None

    def split(self) -> dict[int, InFlightState]:
        if self.offsets is None:
            assert self.state is not None
            self.offsets = {o: self.state.copy()
                            for o in range(self.first_offset, self.last_offset + 1)}
            self.state = None
        return self.offsets

    def states(self) -> list[tuple[int, int, InFlightState]]:
        """(first, last, state) runs."""
        if self.offsets is None:
            assert self.state is not None
            return [(self.first_offset, self.last_offset, self.state)]
        return [(o, o, s) for o, s in sorted(self.offsets.items())]


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """What ShareFetch tells the member it holds (AcquiredRecords of the response)."""

    first_offset: int
    last_offset: int
    delivery_count: int


Undo = list[tuple["InFlightBatch", InFlightState | None, dict[int, InFlightState] | None]]


@dataclass(slots=True)
class PendingUpdate:
    """Acknowledgements applied tentatively: what to write to the share coordinator
    (the changed runs, the start offset as it is and the delivery-complete count with
    them), and how to undo them."""

    batches: list[PersisterStateBatch]
    start_offset: int
    delivery_complete_count: int
    ranges: list[tuple[int, int]]
    undo: Undo


@dataclass(slots=True)
class SharePartition:
    start_offset: int
    """The SPSO: every record below it is terminal."""
    max_delivery_count: int = 5
    """``group.share.delivery.count.limit``."""
    lock_duration_ms: int = 30_000
    """``group.share.record.lock.duration.ms``."""
    max_record_locks: int = 2000
    """``group.share.partition.max.record.locks``: records leased at once."""
    dead_letter: bool = False
    """The group has a dead-letter queue (``errors.deadletterqueue.topic.name``)."""
    batches: dict[int, InFlightBatch] = field(default_factory=dict)
    _firsts: list[int] = field(default_factory=list)
    pending: PendingUpdate | None = None
    """The acknowledgements being written, if any (one at a time)."""

    @classmethod
    def from_state(cls, start_offset: int, batches: list[PersisterStateBatch], **limits: int
                   ) -> SharePartition:
        """A share-partition as the share coordinator last stored it (a new leader, or
        this one after a restart). Offsets between the stored batches (leased but never
        settled before the old leader went) are available as never delivered."""
        sp = cls(start_offset=start_offset, **limits)
        expected = start_offset
        for b in sorted(batches, key=lambda b: b.first_offset):
            if b.last_offset < expected:
                continue
            first = max(b.first_offset, expected)
            if first > expected:
                sp._insert(InFlightBatch(expected, first - 1,
                                         InFlightState(RecordState.AVAILABLE, 0)))
            stored = RecordState(b.delivery_state)
            state = RecordState.AVAILABLE if stored in (RecordState.ACQUIRED,
                                                        RecordState.AVAILABLE) else stored
            cause = RESTORED if state is RecordState.ARCHIVING else ""
            sp._insert(InFlightBatch(first, b.last_offset,
                                     InFlightState(state, b.delivery_count, cause=cause)))
            expected = b.last_offset + 1
        sp._advance_start()
        return sp

    @property
    def end_offset(self) -> int:
        """The offset after the last cached record (the SPSO when nothing is cached)."""
        if not self._firsts:
            return self.start_offset
        return self.batches[self._firsts[-1]].last_offset + 1

    # --- reading the state --------------------------------------------------------------

    def _runs(self) -> list[tuple[int, int, InFlightState]]:
        return [run for first in self._firsts for run in self.batches[first].states()]

    def in_flight_count(self) -> int:
        """Kafka's ``numInFlightRecords``: the records cached from the start offset on,
        leased, available or settled behind one that is not (0 with nothing cached)."""
        return self.end_offset - self.start_offset

    def acquired_count(self) -> int:
        return sum(last - max(first, self.start_offset) + 1
                   for first, last, s in self._runs()
                   if s.state is RecordState.ACQUIRED and last >= self.start_offset)

    def next_fetch_offset(self) -> int:
        """Where the next fetch reads: the first AVAILABLE cached offset, else the end."""
        for first, last, s in self._runs():
            if s.state is RecordState.AVAILABLE and last >= self.start_offset and \
                    not self._is_pending(first, last):
                return max(first, self.start_offset)
        return self.end_offset

    def delivery_complete_count(self) -> int:
        """Terminal records above the start offset (KIP-1226's input to lag)."""
        return sum(last - max(first, self.start_offset) + 1
                   for first, last, s in self._runs()
                   if s.state.terminal and last >= self.start_offset)

    def state_batches(self) -> list[PersisterStateBatch]:
        """The durable view, runs of equal state merged. ACQUIRED records are stored as
        AVAILABLE (a lease does not survive a leader change) with the count they were
        made available with, as Kafka's store has them (it writes no acquired record):
        the delivery in progress is counted by the next leader when it delivers again.
        With their count, a record leased at its last delivery would come back to a new
        leader available at the limit, and be delivered once more than the limit."""
        return self._durable(self._runs(), self.start_offset)

    @staticmethod
    def _durable(runs: list[tuple[int, int, InFlightState]], start: int
                 ) -> list[PersisterStateBatch]:
        out: list[PersisterStateBatch] = []
        for first, last, s in runs:
            if last < start:
                continue
            first = max(first, start)
            state, count = s.state, s.delivery_count
            if state is RecordState.ACQUIRED:
                state, count = RecordState.AVAILABLE, count - 1
            previous = out[-1] if out else None
            if previous is not None and previous.last_offset + 1 == first and \
                    previous.delivery_state == state and previous.delivery_count == count:
                out[-1] = PersisterStateBatch(previous.first_offset, last, state, count)
            else:
                out.append(PersisterStateBatch(first, last, state, count))
        return out

    # --- acquiring ----------------------------------------------------------------------

    def acquire(self, member_id: str, fetched: list[tuple[int, int]], max_records: int,
                now_ms: int, record_limit: bool = False,
                skipped: list[tuple[int, int]] | None = None) -> list[AcquiredRecords]:
        """Lease records of the batches a fetch returned ((first, last) offsets, in order)
        to ``member_id``: new batches whole, cached ones where AVAILABLE (their delivery
        count bumped), about ``max_records`` per call (exactly, with ``record_limit``:
        Kafka's ``share.acquire.mode=record_limit``; else whole batches, batch_optimized).
        As Kafka's ``lastOffsetAndMaxRecordsToAcquire``, the records in flight (everything
        cached from the start offset on, whatever its state) stay within
        ``max_record_locks``: at the limit, only records already cached can be leased
        again. ``skipped`` batches (control markers, aborted transactions when the group
        reads committed) are archived as they are reached, never delivered, so the start
        offset moves over them."""
        budget = min(max_records, self.max_record_locks - self.in_flight_count())
        within_cache = budget <= 0
        if within_cache:
            budget = min(max_records, self.end_offset - self.next_fetch_offset())
        deadline = now_ms + self.lock_duration_ms
        acquired: list[AcquiredRecords] = []
        ranges = sorted([(f, la, False) for f, la in fetched] +
                        [(f, la, True) for f, la in skipped or ()])
        for first, last, skip in ranges:
            if budget <= 0:
                break
            first = max(first, self.start_offset)
            if last < first:
                continue
            if skip:
                self._skip(first, last)
                continue
            if within_cache:
                last = min(last, self.end_offset - 1)
                if last < first:
                    break
            if first >= self.end_offset:
                if record_limit:
                    last = min(last, first + budget - 1)
                self._insert(InFlightBatch(first, last, InFlightState(
                    RecordState.ACQUIRED, 1, member_id, deadline)))
                acquired.append(AcquiredRecords(first, last, 1))
                budget -= last - first + 1
                continue
            budget = self._reacquire(member_id, first, last, budget, deadline, record_limit,
                                     acquired)
        return acquired

    def _reacquire(self, member_id: str, first: int, last: int, budget: int, deadline: int,
                   record_limit: bool, acquired: list[AcquiredRecords]) -> int:
        for batch in self._overlapping(first, last):
            if budget <= 0:
                break
            if self._is_pending(batch.first_offset, batch.last_offset):
                continue  # being acknowledged: settled by its write first
            whole = batch.offsets is None and first <= batch.first_offset and \
                batch.last_offset <= last and batch.first_offset >= self.start_offset
            if whole and batch.state is not None and \
                    batch.state.state is RecordState.AVAILABLE and \
                    (not record_limit or batch.last_offset - batch.first_offset < budget):
                self._lease(batch.state, member_id, deadline)
                acquired.append(AcquiredRecords(batch.first_offset, batch.last_offset,
                                                batch.state.delivery_count))
                budget -= batch.last_offset - batch.first_offset + 1
                continue
            if batch.offsets is None and (batch.state is None or
                                          batch.state.state is not RecordState.AVAILABLE):
                continue
            offsets = batch.split()
            for offset in range(max(first, self.start_offset, batch.first_offset),
                                min(last, batch.last_offset) + 1):
                if budget <= 0:
                    break
                state = offsets[offset]
                if state.state is not RecordState.AVAILABLE:
                    continue
                self._lease(state, member_id, deadline)
                previous = acquired[-1] if acquired else None
                if previous is not None and previous.last_offset + 1 == offset and \
                        previous.delivery_count == state.delivery_count:
                    acquired[-1] = AcquiredRecords(previous.first_offset, offset,
                                                   state.delivery_count)
                else:
                    acquired.append(AcquiredRecords(offset, offset, state.delivery_count))
                budget -= 1
        # Fetched records past the cache are new.
        if budget > 0 and last >= self.end_offset:
            start = self.end_offset
            end = min(last, start + budget - 1) if record_limit else last
            self._insert(InFlightBatch(start, end, InFlightState(
                RecordState.ACQUIRED, 1, member_id, deadline)))
            acquired.append(AcquiredRecords(start, end, 1))
            budget -= end - start + 1
        return budget

    def _skip(self, first: int, last: int) -> None:
        """Archive offsets that hold no record to deliver: new ones from the end of the
        cache, and cached ones never delivered (a stored state's gaps)."""
        if first >= self.end_offset:
            if first == self.end_offset:
                self._insert(InFlightBatch(first, last,
                                           InFlightState(RecordState.ARCHIVED, 0)))
        else:
            for key in list(self._firsts):
                batch = self.batches[key]
                if batch.last_offset < first or batch.first_offset > last or \
                        self._is_pending(batch.first_offset, batch.last_offset):
                    continue
                for offset, state in batch.split().items():
                    if first <= offset <= last and state.delivery_count == 0 and \
                            state.state is RecordState.AVAILABLE:
                        state.state = RecordState.ARCHIVED
            if last >= self.end_offset:
                self._insert(InFlightBatch(self.end_offset, last,
                                           InFlightState(RecordState.ARCHIVED, 0)))
        self._advance_start()

    def _lease(self, state: InFlightState, member_id: str, deadline: int) -> None:
        state.move(RecordState.ACQUIRED, self.max_delivery_count)
        state.delivery_count += 1
        state.member_id = member_id
        state.lock_deadline_ms = deadline

    def _insert(self, batch: InFlightBatch) -> None:
        self.batches[batch.first_offset] = batch
        bisect.insort(self._firsts, batch.first_offset)

    # --- acknowledging --------------------------------------------------------------------

    def acknowledge(self, member_id: str,
                    acknowledgements: list[tuple[int, int, list[int]]], now_ms: int = 0
                    ) -> ErrorCode:
        """``begin_acknowledge`` and ``commit`` at once (nothing to persist)."""
        update = self.begin_acknowledge(member_id, acknowledgements, now_ms)
        if isinstance(update, ErrorCode):
            return update
        self.commit(update)
        return ErrorCode.none

    def begin_acknowledge(self, member_id: str,
                          acknowledgements: list[tuple[int, int, list[int]]],
                          now_ms: int = 0) -> PendingUpdate | ErrorCode:
        """ShareFetch's or ShareAcknowledge's (first, last, types) runs for this member: one
        type for the whole run, or one per offset. All apply tentatively, or none (a failed
        run leaves the state as it was) with INVALID_RECORD_STATE. RENEW keeps a record
        leased, its lock running from ``now_ms``. The driver writes one update at a time
        per share-partition, so none is pending here."""
        if self.pending is not None:
            raise RuntimeError("one acknowledgement write at a time")
        undo: Undo = []
        saved: set[int] = set()
        try:
            for first, last, types in acknowledgements:
                if len(types) not in (1, last - first + 1) or last < first:
                    raise InvalidRecordState("acknowledgement types do not match the range")
                if last < self.start_offset:
                    continue  # as Kafka: already archived, nothing to do
                self._check_fetched(first, last)
                self._acknowledge_run(member_id, first, last, types, undo, saved,
                                      now_ms + self.lock_duration_ms)
        except InvalidRecordState as e:
            self._undo(undo)
            return e.code
        # The start offset as it is, not as it will be (Kafka's writeShareGroupState): it
        # moves once the write succeeded, and the next write carries it. A write that
        # failed here may still be stored; with the start offset it would give, the
        # coordinator would drop the state below it while this leader goes on from the
        # old one, and records settled before would come to a new leader as never
        # delivered.
        start = self.start_offset
        changed = [run for batch, _, _ in undo for run in batch.states()]
        self.pending = PendingUpdate(
            batches=self._durable(sorted(changed, key=lambda r: r[0]), start),
            start_offset=start, delivery_complete_count=self._complete_above(start),
            ranges=[(f, la) for f, la, _ in acknowledgements], undo=undo)
        return self.pending

    def commit(self, update: PendingUpdate) -> None:
        """The update is durable: its records settle and the start offset moves."""
        if self.pending is update:
            self.pending = None
        self._advance_start()

    def rollback(self, update: PendingUpdate) -> None:
        """The write failed: the acknowledged records are as before the acknowledgement.
        Only those: other records of the batches it touched may have moved meanwhile (a
        lease ran out, the dead-letter queue took one) and stay so, or a record archived
        after its dead letter was sent would be sent again."""
        if self.pending is update:
            self.pending = None
        self._undo(update.undo, update.ranges)

    @staticmethod
    def _undo(undo: Undo, ranges: list[tuple[int, int]] | None = None) -> None:
        """Restore the batches ``undo`` saved: whole, or with ``ranges`` only the offsets
        in them of the batches split since they were saved."""
        for batch, state, offsets in reversed(undo):
            if ranges is None or batch.offsets is None:
                batch.state, batch.offsets = state, offsets
                continue
            for first, last in ranges:
                for offset in range(max(first, batch.first_offset),
                                    min(last, batch.last_offset) + 1):
                    saved = offsets[offset] if offsets is not None else state
                    assert saved is not None
                    batch.offsets[offset] = saved.copy()

    def _is_pending(self, first: int, last: int) -> bool:
        return self.pending is not None and any(
            f <= last and first <= la for f, la in self.pending.ranges)

    def _complete_above(self, start: int) -> int:
        return sum(last - max(first, start) + 1 for first, last, s in self._runs()
                   if s.state.terminal and last >= start)

    def _overlapping(self, first: int, last: int) -> list[InFlightBatch]:
        """The cached batches holding any of ``first``..``last``, in order (batches do not
        overlap, so a bisect finds the first)."""
        found = []
        for key in self._firsts[max(0, bisect.bisect_right(self._firsts, first) - 1):]:
            if key > last:
                break
            batch = self.batches[key]
            if batch.last_offset >= first:
                found.append(batch)
        return found

    def _check_fetched(self, first: int, last: int) -> None:
        """Kafka's fetchSubMapForAcknowledgementBatch: a run must end within the records
        fetched so far (INVALID_REQUEST past them)."""
        if not self._firsts:
            return  # nothing cached: the run finds nothing in flight below
        end = self.batches[self._firsts[-1]].last_offset
        if first > end:
            raise PastAcquiredRecords("Batch record not found. The first offset in request "
                                      "is past acquired records.")
        if last > end:
            raise PastAcquiredRecords("Batch record not found. The last offset in request "
                                      "is past acquired records.")

    def _acknowledge_run(self, member_id: str, first: int, last: int, types: list[int],
                         undo: Undo, saved: set[int], renewed_until: int) -> None:
        """One run of an acknowledgement. A client acknowledging record by record sends
        thousands of runs over one batch: each touches only its own offsets, and a batch's
        state is saved for the undo once (``saved``), so the whole is linear."""
        covered = 0
        for batch in self._overlapping(first, last):
            if id(batch) not in saved:
                saved.add(id(batch))
                undo.append((batch, batch.state.copy() if batch.state is not None else None,
                             {o: s.copy() for o, s in batch.offsets.items()}
                             if batch.offsets is not None else None))
            exact = batch.first_offset == first and batch.last_offset == last
            if batch.offsets is None and exact and len(types) == 1 and \
                    batch.first_offset >= self.start_offset:
                self._settle(batch.state, member_id, types[0],  # type: ignore[arg-type]
                             renewed_until)
                covered += last - first + 1
                continue
            if batch.offsets is None and (batch.state is None or
                                          batch.state.state is not RecordState.ACQUIRED):
                raise InvalidRecordState("the batch is not acquired")
            offsets = batch.split()
            for offset in range(max(first, batch.first_offset, self.start_offset),
                                min(last, batch.last_offset) + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                self._settle(offsets[offset], member_id, kind, renewed_until)
                covered += 1
        if covered == 0:
            raise InvalidRecordState(f"offsets {first}-{last} are not in flight")

    def _settle(self, state: InFlightState, member_id: str, kind: int,
                renewed_until: int) -> None:
        if state.state is not RecordState.ACQUIRED:
            raise InvalidRecordState("the records are not acquired")
        if state.member_id != member_id:
            raise InvalidRecordState("the member does not hold the records")
        if kind == AcknowledgeType.RENEW:
            state.lock_deadline_ms = renewed_until
            return
        try:
            target = ACK_TARGET[AcknowledgeType(kind)]
        except ValueError:
            raise InvalidRecordState(f"unknown acknowledgement type {kind}") from None
        state.move(target, self.max_delivery_count,
                   self.dead_letter and kind != AcknowledgeType.GAP)

    # --- leases ending ---------------------------------------------------------------------

    def release_member(self, member_id: str) -> int:
        """A member left or was fenced: its records are available again (or archived when
        they used their deliveries). How many."""
        return self._release(lambda s: s.member_id == member_id)

    def expire_locks(self, now_ms: int) -> int | None:
        """Acquisition locks past their deadline end (records available again or
        archived); the next deadline, if any."""
        self._release(lambda s: 0 <= s.lock_deadline_ms <= now_ms)
        deadlines = [s.lock_deadline_ms for _, _, s in self._runs()
                     if s.state is RecordState.ACQUIRED]
        return min(deadlines, default=None)

    def _release(self, which: Callable[[InFlightState], bool]) -> int:
        released = 0
        for first, last, state in self._runs():
            if state.state is RecordState.ACQUIRED and which(state):
                state.move(RecordState.AVAILABLE, self.max_delivery_count, self.dead_letter)
                released += last - first + 1
        if released:
            self._advance_start()
        return released

    # --- the dead-letter queue (KIP-1191) ----------------------------------------------------

    def archiving(self) -> list[tuple[int, int, int, str]]:
        """(first, last, delivery count, cause) runs waiting for the dead-letter queue."""
        out: list[tuple[int, int, int, str]] = []
        for first, last, s in self._runs():
            if s.state is not RecordState.ARCHIVING or last < self.start_offset or \
                    self._is_pending(first, last):
                continue
            previous = out[-1] if out else None
            if previous is not None and previous[1] + 1 == first and \
                    previous[2:] == (s.delivery_count, s.cause):
                out[-1] = (previous[0], last, s.delivery_count, s.cause)
            else:
                out.append((first, last, s.delivery_count, s.cause))
        return out

    def archived(self, first: int, last: int) -> int:
        """The dead-letter queue has offsets ``first``..``last``: ARCHIVING becomes
        ARCHIVED and the start offset may move. How many records."""
        done = 0
        for key in list(self._firsts):
            batch = self.batches[key]
            if batch.last_offset < first or batch.first_offset > last:
                continue
            inside = first <= batch.first_offset and batch.last_offset <= last
            if batch.offsets is None and inside and batch.state is not None:
                if batch.state.state is RecordState.ARCHIVING:
                    batch.state.state = RecordState.ARCHIVED
                    done += batch.last_offset - batch.first_offset + 1
                continue
            for offset, state in batch.split().items():
                if first <= offset <= last and state.state is RecordState.ARCHIVING:
                    state.state = RecordState.ARCHIVED
                    done += 1
        if done:
            self._advance_start()
        return done

    # --- the start offset -------------------------------------------------------------------

    def _terminal_prefix_end(self) -> int:
        """The end of the contiguous terminal prefix; records still being written count
        as not terminal."""
        start = self.start_offset
        for first, last, state in self._runs():
            if last < start:
                continue
            if first > start or not state.state.terminal or self._is_pending(first, last):
                break
            start = last + 1
        return start

    def _advance_start(self) -> None:
        """Move the SPSO over the contiguous terminal prefix and drop batches wholly
        below it (Kafka's maybeUpdateCachedStateAndOffsets)."""
        start = self._terminal_prefix_end()
        self.start_offset = start
        while self._firsts and self.batches[self._firsts[0]].last_offset < start:
            del self.batches[self._firsts.pop(0)]
