"""A simulated KRaft quorum: seeded clock, network, disk and faults around RaftReplica.

Everything that varies (delays, losses, partitions, crashes, election timers, how long
an fsync takes) comes from one ``random.Random(seed)``, so a failing seed replays
exactly. Each node's log is a :class:`SimulatedDisk`: appends become durable only when a
later flush event runs, and a crash loses whatever was not flushed, or (``torn``) keeps
some whole unflushed batches and part of the next, which the restart drops as
``FileRaftLog``'s recovery does (CRC and length checks on the batches' real bytes). A
disk fault (``eio``, ``disk-full``) makes a node's next append fail (and its next
fsync, for EIO): the node halts as Ottla's and Kafka's do on any error of the Raft IO
thread, losing what was not flushed and not holding the failed write, and restarts
later with the disk repaired. ``FSYNC_LIES_ON`` is a mutation, not a fault: no Raft
survives a voter losing what it acknowledged as durable. Snapshot writes take
time too, as the node's driver does them off its loop: a crash while one is under way
finds it written (the next start adopts it, as ``FileRaftLog`` does) or not, at random.
Proposals are batches of one to three offsets, and observers (brokers) follow the log
beside the voters. Invariants are checked as the run goes: one leader per epoch, every node's
committed entries equal one global committed log (nothing committed is lost or
reordered), a leader's high watermark is on the disks (what a crash keeps) of a majority
of its voters, and no replica ever truncates below its high watermark (``RaftError``,
raised by ``RaftReplica`` itself). A broken one raises a ``Violation`` naming its ``Invariant``.

The notable steps (faults, crashes, boots, each epoch's first leader; subclasses add
theirs) go to ``trace``, the last ``TRACE_LENGTH`` of them unless a caller keeps all
(``python -m tests.simulation --trace``); ``faults_off`` switches fault kinds off.
"""

from __future__ import annotations

import bisect
import collections
import enum
import errno
import hashlib
import heapq
import itertools
import os
import random
from dataclasses import dataclass, field
from typing import Any

from ottla.protocol.records import BatchHeader, CorruptRecord, build_batch, scan_batches
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Committed, Entry, Outgoing, Snapshot, SnapshotWrite
from ottla.raft.quorum import RaftConfig, RaftReplica, Role

TICK_MS = 10
SNAPSHOT_EVERY = 40  # offsets applied beyond the last snapshot before taking another
MAX_FSYNC_MS = 60
TRACE_LENGTH = 200
FAULT_KINDS = ("loss", "delay", "partition", "crash", "torn", "eio", "disk-full")
"""The faults ``inject_fault`` draws from, each of which a run may switch off
(``faults_off``); ``torn`` is what a crash may do to the unflushed tail."""
TORN_CHANCE = 0.7
"""How often a crash that finds unflushed batches leaves some of them and a torn one."""
FSYNC_LIES_ON: int | None = None
"""A mutation: this node's log flushes report success and persist nothing, so a crash
loses entries it acknowledged. Raft cannot survive it; the checker must catch it."""


class Invariant(enum.Enum):
    """The rules a run of the quorum is held to, one member per rule, so that a test can
    tell which rule caught a run."""

    ONE_LEADER_PER_EPOCH = "one leader per epoch"
    ONE_COMMITTED_LOG = "every node applies a prefix of one committed log, skipping nothing"
    RECOVERS = "after healing a leader is elected, commits, and the nodes catch up"
    VOTERS_AGREE = "every replica's voter set at its high watermark is the committed log's"
    VOTERS_AS_APPENDED = "a replica counts the last voter set in its log, committed or not"
    COMMITTED_IS_DURABLE = "a leader's high watermark is on the disks of a majority of its voters"


class Violation(AssertionError):
    """A broken invariant: the message starts with ``[NAME]`` of its ``invariant`` (an
    ``Invariant`` here, or a ``MetadataInvariant`` of ``metadata_cluster``), which a test
    compares with the rule it expects broken."""

    def __init__(self, invariant: enum.Enum, detail: str) -> None:
        super().__init__(f"[{invariant.name}] {detail}")
        self.invariant = invariant


class DiskFailure(OSError):
    """A write the simulated disk refused (EIO, or ENOSPC when full): raised out of the
    replica's step, as ``FileRaftLog`` raises it out of ``RaftReplica``; the node halts."""

    def __init__(self, disk: SimulatedDisk, code: int) -> None:
        super().__init__(code, os.strerror(code))
        self.disk = disk


class SimulatedDisk(MemoryLog):
    """A log whose appends are durable only after ``flush``; a crash keeps the rest, or
    a torn part of it that recovery drops (``lose_unflushed``). ``failing`` arms a fault:
    the next append fails with that errno, and the next flush too if it is EIO (a full
    disk refuses new bytes; an fsync of those it holds succeeds)."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed = 0
        """What ``flush`` reported durable: the replica acknowledges up to here."""
        self.persisted = 0
        """What a crash keeps: ``flushed``, unless the disk ``lies``."""
        self.failing: int | None = None
        self.lies = False
        """fsync reports success and persists nothing (the ``FSYNC_LIES_ON`` mutation)."""

    @property
    def flushed_end_offset(self) -> int:
        return min(self.flushed, self.end_offset)

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        if self.failing is not None:
            raise DiskFailure(self, self.failing)  # nothing of it is in the log
        super().append(entries)

    def flush(self) -> None:
        if self.failing == errno.EIO:
            raise DiskFailure(self, self.failing)
        self.flushed = self.end_offset
        if not self.lies:
            self.persisted = self.end_offset

    def truncate_to(self, offset: int) -> None:
        super().truncate_to(offset)
        self.flushed = min(self.flushed, self.end_offset)
        self.persisted = min(self.persisted, self.end_offset)

    def end_snapshot(self, write: SnapshotWrite) -> bool:
        if not super().end_snapshot(write):  # the snapshot file is written and fsynced
            return False
        end = write.snapshot.end_offset
        self.flushed = end if write.install else max(self.flushed, end)
        self.persisted = end if write.install else max(self.persisted, end)
        return True

    def unpersisted(self) -> list[tuple[int, Entry]]:
        """The entries a crash now may lose, with their base offsets."""
        start = max(self.persisted, self.start_offset)
        i = bisect.bisect_left(self._bases, start)
        return list(zip(self._bases[i:], self.entries[i:], strict=True))

    def lose_unflushed(self, written: bytes = b"") -> int:
        """A crash: the log keeps what it persisted, then the batches of ``written`` (the
        bytes of the unpersisted tail that reached the disk, a torn batch last) that
        recovery finds whole, as ``FileRaftLog``'s start does; how many it kept. The
        start fsyncs what it recovered."""
        tail = self.unpersisted()
        kept = len(recovered_batches(written, max(self.persisted, self.start_offset)))
        assert kept <= len(tail), "recovery found batches that were never written"
        end = tail[kept][0] if kept < len(tail) else self.end_offset
        self.truncate_to(max(end, self.start_offset))
        self.flushed = self.persisted = self.end_offset
        return kept


def encoded(base: int, entry: Entry) -> bytes:
    """``entry`` as the v2 batch ``FileRaftLog`` would write at ``base`` (its payload's
    repr as the first record's value: recovery checks bytes, not meaning)."""
    records: list[tuple[bytes | None, bytes | None]] = \
        [(None, repr(entry.payload).encode())] + [(None, None)] * (entry.count - 1)
    return build_batch(records, base_offset=base, partition_leader_epoch=entry.epoch)


def recovered_batches(data: bytes, next_offset: int) -> list[BatchHeader]:
    """The batches of ``data`` a log's recovery keeps (``LogSegment.recover``): each one
    whole, CRC-32C and structure checked (``check_batch``, through ``scan_batches``), its
    offsets not going backwards; it stops at the first that is not."""
    kept: list[BatchHeader] = []
    try:
        for _, header in scan_batches(data, verify=True):
            if header.base_offset < next_offset:
                break
            kept.append(header)
            next_offset = header.next_offset
    except CorruptRecord:
        pass
    return kept


@dataclass
class Faults:
    loss: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 20
    partitioned: set[frozenset[int]] = field(default_factory=set)  # cut links
    one_way: set[tuple[int, int]] = field(default_factory=set)
    """(a, b): what a sends b is lost, not what b sends a."""
    duplicate: float = 0.0
    """The chance a message is delivered twice (a retransmission)."""

    def cut(self, a: int, b: int) -> bool:
        return frozenset((a, b)) in self.partitioned or (a, b) in self.one_way


class SimulatedQuorum:
    FAULT_KINDS = FAULT_KINDS
    faults_off: frozenset[str] = frozenset()
    """Fault kinds not injected: a fault drawn of one of them is skipped (the shrinker's
    knob; the run stays a function of the seed and this set)."""
    op_interval_ms: int | None = None
    """The least time between two proposals under chaos (the shrinker's other knob: a
    leader's proposal due sooner is skipped, as the propose timer goes on; the draws after
    change, deterministically); None: every propose event proposes."""
    proposals_are_operations = True
    """False for a subclass whose counted operations are others (it spaces them itself)."""
    operations = 0
    """Proposals under chaos (set on the instance by the first)."""
    next_operation_ms = 0

    def __init__(self, seed: int, voters: int, observers: int = 0,
                 ids: list[int] | None = None) -> None:
        """Nodes ``1..voters`` vote and the next ``observers`` follow, unless ``ids``
        names them (the voters first): a whole cluster keeps brokers' ids for its
        observers."""
        self.injected: collections.Counter[str] = collections.Counter()
        self.trace: collections.deque[tuple[int, str, tuple[Any, ...]]] = \
            collections.deque(maxlen=TRACE_LENGTH)
        """The last notable steps (faults, crashes, restarts, new leaders), formatted only
        when shown."""
        self.rng = random.Random(seed)
        self.ids = list(ids) if ids is not None else list(range(1, voters + observers + 1))
        self.voter_ids = self.ids[:voters]
        self.now = 0
        self.faults = Faults()
        self.logs = {n: SimulatedDisk() for n in self.ids}
        if FSYNC_LIES_ON in self.logs:
            self.logs[FSYNC_LIES_ON].lies = True
        self.durable: dict[int, tuple[int, int | None]] = {n: (0, None) for n in self.ids}
        self.nodes: dict[int, RaftReplica | None] = {}
        self.applied: dict[int, list[Entry]] = {}
        self.applied_end: dict[int, int] = {}
        self.flushing: set[int] = set()
        self.snapshot_writes: dict[int, SnapshotWrite] = {}  # node -> being written
        self.committed: list[Entry] = []  # the one committed log every node must agree on
        self.committed_bases: list[int] = []
        self.leaders: dict[int, int] = {}  # epoch -> leader
        self.noted_leaders: set[int] = set()
        self.durable_checked = 0  # the highest high watermark found on a majority's disks
        self.events: list[tuple[int, int, str, Any]] = []
        self.seq = itertools.count()
        self.proposed = 0
        self.snapshots_loaded = 0
        self.skew: dict[int, int] = {}
        """Node -> how far its clock is off. Kafka's Raft timers run on the wall clock;
        Ottla's on a steady one (the wall clock at the node's start, then monotonic), which
        a step reaches when the node next starts. Stepped here at once: the harder case."""
        self.paused: dict[int, int] = {}
        """Node -> when a paused process resumes (SIGSTOP: it does nothing meanwhile, and
        its timers and the messages sent to it wait)."""
        for n in self.ids:
            self.boot(n)

    # --- node lifecycle ------------------------------------------------------------------

    def note(self, text: str, *args: Any) -> None:
        self.trace.append((self.now, text, args))

    def history(self) -> str:
        """The last notable steps, one a line."""
        return "\n".join(f"{at:>7} ms  {text.format(*args)}" for at, text, args in self.trace)

    def boot(self, n: int) -> None:
        epoch, voted = self.durable[n]
        self.note("node {} starts (epoch {}, voted for {}, log end {})", n, epoch, voted,
                  self.logs[n].end_offset)
        self.logs[n].failing = None  # repaired, or room made, while it was down
        replica = self.make_replica(n, epoch, voted)
        self.nodes[n] = replica
        self.applied[n] = []  # the state machine is rebuilt from the log after a restart
        self.applied_end[n] = 0
        self.after(n, replica.start(self.clock(n)))

    def make_replica(self, n: int, epoch: int, voted: int | None) -> RaftReplica:
        return RaftReplica(n, set(self.voter_ids), self.logs[n],
                           random.Random(self.rng.random()), RaftConfig(), epoch=epoch,
                           voted_for=voted)

    def clock(self, n: int) -> int:
        """Node ``n``'s clock, what its ``RaftReplica`` is given as now."""
        return self.now + self.skew.get(n, 0)

    def crash(self, n: int) -> None:
        """Volatile state gone; the quorum state and the flushed log survive."""
        self.nodes[n] = None
        write = self.snapshot_writes.pop(n, None)
        if write is not None and self.rng.random() < 0.5:
            self.logs[n].end_snapshot(write)  # it was on disk: the start adopts it
        disk = self.logs[n]
        tail = disk.unpersisted()
        written = b""
        if tail and "torn" not in self.faults_off and self.rng.random() < TORN_CHANCE:
            # Some whole batches of the unflushed tail reached the disk, then part of
            # the next one (cut short, or its length written and zeros after).
            whole = self.rng.randrange(len(tail))
            torn = encoded(*tail[whole])
            cut = self.rng.randrange(1, len(torn))
            written = b"".join(encoded(*t) for t in tail[:whole]) + torn[:cut] + \
                (bytes(len(torn) - cut) if self.rng.random() < 0.5 else b"")
            self.injected["torn"] += 1
            self.note("node {}'s crash tears batch {} after {} unflushed ones", n,
                      tail[whole][0], whole)
        disk.lose_unflushed(written)
        self.flushing.discard(n)
        self.note("node {} crashes (flushed log end {})", n, self.logs[n].end_offset)

    def halt(self, failure: DiskFailure) -> None:
        """A write failed: the node halts as Ottla's (and Kafka's) Raft IO thread does on
        any error, losing what was not flushed, and restarts once the disk is repaired
        or has room again."""
        n = next(m for m, disk in self.logs.items() if disk is failure.disk)
        self.note("node {} halts: {}", n, failure)
        self.crash(n)
        self.schedule(self.now + self.rng.randint(100, 3000), "restart", n)

    # --- events ---------------------------------------------------------------------------

    def schedule(self, at: int, kind: str, data: Any) -> None:
        heapq.heappush(self.events, (at, next(self.seq), kind, data))

    def after(self, n: int, outgoing: list[Outgoing]) -> None:
        """Persist quorum state, check invariants, then put messages on the wire."""
        replica = self.nodes[n]
        assert replica is not None
        self.durable[n] = (replica.epoch, replica.voted_for)
        if replica.role is Role.LEADER:
            first = self.leaders.setdefault(replica.epoch, n)
            if first == n and replica.epoch not in self.noted_leaders:
                self.noted_leaders.add(replica.epoch)
                self.note("node {} leads epoch {}", n, replica.epoch)
            elif first != n:
                raise Violation(Invariant.ONE_LEADER_PER_EPOCH,
                                f"epoch {replica.epoch} has two leaders: {first} and {n}")
            if replica.high_watermark > self.durable_checked:
                self.check_durable(n, replica)
        committed = replica.take_committed()
        if committed is not None:
            self.on_committed(n, replica, committed)
        self.on_state(n, replica)
        write = replica.take_snapshot_write()
        if write is not None:
            self.snapshot_writes[n] = write
            self.schedule(self.now + self.rng.randint(0, MAX_FSYNC_MS), "snapshot", (n, write))
        if self.logs[n].flushed_end_offset < self.logs[n].end_offset and \
                n not in self.flushing:
            self.flushing.add(n)
            self.schedule(self.now + self.rng.randint(0, MAX_FSYNC_MS), "flush", n)
        for out in outgoing:
            if self.rng.random() < self.faults.loss or self.faults.cut(n, out.destination):
                continue
            delay = self.rng.randint(self.faults.min_delay_ms, self.faults.max_delay_ms)
            self.schedule(self.now + delay, "deliver", (n, out.destination, out.message))
            if self.faults.duplicate and self.rng.random() < self.faults.duplicate:
                again = self.rng.randint(self.faults.min_delay_ms, self.faults.max_delay_ms)
                self.schedule(self.now + again, "deliver", (n, out.destination, out.message))

    def check_durable(self, n: int, replica: RaftReplica) -> None:
        """What leader ``n`` commits survives any crash: the entry before its high
        watermark is persisted (``SimulatedDisk.persisted``, what a crash keeps, not what
        the disk reported) by a majority of its voters, or in their snapshots."""
        hw = replica.high_watermark
        self.durable_checked = hw
        if hw <= replica.log.start_offset:
            return
        epoch = replica.log.epoch_at(hw - 1)
        holders = [v for v in replica.voters if self.persists(v, hw, epoch)]
        if len(holders) * 2 <= len(replica.voters):
            raise Violation(Invariant.COMMITTED_IS_DURABLE,
                            f"leader {n} has its high watermark at {hw}, but only voters "
                            f"{holders} of {sorted(replica.voters)} have it on disk")

    def persists(self, v: int, end: int, epoch: int) -> bool:
        """Whether node ``v``'s disk keeps the entries before ``end`` through a crash
        (the last of them in ``epoch``: the log matching property does the rest)."""
        disk = self.logs[v]
        if end <= disk.start_offset:
            return True
        return min(disk.persisted, disk.end_offset) >= end and disk.epoch_at(end - 1) == epoch

    def on_committed(self, n: int, replica: RaftReplica, committed: Committed) -> None:
        """Apply what the quorum committed; snapshot now and then. A snapshot's data is
        (the entries it covers, ``snapshot_state``) so the entries can be checked."""
        if committed.snapshot is not None:
            self.load_snapshot(n, committed.snapshot)
        self.apply(n, committed.base_offset, committed.entries)
        self.maybe_snapshot(n, replica)

    def maybe_snapshot(self, n: int, replica: RaftReplica) -> None:
        applied = self.applied_end[n]
        if applied - replica.log.start_offset >= SNAPSHOT_EVERY:
            # The log before the state machine's state goes, so lagging followers must
            # fetch the snapshot.
            replica.create_snapshot(applied, (tuple(self.applied[n]), self.snapshot_state(n)))

    def on_state(self, n: int, replica: RaftReplica) -> None:
        """After every step of node ``n`` (a subclass follows leadership here)."""

    def snapshot_state(self, n: int) -> object:
        return None

    def load_snapshot(self, n: int, snapshot: Snapshot) -> None:
        """A snapshot replaces the state: it must be a prefix of the committed log."""
        self.applied[n] = []
        self.applied_end[n] = 0
        self._record_applied(n, 0, list(snapshot.data[0]))
        if self.applied_end[n] != snapshot.end_offset:
            raise Violation(Invariant.ONE_COMMITTED_LOG,
                            f"node {n} loaded a snapshot ending at {snapshot.end_offset} whose "
                            f"entries end at {self.applied_end[n]}")
        self.snapshots_loaded += 1

    def apply(self, n: int, base: int, entries: list[Entry]) -> None:
        self._record_applied(n, base, entries)

    def _record_applied(self, n: int, base: int, entries: list[Entry]) -> None:
        """Check entries a node applies against the one committed log, and keep them."""
        applied = self.applied[n]
        if base != self.applied_end[n]:
            raise Violation(Invariant.ONE_COMMITTED_LOG,
                            f"node {n} skipped committed offsets {self.applied_end[n]}..{base}")
        for entry in entries:
            i = len(applied)
            if i < len(self.committed):
                if (self.committed[i], self.committed_bases[i]) != (entry, base):
                    raise Violation(Invariant.ONE_COMMITTED_LOG,
                                    f"node {n} committed {entry} at {base}, others "
                                    f"{self.committed[i]} at {self.committed_bases[i]}")
            else:
                self.committed.append(entry)
                self.committed_bases.append(base)
            applied.append(entry)
            base += entry.count
        self.applied_end[n] = base

    def digest(self, entries: list[Entry]) -> str:
        h = hashlib.sha256()
        for e in entries:
            h.update(repr((e.epoch, e.payload)).encode())
        return h.hexdigest()

    def run_until(self, end_ms: int, chaos: bool) -> None:
        self.start_phase(chaos)
        self.step_until(end_ms, chaos)
        self.end_phase(end_ms)

    def start_phase(self, chaos: bool) -> None:
        """A phase's timers: ticks, proposals, faults under chaos, the workload's own."""
        for n in self.ids:
            self.schedule(self.now + self.rng.randrange(TICK_MS), "tick", n)
        self.schedule(self.now + 20, "propose", None)
        if chaos:
            self.schedule(self.now + self.rng.randint(200, 2000), "fault", None)
        self.start_workload(chaos)

    def step_until(self, end_ms: int, chaos: bool) -> None:
        """Run the events due by ``end_ms`` (a whole cluster interleaves its parts so)."""
        while self.events and self.events[0][0] <= end_ms:
            at, _, kind, data = heapq.heappop(self.events)
            self.now = at
            if self.paused:
                node = data if kind in ("tick", "flush", "restart") else \
                    data[1] if kind in ("deliver", "request") else \
                    data[0] if kind == "snapshot" else None
                until = self.paused.get(node, 0) if node is not None else 0
                if until > at:  # a paused process: it runs this when it resumes
                    self.schedule(until, kind, data)
                    continue
            try:
                self.handle_event(kind, data, chaos)
            except DiskFailure as failure:
                self.halt(failure)

    def end_phase(self, end_ms: int) -> None:
        """The phase's timers stop; what is on the wire or the disk goes on."""
        self.now = end_ms
        self.events = [e for e in self.events
                       if e[2] in ("deliver", "restart", "flush", "snapshot")]
        heapq.heapify(self.events)

    def handle_event(self, kind: str, data: Any, chaos: bool) -> None:
        """Run one event. A replica's step that a disk fault interrupts raises
        ``DiskFailure``; an event that recurs is scheduled again first, so it survives."""
        if kind == "tick":
            self.schedule(self.now + TICK_MS, "tick", data)
            replica = self.nodes[data]
            if replica is not None:
                self.after(data, replica.tick(self.clock(data)))
        elif kind == "deliver":
            source, dest, message = data
            replica = self.nodes[dest]
            if replica is not None and not self.faults.cut(source, dest):
                self.after(dest, replica.handle(source, message, self.clock(dest)))
        elif kind == "propose":
            self.schedule(self.now + self.rng.randint(5, 50), "propose", None)
            for n, replica in self.nodes.items():
                if replica is not None and replica.is_leader and \
                        self.spaced_propose(n, replica, chaos):
                    self.proposed += 1
                    self.after(n, replica.tick(self.clock(n)))
        elif kind == "flush":
            self.flushing.discard(data)
            replica = self.nodes[data]
            if replica is not None:
                self.logs[data].flush()
                self.after(data, replica.tick(self.clock(data)))
        elif kind == "snapshot":
            n, write = data
            replica = self.nodes[n]
            if replica is not None and self.snapshot_writes.get(n) is write:
                del self.snapshot_writes[n]
                self.after(n, replica.snapshot_written(write, self.clock(n)))
        elif kind == "fault" and chaos:
            self.inject_fault()
            self.schedule(self.now + self.rng.randint(200, 2000), "fault", None)
        elif kind == "restart":
            if self.nodes[data] is None:
                self.boot(data)
        else:
            self.on_event(kind, data, chaos)

    def start_workload(self, chaos: bool) -> None:
        """Schedule a subclass's own events (``on_event`` runs them)."""

    def on_event(self, kind: str, data: Any, chaos: bool) -> None:
        """A subclass's event."""

    def spaced_propose(self, n: int, replica: RaftReplica, chaos: bool) -> bool:
        """``propose``, counted as an operation under chaos, and skipped there when due
        sooner than ``op_interval_ms`` after the last one."""
        counted = chaos and self.proposals_are_operations
        if counted and self.op_interval_ms is not None and self.now < self.next_operation_ms:
            return False
        if not self.propose(n, replica):
            return False
        if counted:
            self.operations += 1
            self.next_operation_ms = self.now + (self.op_interval_ms or 0)
        return True

    def propose(self, n: int, replica: RaftReplica) -> bool:
        """What a leader appends now: a batch of one to three offsets."""
        count = self.rng.randint(1, 3)
        return replica.propose(f"batch-{self.proposed}", self.clock(n), count) is not None

    def inject_fault(self) -> None:
        choice = self.rng.random()
        kind = "loss" if choice < 0.22 else "delay" if choice < 0.4 else \
            "partition" if choice < 0.63 else None if choice < 0.77 else \
            "crash" if choice < 0.9 else "eio" if choice < 0.95 else "disk-full"
        if kind in self.faults_off:
            return
        if kind is not None:
            self.injected[kind] += 1
        if kind == "loss":
            self.faults.loss = self.rng.choice([0.0, 0.05, 0.2, 0.5])
            self.note("loss {}", self.faults.loss)
        elif kind == "delay":
            self.faults.max_delay_ms = self.rng.choice([5, 20, 100, 400])
            self.note("delays up to {} ms", self.faults.max_delay_ms)
        elif kind == "partition":
            # cut the quorum in two random groups (possibly a lone node)
            group = set(self.rng.sample(self.ids, self.rng.randint(1, len(self.ids) // 2)))
            self.faults.partitioned = {frozenset((a, b)) for a in group
                                       for b in self.ids if b not in group}
            self.note("partition: {} cut off", sorted(group))
        elif kind is None:
            self.faults.partitioned = set()
            self.note("partition healed")
        elif kind == "crash":
            alive = [n for n in self.ids if self.nodes[n] is not None]
            if alive:
                victim = self.rng.choice(alive)
                self.crash(victim)
                self.schedule(self.now + self.rng.randint(100, 3000), "restart", victim)
        else:
            alive = [n for n in self.ids if self.nodes[n] is not None]
            if alive:
                victim = self.rng.choice(alive)
                code = errno.EIO if kind == "eio" else errno.ENOSPC
                self.logs[victim].failing = code
                self.note("node {}'s disk: its next {} fails with {}", victim,
                          "write or fsync" if kind == "eio" else "write",
                          errno.errorcode[code])

    def heal(self) -> None:
        self.note("healed")
        self.faults = Faults()
        for disk in self.logs.values():
            disk.failing = None
        for n in self.ids:
            if self.nodes[n] is None:
                self.boot(n)

    def leader(self) -> int | None:
        voters = [self.nodes[v] for v in self.voter_ids]
        leaders = [r.node_id for r in voters
                   if r is not None and r.is_leader and
                   all(o is not None and o.epoch == r.epoch for o in voters)]
        return leaders[0] if leaders else None

    @property
    def committed_end(self) -> int:
        if not self.committed:
            return 0
        return self.committed_bases[-1] + self.committed[-1].count
