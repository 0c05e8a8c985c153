"""A whole cluster in one simulation: three controllers on the KRaft quorum, three
brokers replicating a partition through them, and the group coordinator on whichever
broker leads it, under one seed's faults (issue 34).

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
  are judged against the metadata the quorum really committed;
* the partition is also ``__consumer_offsets``: the broker that leads it runs a real
  ``CoordinatorRuntime`` with ``GroupCoordinatorShard``s (both ``__consumer_offsets``
  partitions of ``offset_commit_cluster``, each batch of records one tagged value of the
  one replicated log, so that it moves whole), loaded when it becomes leader and
  unloaded when it stops being
  leader, as Kafka's onElection and onResignation; its writes are the leader's acks=all
  appends and are answered at the high watermark. The members of
  ``offset_commit_cluster`` commit and fetch through it, finding it as FindCoordinator
  does, and its checker (acknowledged commits visible, fetched offsets never back, a
  fresh load of the final log showing every last commit) holds each answer to what is
  below its coordinator's high watermark, which is what Kafka's coordinator guarantees
  (see ``ClusterOffsets``);
* clients ask brokers for producer ids (InitProducerId); a broker hands them out from a
  block it gets from the controller (AllocateProducerIds, the real
  ``ProducerIdControlManager``, answered once its record commits) and loses the rest of
  it when it crashes. No id may be handed out twice (``ClusterInvariant``), across
  brokers, their restarts and controller failovers.

Faults come from the partition cluster's random stream and reach both halves: message
loss and delay on every link, Raft messages duplicated, cuts splitting the six nodes in
two groups and one-way cuts between two nodes (the Raft links, the controller channel
and replication alike), a process paused (SIGSTOP: its timers and what is sent to it
wait until it resumes), a wall clock stepping 1-10 s ahead or back (the Raft timers
run on it, as Kafka's do, and so do a leader's ISR lag timers), a
broker crash (the process: its partition state and its
metadata follower, whose unflushed log tail is lost; the partition's log and HW
checkpoint stay), and a controller crash (the active one more often than not). The Raft
quorum's invariants (one leader per epoch, one committed log, images that agree), the
partition's and the offset commits' are checked as the run goes; after healing, the
cluster must elect a controller, converge to one ISR of three, acknowledge new writes
and every member's last commit.
"""

from __future__ import annotations

import collections
import enum
import errno
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ottla.common.topics import NewTopic
from ottla.controller.offset_control import OffsetControl
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import ControllerError
from ottla.coordinator.group import records as group_records
from ottla.coordinator.group.records import CoordinatorRecord
from ottla.coordinator.runtime import Loading
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.raft.messages import Committed
from ottla.raft.quorum import RaftReplica
from tests.simulation import offset_commit_cluster as oc
from tests.simulation import partition_cluster as pc
from tests.simulation.metadata_cluster import MetadataQuorum
from tests.simulation.partition_cluster import (
    BROKERS,
    CONNECTIONS,
    CONTROLLER,
    FENCE_CHECK_MS,
    MIN_INSYNC_REPLICAS,
    REGISTER_RETRY_MS,
    SESSION_TIMEOUT_MS,
    TOPIC,
    PartitionCluster,
    SimBroker,
    metadata_of,
)
from tests.simulation.raft_cluster import DiskFailure, Violation
from tests.simulation.raft_cluster import Faults as RaftFaults

logging.getLogger("ottla.coordinator.runtime").setLevel(logging.CRITICAL)
"""A coordinator write refused for a small ISR is logged as an error and reloads the
shard, as on a broker; here it happens every few seeds and is counted instead."""

CONTROLLERS = (11, 12, 13)
NODES = (*CONTROLLERS, *BROKERS)
FAULT_KINDS = ("loss", "delay", "duplicate", "cut", "one-way", "pause", "clock-jump",
               "crash", "controller-crash", "eio", "disk-full", "torn")
SETUP_BOUND_MS = 10_000
"""Brokers registered and unfenced and the topic led, before the faults start."""
CREATE_RETRY_MS = 200
CLOCK_STEP_MS = 10_000
"""The largest step of a wall clock. A step back stalls the Raft timers for as long (they
run on the wall clock, as Kafka's do, and wait for it to pass their deadlines again), so
steps of minutes would outlast the recovery bound after healing; the chaos harness steps
real clocks by minutes."""
EARLY_ANSWERS: tuple[type, ...] = ()
"""A mutation: the answers of these types a controller sends as soon as it has appended
their records, before the quorum commits them (the tests show the checker catches it)."""


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """The admin client's CreateTopics for the partition, sent until it exists."""

    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AllocateProducerIds:
    """A broker's AllocateProducerIds, for the next InitProducerId it answers."""

    incarnation: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class ProducerIdsAllocated:
    incarnation: int
    start: int
    length: int


CONNECTIONS[AllocateProducerIds] = CONNECTIONS[ProducerIdsAllocated] = "controller"


class ClusterInvariant(enum.Enum):
    """The whole cluster's own rule, beside the partition's, the quorum's and the offset
    commits'."""

    UNIQUE_PRODUCER_IDS = ("a producer id is handed out once, across brokers, their "
                           "restarts and controller failovers")


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

    def halt(self, failure: DiskFailure) -> None:
        """A metadata log write failed: the process halts, a broker's whole process with
        its partition and coordinator (restarted with it)."""
        n = next(m for m, disk in self.logs.items() if disk is failure.disk)
        if n not in BROKERS:
            super().halt(failure)
            return
        self.note("node {} halts: {}", n, failure)
        self.cluster.crash_broker(n)

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

    def _append(self, control: OffsetControl, replica: RaftReplica, records: list[Any]
                ) -> bool:
        if not records:
            return False
        base = replica.log.end_offset
        control.before_append(base)
        assert replica.propose(tuple(records), self.clock(replica.node_id), len(records)) == base
        control.replay_appended(records, base, self.now)
        return True

    @staticmethod
    def _create_topic(controller: QuorumController, message: CreateTopic) -> list[Any]:
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
        stable, end = control.stable_end, replica.log.end_offset
        ready = [a for a in self.answers[n]
                 if a[0] <= (end if isinstance(a[2], EARLY_ANSWERS) else stable)]
        if ready:
            self.answers[n] = [a for a in self.answers[n] if a not in ready]
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
        self.topic_id: uuid.UUID | None = None
        super().__init__(seed)

    def bootstrap(self) -> None:
        """Nothing is registered before time 0: the brokers register through the quorum."""
        for broker in self.brokers.values():
            broker.reset(0)
            broker.incarnation_id = self._uuid()
        self.pid_blocks: dict[int, list[int]] = {}
        """Broker -> [next, end) of the producer id block it hands out from (memory)."""
        self.pid_due = dict.fromkeys(BROKERS, 0)
        self.issued: dict[int, tuple[int, int]] = {}
        """The checker's: producer id -> (broker, when) it was handed out."""
        self.blocks_allocated = 0

    def handle_controller_request(self, controller: QuorumController, base_offset: int,
                                  source: int, message: Any) -> tuple[list[Any], Any]:
        if isinstance(message, AllocateProducerIds):
            result = controller.producer_ids.allocate_producer_ids(source,
                                                                   message.broker_epoch)
            start, length = result.response
            return result.records, ProducerIdsAllocated(message.incarnation, start, length)
        return super().handle_controller_request(controller, base_offset, source, message)

    def broker_receive(self, broker: SimBroker, source: int, message: Any) -> None:
        if isinstance(message, ProducerIdsAllocated):
            if message.incarnation == broker.incarnation and broker.alive:
                self.blocks_allocated += 1
                self.pid_blocks[broker.broker_id] = [message.start,
                                                     message.start + message.length]
                self.note("broker {} has producer ids {}..{}", broker.broker_id,
                          message.start, message.start + message.length - 1)
            return
        super().broker_receive(broker, source, message)

    def init_producer_id(self) -> None:
        """A client's InitProducerId (idempotent, no transactional id) to a live broker:
        answered from the broker's block, or, with none left, after it gets a block
        from the controller (the client retries meanwhile)."""
        serving = [b for b in self.brokers.values() if b.alive and b.broker_epoch >= 0]
        if serving:
            broker = self.rng.choice(serving)
            b = broker.broker_id
            block = self.pid_blocks.get(b)
            if block is not None and block[0] < block[1]:
                pid = block[0]
                block[0] += 1
                if pid in self.issued:
                    first, at = self.issued[pid]
                    raise Violation(ClusterInvariant.UNIQUE_PRODUCER_IDS, (
                        f"broker {b} handed out producer id {pid}, which broker {first} "
                        f"handed out at {at} ms"))
                self.issued[pid] = (b, self.now)
            elif self.now >= self.pid_due[b]:
                self.pid_due[b] = self.now + REGISTER_RETRY_MS
                self.send(b, CONTROLLER, AllocateProducerIds(broker.incarnation,
                                                             broker.broker_epoch))
        self.cluster.offsets.after(self.rng.randint(5, 40), self.init_producer_id)

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

    def apply_metadata(self, broker: SimBroker, message: pc.Metadata) -> None:
        super().apply_metadata(broker, message)
        self.cluster.offsets.leadership(broker)

    def after(self, broker: SimBroker) -> None:
        super().after(broker)
        self.cluster.offsets.high_watermark_moved(broker.broker_id)

    def crash(self, broker: SimBroker) -> None:
        super().crash(broker)
        self.pid_blocks.pop(broker.broker_id, None)  # the rest of its block is never used
        self.cluster.offsets.crashed(broker.broker_id)

    def inject_fault(self) -> None:
        self.cluster.inject_fault()

    def restart(self, broker: SimBroker) -> None:
        super().restart(broker)
        quorum = self.cluster.quorum
        if quorum.nodes[broker.broker_id] is None:
            quorum.boot(broker.broker_id)


OFFSETS_PREFIX = "o"
"""A log value that is a batch of ``__consumer_offsets`` records, not a producer's record:
``o<p>:<key hex>=<value hex>;...`` for a batch of ``__consumer_offsets`` partition ``p``.
One value, so that replication moves the batch whole, as Kafka's followers fetch whole
batches (the model's followers fetch values: a batch of several values could be split
between leader and follower, which Kafka never does)."""


def offsets_batch(partition: int, records: list[CoordinatorRecord]) -> str:
    encoded = (group_records.encode(r) for r in records)
    return f"{OFFSETS_PREFIX}{partition}:" + ";".join(
        f"{key.hex()}={'-' if value is None else value.hex()}" for key, value in encoded)


def offsets_records(values: Iterator[tuple[int, str]], partition: int
                    ) -> Iterator[tuple[int, CoordinatorRecord]]:
    """The decoded records of ``__consumer_offsets`` partition ``partition`` among
    (offset, value): every record of a batch at the batch's offset, so that it ends
    where the batch does."""
    prefix = f"{OFFSETS_PREFIX}{partition}:"
    for offset, value in values:
        if value.startswith(prefix):
            for item in value[len(prefix):].split(";"):
                key, data = item.split("=")
                yield offset, group_records.decode(
                    bytes.fromhex(key), None if data == "-" else bytes.fromhex(data))


class BrokerOffsetsLog:
    """A broker's ``PartitionWriter`` for its group coordinator: the ``__consumer_offsets``
    partitions are the replicated partition (each batch of the coordinator's records one
    value beside the producer's, tagged with its partition), appended by the leader as
    acks=all writes and committed at its high watermark."""

    def __init__(self, part: ClusterPartition, b: int) -> None:
        self.part = part
        self.broker = part.brokers[b]

    def append(self, tp: tuple[str, int], records: list[CoordinatorRecord], now_ms: int
               ) -> int:
        broker, state = self.broker, self.broker.state
        if not broker.alive or state is None or not state.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower, "not the leader")
        if len(state.isr) < MIN_INSYNC_REPLICAS:
            raise KafkaError(ErrorCode.not_enough_replicas, "the ISR is too small")
        self.part.append_as_leader(broker, state, (offsets_batch(tp[1], records),))
        offsets = self.part.cluster.offsets
        end = broker.log.end
        for record in records:
            key, value = record.key, record.value
            if isinstance(key, group_records.OffsetCommitKey) and \
                    isinstance(value, group_records.OffsetCommitValue):
                offsets.batch_end[((key.group, key.topic, key.partition), value.offset)] = end
        return end

    def high_watermark(self, tp: tuple[str, int]) -> int:
        state = self.broker.state
        return state.high_watermark if state is not None else 0

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, CoordinatorRecord]]:
        return offsets_records(((o, v) for o, _, v in list(self.broker.log.records)), tp[1])


class FinalOffsetsLog:
    """The final leader's log, all of it committed: what a fresh load reads."""

    def __init__(self, records: list[tuple[int, int, str]]) -> None:
        self.records = records

    def append(self, tp: tuple[str, int], records: list[CoordinatorRecord], now_ms: int
               ) -> int:
        raise KafkaError(ErrorCode.not_leader_or_follower, "read only")

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return len(self.records)

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, CoordinatorRecord]]:
        return offsets_records(((o, v) for o, _, v in self.records), tp[1])


class BrokerCoordinator(oc.Coordinator):
    """The group coordinator on the partition's leader, for one leader epoch: loaded when
    the broker becomes leader, unloaded when it no longer is (Kafka's onElection and
    onResignation), gone with the broker when it crashes."""

    def __init__(self, sim: ClusterOffsets, b: int, leader_epoch: int, incarnation: int
                 ) -> None:
        super().__init__(sim, incarnation)
        self.node = ("coordinator", b, incarnation)
        self.broker_id = b
        self.leader_epoch = leader_epoch
        self.runtime = oc.new_runtime(BrokerOffsetsLog(sim.cluster.part, b))
        self.runtime.on_timer_change = self.deadline_changed
        self.offsets_sim = sim

    def receive(self, source: oc.Node, message: Any) -> None:
        self.offsets_sim.serving_hw = self.runtime.writer.high_watermark(oc.OFFSETS_TPS[0])
        super().receive(source, message)

    def step_load(self, job: Loading) -> None:
        self.offsets_sim.serving_hw = self.runtime.writer.high_watermark(oc.OFFSETS_TPS[0])
        super().step_load(job)


class ClusterOffsets(oc.OffsetCommitCluster):
    """The offset-commit half: the members commit and fetch through the coordinator on
    whichever broker leads the partition, as their FindCoordinator finds it."""

    FAULT_KINDS = FAULT_KINDS

    def __init__(self, seed: int, cluster: WholeCluster) -> None:
        self.cluster = cluster
        self.coordinators: dict[int, BrokerCoordinator] = {}
        self.batch_end: dict[tuple[tuple[str, str, int], int], int] = {}
        """(group, topic, partition), committed offset -> the end of the batch its record
        was appended in (each commit of a member is of a new offset, so the key is
        unique): it is committed once the high watermark reaches that end."""
        self.acked_all: dict[tuple[str, str, int], list[int]] = {}
        self.serving_hw = 0
        """The high watermark of the coordinator whose answer is being checked."""
        self.loads = 0
        super().__init__(seed)

    # --- the checker, as Kafka's coordinator guarantees it -------------------------------
    #
    # A coordinator shows a group's offsets as of its partition's high watermark (Kafka's
    # lastCommittedOffset, which CoordinatorLoaderImpl sets to the log's high watermark).
    # A follower elected leader may have a high watermark below its predecessor's for a
    # fetch round: until it passes them, commits the old leader acknowledged are in the
    # new coordinator's log but not yet shown. Kafka behaves the same; the rules here
    # hold every answer to what is below its coordinator's high watermark.

    def acknowledged(self, gtp: tuple[str, str, int], offset: int, member: oc.Member) -> None:
        super().acknowledged(gtp, offset, member)
        self.acked_all.setdefault(gtp, []).append(offset)

    def covered(self, gtp: tuple[str, str, int], offset: int) -> bool:
        end = self.batch_end.get((gtp, offset))
        return end is not None and end <= self.serving_hw

    def check_fetch(self, group: str, shown: dict[tuple[str, int], int],
                    must_see: dict[tuple[str, int], int], what: str) -> None:
        visible = {}
        for (t, p), offset in must_see.items():
            gtp = (group, t, p)
            below = [o for o in self.acked_all.get(gtp, ()) if o <= offset and
                     self.covered(gtp, o)]
            if below:
                visible[(t, p)] = max(below)
        for (t, p), offset in shown.items():
            gtp = (group, t, p)
            before = self.shown.get(gtp, -1)
            if offset < before and not self.covered(gtp, before):
                self.shown[gtp] = offset  # shown above this coordinator's HW before
        super().check_fetch(group, shown, visible, what)

    def start_coordinator(self) -> None:
        """None of its own: a coordinator comes with the partition's leadership."""

    def deliver(self, dest: oc.Node, source: oc.Node, message: Any) -> None:
        """A request to the coordinator of a paused broker waits for it to resume."""
        if dest[0] == "coordinator":
            until = self.cluster.part.paused.get(dest[1], 0)
            if until > self.now:
                self.after(until - self.now, self.deliver, dest, source, message)
                return
        super().deliver(dest, source, message)

    def inject_fault(self) -> None:
        """The whole cluster injects the faults."""

    def coordinator_node(self) -> oc.Node | None:
        """FindCoordinator: the leader as some live broker's metadata names it."""
        views = [b for b in self.cluster.part.brokers.values()
                 if b.alive and b.state is not None]
        if not views:
            return None
        view = self.rng.choice(views).state
        assert view is not None
        coordinator = self.coordinators.get(view.assignment.leader)
        return coordinator.node if coordinator is not None else None

    def leadership(self, broker: SimBroker) -> None:
        """The broker's partition state changed: load or unload its coordinator."""
        b, state = broker.broker_id, broker.state
        current = self.coordinators.get(b)
        leading = broker.alive and state is not None and state.is_leader
        epoch = state.leader_epoch if state is not None else -1
        if current is not None and (not leading or current.leader_epoch != epoch):
            self.coordinators.pop(b)
            del self.nodes[current.node]
            for tp in oc.OFFSETS_TPS:
                current.runtime.unload(tp)
            current.alive = False
            self.note("coordinator {} on broker {} unloads", current.incarnation, b)
        if leading and b not in self.coordinators:
            coordinator = BrokerCoordinator(self, b, epoch, next(self.incarnations))
            self.coordinators[b] = coordinator
            self.nodes[coordinator.node] = coordinator
            self.loads += 1
            self.note("coordinator {} on broker {} loads (leader epoch {})",
                      coordinator.incarnation, b, epoch)
            coordinator.start()

    def crashed(self, b: int) -> None:
        coordinator = self.coordinators.pop(b, None)
        if coordinator is not None:
            del self.nodes[coordinator.node]
            coordinator.alive = False
            self.stats.crashes += 1

    def high_watermark_moved(self, b: int) -> None:
        coordinator = self.coordinators.get(b)
        if coordinator is not None:
            for tp in oc.OFFSETS_TPS:
                coordinator.runtime.on_high_watermark(tp)

    def heal(self) -> None:
        super().heal()
        self.faults = oc.Faults()

    def check_final(self) -> None:
        """A coordinator loaded afresh from the final leader's log shows every last
        acknowledged commit."""
        leader = self.cluster.part.leader()
        assert leader is not None
        runtime = oc.new_runtime(FinalOffsetsLog(list(leader.log.records)))
        for tp in oc.OFFSETS_TPS:
            runtime.load(tp, self.now)
        for group in oc.GROUPS:
            shown = oc.fetched(runtime, group)
            for (t, p), offset in self.must_see(group).items():
                if shown[(t, p)] != offset:
                    raise oc.Violation(oc.Invariant.QUIET, (
                        f"a fresh load of the final leader's log shows {group} {t}-{p} at "
                        f"{shown[(t, p)]}, not the last acknowledged {offset}"))


class WholeCluster:
    """The quorum and the partition on one clock, their events interleaved in time order
    (the quorum's first within a millisecond)."""

    FAULT_KINDS = FAULT_KINDS

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.quorum = ControllerQuorum(seed, self)
        self.part = ClusterPartition(seed, self)
        self.offsets = ClusterOffsets(seed, self)
        self.offsets.after(50, self.part.init_producer_id)
        self.quorum.start_phase(chaos=False)  # ticks and proposals for the whole run
        self.create_due = 0

    # --- what the runner reads (workloads.Traced, Counted) ------------------------------

    @property
    def now(self) -> int:
        return self.part.now

    @property
    def trace(self) -> collections.deque[tuple[int, str, tuple[Any, ...]]]:
        return self.part.trace

    @trace.setter
    def trace(self, value: collections.deque[tuple[int, str, tuple[Any, ...]]]) -> None:
        self.part.trace = value
        self.quorum.trace = collections.deque(self.quorum.trace, maxlen=value.maxlen)
        self.offsets.trace = collections.deque(self.offsets.trace, maxlen=value.maxlen)

    @property
    def faults_off(self) -> frozenset[str]:
        return self.part.faults_off

    @faults_off.setter
    def faults_off(self, value: frozenset[str]) -> None:
        self.part.faults_off = self.quorum.faults_off = value

    @property
    def injected(self) -> collections.Counter[str]:
        """The faults injected by kind, with the torn writes the metadata logs' crashes
        left."""
        return self.part.injected + self.quorum.injected

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
        steps = sorted([*self.quorum.trace, *self.part.trace, *self.offsets.trace],
                       key=lambda step: step[0])
        return "\n".join(f"{at:>7} ms  {text.format(*args)}" for at, text, args in steps)

    # --- running ----------------------------------------------------------------------

    def run_until(self, end_ms: int, chaos: bool | None = None) -> None:
        part, quorum, offsets = self.part, self.quorum, self.offsets
        if chaos is not None:
            part.chaos = offsets.chaos = chaos
        while True:
            due = min(quorum.events[0][0] if quorum.events else end_ms + 1,
                      part.events[0][0] if part.events else end_ms + 1,
                      offsets.events[0][0] if offsets.events else end_ms + 1)
            if due > end_ms:
                break
            part.now = offsets.now = max(part.now, due)
            quorum.step_until(due, chaos=False)
            part.run_until(due)
            offsets.run_until(due)
            self.maybe_create_topic()
        part.now = quorum.now = offsets.now = max(part.now, end_ms)

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
        kind = "loss" if choice < 0.1 else "delay" if choice < 0.2 else \
            "duplicate" if choice < 0.26 else "cut" if choice < 0.4 else \
            "one-way" if choice < 0.48 else None if choice < 0.6 else \
            "pause" if choice < 0.68 else "clock-jump" if choice < 0.74 else \
            "crash" if choice < 0.85 else "controller-crash" if choice < 0.96 else \
            "eio" if choice < 0.98 else "disk-full"
        if kind in part.faults_off:
            return
        if kind == "loss":
            part.faults.loss = quorum.faults.loss = self.offsets.faults.loss = \
                rng.choice([0.0, 0.05, 0.2, 0.5])
            part.note("loss {}", part.faults.loss)
        elif kind == "delay":
            part.faults.max_delay_ms = quorum.faults.max_delay_ms = \
                rng.choice([5, 20, 100, 400])
            self.offsets.faults.max_delay_ms = min(part.faults.max_delay_ms, 200)
            part.note("delays up to {} ms", part.faults.max_delay_ms)
        elif kind == "cut":
            group = set(rng.sample(NODES, rng.randint(1, len(NODES) // 2)))
            links = {frozenset((a, b)) for a in group for b in NODES if b not in group}
            part.faults.cut = set(links)
            quorum.faults.partitioned = set(links)
            part.note("cut: {} from the rest", sorted(group))
        elif kind == "duplicate":
            quorum.faults.duplicate = rng.choice([0.0, 0.1, 0.3])
            part.note("Raft messages duplicated: {}", quorum.faults.duplicate)
        elif kind == "one-way":
            a, b = rng.sample(NODES, 2)
            part.faults.one_way.add((a, b))
            quorum.faults.one_way.add((a, b))
            part.note("one way: {} cannot reach {}", a, b)
        elif kind is None:
            part.faults.cut, part.faults.one_way = set(), set()
            quorum.faults.partitioned, quorum.faults.one_way = set(), set()
            part.note("cut links healed")
        elif kind == "pause":
            self.pause(rng.choice(NODES), part.now + rng.randint(100, 2500))
        elif kind == "clock-jump":
            node = rng.choice(NODES)
            if quorum.skew.get(node):
                quorum.skew[node] = 0
                part.note("node {}'s wall clock jumps back to the right time", node)
            else:
                quorum.skew[node] = rng.choice([-1, 1]) * rng.randint(1_000, CLOCK_STEP_MS)
                part.note("node {}'s wall clock jumps {} s", node, quorum.skew[node] // 1000)
        elif kind == "crash":
            alive = [b for b in BROKERS if part.brokers[b].alive]
            if alive:
                # The leader more often than not: that is where the interesting cases are.
                leaders = [b for b in alive if b == part.partition.leader]
                self.crash_broker(leaders[0] if leaders and rng.random() < 0.6
                                  else rng.choice(alive))
        elif kind == "controller-crash":
            self.crash_controller()
        else:
            alive = [n for n in NODES if quorum.nodes[n] is not None]
            if alive:
                victim = rng.choice(alive)
                code = errno.EIO if kind == "eio" else errno.ENOSPC
                quorum.logs[victim].failing = code
                part.note("node {}'s metadata log disk: its next {} fails with {}", victim,
                          "write or fsync" if kind == "eio" else "write",
                          errno.errorcode[code])
        if kind is not None:
            part.injected[kind] += 1

    def pause(self, node: int, until: int) -> None:
        """SIGSTOP until ``until``: the process does nothing meanwhile; what is sent to it
        and its timers wait (a broker's metadata follower and coordinator with it)."""
        self.quorum.paused[node] = until
        if node in BROKERS:
            self.part.paused[node] = until
        self.part.note("node {} paused until {} ms", node, until)

    def crash_broker(self, b: int) -> None:
        """Broker ``b``'s process dies (kill -9, or a halt): its partition state, its
        coordinator and its metadata follower; restarted together later."""
        part, quorum = self.part, self.quorum
        if part.brokers[b].alive:
            part.crash(part.brokers[b])
        if quorum.nodes[b] is not None:
            quorum.crash(b)
        part.schedule(part.now + part.rng.randint(100, 3000), "restart", b)

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
        self.offsets.heal()  # the members commit once more and stop
        self.part.heal()  # restarts the brokers (and their followers)
        self.quorum.faults = RaftFaults()
        for disk in self.quorum.logs.values():
            disk.failing = None
        # A pause runs out by itself (2.5 s at most): ending it here would let what is
        # sent from now on overtake what waits for the process to resume.
        self.quorum.skew.clear()
        for c in CONTROLLERS:
            if self.quorum.nodes[c] is None:
                self.quorum.boot(c)
        self.part.note("healed")

    # --- the end ------------------------------------------------------------------------

    def convergence_problem(self) -> str | None:
        if self.quorum.leader() is None:
            return "no controller leads"
        return self.part.convergence_problem() or self.offsets.convergence_problem()

    def check_final(self) -> None:
        self.part.check_final()
        self.offsets.check_final()
