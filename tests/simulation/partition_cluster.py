"""A simulated partition: one topic-partition replicated over three brokers, with a
controller, a producer and consumers, under seeded faults (issue 18).

What runs is the real code wherever it is sans-I/O:

* each broker's replica is a ``PartitionState`` (role, epochs, ISR, maximal ISR, high
  watermark, ``isr_to_expand`` / ``isr_to_shrink`` / ``isr_answered``,
  ``check_enough_replicas`` with min.insync.replicas=2);
* the leader answers a follower's fetch with ``diverging_epoch`` over its log's epoch
  history (``epoch_end_offset``) and records its position with ``on_follower_fetch``;
  the follower cuts its log at ``truncation_offset``, appends, and takes the leader's
  high watermark with ``on_leader_high_watermark``;
* the controller is a real ``QuorumController``: broker registrations, heartbeats
  (unfencing a caught-up broker), ``fence_stale_brokers`` after the session timeout
  (moving the leadership to an in-sync replica, shrinking the ISR), ``alter_partition``
  (``_check_isr_change``: leader epoch, partition epoch, eligible members) and
  ``PartitionChangeBuilder``. Its records are encoded, decoded and replayed into its
  image, whose partition epoch grows with every change; brokers learn the partition's
  ``LeaderAndIsr`` from delayed, lossy "metadata" messages carrying the image at an
  offset (applied only if newer than what they have, as a metadata log is).

What is modelled is thin glue mirroring the broker's drivers: ``Partition`` (its
``__init__`` from the log's end and checkpointed high watermark, ``read``,
``truncate_to``), ``ReplicaFetcherManager.apply``, ``ReplicaManager`` (the produce
purgatory, ``update_follower_fetch``, ``maybe_shrink_isr``), the fetch handler,
``AlterPartitionManager`` over ``ControllerChannel.call`` (attempts retried until a
timeout; an answer overtaken by a newer change ignored; only a refusal saying the change
was not made clears it; a failed call sent again) and ``BrokerLifecycle`` (register
under a new incarnation, heartbeat, serve once unfenced). A log is a list of ``(offset,
leader epoch, value)`` with the leader-epoch cache's ``(epoch, start offset)`` entries
beside it. The controller itself never fails (KRaft has its own simulation).

Faults come from one ``random.Random(seed)``: message loss, delays (so messages of
different connections overtake each other; one connection stays in order, as TCP),
cut links between any two nodes (brokers and the controller), and broker crashes and
restarts. A crash keeps the log (a killed process keeps the page cache) and the last
high-watermark checkpoint and loses the rest; the restarted broker registers again,
applies metadata from its registration on, and rebuilds its ``PartitionState``.

Invariants, checked as the run goes (a ``Violation``, an ``AssertionError`` naming the
``Invariant`` that broke, with the last steps of the run in the test's failure message):

1. every acknowledged write is, at its offset and with its value, in the log of every
   replica that becomes leader afterwards (checked when it becomes leader, and for the
   leaders of newer epochs when a write is acknowledged), and in the final leader's;
   and no replica ever truncates a committed record (the step before losing one);
2. whatever a leader serves below its high watermark (checked after every step, and by
   consumer reads) is the one committed history; a follower's too (consumers may read
   followers, KIP-392);
3. leader epochs only grow: in each broker's ``PartitionState`` across metadata updates
   and restarts, along each log, and in the controller (strictly, on every change of
   leader);
4. the ISR the controller commits always holds a replica with every acknowledged write;
   and, the rule that keeps it so, the leader of the controller's current epoch counts
   its high watermark over every member of that ISR (its maximal ISR);
5. after healing the replicas converge (``convergence_problem``, checked by the test).
"""

from __future__ import annotations

import collections
import enum
import heapq
import itertools
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from ottla.broker.replication.alter_partition_manager import NOT_MADE
from ottla.broker.replication.partition_state import (
    NO_EPOCH,
    LeaderAndIsr,
    PartitionState,
    diverging_epoch,
    truncation_offset,
)
from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import ControllerError
from ottla.metadata import records as r
from ottla.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration
from ottla.metadata.isr_change import IsrChange
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.leader_epoch import epoch_end_offset

CONTROLLER = 0
BROKERS = (1, 2, 3)
PRODUCER = 100
TOPIC = "sim"

MIN_INSYNC_REPLICAS = 2
TICK_MS = 10
REPLICA_LAG_TIME_MAX_MS = 400
"""replica.lag.time.max.ms; the leader looks for lagging followers every half of it."""
SESSION_TIMEOUT_MS = 600
"""broker.session.timeout.ms: the controller fences a broker silent for longer."""
HEARTBEAT_MS = 100
FENCE_CHECK_MS = 50
METADATA_POLL_MS = 150
"""How often a broker asks for the metadata it misses (the controller re-sends its image)."""
FETCH_WAIT_MS = 25
"""How long a follower waits after an empty fetch (the leader's long poll, roughly)."""
FETCH_TIMEOUT_MS = 300
FETCH_BACKOFF_MS = 50
MAX_FETCH_RECORDS = 16
PRODUCE_TIMEOUT_MS = 1_000
REGISTER_RETRY_MS = 250
ALTER_ATTEMPT_MS = 250
"""An AlterPartition attempt with no answer by then counts as a broken connection: the
controller channel tries again, until ``ALTER_CALL_TIMEOUT_MS``."""
ALTER_CALL_TIMEOUT_MS = 1_500
ALTER_RETRY_BACKOFF_MS = 100
KEEP_PENDING_ON_UNKNOWN_OUTCOME = True
"""False models the AlterPartitionManager before it kept a change whose outcome is not
known pending (every failure cleared it): the test shows the checker catches that."""
HW_CHECKPOINT_MS = 400
"""replica.high.watermark.checkpoint.interval.ms: what a restart finds of the HW."""
TRACE_LENGTH = 80
NO_INCARNATION = uuid.UUID(int=0)


# --- what the checker checks ---------------------------------------------------------------


class Invariant(enum.Enum):
    """The rules a run is held to (numbered as in the module's docstring), one member per
    rule, so that a test can tell which rule caught a run."""

    ACKED_IN_LEADER = "1. every later leader's log holds every acknowledged write"
    COMMITTED_KEPT = "1. no replica truncates a committed record"
    ONE_HISTORY = "2. what is served below a high watermark or acknowledged is one history"
    EPOCHS_GROW = "3. leader epochs only grow"
    ISR_HAS_ACKED = "4. the controller's ISR holds a replica with every acknowledged write"
    HW_OVER_ISR = "4. the current leader counts its high watermark over the controller's ISR"
    CONVERGES = "5. after healing: one leader, a full ISR, one log, new writes acknowledged"


class Violation(AssertionError):
    """A broken invariant: the message starts with ``[NAME]`` of its ``invariant``, which a
    mutation test compares with the rule its mutation breaks (a catch by another rule, or
    by the convergence bound only, is not the checker seeing the bug)."""

    def __init__(self, invariant: Invariant, detail: str) -> None:
        super().__init__(f"[{invariant.name}] {detail}")
        self.invariant = invariant


# --- messages ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    incarnation: int
    token: int
    replica_id: int
    broker_epoch: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    incarnation: int
    token: int
    error: ErrorCode
    high_watermark: int
    diverging: tuple[int, int] | None = None
    records: tuple[tuple[int, int, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    """A follower's ListOffsets LATEST after OFFSET_OUT_OF_RANGE: the leader's log end."""

    incarnation: int
    token: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    incarnation: int
    token: int
    error: ErrorCode
    log_end: int


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Metadata:
    offset: int
    assignment: LeaderAndIsr
    brokers: dict[int, tuple[int, bool]]
    """Broker id -> (broker epoch, fenced), what ``isr_eligible`` reads."""


@dataclass(frozen=True, slots=True)
class Register:
    incarnation: int
    incarnation_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Registered:
    incarnation: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    incarnation: int
    broker_epoch: int
    metadata_offset: int


@dataclass(frozen=True, slots=True)
class HeartbeatRefused:
    incarnation: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartition:
    incarnation: int
    attempt: int
    broker_epoch: int
    change: IsrChange


@dataclass(frozen=True, slots=True)
class AlterPartitionAnswer:
    incarnation: int
    attempt: int
    error: ErrorCode
    """The partition's error, or the request's (``top_level``)."""
    top_level: bool
    leader: int
    isr: list[int] | None
    partition_epoch: int


CONNECTIONS: dict[type, str] = {
    FetchRequest: "replication", FetchResponse: "replication",
    ListOffsetsRequest: "replication", ListOffsetsResponse: "replication",
    ProduceRequest: "client",
    Metadata: "metadata",
    Register: "controller", Registered: "controller", Heartbeat: "controller",
    HeartbeatRefused: "controller", AlterPartition: "controller",
    AlterPartitionAnswer: "controller",
}
"""Which connection a message goes on: the replica fetcher's, a client's, the metadata
log's (a broker fetches it from the controller), and the broker's controller channel."""


# --- a replica's log ---------------------------------------------------------------------


class SimLog:
    """A replica's log in memory: ``(offset, leader epoch, value)`` per record from offset
    0, and the leader-epoch cache's ``(epoch, start offset)`` entries: an epoch is
    assigned on the first append of a larger one and cut with the records."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int, str]] = []
        self.epochs: list[tuple[int, int]] = []

    @property
    def end(self) -> int:
        return len(self.records)

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else NO_EPOCH

    def end_offset_for_leader_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        return epoch_end_offset(self.epochs, epoch, log_end_offset)

    def append(self, epoch: int, value: str) -> None:
        offset = len(self.records)
        if epoch < self.latest_epoch:
            raise Violation(Invariant.EPOCHS_GROW, f"appending epoch {epoch} at {offset} after "
                                                   f"epoch {self.latest_epoch}")
        if epoch > self.latest_epoch:
            self.epochs.append((epoch, offset))
        self.records.append((offset, epoch, value))

    def truncate_to(self, offset: int) -> None:
        del self.records[offset:]
        while self.epochs and self.epochs[-1][1] >= offset:
            self.epochs.pop()


# --- a broker -----------------------------------------------------------------------------


@dataclass(slots=True)
class PendingProduce:
    """An acks=all write waiting in the produce purgatory."""

    required_offset: int
    leader_epoch: int
    base_offset: int
    values: tuple[str, ...]
    deadline: int


@dataclass(slots=True)
class AlterCall:
    """An AlterPartition round in flight (``AlterPartitionManager._round``)."""

    attempt: int
    change: IsrChange
    broker_epoch: int
    deadline: int
    attempt_deadline: int


@dataclass(slots=True)
class SimBroker:
    broker_id: int
    log: SimLog = field(default_factory=SimLog)
    hw_checkpoint: int = 0
    """The last replication-offset-checkpoint: survives a crash, as the log does."""
    alive: bool = True
    incarnation: int = 0
    incarnation_id: uuid.UUID = NO_INCARNATION
    # Everything below is lost in a crash (``reset``).
    broker_epoch: int = -1
    min_metadata_offset: int | None = None
    """A restarted broker applies metadata from its registration on (it has caught up)."""
    applied_offset: int = -1
    image_epochs: tuple[int, int] | None = None
    image_brokers: dict[int, tuple[int, bool]] = field(default_factory=dict)
    state: PartitionState | None = None
    serving: bool = False
    """Listeners open: once the broker has seen itself unfenced (``BrokerLifecycle``)."""
    fetch_token: int = 0
    fetching: bool = False
    fetch_due: int = 0
    fetch_deadline: int = 0
    fetch_leader: int = -1
    fetch_leader_epoch: int = NO_EPOCH
    produces: list[PendingProduce] = field(default_factory=list)
    alter_call: AlterCall | None = None
    alter_queued: IsrChange | None = None
    alter_retry_due: int = 0
    register_due: int = 0
    heartbeat_due: int = 0
    shrink_due: int = 0
    checkpoint_due: int = 0

    def reset(self, now: int) -> None:
        self.broker_epoch = -1
        self.min_metadata_offset = None
        self.applied_offset = -1
        self.image_epochs = None
        self.image_brokers = {}
        self.state = None
        self.serving = False
        self.fetching = False
        self.fetch_due = now
        self.fetch_leader = -1
        self.fetch_leader_epoch = NO_EPOCH
        self.produces = []
        self.alter_call = None
        self.alter_queued = None
        self.alter_retry_due = now
        self.register_due = now
        self.heartbeat_due = now
        self.shrink_due = now + REPLICA_LAG_TIME_MAX_MS // 2
        self.checkpoint_due = now + HW_CHECKPOINT_MS


@dataclass
class Faults:
    loss: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 10
    cut: set[frozenset[int]] = field(default_factory=set)
    one_way: set[tuple[int, int]] = field(default_factory=set)
    """(a, b): what a sends b is lost, not what b sends a."""

    def is_cut(self, a: int, b: int) -> bool:
        return frozenset((a, b)) in self.cut or (a, b) in self.one_way


@dataclass
class Stats:
    acked: int = 0
    produce_refused: int = 0
    leader_changes: int = 0
    leaderless: int = 0
    truncations: int = 0
    truncated_records: int = 0
    out_of_range: int = 0
    diverging: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    fenced: int = 0
    """Brokers the controller fenced for a session timeout."""
    crashes: int = 0
    restarts_with_checkpoint: int = 0
    alter_refused: int = 0
    alter_timed_out: int = 0
    consumer_reads: int = 0


def metadata_of(image: MetadataImage, offset: int) -> Metadata:
    """What a broker's metadata publisher takes from an image at ``offset``: the
    partition's ``LeaderAndIsr`` and every broker's epoch and fencing."""
    part = image.topics_by_name[TOPIC].partitions[0]
    return Metadata(offset,
                    LeaderAndIsr(part.leader, part.leader_epoch, part.partition_epoch,
                                 list(part.replicas), list(part.isr),
                                 part.leader_recovery_state),
                    {b.broker_id: (b.epoch, b.fenced or b.in_controlled_shutdown)
                     for b in image.brokers.values()})


class PartitionCluster:
    FAULT_KINDS = ("loss", "delay", "cut", "crash")
    faults_off: frozenset[str] = frozenset()
    """Fault kinds not injected: a fault drawn of one of them is skipped (the shrinker's
    knob; the run stays a function of the seed and this set)."""
    op_interval_ms: int | None = None
    """The least time between two produce requests under chaos (the shrinker's other
    knob: one due sooner is skipped); after the heal the producer goes as it does, as
    the check needs new writes."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.injected: collections.Counter[str] = collections.Counter()
        self.rng = random.Random(seed)
        self.now = 0
        self.chaos = False
        self.faults = Faults()
        self.events: list[tuple[int, int, str, Any]] = []
        self.seq = itertools.count()
        self.last_delivery: dict[tuple[int, int, str], int] = {}
        self.stats = Stats()
        self.produced = 0
        self.operations = 0
        """Produce requests sent under chaos."""
        self.next_operation_ms = 0
        self.paused: dict[int, int] = {}
        """Broker -> when its paused process resumes (only the whole cluster pauses)."""
        self.brokers = {b: SimBroker(b) for b in BROKERS}
        # What the checker knows, beside the system.
        self.committed: list[tuple[int, int, str]] = []
        """The one committed history: what leaders exposed below their high watermarks."""
        self.acked: dict[int, tuple[int, int, str]] = {}
        self.acked_end = 0
        self.agree = {b: 0 for b in BROKERS}
        """How long a prefix of each broker's log is the committed history (a cache)."""
        self.max_leader_epoch = {b: NO_EPOCH for b in BROKERS}
        self.alter_attempts = itertools.count(1)
        self.trace: collections.deque[tuple[int, str, tuple[Any, ...]]] = \
            collections.deque(maxlen=TRACE_LENGTH)
        """The last notable steps, formatted only when a failure shows them."""

        self.metadata_due = 0
        self.ctrl_leader, self.ctrl_leader_epoch, self.ctrl_partition_epoch = NO_LEADER, -1, -1
        self.ctrl_isr: list[int] = []
        """The partition as the controller last committed it (the checker's copy)."""
        self.bootstrap()
        self.stats = Stats()

        for b in BROKERS:
            self.schedule(self.rng.randrange(TICK_MS), "tick", b)
        self.schedule(5, "produce", None)
        self.schedule(50, "consume", None)
        self.schedule(self.rng.randint(300, 1500), "fault", None)

    def bootstrap(self) -> None:
        """Before time 0: the controller, the brokers registered, the topic created. A
        whole cluster (``whole_cluster``) does it through its quorum instead."""
        self.controller = QuorumController(CONTROLLER, rng=random.Random(self.rng.random()))
        self.next_offset = 0
        for b in BROKERS:
            broker = self.brokers[b]
            broker.reset(0)
            broker.incarnation_id = self._uuid()
            epoch = self.next_offset
            self.commit(self.controller.cluster.register_broker(
                b, broker.incarnation_id, [("PLAINTEXT", "sim", 9000 + b, 0)], None, epoch).records)
            broker.broker_epoch = broker.min_metadata_offset = epoch
        replicas = list(BROKERS)
        self.rng.shuffle(replicas)
        created = self.controller.replication.create_topics(
            [NewTopic(TOPIC, assignments={0: replicas})])
        assert created.response[0].error == ErrorCode.none, created.response
        self.commit(created.records)
        self.topic_id = self.controller.image.topics_by_name[TOPIC].topic_id
        self.schedule(0, "controller", None)

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    @property
    def partition(self) -> PartitionRegistration:
        return self.committed_image().topics_by_name[TOPIC].partitions[0]

    # --- the event loop ---------------------------------------------------------------

    def note(self, text: str, *args: Any) -> None:
        self.trace.append((self.now, text, args))

    def history(self) -> str:
        """The last notable steps, one a line."""
        return "\n".join(f"{at:>7} ms  {text.format(*args)}" for at, text, args in self.trace)

    def schedule(self, at: int, kind: str, data: Any) -> None:
        heapq.heappush(self.events, (at, next(self.seq), kind, data))

    def send(self, source: int, dest: int, message: Any) -> None:
        """Put ``message`` on the wire: lost, or delivered after a random delay. Messages
        of one connection (``CONNECTIONS``) arrive in the order they were sent, as over
        TCP (a lost one is a broken connection, the next goes on a new one); messages of
        different connections overtake each other freely."""
        faults = self.faults
        if faults.loss and self.rng.random() < faults.loss:
            return
        if (faults.cut or faults.one_way) and faults.is_cut(source, dest):
            return
        at = self.now + self.rng.randint(faults.min_delay_ms, faults.max_delay_ms)
        key = (source, dest, CONNECTIONS[type(message)])
        at = max(at, self.last_delivery.get(key, 0))
        self.last_delivery[key] = at
        self.schedule(at, "deliver", (source, dest, message))

    def run_until(self, end_ms: int, chaos: bool | None = None) -> None:
        if chaos is not None:
            self.chaos = chaos
        events = self.events
        while events and events[0][0] <= end_ms:
            at, _, kind, data = heapq.heappop(events)
            self.now = at
            if self.paused:
                node = data[1] if kind == "deliver" else \
                    data if kind in ("tick", "restart") else None
                until = self.paused.get(node, 0) if node is not None else 0
                if until > at:  # a paused process: it runs this when it resumes
                    self.schedule(until, kind, data)
                    continue
            if kind == "deliver":
                source, dest, message = data
                if (self.faults.cut or self.faults.one_way) and \
                        self.faults.is_cut(source, dest):
                    continue  # cut while in flight
                if dest == CONTROLLER:
                    self.controller_receive(source, message)
                elif dest in self.brokers and self.brokers[dest].alive:
                    self.broker_receive(self.brokers[dest], source, message)
            elif kind == "tick":
                broker = self.brokers[data]
                if broker.alive:
                    self.broker_tick(broker)
                self.schedule(self.now + TICK_MS, "tick", data)
            elif kind == "controller":
                self.controller_tick()
            elif kind == "produce":
                if not self.chaos:
                    self.produce()
                elif self.op_interval_ms is None or self.now >= self.next_operation_ms:
                    self.operations += 1
                    self.next_operation_ms = self.now + (self.op_interval_ms or 0)
                    self.produce()  # else skipped: too soon after the last
                self.schedule(self.now + self.rng.randint(5, 40), "produce", None)
            elif kind == "consume":
                self.consume()
                self.schedule(self.now + self.rng.randint(30, 120), "consume", None)
            elif kind == "fault":
                if self.chaos:
                    self.inject_fault()
                    self.schedule(self.now + self.rng.randint(200, 1500), "fault", None)
            elif kind == "restart" and not self.brokers[data].alive:
                self.restart(self.brokers[data])
        self.now = max(self.now, end_ms)

    # --- faults -----------------------------------------------------------------------

    def inject_fault(self) -> None:
        choice = self.rng.random()
        kind = "loss" if choice < 0.15 else "delay" if choice < 0.3 else \
            "cut" if choice < 0.45 else None if choice < 0.6 else "crash"
        if kind in self.faults_off:
            return
        faults = self.faults
        if kind == "loss":
            faults.loss = self.rng.choice([0.0, 0.05, 0.2, 0.5])
            self.note("loss {}", faults.loss)
        elif kind == "delay":
            faults.max_delay_ms = self.rng.choice([5, 20, 100, 400])
            self.note("delays up to {} ms", faults.max_delay_ms)
        elif kind == "cut":
            # Cut one broker off from some of the others and perhaps the controller.
            victim = self.rng.choice(BROKERS)
            others = [n for n in (CONTROLLER, *BROKERS) if n != victim]
            cut = self.rng.sample(others, self.rng.randint(1, len(others)))
            faults.cut = {frozenset((victim, n)) for n in cut}
            self.note("links of {} to {} cut", victim, sorted(cut))
        elif kind is None:
            faults.cut = set()
            self.note("cut links healed")
        else:
            alive = [b for b in BROKERS if self.brokers[b].alive]
            if not alive:
                return
            # The leader more often than not: that is where the interesting cases are.
            leaders = [b for b in alive if b == self.partition.leader]
            victim = leaders[0] if leaders and self.rng.random() < 0.6 else \
                self.rng.choice(alive)
            self.crash(self.brokers[victim])
            self.schedule(self.now + self.rng.randint(100, 3000), "restart", victim)
        if kind is not None:
            self.injected[kind] += 1

    def crash(self, broker: SimBroker) -> None:
        """The process dies: its log and HW checkpoint stay, the rest is gone."""
        broker.alive = False
        broker.reset(self.now)
        self.stats.crashes += 1
        self.note("broker {} crashes (log end {}, HW checkpoint {})", broker.broker_id,
                  broker.log.end, broker.hw_checkpoint)

    def restart(self, broker: SimBroker) -> None:
        broker.alive = True
        broker.incarnation += 1
        broker.incarnation_id = self._uuid()
        broker.reset(self.now)
        self.note("broker {} restarts", broker.broker_id)

    def heal(self) -> None:
        """Stop the faults and start every broker that is down."""
        self.chaos = False
        self.faults = Faults()
        for broker in self.brokers.values():
            if not broker.alive:
                self.restart(broker)

    # --- the controller ---------------------------------------------------------------

    def commit(self, records: list[Any]) -> None:
        """Append ``records`` to the metadata log: replay them (through their encoding),
        check the controller's invariants and tell the brokers."""
        if not records:
            return
        for record in records:
            self.controller.replay(r.decode(r.encode(record)), self.next_offset)
            self.next_offset += 1
        if self.committed_changed(records):
            for b in BROKERS:
                self.send_metadata(b)

    def committed_changed(self, records: list[Any]) -> bool:
        """The controller committed ``records``: check its invariants (False before the
        topic exists)."""
        if TOPIC not in self.committed_image().topics_by_name:
            return False  # the topic is not created yet
        part = self.partition
        if part.leader_epoch < self.ctrl_leader_epoch or \
                part.partition_epoch < self.ctrl_partition_epoch:
            raise Violation(Invariant.EPOCHS_GROW, (
                f"the controller's epochs went back: leader epoch {self.ctrl_leader_epoch} -> "
                f"{part.leader_epoch}, partition epoch {self.ctrl_partition_epoch} -> "
                f"{part.partition_epoch}"))
        if part.leader != self.ctrl_leader:
            if part.leader_epoch <= self.ctrl_leader_epoch:
                raise Violation(Invariant.EPOCHS_GROW, (
                    f"the leader changed from {self.ctrl_leader} to {part.leader} without a "
                    f"new leader epoch ({part.leader_epoch})"))
            if part.leader == NO_LEADER:
                self.stats.leaderless += 1
            else:
                self.stats.leader_changes += 1
        if part.partition_epoch != self.ctrl_partition_epoch:
            self.note("controller commits {}: leader {} epoch {} partition epoch {} ISR {}; "
                      "fenced {}", [type(rec).__name__ for rec in records], part.leader,
                      part.leader_epoch, part.partition_epoch, part.isr,
                      [b.broker_id for b in self.committed_image().brokers.values()
                       if b.fenced])
        if self.ctrl_partition_epoch >= 0 and len(part.isr) != len(self.ctrl_isr):
            if len(part.isr) < len(self.ctrl_isr):
                self.stats.isr_shrinks += 1
            else:
                self.stats.isr_expands += 1
        self.ctrl_leader, self.ctrl_leader_epoch = part.leader, part.leader_epoch
        self.ctrl_partition_epoch = part.partition_epoch
        self.ctrl_isr = list(part.isr)
        self.check_isr_has_acked("committed")
        return True

    def committed_image(self) -> MetadataImage:
        """The metadata the controller quorum has committed."""
        return self.controller.image

    def metadata(self) -> Metadata:
        return metadata_of(self.controller.image, self.next_offset - 1)

    def send_metadata(self, b: int) -> None:
        self.send(CONTROLLER, b, self.metadata())

    def controller_tick(self) -> None:
        fenced = self.controller.cluster.fence_stale_brokers(self.now, SESSION_TIMEOUT_MS)
        self.stats.fenced += len(fenced.response)
        self.commit(fenced.records)
        if self.now >= self.metadata_due:
            self.metadata_due = self.now + METADATA_POLL_MS
            for b in BROKERS:
                self.send_metadata(b)
        self.schedule(self.now + FENCE_CHECK_MS, "controller", None)

    def controller_receive(self, source: int, message: Any) -> None:
        records, answer = self.handle_controller_request(
            self.controller, self.next_offset, source, message)
        self.commit(records)
        if answer is not None:
            self.send(CONTROLLER, source, answer)

    def handle_controller_request(self, controller: QuorumController, base_offset: int,
                                  source: int, message: Any) -> tuple[list[Any], Any]:
        """The active controller's handling of a broker's request: the records to append
        at ``base_offset`` and the answer to send once they are committed (or None)."""
        cluster = controller.cluster
        if isinstance(message, Register):
            result = cluster.register_broker(
                source, message.incarnation_id, [("PLAINTEXT", "sim", 9000 + source, 0)],
                None, base_offset, now_ms=self.now, unfence=False)
            return result.records, Registered(message.incarnation, result.response)
        if isinstance(message, Heartbeat):
            try:
                result = cluster.broker_heartbeat(source, message.broker_epoch,
                                                  message.metadata_offset, False, False,
                                                  self.now)
            except ControllerError as e:
                if e.code in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered):
                    return [], HeartbeatRefused(message.incarnation, message.broker_epoch)
                return [], None
            return result.records, None
        if isinstance(message, AlterPartition):
            return self.alter_partition(controller, source, message)
        return [], None

    def alter_partition(self, controller: QuorumController, source: int,
                        message: AlterPartition) -> tuple[list[Any], AlterPartitionAnswer]:
        result = controller.replication.alter_partition(source, message.broker_epoch,
                                                        [message.change])
        top, results = result.response
        if top != ErrorCode.none:
            self.stats.alter_refused += 1
            return result.records, AlterPartitionAnswer(
                message.incarnation, message.attempt, top, True, -1, None, -1)
        answer = results[(self.topic_id, 0)]
        if answer.error != ErrorCode.none:
            self.stats.alter_refused += 1
        return result.records, AlterPartitionAnswer(
            message.incarnation, message.attempt, answer.error, False, answer.leader,
            list(answer.isr) if answer.error == ErrorCode.none else None,
            answer.partition_epoch)

    # --- a broker ---------------------------------------------------------------------

    def lag_clock(self, broker_id: int) -> int:
        """What the broker's ``PartitionState`` is given as now: the ISR's lag timers run
        on the broker's monotonic clock (``ReplicaManager.lag_clock``), which no step of
        its wall clock moves: the simulation's own time."""
        return self.now


    def broker_tick(self, broker: SimBroker) -> None:
        now = self.now
        b = broker.broker_id
        if broker.broker_epoch < 0:
            if now >= broker.register_due:
                broker.register_due = now + REGISTER_RETRY_MS
                self.send(b, CONTROLLER, Register(broker.incarnation, broker.incarnation_id))
        elif now >= broker.heartbeat_due:
            broker.heartbeat_due = now + HEARTBEAT_MS
            self.send(b, CONTROLLER, Heartbeat(broker.incarnation, broker.broker_epoch,
                                               broker.applied_offset))
        state = broker.state
        if state is None:
            return
        if now >= broker.checkpoint_due:
            broker.checkpoint_due = now + HW_CHECKPOINT_MS
            broker.hw_checkpoint = state.high_watermark
        if broker.fetching and now >= broker.fetch_deadline:
            broker.fetching = False  # the request or its answer was lost
            broker.fetch_due = now + FETCH_BACKOFF_MS
        self.maybe_fetch(broker)
        if now >= broker.shrink_due:
            broker.shrink_due = now + REPLICA_LAG_TIME_MAX_MS // 2
            isr = state.isr_to_shrink(self.lag_clock(b), REPLICA_LAG_TIME_MAX_MS)
            if isr is not None:
                self.alter_isr(broker, isr)
        call = broker.alter_call
        if call is None:
            if broker.alter_queued is not None and now >= broker.alter_retry_due:
                self.send_alter_round(broker)
        else:
            if now >= call.deadline:
                self.stats.alter_timed_out += 1
                self.alter_failed(broker)
            elif now >= call.attempt_deadline:
                # The connection broke: the channel tries again on a new one, and only
                # the new attempt's answer can come back.
                call.attempt_deadline = now + ALTER_ATTEMPT_MS
                call.attempt = next(self.alter_attempts)
                self.send(b, CONTROLLER, AlterPartition(broker.incarnation, call.attempt,
                                                        call.broker_epoch, call.change))
        for pending in [p for p in broker.produces if now >= p.deadline]:
            broker.produces.remove(pending)  # REQUEST_TIMED_OUT: not acknowledged
        self.after(broker)

    def broker_receive(self, broker: SimBroker, source: int, message: Any) -> None:
        if isinstance(message, FetchRequest):
            self.send(broker.broker_id, source, self.serve_fetch(broker, message))
        elif isinstance(message, FetchResponse):
            if message.incarnation == broker.incarnation and broker.fetching and \
                    message.token == broker.fetch_token:
                self.apply_fetch(broker, message, source)
        elif isinstance(message, ListOffsetsRequest):
            self.send(broker.broker_id, source, self.serve_list_offsets(broker, message))
        elif isinstance(message, ListOffsetsResponse):
            if message.incarnation == broker.incarnation and broker.fetching and \
                    message.token == broker.fetch_token:
                self.apply_list_offsets(broker, message)
        elif isinstance(message, Metadata):
            self.apply_metadata(broker, message)
        elif isinstance(message, ProduceRequest):
            self.append_produced(broker, message)
        elif isinstance(message, Registered):
            if message.incarnation == broker.incarnation and broker.broker_epoch < 0:
                broker.broker_epoch = message.broker_epoch
                if broker.min_metadata_offset is None:
                    broker.min_metadata_offset = message.broker_epoch
                broker.heartbeat_due = self.now
        elif isinstance(message, HeartbeatRefused):
            if message.incarnation == broker.incarnation and \
                    message.broker_epoch == broker.broker_epoch:
                broker.broker_epoch = -1  # registration gone: register again
                broker.register_due = self.now
        elif isinstance(message, AlterPartitionAnswer):
            call = broker.alter_call
            if message.incarnation == broker.incarnation and call is not None and \
                    call.attempt == message.attempt:
                self.alter_answered(broker, message)
        self.after(broker)

    def apply_metadata(self, broker: SimBroker, message: Metadata) -> None:
        """The broker's metadata publisher and ``ReplicaManager.apply_delta``: a newer
        image, and the partition updated if its registration changed."""
        if broker.min_metadata_offset is None or message.offset < broker.min_metadata_offset \
                or message.offset <= broker.applied_offset:
            return
        broker.applied_offset = message.offset
        broker.image_brokers = message.brokers
        own = message.brokers.get(broker.broker_id)
        if own is not None and own == (broker.broker_epoch, False):
            broker.serving = True
        a = message.assignment
        epochs = (a.leader_epoch, a.partition_epoch)
        if broker.state is not None and epochs == broker.image_epochs:
            return
        broker.image_epochs = epochs
        assignment = LeaderAndIsr(a.leader, a.leader_epoch, a.partition_epoch,
                                  list(a.replicas), list(a.isr), a.leader_recovery_state)
        state = broker.state
        was_leading = state is not None and state.is_leader
        old_epoch = state.leader_epoch if state is not None else NO_EPOCH
        if state is None:
            # Partition.__init__: from no assignment, the log's end and the checkpointed HW.
            log = broker.log
            hw = min(broker.hw_checkpoint, log.end)
            if hw > 0:
                self.stats.restarts_with_checkpoint += 1
            state = broker.state = PartitionState(
                broker.broker_id, LeaderAndIsr(-1, NO_EPOCH, -1, [], []), log.end, hw)
        state.update(assignment, self.lag_clock(broker.broker_id))
        self.note("broker {} applies metadata {}: leader {} epoch {} partition epoch {} ISR {}"
                  " (log end {}, HW {})", broker.broker_id, message.offset, a.leader,
                  a.leader_epoch, a.partition_epoch, a.isr, broker.log.end,
                  state.high_watermark)
        b = broker.broker_id
        if state.leader_epoch < self.max_leader_epoch[b]:
            raise Violation(Invariant.EPOCHS_GROW, (
                f"broker {b}'s leader epoch went back from {self.max_leader_epoch[b]} to "
                f"{state.leader_epoch}"))
        self.max_leader_epoch[b] = state.leader_epoch
        if state.is_leader and (not was_leading or state.leader_epoch != old_epoch):
            self.check_leader_has_acked(broker, "became leader")
        if state.leader_epoch != broker.fetch_leader_epoch or \
                state.assignment.leader != broker.fetch_leader:
            # ReplicaFetcherManager.follow: a new leader or epoch; what is in flight is
            # dropped when it comes back.
            broker.fetching = False
            broker.fetch_due = self.now
            broker.fetch_leader = state.assignment.leader
            broker.fetch_leader_epoch = state.leader_epoch
            self.maybe_fetch(broker)
        recovered = state.recovery_to_report()  # only after an unclean election
        if recovered is not None:
            self.alter_isr(broker, recovered)

    # --- produce ----------------------------------------------------------------------

    def produce(self) -> None:
        """A producer sends a batch of one to three records, acks=all, to the leader as
        some broker's (possibly stale) metadata names it."""
        views = [b for b in self.brokers.values() if b.alive and b.state is not None]
        if not views:
            return
        leader = self.rng.choice(views).state.assignment.leader  # type: ignore[union-attr]
        if leader < 0:
            return
        count = self.rng.randint(1, 3)
        values = tuple(f"s{self.seed}-{self.produced + i}" for i in range(count))
        self.produced += count
        self.send(PRODUCER, leader, ProduceRequest(values))

    def append_produced(self, broker: SimBroker, message: ProduceRequest) -> None:
        """Partition.append_as_leader and the produce purgatory."""
        state = broker.state
        if not broker.serving or state is None or not state.is_leader:
            self.stats.produce_refused += 1  # NOT_LEADER_OR_FOLLOWER
            return
        if len(state.isr) < MIN_INSYNC_REPLICAS:
            self.stats.produce_refused += 1  # NOT_ENOUGH_REPLICAS
            return
        self.append_as_leader(broker, state, message.values)

    def append_as_leader(self, broker: SimBroker, state: PartitionState,
                         values: tuple[str, ...]) -> None:
        """``Partition.append_as_leader``: the values at the log end, acks=all in the
        produce purgatory."""
        base = broker.log.end
        for value in values:
            broker.log.append(state.leader_epoch, value)
        state.on_local_append(broker.log.end)
        broker.produces.append(PendingProduce(broker.log.end, state.leader_epoch, base,
                                              values, self.now + PRODUCE_TIMEOUT_MS))

    def complete_produces(self, broker: SimBroker) -> None:
        state = broker.state
        if state is None:
            return
        for pending in list(broker.produces):
            done, error = state.check_enough_replicas(pending.required_offset,
                                                      pending.leader_epoch, MIN_INSYNC_REPLICAS)
            if not done:
                continue
            broker.produces.remove(pending)
            if error == ErrorCode.none:
                self.acknowledged(broker, pending)

    def acknowledged(self, broker: SimBroker, pending: PendingProduce) -> None:
        """The leader acknowledges a write to the producer."""
        b = broker.broker_id
        for i, value in enumerate(pending.values):
            offset = pending.base_offset + i
            record = (offset, pending.leader_epoch, value)
            if offset >= len(self.committed) or self.committed[offset] != record:
                raise Violation(Invariant.ONE_HISTORY, (
                    f"broker {b} acknowledged {record}, but the committed history has "
                    f"{self.committed[offset] if offset < len(self.committed) else 'nothing'} "
                    f"there"))
            previous = self.acked.setdefault(offset, record)
            if previous != record:
                raise Violation(Invariant.ONE_HISTORY,
                                f"offset {offset} acknowledged as {previous} and {record}")
            self.stats.acked += 1
        self.acked_end = max(self.acked_end, pending.required_offset)
        self.note("broker {} acknowledges offsets {}..{} (epoch {})", b, pending.base_offset,
                  pending.required_offset - 1, pending.leader_epoch)
        for other in self.brokers.values():
            state = other.state
            if other.alive and state is not None and state.is_leader and \
                    state.leader_epoch > pending.leader_epoch:
                self.check_leader_has_acked(other, f"leads epoch {state.leader_epoch} when "
                                                   f"broker {b} acknowledged offsets "
                                                   f"{pending.base_offset}..")
        self.check_isr_has_acked(f"broker {b} acknowledged offsets {pending.base_offset}..")

    # --- fetch: the follower's side -------------------------------------------------------

    def maybe_fetch(self, broker: SimBroker) -> None:
        state = broker.state
        if state is None or broker.fetching or self.now < broker.fetch_due:
            return
        leader = state.assignment.leader
        if state.is_leader or leader < 0:
            return
        broker.fetching = True
        broker.fetch_token += 1
        broker.fetch_deadline = self.now + FETCH_TIMEOUT_MS
        log = broker.log
        self.send(broker.broker_id, leader, FetchRequest(
            broker.incarnation, broker.fetch_token, broker.broker_id, broker.broker_epoch,
            state.leader_epoch, log.end, log.latest_epoch))

    def apply_fetch(self, broker: SimBroker, response: FetchResponse, leader: int) -> None:
        """ReplicaFetcherManager.apply for the partition's part of a Fetch response; out
        of range, ReplicaFetcher._reset_out_of_range: the round trip goes on with a
        ListOffsets of the leader's log end (its log start is always 0 here, so the
        EARLIEST step never starts a log over)."""
        broker.fetching = False
        state = broker.state
        if state is None or state.is_leader or state.leader_epoch != broker.fetch_leader_epoch:
            return  # moved on while the fetch was out
        log = broker.log
        if response.error == ErrorCode.offset_out_of_range:
            self.stats.out_of_range += 1
            broker.fetching = True
            broker.fetch_deadline = self.now + FETCH_TIMEOUT_MS
            self.send(broker.broker_id, leader, ListOffsetsRequest(
                broker.incarnation, broker.fetch_token, state.leader_epoch))
            return
        if response.error != ErrorCode.none:
            broker.fetch_due = self.now + FETCH_BACKOFF_MS
            return
        if response.diverging is not None:
            self.stats.diverging += 1
            epoch, end_offset = response.diverging
            self.truncate(broker, truncation_offset(log, epoch, end_offset, 0, log.end))
            broker.fetch_due = self.now
            self.maybe_fetch(broker)
            return
        for offset, epoch, value in response.records:
            assert offset == log.end, \
                f"broker {broker.broker_id} got offset {offset} to append at {log.end}"
            log.append(epoch, value)
        if response.records:
            state.on_local_append(log.end)
        state.on_leader_high_watermark(response.high_watermark)
        broker.fetch_due = self.now if response.records else self.now + FETCH_WAIT_MS
        self.maybe_fetch(broker)

    def apply_list_offsets(self, broker: SimBroker, response: ListOffsetsResponse) -> None:
        """ReplicaFetcherManager.truncate_to_leader_end: a replica with more than the
        leader cuts back to the leader's log end."""
        broker.fetching = False
        state = broker.state
        if state is None or state.is_leader or state.leader_epoch != broker.fetch_leader_epoch:
            return  # moved on while the request was out
        if response.error != ErrorCode.none:
            broker.fetch_due = self.now + FETCH_BACKOFF_MS
            return
        if response.log_end < broker.log.end:
            self.truncate(broker, response.log_end)
        broker.fetch_due = self.now
        self.maybe_fetch(broker)

    def serve_list_offsets(self, broker: SimBroker, request: ListOffsetsRequest
                           ) -> ListOffsetsResponse:
        """The ListOffsets handler for a replica (LATEST is the log end), after
        ``check_leader_epoch``."""
        state = broker.state
        error = ErrorCode.none
        if not broker.serving or state is None or not state.is_leader:
            error = ErrorCode.not_leader_or_follower
        elif request.current_leader_epoch < state.leader_epoch:
            error = ErrorCode.fenced_leader_epoch
        elif request.current_leader_epoch > state.leader_epoch:
            error = ErrorCode.unknown_leader_epoch
        return ListOffsetsResponse(request.incarnation, request.token, error,
                                   broker.log.end if error == ErrorCode.none else -1)

    def truncate(self, broker: SimBroker, offset: int) -> None:
        """Partition.truncate_to."""
        log = broker.log
        if offset >= log.end:
            return
        self.stats.truncations += 1
        self.note("broker {} truncates from {} to {}", broker.broker_id, log.end, offset)
        agree = self.sync_agree(broker.broker_id)
        if agree > offset:
            raise Violation(Invariant.COMMITTED_KEPT, (
                f"broker {broker.broker_id} truncates from {log.end} to {offset}, cutting "
                f"committed records from {broker.log.records[offset]} on (it agrees with the "
                f"committed history up to {agree})"))
        self.stats.truncated_records += log.end - offset
        log.truncate_to(offset)
        assert broker.state is not None
        broker.state.on_truncation(log.end)
        b = broker.broker_id
        self.agree[b] = min(self.agree[b], log.end)

    # --- fetch: the leader's side -------------------------------------------------------

    def serve_fetch(self, broker: SimBroker, request: FetchRequest) -> FetchResponse:
        """The fetch handler's _read_partition with Partition.read for a follower."""
        state = broker.state
        if not broker.serving or state is None:
            return FetchResponse(request.incarnation, request.token,
                                 ErrorCode.not_leader_or_follower, -1)
        log = broker.log
        try:
            if not state.is_leader:
                raise KafkaError(ErrorCode.not_leader_or_follower)
            if request.current_leader_epoch < state.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if request.current_leader_epoch > state.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)
            if request.replica_id not in state.assignment.replicas:
                raise KafkaError(ErrorCode.not_leader_or_follower)
            if request.last_fetched_epoch != NO_EPOCH:
                diverged = diverging_epoch(log, request.last_fetched_epoch,
                                           request.fetch_offset, 0, log.end, state.leader_epoch)
                if diverged is not None:
                    return FetchResponse(request.incarnation, request.token, ErrorCode.none,
                                         state.high_watermark, diverged)
            if request.fetch_offset > log.end:
                raise KafkaError(ErrorCode.offset_out_of_range)
            records = tuple(log.records[request.fetch_offset:
                                        request.fetch_offset + MAX_FETCH_RECORDS])
            # ReplicaManager.update_follower_fetch
            state.on_follower_fetch(request.replica_id, request.fetch_offset,
                                    self.lag_clock(broker.broker_id),
                                    request.broker_epoch)
            if request.replica_id not in state.isr and \
                    self.isr_eligible(broker, request.replica_id, request.broker_epoch):
                isr = state.isr_to_expand(request.replica_id)
                if isr is not None:
                    self.alter_isr(broker, isr)
        except KafkaError as e:  # as Kafka: no watermarks with an error
            return FetchResponse(request.incarnation, request.token, e.code, -1)
        return FetchResponse(request.incarnation, request.token, ErrorCode.none,
                             state.high_watermark, None, records)

    @staticmethod
    def isr_eligible(broker: SimBroker, replica_id: int, broker_epoch: int) -> bool:
        registration = broker.image_brokers.get(replica_id)
        return registration is not None and not registration[1] and \
            (broker_epoch < 0 or broker_epoch == registration[0])

    # --- ISR changes: AlterPartitionManager -------------------------------------------

    def alter_isr(self, broker: SimBroker, isr: list[int]) -> None:
        """Broker._alter_isr and AlterPartitionManager.submit."""
        state = broker.state
        assert state is not None
        epochs = {f.replica_id: f.broker_epoch for f in state.followers.values()}
        epochs[broker.broker_id] = broker.broker_epoch
        broker.alter_queued = IsrChange.proposed(self.topic_id, 0, state.leader_epoch, isr,
                                                 epochs, state.assignment.partition_epoch)
        if broker.alter_call is None and self.now >= broker.alter_retry_due:
            self.send_alter_round(broker)

    def send_alter_round(self, broker: SimBroker) -> None:
        change, broker.alter_queued = broker.alter_queued, None
        if change is None:
            return
        call = broker.alter_call = AlterCall(next(self.alter_attempts), change, broker.broker_epoch,
                                             self.now + ALTER_CALL_TIMEOUT_MS,
                                             self.now + ALTER_ATTEMPT_MS)
        self.note("broker {} sends AlterPartition {}: ISR {} (leader epoch {}, partition epoch "
                  "{})", broker.broker_id, call.attempt, change.isr, change.leader_epoch,
                  change.partition_epoch)
        self.send(broker.broker_id, CONTROLLER, AlterPartition(
            broker.incarnation, call.attempt, call.broker_epoch, change))

    def alter_answered(self, broker: SimBroker, answer: AlterPartitionAnswer) -> None:
        """The round ends with the controller's answer: the partition is told, unless it
        decided a newer change meanwhile (then the answer is out of date), and what was
        queued goes. A refusal that says the change was not made (INELIGIBLE_REPLICA, or
        the whole request refused) clears the pending ISR; one that says the partition
        moved on (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH), which an earlier attempt
        of this very change may have caused, leaves it pending until the metadata
        settles it, as Kafka's ``handleAlterPartitionError`` does."""
        self.note("broker {} AlterPartition {} answered: {} ISR {} partition epoch {}",
                  broker.broker_id, answer.attempt, answer.error.name, answer.isr,
                  answer.partition_epoch)
        broker.alter_call = None
        state = broker.state
        if state is not None and broker.alter_queued is None:
            if answer.error == ErrorCode.none and answer.leader == broker.broker_id:
                state.isr_answered(answer.isr, answer.partition_epoch)
            elif answer.top_level or answer.error in (ErrorCode.none, *NOT_MADE) or \
                    not KEEP_PENDING_ON_UNKNOWN_OUTCOME:
                state.isr_answered(None, -1)
        self.send_alter_round(broker)

    def alter_failed(self, broker: SimBroker) -> None:
        """The controller channel gave up (no answer): the change may or may not have
        been made, so it stays pending and is sent again after a backoff, unless the
        partition decided a newer one meanwhile."""
        call = broker.alter_call
        assert call is not None
        self.note("broker {} AlterPartition {} failed", broker.broker_id, call.attempt)
        broker.alter_call = None
        if not KEEP_PENDING_ON_UNKNOWN_OUTCOME:
            if broker.state is not None and broker.alter_queued is None:
                broker.state.isr_answered(None, -1)
            self.send_alter_round(broker)
            return
        if broker.alter_queued is None:
            broker.alter_queued = call.change
        broker.alter_retry_due = self.now + ALTER_RETRY_BACKOFF_MS

    # --- what is checked after every step ---------------------------------------------

    def after(self, broker: SimBroker) -> None:
        """After a broker's step: what a leader now serves is checked, then the produce
        purgatory completes what it can (as ``ReplicaManager._moved``)."""
        state = broker.state
        if state is None:
            return
        if state.is_leader:
            self.check_counted(broker, state)
        self.check_served(broker, state)
        if broker.produces:
            self.complete_produces(broker)

    def check_counted(self, broker: SimBroker, state: PartitionState) -> None:
        """Invariant 4, as the leader sees it: the leader of the controller's current epoch
        computes its high watermark over every member of the controller's ISR (its
        maximal ISR), or it may count as committed what a member lacks, and that member
        may be elected."""
        if state.leader_epoch != self.ctrl_leader_epoch or \
                broker.broker_id != self.ctrl_leader:
            return
        counted = state.maximal_isr
        missing = [b for b in self.ctrl_isr if b not in counted]
        if missing:
            raise Violation(Invariant.HW_OVER_ISR, (
                f"leader {broker.broker_id} (epoch {state.leader_epoch}) counts its high "
                f"watermark over {counted} (ISR {state.isr}, pending {state.pending_isr}), but "
                f"the controller's ISR is {self.ctrl_isr}: {missing} may lack what it commits"))

    def sync_agree(self, b: int) -> int:
        records = self.brokers[b].log.records
        committed = self.committed
        a = self.agree[b]
        limit = min(len(records), len(committed))
        while a < limit and records[a] == committed[a]:
            a += 1
        self.agree[b] = a
        return a

    def check_served(self, broker: SimBroker, state: PartitionState) -> None:
        """Invariant 2: a leader's log below its high watermark, which consumers read, is
        the committed history (and extends it). A follower's too, since consumers may
        read followers (KIP-392); its high watermark is a leader's, so it never passes
        the committed history."""
        b = broker.broker_id
        high_watermark = state.high_watermark
        agree = self.sync_agree(b)
        committed = self.committed
        if agree >= high_watermark:
            return
        role = "leader" if state.is_leader else "follower"
        if agree < min(high_watermark, len(committed)):
            raise Violation(Invariant.ONE_HISTORY, (
                f"{role} {b} (epoch {state.leader_epoch}) serves {broker.log.records[agree]} "
                f"below its high watermark {high_watermark}, but the committed history has "
                f"{committed[agree]}"))
        if not state.is_leader:
            raise Violation(Invariant.ONE_HISTORY, (
                f"follower {b}'s high watermark {high_watermark} is past every leader's "
                f"({len(committed)})"))
        committed.extend(broker.log.records[len(committed):high_watermark])
        self.agree[b] = high_watermark

    def missing_acked(self, b: int, up_to_epoch: int | None = None
                      ) -> tuple[int, int, str] | None:
        """An acknowledged record broker ``b``'s log does not hold (of a leader epoch up
        to ``up_to_epoch`` when given), or None."""
        if self.sync_agree(b) >= self.acked_end:
            return None
        records = self.brokers[b].log.records
        for offset in sorted(self.acked):
            record = self.acked[offset]
            if up_to_epoch is not None and record[1] > up_to_epoch:
                continue
            if offset >= len(records) or records[offset] != record:
                return record
        return None

    def check_leader_has_acked(self, broker: SimBroker, when: str) -> None:
        """Invariant 1: a leader of epoch E holds every record acknowledged in an epoch up
        to E. A broker whose metadata is behind may take up an epoch the controller has
        since replaced (a zombie leader: the other replicas follow the newer leader, so
        nothing fetches from it and its high watermark and acknowledgements cannot
        move); what newer leaders acknowledged is not required of it."""
        state = broker.state
        missing = self.missing_acked(broker.broker_id,
                                     state.leader_epoch if state is not None else None)
        if missing is not None:
            raise Violation(Invariant.ACKED_IN_LEADER, (
                f"broker {broker.broker_id} {when}, but its log lacks the acknowledged record "
                f"{missing} (log end {broker.log.end}, has "
                f"{self._at(broker.broker_id, missing[0])})"))

    def check_isr_has_acked(self, when: str) -> None:
        """Invariant 4: the controller's ISR holds a replica with every acknowledged write."""
        if not self.acked:
            return
        isr = self.partition.isr
        for b in isr:
            if self.missing_acked(b) is None:
                return
        raise Violation(Invariant.ISR_HAS_ACKED, (
            f"{when}: no replica in the controller's ISR {isr} has every acknowledged write: "
            + "; ".join(f"broker {b} lacks {self.missing_acked(b)}" for b in isr)))

    def _at(self, b: int, offset: int) -> tuple[int, int, str] | None:
        records = self.brokers[b].log.records
        return records[offset] if offset < len(records) else None

    def consume(self) -> None:
        """A consumer reads from a broker up to its HW: a leader (as it believes itself),
        or a follower (KIP-392)."""
        serving = [b for b in self.brokers.values()
                   if b.alive and b.serving and b.state is not None]
        if not serving:
            return
        broker = self.rng.choice(serving)
        assert broker.state is not None
        role = "leader" if broker.state.is_leader else "follower"
        high_watermark = broker.state.high_watermark
        start = self.rng.randint(0, high_watermark)
        served = broker.log.records[start:high_watermark]
        expected = self.committed[start:high_watermark]
        self.stats.consumer_reads += 1
        if served != expected:
            bad = next(i for i in range(len(served))
                       if i >= len(expected) or served[i] != expected[i])
            raise Violation(Invariant.ONE_HISTORY, (
                f"a consumer read {served[bad]} from {role} {broker.broker_id} below its "
                f"high watermark {high_watermark}; the committed history has "
                f"{expected[bad] if bad < len(expected) else 'nothing'} there"))

    # --- the end ------------------------------------------------------------------------

    def leader(self) -> SimBroker | None:
        leader = self.partition.leader
        return self.brokers.get(leader)

    def convergence_problem(self) -> str | None:
        """Why the healed cluster is not (yet) one full ISR with one log, or None."""
        part = self.partition
        if part.leader == NO_LEADER:
            return "the partition has no leader"
        if sorted(part.isr) != sorted(part.replicas):
            return f"the ISR is {part.isr}"
        leader = self.brokers[part.leader]
        state = leader.state
        if state is None or not state.is_leader or state.leader_epoch != part.leader_epoch:
            return f"broker {part.leader} does not know it leads epoch {part.leader_epoch}"
        hw = state.high_watermark
        for broker in self.brokers.values():
            if not broker.alive or broker.state is None:
                return f"broker {broker.broker_id} is not up"
            if broker.state.leader_epoch != part.leader_epoch:
                return f"broker {broker.broker_id} is in epoch {broker.state.leader_epoch}"
            if broker.log.records[:hw] != leader.log.records[:hw]:
                return (f"broker {broker.broker_id}'s log (end {broker.log.end}) differs from "
                        f"the leader's below its high watermark {hw}")
        return None

    def check_final(self) -> None:
        leader = self.leader()
        if leader is None:
            raise Violation(Invariant.CONVERGES, "no leader at the end")
        self.check_leader_has_acked(leader, "leads at the end")
