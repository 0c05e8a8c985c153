"""Simulated offset commits: consumers committing and fetching offsets through a group
coordinator whose ``__consumer_offsets`` partitions change leader, under seeded faults.

What runs is the real code wherever it is sans-I/O: the coordinator is a real
``CoordinatorRuntime`` with real ``GroupCoordinatorShard``s, one per ``__consumer_offsets``
partition (``OFFSETS_PARTITIONS`` of them, groups hashed with the service's
``partition_for``). OffsetCommit is ``commit_offsets`` run as a runtime write, as the
broker's handler runs it (version 8: generation -1 and no member id, the commits of
consumers that assign their partitions themselves, which make a simple group); OffsetFetch
is ``fetch_offsets`` run as a runtime read. Records are encoded and decoded with the
``__consumer_offsets`` codec (``records.encode`` / ``decode``); a loading coordinator
replays the decoded log, a slice of records a millisecond (requests meanwhile get
COORDINATOR_LOAD_IN_PROGRESS).

What is modelled:

* ``OffsetsLog`` is a ``__consumer_offsets`` partition: the runtime's ``PartitionWriter``,
  encoded records whose high watermark follows the appends after a replication delay. A
  leader change (a crash of the coordinator's broker: nothing answered any more; or a
  resignation: the runtime unloads and answers what waits NOT_COORDINATOR) makes a follower
  the leader: its log is the old one cut at a batch boundary between the high watermark and
  the log end, so committed records survive and uncommitted ones may not; the new
  coordinator loads it. The new leader keeps the partition's high watermark (a follower's
  own may lag it for a moment; the model does not).
* a ``Member`` is a consumer of one group that owns some partitions of the data topics
  and commits only forward: one request at a time (OffsetCommit of some of its
  partitions, each past what it committed before, or OffsetFetch of the group), retried
  on an error or after ``RPC_TIMEOUT_MS`` without an answer. Messages are lost or delayed
  (under ``RPC_TIMEOUT_MS``, so a request timed out was lost and never overtakes the next).

Faults come from one ``random.Random(seed)``: message loss and delay, slow replication,
coordinator crashes and resignations at random times or right after an append (before it
is replicated), slow loads.

Invariants (a ``Violation``, an ``AssertionError`` naming the ``Invariant`` that broke):

1. an acknowledged commit is visible: every OffsetFetch the coordinator answers shows, for
   each partition, at least the offset whose commit was acknowledged to a member before
   the fetch was sent (members only commit forward); checked too on the shard of every
   coordinator that finishes loading (after each failover) and at the end.
2. committed offsets never go back: what OffsetFetch shows for a partition is never below
   what an earlier OffsetFetch showed for it (before or after a failover), and is an
   offset a member committed.
3. after healing every member's last commit is acknowledged within a bound, and a
   coordinator loaded afresh from the logs shows each member's last acknowledged offsets.
"""

from __future__ import annotations

import collections
import enum
import heapq
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ottla.broker.coordinators.coordinator_service import partition_for
from ottla.coordinator.group import records as rec
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard
from ottla.coordinator.runtime import CoordinatorRuntime, CoordinatorState, Loading
from ottla.protocol.errors import ErrorCode, KafkaError

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 2
OFFSETS_TPS = tuple((OFFSETS_TOPIC, i) for i in range(OFFSETS_PARTITIONS))
GROUPS = ("billing", "audit", "search", "mail")
"""Two on each ``__consumer_offsets`` partition."""
TOPICS = ("orders", "clicks")
DATA_PARTITIONS = 3
MEMBERS_PER_GROUP = 2
COMMIT_VERSION = 8
RPC_TIMEOUT_MS = 500
LOAD_SLICE = 3
"""Records a loading coordinator replays a millisecond."""
BACKOFF_MS = (10, 100)
TRACE_LENGTH = 200

Node = tuple[Any, ...]
GTP = tuple[str, str, int]
"""(group, topic, partition)."""


def offsets_tp(group: str) -> tuple[str, int]:
    return OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS)


class Invariant(enum.Enum):
    """The rules a run is held to (numbered as in the module's docstring)."""

    ACKED_VISIBLE = "1. an acknowledged commit is visible to OffsetFetch, after failovers too"
    NEVER_BACK = "2. a partition's committed offset, as fetched, never goes back"
    QUIET = "3. after healing every last commit is acknowledged and visible"


class Violation(AssertionError):
    """A broken invariant; the message starts with ``[NAME]`` of its ``invariant``."""

    def __init__(self, invariant: Invariant, detail: str) -> None:
        super().__init__(f"[{invariant.name}] {detail}")
        self.invariant = invariant


# --- messages ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    rid: int
    group: str
    offsets: tuple[tuple[str, int, int], ...]
    """(topic, partition, offset)."""


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    rid: int
    group: str
    must_see: dict[tuple[str, int], int]
    """The checker's: the group's offsets acknowledged before the fetch was sent."""


@dataclass(frozen=True, slots=True)
class Answer:
    rid: int
    errors: dict[tuple[str, int], ErrorCode] | ErrorCode
    """Per partition (a commit), or one error for the request."""


@dataclass(slots=True)
class Faults:
    loss: float = 0.0
    max_delay_ms: int = 10
    replication_ms: int = 10


@dataclass
class Stats:
    commits_sent: int = 0
    commits_acked: int = 0
    fetches: int = 0
    crashes: int = 0
    resignations: int = 0
    records_cut: int = 0
    not_coordinator: int = 0
    load_in_progress: int = 0
    lost: int = 0
    timeouts: int = 0


# --- __consumer_offsets --------------------------------------------------------------------


@dataclass(slots=True)
class OffsetsLog:
    """One ``__consumer_offsets`` partition: encoded records, batch ends, high watermark,
    leader epoch."""

    tp: tuple[str, int]
    entries: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    batch_ends: list[int] = field(default_factory=list)
    hw: int = 0
    leader_epoch: int = 0

    @property
    def end(self) -> int:
        return len(self.entries)

    def truncate(self, end: int) -> None:
        del self.entries[end:]
        self.batch_ends = [e for e in self.batch_ends if e <= end]


class OffsetsLogs:
    """The runtime's ``PartitionWriter`` over the ``OffsetsLog``s."""

    def __init__(self, sim: OffsetCommitCluster) -> None:
        self.sim = sim
        self.logs = {tp: OffsetsLog(tp) for tp in OFFSETS_TPS}

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        log = self.logs[tp]
        log.entries.extend(rec.encode(r) for r in records)
        log.batch_ends.append(log.end)
        self.sim.replicate(log)
        if self.sim.crash_after_append:
            self.sim.crash_after_append = False
            self.sim.after(0, self.sim.fail_over, True)
        return log.end

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return self.logs[tp].hw

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        for offset, (key, value) in enumerate(list(self.logs[tp].entries)):
            yield offset, rec.decode(key, value)


def new_runtime(writer: Any) -> CoordinatorRuntime[GroupCoordinatorShard]:
    return CoordinatorRuntime(writer, lambda ctx: GroupCoordinatorShard(ctx, GroupConfig()))


def fetched(runtime: CoordinatorRuntime[GroupCoordinatorShard], group: str
            ) -> dict[tuple[str, int], int]:
    """OffsetFetch of every partition of the group's topics, as a dict."""
    answer = runtime.read(offsets_tp(group), lambda shard: shard.fetch_offsets(
        group, [(t, list(range(DATA_PARTITIONS))) for t in TOPICS]))
    return {(t, p): offset for t, parts in answer for p, offset, _, _ in parts}


# --- the coordinator -------------------------------------------------------------------------


class Coordinator:
    """The group coordinator of one broker incarnation: the runtime, its loads and timer."""

    def __init__(self, sim: OffsetCommitCluster, incarnation: int) -> None:
        self.sim = sim
        self.incarnation = incarnation
        self.node: Node = ("coordinator", incarnation)
        self.alive = True
        self.runtime = new_runtime(sim.logs)
        self.runtime.on_timer_change = self.deadline_changed

    def start(self) -> None:
        for tp in OFFSETS_TPS:
            self.step_load(self.runtime.begin_load(tp, self.sim.now))

    def step_load(self, job: Loading) -> None:
        if not self.alive:
            return
        if not job.step(LOAD_SLICE, self.sim.now):
            self.sim.after(1, self.step_load, job)
            return
        tp = job.context.tp
        if self.runtime.contexts.get(tp) is job.context and \
                job.context.state is CoordinatorState.ACTIVE:
            self.sim.check_loaded(self, tp)

    def deadline_changed(self, deadline: int) -> None:
        self.sim.after(max(0, deadline - self.sim.now), self.poll)

    def poll(self) -> None:
        if self.alive:
            self.runtime.poll(self.sim.now)

    def receive(self, source: Node, message: Any) -> None:
        def reply(response: Any) -> None:
            if not self.alive:
                return  # a crashed broker answers nothing
            errors = response.code if isinstance(response, KafkaError) else response
            self.sim.send(self.node, source, Answer(message.rid, errors))

        if isinstance(message, OffsetCommit):
            offsets = [(t, p, o, -1, None) for t, p, o in message.offsets]
            try:
                self.runtime.write(offsets_tp(message.group), lambda shard, now: shard.
                                   commit_offsets(now, message.group, -1, "", None, offsets,
                                                  COMMIT_VERSION), reply, self.sim.now)
            except KafkaError as e:
                reply(e)
        elif isinstance(message, OffsetFetch):
            try:
                shown = fetched(self.runtime, message.group)
            except KafkaError as e:
                reply(e)
                return
            self.sim.check_fetch(message.group, shown, message.must_see, "OffsetFetch")
            reply(ErrorCode.none)


# --- the consumers ---------------------------------------------------------------------------


class Member:
    """A consumer of ``group`` that owns ``partitions`` and commits only forward."""

    def __init__(self, sim: OffsetCommitCluster, group: str, index: int,
                 partitions: list[tuple[str, int]]) -> None:
        self.sim = sim
        self.group = group
        self.node: Node = ("member", group, index)
        self.partitions = partitions
        self.position = dict.fromkeys(partitions, 0)
        """The next offset to commit (past every one committed so far)."""
        self.in_flight: tuple[int, Any] | None = None
        self.last_commit: dict[tuple[str, int], int] = {}
        """What the member last asked to commit, per partition (the final check's)."""

    def __repr__(self) -> str:
        return f"{self.group}/{self.node[2]}"

    def next_request(self) -> None:
        if self.in_flight is not None:
            return
        sim = self.sim
        if sim.stopping and all(sim.acked.get((self.group, *tp)) == o
                                for tp, o in self.last_commit.items()):
            return
        if not sim.stopping:
            if sim.op_interval_ms is not None:
                if sim.now < sim.next_operation_ms:  # not yet: it waits its turn
                    sim.after(sim.next_operation_ms - sim.now, self.next_request)
                    return
                sim.next_operation_ms = sim.now + sim.op_interval_ms
            sim.operations += 1
        if not sim.stopping and sim.rng.random() < 0.3:
            message: Any = OffsetFetch(sim.rid(), self.group, {
                (t, p): o for (g, t, p), o in sim.acked.items() if g == self.group})
            sim.stats.fetches += 1
        else:
            chosen = [tp for tp in self.partitions if sim.rng.random() < 0.6] or \
                [sim.rng.choice(self.partitions)]
            if sim.stopping:
                chosen = list(self.partitions)
            offsets = []
            for tp in chosen:
                self.position[tp] += sim.rng.randint(1, 30)
                offsets.append((*tp, self.position[tp]))
                self.last_commit[tp] = self.position[tp]
                sim.sent.setdefault((self.group, *tp), set()).add(self.position[tp])
            message = OffsetCommit(sim.rid(), self.group, tuple(offsets))
            sim.stats.commits_sent += 1
        self.in_flight = (message.rid, message)
        sim.send(self.node, sim.coordinator_node(), message)
        sim.after(RPC_TIMEOUT_MS, self.timed_out, message.rid)

    def timed_out(self, rid: int) -> None:
        if self.in_flight is not None and self.in_flight[0] == rid:
            self.sim.stats.timeouts += 1
            self.in_flight = None
            self.again()

    def again(self) -> None:
        self.sim.after(self.sim.rng.randint(*BACKOFF_MS), self.next_request)

    def receive(self, source: Node, answer: Answer) -> None:
        if self.in_flight is None or self.in_flight[0] != answer.rid:
            return
        message = self.in_flight[1]
        self.in_flight = None
        errors = answer.errors
        if isinstance(errors, ErrorCode):
            if errors == ErrorCode.not_coordinator:
                self.sim.stats.not_coordinator += 1
            elif errors == ErrorCode.coordinator_load_in_progress:
                self.sim.stats.load_in_progress += 1
        elif isinstance(message, OffsetCommit):
            for t, p, offset in message.offsets:
                if errors[(t, p)] == ErrorCode.none:
                    self.sim.acknowledged((self.group, t, p), offset, self)
                elif errors[(t, p)] == ErrorCode.not_coordinator:
                    self.sim.stats.not_coordinator += 1
        self.again()


# --- the cluster -----------------------------------------------------------------------------


class OffsetCommitCluster:
    FAULT_KINDS = ("loss", "delay", "replication", "failover", "crash-after-append")
    faults_off: frozenset[str] = frozenset()
    """Fault kinds not injected: a fault drawn of one of them is skipped (the shrinker's
    knob; the run stays a function of the seed and this set)."""
    op_interval_ms: int | None = None
    """The least time between two requests of the members under chaos (the shrinker's
    other knob: a member whose request is due sooner waits)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.injected: collections.Counter[str] = collections.Counter()
        self.operations = 0
        """Requests the members sent under chaos."""
        self.next_operation_ms = 0
        self.rng = random.Random(seed)
        self.now = 0
        self.chaos = False
        self.stopping = False
        self.faults = Faults()
        self.stats = Stats()
        self.events: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self.seq = itertools.count()
        self.rids = itertools.count(1)
        self.last_delivery: dict[tuple[Node, Node], int] = {}
        self.trace: collections.deque[tuple[int, str, tuple[Any, ...]]] = \
            collections.deque(maxlen=TRACE_LENGTH)
        self.crash_after_append = False
        self.logs = OffsetsLogs(self)
        self.nodes: dict[Node, Any] = {}
        self.coordinator: Coordinator | None = None
        self.incarnations = itertools.count(1)
        # What the checker knows, beside the system.
        self.acked: dict[GTP, int] = {}
        """The highest offset whose commit was acknowledged, per partition."""
        self.shown: dict[GTP, int] = {}
        """The highest offset an OffsetFetch showed, per partition."""
        self.sent: dict[GTP, set[int]] = {}
        partitions = [(t, p) for t in TOPICS for p in range(DATA_PARTITIONS)]
        self.members = []
        for group in GROUPS:
            for i in range(MEMBERS_PER_GROUP):
                member = Member(self, group, i, partitions[i::MEMBERS_PER_GROUP])
                self.members.append(member)
                self.nodes[member.node] = member
                self.after(self.rng.randint(0, 100), member.next_request)
        self.start_coordinator()
        self.after(self.rng.randint(200, 800), self.inject_fault)

    # --- the event loop ------------------------------------------------------------------

    def note(self, text: str, *args: Any) -> None:
        self.trace.append((self.now, text, args))

    def history(self) -> str:
        return "\n".join(f"{at:>7} ms  {text.format(*args)}" for at, text, args in self.trace)

    def rid(self) -> int:
        return next(self.rids)

    def after(self, delay: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.events, (self.now + delay, next(self.seq), fn, args))

    def send(self, source: Node, dest: Node | None, message: Any) -> None:
        """Lost, or delivered in order on its connection after a delay."""
        if dest is None or (self.faults.loss and self.rng.random() < self.faults.loss):
            self.stats.lost += 1
            return
        at = max(self.now + self.rng.randint(1, self.faults.max_delay_ms),
                 self.last_delivery.get((source, dest), 0))
        self.last_delivery[(source, dest)] = at
        heapq.heappush(self.events, (at, next(self.seq), self.deliver, (dest, source, message)))

    def deliver(self, dest: Node, source: Node, message: Any) -> None:
        node = self.nodes.get(dest)
        if node is not None:
            node.receive(source, message)

    def run_until(self, end_ms: int, chaos: bool | None = None) -> None:
        if chaos is not None:
            self.chaos = chaos
        while self.events and self.events[0][0] <= end_ms:
            at, _, fn, args = heapq.heappop(self.events)
            self.now = at
            fn(*args)
        self.now = max(self.now, end_ms)

    # --- the coordinator coming and going --------------------------------------------------

    def coordinator_node(self) -> Node | None:
        return self.coordinator.node if self.coordinator is not None else None

    def start_coordinator(self) -> None:
        if self.coordinator is not None:
            return
        coordinator = self.coordinator = Coordinator(self, next(self.incarnations))
        self.nodes[coordinator.node] = coordinator
        for log in self.logs.logs.values():
            self.replicate(log)  # the new leader's uncommitted tail
        self.note("coordinator {} up", coordinator.incarnation)
        coordinator.start()

    def fail_over(self, crash: bool) -> None:
        """The ``__consumer_offsets`` partitions get a new leader: the coordinator's broker
        crashes (``crash``) or resigns, and a follower takes over with the committed log
        and perhaps some of the uncommitted tail."""
        coordinator = self.coordinator
        if coordinator is None:
            return
        self.coordinator = None
        del self.nodes[coordinator.node]
        if crash:
            coordinator.alive = False
            self.stats.crashes += 1
        else:
            self.stats.resignations += 1
            for tp in OFFSETS_TPS:
                coordinator.runtime.unload(tp)
            coordinator.alive = False
        cuts = []
        for log in self.logs.logs.values():
            end = self.rng.choice([log.hw] + [e for e in log.batch_ends if e > log.hw])
            cuts.append((log.hw, end, log.end))
            self.stats.records_cut += log.end - end
            log.truncate(end)
            log.leader_epoch += 1
        self.note("coordinator {} {}; __consumer_offsets (hw, kept, end): {}",
                  coordinator.incarnation, "crashes" if crash else "resigns", cuts)
        self.after(self.rng.randint(20, 200) if not crash else self.rng.randint(100, 800),
                   self.start_coordinator)

    # --- replication -----------------------------------------------------------------------

    def replicate(self, log: OffsetsLog) -> None:
        self.after(self.rng.randint(1, self.faults.replication_ms), self.replicated, log,
                   log.leader_epoch, log.end)

    def replicated(self, log: OffsetsLog, epoch: int, target: int) -> None:
        if epoch != log.leader_epoch or target <= log.hw:
            return
        log.hw = min(target, log.end)
        if self.coordinator is not None:
            self.coordinator.runtime.on_high_watermark(log.tp)

    # --- faults ----------------------------------------------------------------------------

    def inject_fault(self) -> None:
        if not self.chaos:
            return
        rng = self.rng
        choice = rng.random()
        kind = "loss" if choice < 0.2 else "delay" if choice < 0.35 else \
            "replication" if choice < 0.5 else "failover" if choice < 0.65 else \
            "crash-after-append" if choice < 0.85 else None
        if kind in self.faults_off:
            self.after(rng.randint(200, 1000), self.inject_fault)
            return
        if kind == "loss":
            self.faults.loss = rng.choice([0.0, 0.02, 0.1, 0.3])
        elif kind == "delay":
            self.faults.max_delay_ms = rng.choice([5, 20, 100, 200])
        elif kind == "replication":
            self.faults.replication_ms = rng.choice([5, 30, 150, 400])
        elif kind == "failover":
            self.fail_over(rng.random() < 0.5)
        elif kind == "crash-after-append":
            self.crash_after_append = True
        else:
            self.faults = Faults()
        if kind is not None:
            self.injected[kind] += 1
        if kind != "failover":
            self.note("faults {}{}", self.faults,
                      ", crash after the next append" if self.crash_after_append else "")
        self.after(rng.randint(200, 1000), self.inject_fault)

    def heal(self) -> None:
        """No more faults, a coordinator up; members commit all their partitions once
        more and stop when that commit is acknowledged."""
        self.chaos = False
        self.stopping = True
        self.faults = Faults()
        self.crash_after_append = False
        self.start_coordinator()
        self.note("healed")

    # --- the checker -------------------------------------------------------------------------

    def acknowledged(self, gtp: GTP, offset: int, member: Member) -> None:
        self.stats.commits_acked += 1
        self.acked[gtp] = max(offset, self.acked.get(gtp, -1))
        self.note("{}: commit of {}-{} at {} acknowledged", member, gtp[1], gtp[2], offset)

    def check_fetch(self, group: str, shown: dict[tuple[str, int], int],
                    must_see: dict[tuple[str, int], int], what: str) -> None:
        for (t, p), offset in shown.items():
            gtp = (group, t, p)
            if offset != -1 and offset not in self.sent.get(gtp, ()):
                raise Violation(Invariant.NEVER_BACK, f"{what} of {group} shows {t}-{p} at "
                                f"{offset}, which no member committed")
            if offset < must_see.get((t, p), -1):
                raise Violation(Invariant.ACKED_VISIBLE, f"{what} of {group} shows {t}-{p} "
                                f"at {offset}, below the acknowledged commit at "
                                f"{must_see[(t, p)]}")
            if offset < self.shown.get(gtp, -1):
                raise Violation(Invariant.NEVER_BACK, f"{what} of {group} shows {t}-{p} at "
                                f"{offset}, below the {self.shown[gtp]} shown before")
            self.shown[gtp] = max(offset, self.shown.get(gtp, -1))
        self.note("{} of {}: {}", what, group, sorted(shown.items()))

    def must_see(self, group: str) -> dict[tuple[str, int], int]:
        return {(t, p): o for (g, t, p), o in self.acked.items() if g == group}

    def check_loaded(self, coordinator: Coordinator, tp: tuple[str, int]) -> None:
        """A coordinator that loaded ``tp`` shows what was acknowledged of its groups."""
        for group in GROUPS:
            if offsets_tp(group) == tp:
                self.check_fetch(group, fetched(coordinator.runtime, group),
                                 self.must_see(group),
                                 f"coordinator {coordinator.incarnation} after loading")

    def convergence_problem(self) -> str | None:
        for member in self.members:
            for tp, offset in member.last_commit.items():
                if self.acked.get((member.group, *tp)) != offset:
                    return f"{member}'s last commit of {tp} at {offset} is not acknowledged"
        return None

    def check_final(self) -> None:
        """A coordinator loaded afresh from the logs shows every last acknowledged commit."""
        for log in self.logs.logs.values():
            log.hw = log.end
        runtime = new_runtime(self.logs)
        for tp in OFFSETS_TPS:
            runtime.load(tp, self.now)
        for group in GROUPS:
            shown = fetched(runtime, group)
            for (t, p), offset in self.must_see(group).items():
                if shown[(t, p)] != offset:
                    raise Violation(Invariant.QUIET, f"a fresh load shows {group} {t}-{p} at "
                                    f"{shown[(t, p)]}, not the last acknowledged {offset}")
