"""Simulated share consumers (KIP-932) of one share-partition whose leader changes, under
seeded timing: acquisitions, acknowledgements, acquisition locks running out, delivery
limits, failed state writes and the dead-letter queue (KIP-1191).

What runs is the real code wherever it is sans-I/O: each leader of the partition keeps
the share group's in-flight records in a real ``SharePartition`` (``acquire``,
``begin_acknowledge`` then ``commit`` or ``rollback``, ``expire_locks``,
``release_member``, ``archiving`` / ``archived``, ``state_batches``), and a new leader
builds it with ``SharePartition.from_state`` from what the share coordinator stored,
merged as the coordinator merges writes (the real ``combine_state_batches``).

What is modelled is the glue, as ``SharePartitionManager`` drives the core:

* ``Leader`` is the manager of one leader incarnation: ShareFetch acquires from the log's
  batches from ``next_fetch_offset`` on (``max_records`` drawn, in either acquire mode);
  ShareAcknowledge runs ``begin_acknowledge`` and writes the update to the share
  coordinator, one write at a time (the manager's per-partition lock), then commits it or,
  when the write fails, rolls it back; the lock timer fires ``expire_locks`` at the next
  deadline (a little late, as a busy event loop is), and records whose leases ended are
  written as a whole state; with a dead-letter queue the ARCHIVING records are produced to
  it (which may fail and is retried) and then ``archived`` and written. Writes take time
  and sometimes fail; half of those that fail are stored all the same (the leader
  gave up on an answer the coordinator's commit was late for).
* the share coordinator's state is the start offset and the batches the writes left.
* a ``Consumer`` fetches, holds what it acquired for a processing time (sometimes longer
  than the acquisition lock), then acknowledges each record ACCEPT, RELEASE, REJECT or
  RENEW (KIP-1222: it keeps the record and acknowledges it again later), one type per
  run or one per record; it sometimes leaves (its session closes: ``release_member``) or
  dies (its locks run out), and a new member takes its place.
* a leader change loses what the leader held in memory: every lease ends, the write in
  flight was stored or not, answers in flight are lost; the new leader starts from the
  stored state.

Everything is drawn from one ``random.Random(seed)``, including the group's limits
(``group.share.delivery.count.limit``, ``group.share.record.lock.duration.ms``,
``group.share.partition.max.record.locks``) and whether it has a dead-letter queue.

Invariants (a ``Violation`` names the ``Invariant`` that broke). The checker keeps each
record's leases and deliveries from what members were told, not from the core's state:

1. one holder: a record is never handed to a member while another lease of it is live
   (acquired, not settled, released or ended by a lock timer that ran, and before its
   deadline, which a RENEW the member was told succeeded moves on).
2. acknowledged by the holder: an acknowledgement is accepted if and only if each of its
   records at or above the start offset is held by the member under a lease that has not
   ended (a lease past its deadline ends when the lock timer runs).
3. accepted once: a record is told accepted at most once, and a record told accepted or
   rejected is never delivered again (also not by a new leader).
4. delivery limit: each delivery of a record counts one (from the stored count after a
   leader change), no record is delivered more than the limit, and a record that used
   its deliveries is archived when its lease ends.
5. dead letters: only records rejected or out of deliveries go to the dead-letter queue,
   each once per leadership (a new leader resends what the old one had not archived),
   with that cause (the ``__dlq.errors.message`` header) and their delivery count.
6. after healing (consumers accept all they get, no new records, no failures), the start
   offset reaches the log end within a bound and the stored state has it.
"""

from __future__ import annotations

import collections
import enum
import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ottla.broker.share.share_partition import (
    DELIVERY_COUNT_EXCEEDED,
    REJECTED,
    RESTORED,
    AcknowledgeType,
    AcquiredRecords,
    PendingUpdate,
    RecordState,
    SharePartition,
)
from ottla.coordinator.share.combiner import combine_state_batches
from ottla.coordinator.share.state import PersisterStateBatch
from ottla.protocol.errors import ErrorCode

A = AcknowledgeType
CONSUMERS = 3
MAX_DELAY_MS = 5
"""A message's delay between a consumer and the leader."""
WRITE_MS = (1, 40)
"""How long a write to the share coordinator takes."""
STORED_THOUGH_FAILED = 0.5
"""The share of failed writes the share coordinator stored all the same."""
TIMER_LAG_MS = (0, 10)
REQUEST_TIMEOUT_MS = 1000
"""A consumer waits that long for an answer (one lost with its leader)."""
"""How late the lock timer fires."""
TRACE_LENGTH = 200


class Invariant(enum.Enum):
    """The rules a run is held to (numbered as in the module's docstring)."""

    ONE_HOLDER = "1. a record is never handed out while another lease of it is live"
    ACK_BY_HOLDER = "2. an acknowledgement is accepted iff the member holds its records"
    ACCEPTED_ONCE = "3. a record is accepted at most once, never delivered once settled"
    DELIVERY_LIMIT = "4. each delivery counts one, at most the limit, then archived"
    DEAD_LETTERS = "5. only rejected or used-up records go to the dead-letter queue, once"
    QUIET = "6. after healing the start offset reaches the log end"


class Violation(AssertionError):
    """A broken invariant; the message starts with ``[NAME]`` of its ``invariant``."""

    def __init__(self, invariant: Invariant, detail: str) -> None:
        super().__init__(f"[{invariant.name}] {detail}")
        self.invariant = invariant


@dataclass
class Stats:
    deliveries: int = 0
    redeliveries: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    renewed: int = 0
    acks_refused: int = 0
    locks_expired: int = 0
    archived_at_limit: int = 0
    writes_failed: int = 0
    writes_stored_though_failed: int = 0
    leader_changes: int = 0
    members_left: int = 0
    members_died: int = 0
    dead_letters: int = 0


@dataclass(slots=True)
class Lease:
    member: str
    deadline: int
    ended: bool = False


@dataclass(frozen=True, slots=True)
class Settings:
    delivery_limit: int
    lock_ms: int
    max_record_locks: int
    dead_letter: bool


Acks = list[tuple[int, int, list[int]]]


# --- the leader ------------------------------------------------------------------------------


@dataclass(slots=True)
class Job:
    """A write under the partition's lock: an acknowledgement (``acks`` of ``member``,
    answered through ``answer``) or the whole state (``acks`` None)."""

    member: str = ""
    acks: Acks | None = None
    answer: Callable[[ErrorCode], None] | None = None
    begun: int = 0
    """When ``begin_acknowledge`` ran (a RENEW's lock runs from then)."""


class Leader:
    """One leader incarnation of the partition: its ``SharePartition`` and the manager's
    drive of it."""

    def __init__(self, sim: ShareCluster, incarnation: int) -> None:
        self.sim = sim
        self.incarnation = incarnation
        self.alive = True
        s = sim.settings
        self.sp = SharePartition.from_state(
            sim.stored_start, list(sim.stored_batches), max_delivery_count=s.delivery_limit,
            lock_duration_ms=s.lock_ms, max_record_locks=s.max_record_locks)
        self.sp.dead_letter = s.dead_letter
        self.jobs: collections.deque[Job] = collections.deque()
        self.busy: tuple[Job, PendingUpdate | None, tuple[int, list[PersisterStateBatch]]] \
            | None = None
        self.dirty = False
        self.timer_at: int | None = None
        self.dead_lettering = False
        self.dead_lettered: set[int] = set()
        self.restored = {o for b in sim.stored_batches
                         if b.delivery_state == RecordState.ARCHIVING
                         for o in range(max(b.first_offset, sim.stored_start),
                                        b.last_offset + 1)}
        """Records stored ARCHIVING: the dead-letter queue is to have them again."""

    # --- ShareFetch ------------------------------------------------------------------------

    def fetch(self, member: str, max_records: int, record_limit: bool) -> list[AcquiredRecords]:
        sim = self.sim
        offset = self.sp.next_fetch_offset()
        fetched = [(f, la) for f, la in sim.log if la >= offset]
        if not fetched:
            return []
        acquired = self.sp.acquire(member, fetched, max_records, sim.now, record_limit)
        sim.check_acquired(member, acquired)
        if acquired:
            self.timer(sim.now + self.sp.lock_duration_ms)
        return acquired

    # --- ShareAcknowledge and the writes -----------------------------------------------------

    def acknowledge(self, member: str, acks: Acks, answer: Callable[[ErrorCode], None]
                    ) -> None:
        self.jobs.append(Job(member, acks, answer))
        self.next_job()

    def write_later(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.jobs.append(Job())
            self.next_job()

    def next_job(self) -> None:
        sim = self.sim
        while self.busy is None and self.jobs and self.alive:
            job = self.jobs.popleft()
            sp = self.sp
            if job.acks is None:
                if not self.dirty:
                    continue
                self.dirty = False
                write = (sp.start_offset, sp.state_batches())
                update = None
            else:
                before = sp.start_offset
                job.begun = sim.now
                result = sp.begin_acknowledge(job.member, job.acks, sim.now)
                sim.check_acknowledgement(self, job.member, job.acks, before, result)
                if isinstance(result, ErrorCode):
                    assert job.answer is not None
                    job.answer(result)
                    continue
                update = result
                write = (result.start_offset, result.batches)
            self.busy = (job, update, write)
            sim.after(sim.rng.randint(*WRITE_MS), self.written, self.busy)

    def written(self, busy: Any) -> None:
        if not self.alive or busy is not self.busy:
            return
        sim = self.sim
        job, update, write = busy
        self.busy = None
        ok = not sim.chaos or sim.rng.random() >= sim.write_failures
        if ok:
            sim.store(*write)
        else:
            sim.stats.writes_failed += 1
            if sim.rng.random() < STORED_THOUGH_FAILED:
                # Timed out here, yet the coordinator stored it (its append committed
                # after the leader gave up on the answer).
                sim.stats.writes_stored_though_failed += 1
                sim.store(*write)
        if update is not None:
            assert job.answer is not None
            if ok:
                self.sp.commit(update)
                sim.acknowledgement_written(job.member, job.acks, job.begun)
                job.answer(ErrorCode.none)
            else:
                self.sp.rollback(update)
                self.timer(sim.now)  # leases that ran out meanwhile
                job.answer(ErrorCode.coordinator_not_available)
        elif not ok:
            sim.after(sim.rng.randint(20, 100), self.write_later)
        self.dead_letter_later()
        self.next_job()

    # --- the lock timer ------------------------------------------------------------------

    def timer(self, deadline: int) -> None:
        if self.timer_at is not None and self.timer_at <= deadline:
            return
        self.timer_at = deadline
        lag = self.sim.rng.randint(*TIMER_LAG_MS)
        self.sim.after(max(0, deadline - self.sim.now) + lag, self.fire, deadline)

    def fire(self, deadline: int) -> None:
        if not self.alive or self.timer_at != deadline:
            return
        self.timer_at = None
        sim = self.sim
        before = self.sp.acquired_count()
        sim.locks_expiring(self)
        following = self.sp.expire_locks(sim.now)
        if self.sp.acquired_count() != before:
            self.write_later()
            self.dead_letter_later()
        if following is not None:
            self.timer(following)

    def release_member(self, member: str) -> None:
        self.sim.member_released(self, member)
        if self.sp.release_member(member):
            self.write_later()
            self.dead_letter_later()

    # --- the dead-letter queue -------------------------------------------------------------

    def dead_letter_later(self) -> None:
        if self.dead_lettering or not self.sp.archiving() or not self.alive:
            return
        self.dead_lettering = True
        self.sim.after(self.sim.rng.randint(1, 30), self.dead_letter)

    def dead_letter(self) -> None:
        if not self.alive:
            return
        sim = self.sim
        runs = self.sp.archiving()
        if not runs:
            self.dead_lettering = False
            return
        if sim.chaos and sim.rng.random() < sim.write_failures:
            sim.after(sim.rng.randint(20, 100), self.dead_letter)  # the produce failed
            return
        first, last, count, cause = runs[0]
        sim.dead_lettered(self, first, last, count, cause)
        if self.sp.archived(first, last):
            self.write_later()
        sim.after(sim.rng.randint(1, 30), self.dead_letter)


# --- the consumers -----------------------------------------------------------------------------


class Consumer:
    """A share consumer: one request at a time, a member id per incarnation."""

    def __init__(self, sim: ShareCluster, index: int) -> None:
        self.sim = sim
        self.index = index
        self.incarnation = 0
        self.member = ""
        self.held: dict[int, int] = {}
        """The records it holds: offset -> delivery count."""
        self.requests = itertools.count(1)
        self.waiting: int | None = None
        """The request it waits for the answer of."""

    def start(self) -> None:
        self.incarnation += 1
        self.member = f"member-{self.index}.{self.incarnation}"
        self.held = {}
        self.waiting = None
        self.sim.after(self.sim.rng.randint(0, 20), self.fetch, self.incarnation)

    def fetch(self, incarnation: int) -> None:
        sim = self.sim
        if incarnation != self.incarnation or self.waiting is not None:
            return
        leader = sim.leader
        if leader is None:
            sim.after(20, self.fetch, incarnation)
            return
        max_records = sim.rng.randint(1, 8)
        record_limit = sim.rng.random() < 0.5
        request = self.waiting = next(self.requests)

        def arrive() -> None:
            if not leader.alive:
                return
            acquired = leader.fetch(self.member, max_records, record_limit)
            sim.after(sim.rng.randint(1, MAX_DELAY_MS), self.fetched, incarnation, request,
                      acquired)

        sim.after(sim.rng.randint(1, MAX_DELAY_MS), arrive)
        sim.after(REQUEST_TIMEOUT_MS, self.timed_out, incarnation, request)

    def answer_for(self, incarnation: int, request: int) -> bool:
        """Whether an answer (or a timeout) is the one this incarnation waits for."""
        if incarnation != self.incarnation or self.waiting != request:
            return False
        self.waiting = None
        return True

    def timed_out(self, incarnation: int, request: int) -> None:
        if self.answer_for(incarnation, request):
            self.sim.after(1, self.fetch, incarnation)

    def fetched(self, incarnation: int, request: int, acquired: list[AcquiredRecords]
                ) -> None:
        sim = self.sim
        if not self.answer_for(incarnation, request):
            return
        for a in acquired:
            for offset in range(a.first_offset, a.last_offset + 1):
                self.held[offset] = a.delivery_count
        if not self.held:
            sim.after(sim.rng.randint(5, 50), self.fetch, incarnation)
            return
        lock = sim.settings.lock_ms
        if sim.stopping:
            work = sim.rng.randint(1, 10)
        elif sim.rng.random() < 0.2:
            work = sim.rng.randint(lock, 2 * lock)  # slower than the lock
        else:
            work = sim.rng.randint(1, lock // 2)
        sim.after(work, self.acknowledge, incarnation)

    def acknowledge(self, incarnation: int) -> None:
        sim = self.sim
        if incarnation != self.incarnation or self.waiting is not None or not self.held:
            return
        leader = sim.leader
        offsets = sorted(self.held)
        if sim.stopping:
            kinds = [A.ACCEPT] * len(offsets)
        else:
            kinds = [sim.rng.choices((A.ACCEPT, A.RELEASE, A.REJECT, A.RENEW),
                                     (70, 12, 8, 10))[0] for _ in offsets]
            if sim.rng.random() < 0.5:
                kinds = [kinds[0]] * len(offsets)
        acks: Acks = []
        for offset, kind in zip(offsets, kinds, strict=True):
            last = acks[-1] if acks else None
            if last is not None and last[1] + 1 == offset:
                acks[-1] = (last[0], offset, [*last[2], kind])
            else:
                acks.append((offset, offset, [kind]))
        acks = [(f, la, [ks[0]] if len(set(ks)) == 1 else ks) for f, la, ks in acks]
        renewed = {o for o, k in zip(offsets, kinds, strict=True) if k == A.RENEW}

        request = self.waiting = next(self.requests)

        def answered(error: ErrorCode) -> None:
            sim.after(sim.rng.randint(1, MAX_DELAY_MS), self.acknowledged, incarnation,
                      request, error, renewed)

        def arrive() -> None:
            if leader is not None and leader.alive:
                leader.acknowledge(self.member, acks, answered)

        sim.after(sim.rng.randint(1, MAX_DELAY_MS), arrive)
        sim.after(REQUEST_TIMEOUT_MS, self.timed_out, incarnation, request)

    def acknowledged(self, incarnation: int, request: int, error: ErrorCode,
                     renewed: set[int]) -> None:
        sim = self.sim
        if not self.answer_for(incarnation, request):
            return
        if error == ErrorCode.none and renewed:
            self.held = {o: c for o, c in self.held.items() if o in renewed}
            sim.after(sim.rng.randint(1, sim.settings.lock_ms // 2), self.acknowledge,
                      incarnation)
            return
        self.held = {}
        sim.after(sim.rng.randint(1, 20), self.fetch, incarnation)

    def leave(self) -> None:
        """Its session closes: the leader releases its records."""
        leader = self.sim.leader
        if leader is not None:
            leader.release_member(self.member)
        self.start()

    def die(self) -> None:
        """It stops answering: its locks run out."""
        self.incarnation += 1
        self.sim.after(self.sim.rng.randint(100, 500), self.start)


# --- the cluster -----------------------------------------------------------------------------


class ShareCluster:
    FAULT_KINDS = ("write-failures", "leave", "die", "leader-change")
    faults_off: frozenset[str] = frozenset()
    """Fault kinds not injected: a fault drawn of one of them is skipped (the shrinker's
    knob; the run stays a function of the seed and this set)."""
    op_interval_ms: int | None = None
    """The least time between two batches produced (the shrinker's other knob: a batch
    due sooner waits)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.injected: collections.Counter[str] = collections.Counter()
        self.operations = 0
        """Batches produced (all under chaos: the heal stops the producer)."""
        self.next_operation_ms = 0
        self.rng = rng = random.Random(seed)
        self.settings = Settings(delivery_limit=rng.choice((1, 2, 3, 5)),
                                 lock_ms=rng.choice((100, 300, 1000)),
                                 max_record_locks=rng.choice((8, 30, 200)),
                                 dead_letter=rng.random() < 0.5)
        self.now = 0
        self.chaos = False
        self.stopping = False
        self.write_failures = 0.0
        self.stats = Stats()
        self.events: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self.seq = itertools.count()
        self.trace: collections.deque[tuple[int, str, tuple[Any, ...]]] = \
            collections.deque(maxlen=TRACE_LENGTH)
        self.log: list[tuple[int, int]] = []
        """The partition's batches: (first, last) offsets."""
        self.stored_start = 0
        self.stored_batches: list[PersisterStateBatch] = []
        """The share coordinator's state of the share-partition."""
        self.incarnations = itertools.count(1)
        self.leader: Leader | None = None
        # What the checker knows, beside the system.
        self.leases: dict[int, Lease] = {}
        self.deliveries: dict[int, int] = {}
        """Deliveries of each record as its leader counts them."""
        self.settled: dict[int, str] = {}
        """Records told accepted or rejected: how."""
        self.used_up: set[int] = set()
        """Records whose lease ended at their last delivery: archived."""
        self.start_leader()
        self.consumers = [Consumer(self, i) for i in range(CONSUMERS)]
        for consumer in self.consumers:
            consumer.start()
        self.after(0, self.produce)
        self.after(rng.randint(200, 800), self.inject_fault)

    # --- the event loop ------------------------------------------------------------------

    def note(self, text: str, *args: Any) -> None:
        self.trace.append((self.now, text, args))

    def history(self) -> str:
        steps = "\n".join(f"{at:>7} ms  {text.format(*args)}" for at, text, args in self.trace)
        return f"({self.settings})\n{steps}"

    def after(self, delay: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.events, (self.now + delay, next(self.seq), fn, args))

    def run_until(self, end_ms: int, chaos: bool | None = None) -> None:
        if chaos is not None:
            self.chaos = chaos
        while self.events and self.events[0][0] <= end_ms:
            at, _, fn, args = heapq.heappop(self.events)
            self.now = at
            fn(*args)
        self.now = max(self.now, end_ms)

    @property
    def log_end(self) -> int:
        return self.log[-1][1] + 1 if self.log else 0

    def produce(self) -> None:
        if self.stopping:
            return
        if self.op_interval_ms is not None:
            if self.now < self.next_operation_ms:
                self.after(self.next_operation_ms - self.now, self.produce)
                return
            self.next_operation_ms = self.now + self.op_interval_ms
        self.operations += 1
        first = self.log_end
        self.log.append((first, first + self.rng.randint(0, 3)))
        self.after(self.rng.randint(5, 60), self.produce)

    # --- the leader coming and going ----------------------------------------------------------

    def start_leader(self) -> None:
        if self.leader is not None:
            return
        leader = self.leader = Leader(self, next(self.incarnations))
        # Every lease ended with the old leader; deliveries count on from the stored state.
        for lease in self.leases.values():
            lease.ended = True
        self.deliveries = {}
        for b in self.stored_batches:
            for offset in range(max(b.first_offset, self.stored_start), b.last_offset + 1):
                self.deliveries[offset] = b.delivery_count
        self.used_up = {o for o in self.used_up if self.stored_state(o) in (
            RecordState.ARCHIVED, RecordState.ARCHIVING)}
        for offset, how in self.settled.items():
            if offset >= self.stored_start and self.stored_state(offset) not in (
                    RecordState.ACKNOWLEDGED, RecordState.ARCHIVED, RecordState.ARCHIVING):
                raise Violation(Invariant.ACCEPTED_ONCE, f"record {offset} was told {how} "
                                f"but is stored as {self.stored_state(offset)}")
        self.note("leader {} starts at {} from {}", leader.incarnation, leader.sp.start_offset,
                  self.stored_batches)
        leader.dead_letter_later()

    def stored_state(self, offset: int) -> RecordState | None:
        for b in self.stored_batches:
            if b.first_offset <= offset <= b.last_offset:
                return RecordState(b.delivery_state)
        return None

    def change_leader(self) -> None:
        leader = self.leader
        if leader is None:
            return
        leader.alive = False
        self.leader = None
        self.stats.leader_changes += 1
        if leader.busy is not None and self.rng.random() < 0.5:
            self.store(*leader.busy[2])  # the write in flight was stored; its answer is lost
        self.note("leader {} goes (stored start {})", leader.incarnation, self.stored_start)
        self.after(self.rng.randint(10, 200), self.start_leader)

    def store(self, start: int, batches: list[PersisterStateBatch]) -> None:
        self.stored_batches = combine_state_batches(self.stored_batches, batches, start)
        self.stored_start = start

    # --- faults ----------------------------------------------------------------------------

    def inject_fault(self) -> None:
        if not self.chaos:
            return
        rng = self.rng
        choice = rng.random()
        kind = "write-failures" if choice < 0.2 else "leave" if choice < 0.4 else \
            "die" if choice < 0.55 else "leader-change" if choice < 0.7 else None
        if kind is not None and kind not in self.faults_off:
            self.injected[kind] += 1
            if kind == "write-failures":
                self.write_failures = rng.choice((0.0, 0.1, 0.3))
                self.note("state writes fail with probability {}", self.write_failures)
            elif kind == "leave":
                self.stats.members_left += 1
                consumer = rng.choice(self.consumers)
                self.note("consumer {} leaves", consumer.index)
                consumer.leave()
            elif kind == "die":
                self.stats.members_died += 1
                consumer = rng.choice(self.consumers)
                self.note("consumer {} dies", consumer.index)
                consumer.die()
            else:
                self.change_leader()
        self.after(rng.randint(100, 600), self.inject_fault)

    def heal(self) -> None:
        """No new records and no failures; consumers accept everything they get."""
        self.chaos = False
        self.stopping = True
        self.write_failures = 0.0
        if self.leader is None:
            self.start_leader()
        self.note("healed at log end {}", self.log_end)

    def convergence_problem(self) -> str | None:
        leader = self.leader
        if leader is None:
            return "no leader"
        # The stored start offset may lag (a write carries the start offset as it was);
        # what counts is where a new leader would start from the stored state.
        stored = SharePartition.from_state(self.stored_start, list(self.stored_batches))
        if leader.sp.start_offset != self.log_end or stored.start_offset != self.log_end:
            return (f"start offset {leader.sp.start_offset}, stored {self.stored_start} "
                    f"(a new leader starts at {stored.start_offset}), log end {self.log_end}")
        return None

    # --- the checker -------------------------------------------------------------------------

    def check_acquired(self, member: str, acquired: list[AcquiredRecords]) -> None:
        limit = self.settings.delivery_limit
        for a in acquired:
            for offset in range(a.first_offset, a.last_offset + 1):
                lease = self.leases.get(offset)
                if lease is not None and not lease.ended and self.now < lease.deadline:
                    raise Violation(Invariant.ONE_HOLDER, f"record {offset} handed to "
                                    f"{member} while {lease.member} holds it until "
                                    f"{lease.deadline}")
                if offset in self.settled:
                    raise Violation(Invariant.ACCEPTED_ONCE, f"record {offset} handed to "
                                    f"{member} after it was {self.settled[offset]}")
                expected = self.deliveries.get(offset, 0) + 1
                if a.delivery_count != expected or a.delivery_count > limit or \
                        offset in self.used_up:
                    raise Violation(Invariant.DELIVERY_LIMIT, f"record {offset} handed to "
                                    f"{member} as delivery {a.delivery_count}, its delivery "
                                    f"{expected} (limit {limit})")
                self.deliveries[offset] = expected
                if expected > 1:
                    self.stats.redeliveries += 1
                self.stats.deliveries += 1
                self.leases[offset] = Lease(member, self.now + self.settings.lock_ms)
        if acquired:
            self.note("{} acquires {}", member,
                      [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired])

    def lease_ended(self, offset: int, lease: Lease) -> None:
        lease.ended = True
        if self.deliveries.get(offset, 0) >= self.settings.delivery_limit and \
                offset not in self.settled:
            self.used_up.add(offset)
            self.stats.archived_at_limit += 1

    @staticmethod
    def being_written(leader: Leader) -> dict[int, tuple[int, int]]:
        """The records of the acknowledgement being written: offset -> (type, when it
        began). Only RENEWed ones are still leased meanwhile (with their new lock)."""
        if leader.busy is None or leader.busy[0].acks is None:
            return {}
        job = leader.busy[0]
        assert job.acks is not None
        return {offset: (types[0] if len(types) == 1 else types[offset - first], job.begun)
                for first, last, types in job.acks for offset in range(first, last + 1)}

    def still_leased(self, leader: Leader, offset: int, lease: Lease) -> int | None:
        """The deadline of a lease the core still holds, or None for a record being
        acknowledged other than by RENEW."""
        kind, begun = self.being_written(leader).get(offset, (None, 0))
        if kind is None:
            return lease.deadline
        return begun + self.settings.lock_ms if kind == A.RENEW else None

    def locks_expiring(self, leader: Leader) -> None:
        """The lock timer runs ``expire_locks`` now: leases past their deadline end, but
        not those of records an acknowledgement being written holds."""
        for offset, lease in self.leases.items():
            deadline = self.still_leased(leader, offset, lease)
            if not lease.ended and deadline is not None and deadline <= self.now:
                self.stats.locks_expired += 1
                self.lease_ended(offset, lease)

    def member_released(self, leader: Leader, member: str) -> None:
        for offset, lease in self.leases.items():
            if lease.member == member and not lease.ended and \
                    self.still_leased(leader, offset, lease) is not None:
                self.lease_ended(offset, lease)

    def check_acknowledgement(self, leader: Leader, member: str, acks: Acks, start: int,
                              result: PendingUpdate | ErrorCode) -> None:
        """At ``begin_acknowledge``: accepted iff the member holds every record it names
        at or above the start offset."""
        stale = []
        for first, last, _ in acks:
            for offset in range(max(first, start), last + 1):
                lease = self.leases.get(offset)
                if lease is None or lease.ended or lease.member != member:
                    stale.append(offset)
        accepted = not isinstance(result, ErrorCode)
        if accepted and stale:
            raise Violation(Invariant.ACK_BY_HOLDER, f"{member}'s acknowledgement {acks} "
                            f"accepted, but it does not hold {stale}: "
                            f"{[(o, self.leases.get(o)) for o in stale]}")
        if not accepted and not stale:
            raise Violation(Invariant.ACK_BY_HOLDER, f"{member}'s acknowledgement {acks} "
                            f"of records it holds refused: {result}")
        if not accepted:
            self.stats.acks_refused += 1
            self.note("{}'s acknowledgement {} refused ({})", member, acks, result)

    def acknowledgement_written(self, member: str, acks: Acks, begun: int) -> None:
        """The member is told its acknowledgement succeeded."""
        for first, last, types in acks:
            for offset in range(first, last + 1):
                lease = self.leases.get(offset)
                if lease is None or lease.ended or lease.member != member:
                    continue  # below the start offset: nothing was done
                kind = types[0] if len(types) == 1 else types[offset - first]
                if kind == A.RENEW:
                    self.stats.renewed += 1
                    lease.deadline = begun + self.settings.lock_ms
                    continue
                if kind in (A.ACCEPT, A.REJECT):
                    how = "accepted" if kind == A.ACCEPT else "rejected"
                    if offset in self.settled:
                        raise Violation(Invariant.ACCEPTED_ONCE, f"record {offset} {how} "
                                        f"by {member} after it was {self.settled[offset]}")
                    self.settled[offset] = how
                    setattr(self.stats, how, getattr(self.stats, how) + 1)
                    lease.ended = True
                else:
                    self.stats.released += 1
                    self.lease_ended(offset, lease)
        self.note("{} acknowledged {}", member, acks)

    def dead_lettered(self, leader: Leader, first: int, last: int, count: int,
                      cause: str) -> None:
        for offset in range(first, last + 1):
            self.stats.dead_letters += 1
            if offset in leader.dead_lettered:
                raise Violation(Invariant.DEAD_LETTERS, f"record {offset} sent to the "
                                f"dead-letter queue twice by leader {leader.incarnation}")
            leader.dead_lettered.add(offset)
            how = self.settled.get(offset)
            expected = RESTORED if offset in leader.restored else REJECTED \
                if how == "rejected" else DELIVERY_COUNT_EXCEEDED \
                if offset in self.used_up else None
            if cause != expected or count != self.deliveries.get(offset, 0):
                raise Violation(Invariant.DEAD_LETTERS, f"record {offset} sent to the "
                                f"dead-letter queue ({cause!r}, delivery {count}) but it "
                                f"was {how or 'not rejected'}, delivered "
                                f"{self.deliveries.get(offset, 0)} times "
                                f"(expected: {expected!r})")
        self.note("dead letters {}-{} ({}, delivery {})", first, last, cause, count)
