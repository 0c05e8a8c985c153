"""A whole cluster in one simulation: three controllers on the KRaft quorum and three
brokers replicating a partition through them, under one seed's faults (issue 34).

The two simulations it joins each stand in for the other half: ``partition_cluster``
replicates a partition over brokers whose controller never fails and commits at once;
``metadata_cluster`` runs QuorumControllers on the simulated Raft quorum with random
admin operations and no brokers. Here the brokers' requests are the controllers'
operations, and the brokers' metadata is the quorum's log:

* node ids are Kafka's: controllers 11-13 vote, brokers 1-3 are the quorum's observers
  (the broker process's metadata log follower) and the partition's replicas;
* a broker's controller channel (registration, heartbeats, AlterPartition) goes to the
  controller its metadata follower knows as leader (any voter when it knows none). Only
  the claimed controller handles requests (another answers NOT_CONTROLLER, which is a
  lost answer to the broker: it retries); it replays its own records when appending, as
  the active controller does, and answers once they are committed and stable. A
  controller that renounces or crashes drops its unanswered requests;
* every broker learns the partition's ``LeaderAndIsr`` and the brokers' epochs from its
  own follower's ``MetadataImage`` as it applies committed batches (or a snapshot), not
  from a message the controller sends;
* the partition checker's view of "what the controller committed" is the quorum's one
  committed log replayed into an image of its own, so the replication invariants
  (acknowledged writes survive, epochs grow, the ISR holds every acknowledged write)
  are judged against the metadata the quorum really committed.

Faults come from the partition cluster's random stream and reach both halves: message
loss and delay on every link, cuts splitting the six nodes in two groups (the Raft
links, the controller channel and replication alike), a broker crash (the process: its
partition state and its metadata follower, whose unflushed log tail is lost; the
partition's log and HW checkpoint stay), and a controller crash (the active one more
often than not). The Raft quorum's invariants (one leader per epoch, one committed log,
images that agree) and the partition's are checked as the run goes; after healing, the
cluster must elect a controller, converge to one ISR of three and acknowledge new
writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ottla.common.topics import NewTopic
from ottla.controller.results import ControllerError
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.protocol.errors import ErrorCode
from ottla.raft.messages import Committed
from ottla.raft.quorum import RaftReplica
from tests.simulation import partition_cluster as pc
from tests.simulation.metadata_cluster import MetadataQuorum
from tests.simulation.partition_cluster import (
    BROKERS,
    CONNECTIONS,
    CONTROLLER,
    FENCE_CHECK_MS,
    SESSION_TIMEOUT_MS,
    TOPIC,
    PartitionCluster,
    SimBroker,
    metadata_of,
)
from tests.simulation.raft_cluster import Faults as RaftFaults

CONTROLLERS = (11, 12, 13)
NODES = (*CONTROLLERS, *BROKERS)
FAULT_KINDS = ("loss", "delay", "cut", "crash", "controller-crash")
SETUP_BOUND_MS = 10_000
"""Brokers registered and unfenced and the topic led, before the faults start."""
CREATE_RETRY_MS = 200
ANSWER_AFTER_COMMIT = True
"""False models a controller that answers a request as soon as it has appended its
records, before the quorum commits them: the test shows the checker catches that."""


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """The admin client's CreateTopics for the partition, sent until it exists."""

    replicas: tuple[int, ...]


class ControllerQuorum(MetadataQuorum):
    """The metadata quorum of a whole cluster: its voters are controllers answering the
    brokers, its observers the brokers' metadata followers."""

    def __init__(self, seed: int, cluster: WholeCluster) -> None:
        self.cluster = cluster
        self.inbox: dict[int, list[tuple[int, Any]]] = {c: [] for c in CONTROLLERS}
        self.answers: dict[int, list[tuple[int, int, Any]]] = {c: [] for c in CONTROLLERS}
        """Per controller: (offset the answer waits for, broker, answer)."""
        self.fence_due = dict.fromkeys(CONTROLLERS, 0)
        self.checker = MetadataLoader(MetadataImage())
        self.checked = 0
        """Entries of the one committed log replayed into ``checker``."""
        super().__init__(seed, len(CONTROLLERS), len(BROKERS), ids=list(NODES))

    def crash(self, n: int) -> None:
        super().crash(n)
        if n in self.inbox:
            self.inbox[n] = []
            self.answers[n] = []

    def on_event(self, kind: str, data: Any, chaos: bool) -> None:
        if kind == "request":
            source, c, message = data
            control = self.controls.get(c)
            if self.nodes[c] is not None and not self.faults.cut(source, c) and \
                    control is not None and control.claimed:
                self.inbox[c].append((source, message))

    def propose(self, n: int, replica: RaftReplica) -> bool:
        """The active controller's event queue: the brokers' requests and its fencing
        timer, each operation's records a batch of its own."""
        control = self.controls.get(n)
        if control is None or not control.claimed or control.claim_epoch != replica.epoch:
            self.inbox[n] = []
            return False
        requests, self.inbox[n] = self.inbox[n], []
        proposed = False
        part = self.cluster.part
        controller = control.controller
        if self.now >= self.fence_due[n]:
            self.fence_due[n] = self.now + FENCE_CHECK_MS
            fenced = controller.cluster.fence_stale_brokers(self.now, SESSION_TIMEOUT_MS)
            part.stats.fenced += len(fenced.response)
            proposed |= self._append(control, replica, fenced.records)
        for source, message in requests:
            base = replica.log.end_offset
            try:
                if isinstance(message, CreateTopic):
                    records = self._create_topic(controller, message)
                    answer = None
                else:
                    records, answer = part.handle_controller_request(controller, base, source,
                                                                     message)
            except ControllerError:
                continue  # an error answer: the broker tries again
            proposed |= self._append(control, replica, records)
            if answer is not None:
                self.answers[n].append((replica.log.end_offset, source, answer))
        return proposed

    def _append(self, control: Any, replica: RaftReplica, records: list[Any]) -> bool:
        if not records:
            return False
        base = replica.log.end_offset
        control.before_append(base)
        assert replica.propose(tuple(records), self.now, len(records)) == base
        control.replay_appended(records, base, self.now)
        return True

    @staticmethod
    def _create_topic(controller: Any, message: CreateTopic) -> list[Any]:
        image = controller.image
        if TOPIC in image.topics_by_name or \
                any(b not in image.brokers or image.brokers[b].fenced for b in message.replicas):
            return []
        created = controller.replication.create_topics(
            [NewTopic(TOPIC, assignments={0: list(message.replicas)})])
        return created.records if created.response[0].error == ErrorCode.none else []

    def on_state(self, n: int, replica: RaftReplica) -> None:
        super().on_state(n, replica)  # claims and renounces
        if n not in self.answers or not self.answers[n]:
            return
        control = self.controls[n]
        if not control.claimed:
            self.answers[n] = []  # NOT_CONTROLLER: the brokers try again
            return
        stable = control.stable_end if ANSWER_AFTER_COMMIT else replica.log.end_offset
        ready = [a for a in self.answers[n] if a[0] <= stable]
        if ready:
            self.answers[n] = [a for a in self.answers[n] if a[0] > stable]
            for _, broker, answer in ready:
                self.cluster.part.answer(n, broker, answer)

    def on_committed(self, n: int, replica: RaftReplica, committed: Committed) -> None:
        super().on_committed(n, replica, committed)
        self._check_committed()
        if n in BROKERS:
            self.cluster.part.publish_metadata(n, self.loaders[n].image, self.applied_end[n] - 1)

    def _check_committed(self) -> None:
        """Replay what the quorum newly committed into the checker's image and hold the
        partition to its invariants there."""
        part = self.cluster.part
        while self.checked < len(self.committed):
            entry, base = self.committed[self.checked], self.committed_bases[self.checked]
            self.checked += 1
            records = list(entry.payload) if isinstance(entry.payload, (tuple, list)) else []
            for i, record in enumerate(records):
                self.checker.apply(record, base + i)
            if records:
                if part.topic_id is None and TOPIC in self.checker.image.topics_by_name:
                    part.topic_id = self.checker.image.topics_by_name[TOPIC].topic_id
                part.committed_changed(records)


class ClusterPartition(PartitionCluster):
    """The partition cluster with its controller replaced by the quorum's."""

    FAULT_KINDS = FAULT_KINDS

    def __init__(self, seed: int, cluster: WholeCluster) -> None:
        self.cluster = cluster
        self.topic_id: Any = None
        super().__init__(seed)

    def bootstrap(self) -> None:
        """Nothing is registered before time 0: the brokers register through the quorum."""
        for broker in self.brokers.values():
            broker.reset(0)
            broker.incarnation_id = self._uuid()

    def committed_image(self) -> MetadataImage:
        return self.cluster.quorum.checker.image

    def send(self, source: int, dest: int, message: Any) -> None:
        if dest != CONTROLLER:
            super().send(source, dest, message)
            return
        quorum = self.cluster.quorum
        follower = quorum.nodes.get(source)
        known = follower.leader_id if follower is not None else None
        c = known if known in CONTROLLERS else self.rng.choice(CONTROLLERS)
        faults = self.faults
        if (faults.loss and self.rng.random() < faults.loss) or faults.is_cut(source, c):
            return
        at = self.now + self.rng.randint(faults.min_delay_ms, faults.max_delay_ms)
        key = (source, c, CONNECTIONS[type(message)])
        at = max(at, self.last_delivery.get(key, 0))
        self.last_delivery[key] = at
        quorum.schedule(at, "request", (source, c, message))

    def answer(self, c: int, b: int, message: Any) -> None:
        """Controller ``c``'s answer to broker ``b``, on their connection."""
        super().send(c, b, message)

    def publish_metadata(self, b: int, image: MetadataImage, offset: int) -> None:
        """Broker ``b``'s metadata publisher, as its follower applies a committed batch."""
        broker = self.brokers[b]
        if not broker.alive or broker.min_metadata_offset is None:
            return
        if TOPIC in image.topics_by_name:
            self.apply_metadata(broker, metadata_of(image, offset))
            self.after(broker)
        elif offset > broker.applied_offset >= -1 and offset >= broker.min_metadata_offset:
            broker.applied_offset = offset  # caught up, no partition yet
            own = image.brokers.get(b)
            if own is not None and not own.fenced and own.epoch == broker.broker_epoch:
                broker.serving = True

    def broker_tick(self, broker: SimBroker) -> None:
        """A broker registered after its follower applied the log's end publishes that
        image now (Kafka's loader publishes what it has applied to a new publisher)."""
        quorum = self.cluster.quorum
        b = broker.broker_id
        end = quorum.applied_end[b] - 1
        if quorum.nodes[b] is not None and end > broker.applied_offset and \
                broker.min_metadata_offset is not None and end >= broker.min_metadata_offset:
            self.publish_metadata(b, quorum.loaders[b].image, end)
        super().broker_tick(broker)

    def inject_fault(self) -> None:
        self.cluster.inject_fault()

    def restart(self, broker: SimBroker) -> None:
        super().restart(broker)
        quorum = self.cluster.quorum
        if quorum.nodes[broker.broker_id] is None:
            quorum.boot(broker.broker_id)


class WholeCluster:
    """The quorum and the partition on one clock, their events interleaved in time order
    (the quorum's first within a millisecond)."""

    FAULT_KINDS = FAULT_KINDS

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.quorum = ControllerQuorum(seed, self)
        self.part = ClusterPartition(seed, self)
        self.quorum.start_phase(chaos=False)  # ticks and proposals for the whole run
        self.create_due = 0

    # --- what the runner reads (workloads.Traced, Counted) ------------------------------

    @property
    def now(self) -> int:
        return self.part.now

    @property
    def trace(self) -> Any:
        return self.part.trace

    @trace.setter
    def trace(self, value: Any) -> None:
        self.part.trace = value
        self.quorum.trace = type(value)(self.quorum.trace)

    @property
    def faults_off(self) -> frozenset[str]:
        return self.part.faults_off

    @faults_off.setter
    def faults_off(self, value: frozenset[str]) -> None:
        self.part.faults_off = value

    @property
    def injected(self) -> Any:
        return self.part.injected

    @property
    def operations(self) -> int:
        return self.part.operations

    @property
    def op_interval_ms(self) -> int | None:
        return self.part.op_interval_ms

    @op_interval_ms.setter
    def op_interval_ms(self, value: int | None) -> None:
        self.part.op_interval_ms = value

    def history(self) -> str:
        """Both halves' notable steps, in time order."""
        steps = sorted([*self.quorum.trace, *self.part.trace], key=lambda step: step[0])
        return "\n".join(f"{at:>7} ms  {text.format(*args)}" for at, text, args in steps)

    # --- running ----------------------------------------------------------------------

    def run_until(self, end_ms: int, chaos: bool | None = None) -> None:
        part, quorum = self.part, self.quorum
        if chaos is not None:
            part.chaos = chaos
        while True:
            due = min(quorum.events[0][0] if quorum.events else end_ms + 1,
                      part.events[0][0] if part.events else end_ms + 1)
            if due > end_ms:
                break
            part.now = max(part.now, due)
            quorum.step_until(due, chaos=False)
            part.run_until(due)
            self.maybe_create_topic()
        part.now = quorum.now = max(part.now, end_ms)

    def maybe_create_topic(self) -> None:
        """The admin client, until the topic exists: CreateTopics to the active
        controller (it waits for the three brokers to be registered and unfenced)."""
        if self.part.topic_id is not None or self.part.now < self.create_due:
            return
        self.create_due = self.part.now + CREATE_RETRY_MS
        leader = self.quorum.leader()
        if leader is not None:
            self.quorum.inbox[leader].append((-1, CreateTopic(BROKERS)))

    def set_up(self) -> None:
        """Run without faults until the partition has a leader the brokers know, past the
        first fault timer of the partition cluster (chaos then schedules its own)."""
        deadline = self.part.now + SETUP_BOUND_MS
        while self.part.now < deadline and not self.ready():
            self.run_until(self.part.now + 100, chaos=False)
        if not self.ready():
            raise pc.Violation(pc.Invariant.CONVERGES,
                               f"the topic was not led {SETUP_BOUND_MS} ms after the start")
        self.run_until(max(self.part.now, 1500), chaos=False)

    def ready(self) -> bool:
        part = self.part
        if part.topic_id is None or part.partition.leader < 0:
            return False
        leader = part.brokers[part.partition.leader]
        return leader.state is not None and leader.state.is_leader

    def start_chaos(self) -> None:
        self.part.schedule(self.part.now + self.part.rng.randint(200, 1500), "fault", None)

    # --- faults -----------------------------------------------------------------------

    def inject_fault(self) -> None:
        part, quorum = self.part, self.quorum
        rng = part.rng
        choice = rng.random()
        kind = "loss" if choice < 0.12 else "delay" if choice < 0.24 else \
            "cut" if choice < 0.44 else None if choice < 0.6 else \
            "crash" if choice < 0.8 else "controller-crash"
        if kind in part.faults_off:
            return
        if kind == "loss":
            part.faults.loss = quorum.faults.loss = rng.choice([0.0, 0.05, 0.2, 0.5])
            part.note("loss {}", part.faults.loss)
        elif kind == "delay":
            part.faults.max_delay_ms = quorum.faults.max_delay_ms = \
                rng.choice([5, 20, 100, 400])
            part.note("delays up to {} ms", part.faults.max_delay_ms)
        elif kind == "cut":
            group = set(rng.sample(NODES, rng.randint(1, len(NODES) // 2)))
            links = {frozenset((a, b)) for a in group for b in NODES if b not in group}
            part.faults.cut = set(links)
            quorum.faults.partitioned = set(links)
            part.note("cut: {} from the rest", sorted(group))
        elif kind is None:
            part.faults.cut = set()
            quorum.faults.partitioned = set()
            part.note("cut links healed")
        elif kind == "crash":
            self.crash_broker()
        else:
            self.crash_controller()
        if kind is not None:
            part.injected[kind] += 1

    def crash_broker(self) -> None:
        part, quorum = self.part, self.quorum
        alive = [b for b in BROKERS if part.brokers[b].alive]
        if not alive:
            return
        leaders = [b for b in alive if b == part.partition.leader]
        victim = leaders[0] if leaders and part.rng.random() < 0.6 else part.rng.choice(alive)
        part.crash(part.brokers[victim])
        if quorum.nodes[victim] is not None:
            quorum.crash(victim)
        part.schedule(part.now + part.rng.randint(100, 3000), "restart", victim)

    def crash_controller(self) -> None:
        quorum, part = self.quorum, self.part
        alive = [c for c in CONTROLLERS if quorum.nodes[c] is not None]
        if not alive:
            return
        active = quorum.leader()
        victim = active if active in alive and part.rng.random() < 0.6 else \
            part.rng.choice(alive)
        quorum.crash(victim)
        quorum.schedule(part.now + part.rng.randint(100, 3000), "restart", victim)

    def heal(self) -> None:
        self.part.heal()  # restarts the brokers (and their followers)
        self.quorum.faults = RaftFaults()
        for c in CONTROLLERS:
            if self.quorum.nodes[c] is None:
                self.quorum.boot(c)
        self.part.note("healed")

    # --- the end ------------------------------------------------------------------------

    def convergence_problem(self) -> str | None:
        if self.quorum.leader() is None:
            return "no controller leads"
        return self.part.convergence_problem()

    def check_final(self) -> None:
        self.part.check_final()
