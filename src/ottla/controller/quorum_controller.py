"""The QuorumController: validates admin operations and turns them into metadata records.

Sans-I/O, as seed 003 describes the controller: each operation reads the current state,
returns ``ControllerResult(records, response)`` and changes nothing itself; the driver
appends the records to the metadata log, replays them through ``replay`` (the one path
that changes state, also used to load the log on start) and releases the response once
they are committed. Randomness (topic ids, placement) comes from an injected generator.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ottla.common.config import ConfigError
from ottla.common.features import METADATA_VERSION, METADATA_VERSION_LEVEL, SUPPORTED_FEATURES
from ottla.common.server_config import BROKER_CONFIGS, DYNAMIC_BROKER_KEYS
from ottla.common.topic_configs import TOPIC_CONFIGS, validate_topic_configs
from ottla.common.topics import NewTopic, topic_name_problem
from ottla.controller.placement import place
from ottla.metadata import records as r
from ottla.metadata.image import NO_LEADER, ConfigResourceType, MetadataImage
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.timeline import SnapshotRegistry

PRODUCER_ID_BLOCK_SIZE = 1000
MAX_RECORDS_PER_USER_OP = 10_000
"""Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the most records one operation a
client asks for may write (the controller's own, such as fencing, are not bounded)."""

# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass(slots=True)
class ControllerResult:
    records: list[Any]
    response: Any = None


@dataclass(slots=True)
class HeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition of an AlterPartition request; ``new_isr``: (broker, epoch or -1)."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[tuple[int, int], ...]
    leader_recovery_state: int
    partition_epoch: int


@dataclass(slots=True)
class AlterPartitionResult:
    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0
    partition_epoch: int = -1


@dataclass(slots=True)
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


class ControllerError(KafkaError):
    """An operation refused with a Kafka error; raised out of a whole operation, it is
    the error of everything the request named."""

    message: str

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(code, message)


class BatchTooLarge(ControllerError):
    """An operation that would write more than ``MAX_RECORDS_PER_USER_OP`` records."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.policy_violation,
                         "Unable to perform excessively large batch operation.")


def check_user_op(records: int) -> None:
    """Refuse an operation a client asked for before it makes more records than Kafka
    allows one (and before the work of making them: a request for 2^31-1 partitions is
    33 bytes)."""
    if records > MAX_RECORDS_PER_USER_OP:
        raise BatchTooLarge()


class NotControllerError(ControllerError):
    """This node is not (or no longer) the active controller: ask the active one."""

    def __init__(self, message: str = "This node is not the active controller") -> None:
        super().__init__(ErrorCode.not_controller, message)


def _validate_dynamic_broker_config(name: str, value: str | None) -> None:
    """Whether AlterConfigs may set broker key ``name`` to ``value`` at run time."""
    if name not in BROKER_CONFIGS:
        raise ControllerError(ErrorCode.invalid_config, f"Unknown broker config name: {name}")
    if name not in DYNAMIC_BROKER_KEYS:
        raise ControllerError(ErrorCode.invalid_request,
                              f"Cannot update these configs dynamically: {{{name}}}")
    if value is not None:
        BROKER_CONFIGS[name].parse(value)


def validate_topic_name(name: str) -> None:
    problem = topic_name_problem(name)
    if problem is not None:
        raise ControllerError(ErrorCode.invalid_topic_exception, problem)


_ELECTION_MESSAGES = {
    ErrorCode.election_not_needed: "Leader election not needed for {tp}",
    ErrorCode.preferred_leader_not_available:
        "Preferred replica {preferred} of {tp} is not live or not in the ISR",
    ErrorCode.eligible_leaders_not_available: "No live replica of {tp} can lead",
}


class QuorumController:
    def __init__(self, node_id: int, *, default_num_partitions: int = 1,
                 default_replication_factor: int = 1, delete_topic_enable: bool = True,
                 rng: random.Random | None = None,
                 registry: SnapshotRegistry | None = None) -> None:
        self.node_id = node_id
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable
        self.rng = rng or random.Random()
        self.registry = registry
        """The timeline the image's maps keep their history on (None: plain dicts)."""
        self.image = MetadataImage(registry)
        self.last_heartbeat_ms: dict[int, int] = {}
        """Broker sessions: soft state of the active controller, not in the log."""

    def replay(self, record: Any, offset: int | None = None) -> None:
        self.image.replay(record, offset)

    def _uuid(self) -> uuid.UUID:
        while True:
            value = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if value not in self.image.topics_by_id:
                return value

    # --- bootstrap and brokers -------------------------------------------------------

    def bootstrap_records(self) -> list[Any]:
        """The records a freshly formatted cluster starts its log with."""
        return [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=METADATA_VERSION_LEVEL)]

    def register_broker(self, broker_id: int, incarnation_id: uuid.UUID,
                        endpoints: Sequence[tuple[str, str, int, int]], rack: str | None,
                        broker_epoch: int, *, now_ms: int = 0, unfence: bool = True
                        ) -> ControllerResult:
        """Register (or re-register after a restart) a broker.

        ``broker_epoch`` is the offset the registration record will get, as in KRaft. A
        remote broker registers fenced and is unfenced by its heartbeats once caught up
        (``unfence=False``), and a new incarnation of it first gives up its leaderships;
        the broker in the controller's own process is unfenced at once.
        """
        records: list[Any] = []
        existing = self.image.brokers.get(broker_id)
        if existing is not None and existing.incarnation_id != incarnation_id \
                and not existing.fenced and not unfence:
            # A remote broker restarted: it leads nothing until it has caught up.
            records += self._fence(broker_id, existing.epoch)
        records.append(r.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=broker_epoch,
            end_points=tuple(r.BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                             for n, h, p, s in endpoints),
            rack=rack, fenced=True))
        self.last_heartbeat_ms[broker_id] = now_ms
        if unfence:
            records += self._unfence(broker_id, broker_epoch)
        return ControllerResult(records, broker_epoch)

    def broker_heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                         want_fence: bool, want_shutdown: bool, now_ms: int
                         ) -> ControllerResult:
        """BrokerHeartbeat: keep the session alive, unfence a caught-up broker that asks,
        fence one that asks (or is shutting down). Response: HeartbeatReply."""
        broker = self.image.brokers.get(broker_id)
        if broker is None:  # as Kafka: a heartbeat before registration has a stale epoch
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"Received a heartbeat from broker {broker_id}, but no "
                                  "broker with that id is registered")
        if broker.epoch != broker_epoch:
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"Expected broker epoch {broker.epoch}, got {broker_epoch}")
        self.last_heartbeat_ms[broker_id] = now_ms
        caught_up = metadata_offset >= broker.epoch
        records: list[Any] = []
        fenced = broker.fenced
        if (want_fence or want_shutdown) and not broker.fenced:
            records = self._fence(broker_id, broker_epoch)
            fenced = True
        elif not want_fence and not want_shutdown and broker.fenced and caught_up:
            records = self._unfence(broker_id, broker_epoch)
            fenced = False
        return ControllerResult(records, HeartbeatReply(caught_up, fenced, want_shutdown))

    def fence_stale_brokers(self, now_ms: int, session_timeout_ms: int,
                            exempt: frozenset[int] = frozenset()) -> ControllerResult:
        """Fence every unfenced broker silent for ``broker.session.timeout.ms``."""
        records: list[Any] = []
        fenced = []
        for broker in self.image.live_brokers():
            if broker.broker_id in exempt:
                continue
            last = self.last_heartbeat_ms.get(broker.broker_id)
            if last is None:
                self.last_heartbeat_ms[broker.broker_id] = now_ms  # e.g. after failover
            elif now_ms - last > session_timeout_ms:
                records += self._fence(broker.broker_id, broker.epoch)
                fenced.append(broker.broker_id)
        return ControllerResult(records, fenced)

    def _fence(self, broker_id: int, epoch: int) -> list[Any]:
        """FenceBrokerRecord, and leadership moved to another live ISR member or none."""
        live = {b.broker_id for b in self.image.live_brokers()} - {broker_id}
        records: list[Any] = [r.FenceBrokerRecord(id=broker_id, epoch=epoch)]
        for topic in self.image.topics_by_id.values():
            for index, part in topic.partitions.items():
                if part.leader != broker_id:
                    continue
                successor = next((b for b in part.isr if b in live), NO_LEADER)
                isr = [b for b in part.isr if b != broker_id] or list(part.isr)
                records.append(r.PartitionChangeRecord(
                    partition_id=index, topic_id=topic.topic_id, leader=successor,
                    isr=tuple(isr) if isr != part.isr else None))
        return records

    def _unfence(self, broker_id: int, epoch: int) -> list[Any]:
        """UnfenceBrokerRecord, and leaders for partitions that had none it can lead."""
        records: list[Any] = [r.UnfenceBrokerRecord(id=broker_id, epoch=epoch)]
        for topic in self.image.topics_by_id.values():
            for index, part in topic.partitions.items():
                if part.leader == NO_LEADER and broker_id in part.isr:
                    records.append(r.PartitionChangeRecord(
                        partition_id=index, topic_id=topic.topic_id, leader=broker_id))
        return records

    def alter_partition(self, broker_id: int, broker_epoch: int,
                        changes: Sequence[IsrChange]) -> ControllerResult:
        """AlterPartition: a leader shrinks or expands its ISR. Response: the top-level
        error and, per (topic id, partition), an AlterPartitionResult."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.epoch != broker_epoch:
            return ControllerResult([], (ErrorCode.stale_broker_epoch, {}))
        records: list[Any] = []
        results: dict[tuple[uuid.UUID, int], AlterPartitionResult] = {}
        for change in changes:
            topic = self.image.topics_by_id.get(change.topic_id)
            key = (change.topic_id, change.partition)
            if topic is None:
                results[key] = AlterPartitionResult(ErrorCode.unknown_topic_id)
                continue
            part = topic.partitions.get(change.partition)
            if part is None:
                results[key] = AlterPartitionResult(ErrorCode.unknown_topic_or_partition)
                continue
            error = self._check_isr_change(broker_id, part, change)
            if error != ErrorCode.none:
                results[key] = AlterPartitionResult(error, part.leader, part.leader_epoch,
                                                    list(part.isr), part.leader_recovery_state,
                                                    part.partition_epoch)
                continue
            isr = [b for b, _ in change.new_isr]
            records.append(r.PartitionChangeRecord(
                partition_id=change.partition, topic_id=change.topic_id, isr=tuple(isr),
                leader_recovery_state=change.leader_recovery_state))
            results[key] = AlterPartitionResult(
                ErrorCode.none, part.leader, part.leader_epoch, isr,
                change.leader_recovery_state, part.partition_epoch + 1)
        return ControllerResult(records, (ErrorCode.none, results))

    def _check_isr_change(self, broker_id: int, part: Any, change: IsrChange) -> ErrorCode:
        if change.leader_epoch != part.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if broker_id != part.leader:
            return ErrorCode.invalid_request
        if change.partition_epoch != part.partition_epoch:
            return ErrorCode.invalid_update_version
        if change.leader_recovery_state not in (0, 1) or \
                (part.leader_recovery_state == 0 and change.leader_recovery_state == 1):
            return ErrorCode.invalid_request
        members = [b for b, _ in change.new_isr]
        if len(set(members)) != len(members) or part.leader not in members:
            return ErrorCode.invalid_request
        for member, epoch in change.new_isr:
            registered = self.image.brokers.get(member)
            if member not in part.replicas or registered is None or registered.fenced or \
                    registered.in_controlled_shutdown or \
                    (epoch >= 0 and epoch != registered.epoch):
                return ErrorCode.ineligible_replica
        return ErrorCode.none

    def elect_leaders(self, election_type: int,
                      partitions: Sequence[tuple[str, int]] | None) -> ControllerResult:
        """ElectLeaders: preferred (0) or unclean (1) elections; response: {(topic,
        partition): (error, message)}. ``None`` means every partition, and then only the
        partitions that got a new leader are reported, as Kafka does."""
        live = {b.broker_id for b in self.image.live_brokers()}
        everything = partitions is None
        if partitions is None:
            partitions = [(t.name, p) for t in self.image.topics_by_id.values()
                          for p in t.partitions]
        records: list[Any] = []
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        for name, index in partitions:
            topic = self.image.topics_by_name.get(name)
            part = topic.partitions.get(index) if topic is not None else None
            if topic is None or part is None:
                results[(name, index)] = (ErrorCode.unknown_topic_or_partition,
                                          f"{name}-{index} does not exist")
                continue
            if election_type == 0:
                error, leader, isr = self._preferred(part, live)
            else:
                error, leader, isr = self._unclean(part, live)
            if error == ErrorCode.none:
                records.append(r.PartitionChangeRecord(
                    partition_id=index, topic_id=topic.topic_id, leader=leader,
                    isr=tuple(isr) if isr is not None else None))
            if not (everything and error != ErrorCode.none):
                results[(name, index)] = (error, _ELECTION_MESSAGES.get(error, "").format(
                    tp=f"{name}-{index}", preferred=part.replicas[0]) or None)
        check_user_op(len(records))
        return ControllerResult(records, results)

    def balance_partition_leaders(self, max_elections: int = 1000) -> ControllerResult:
        """The periodic preferred-leader election (auto.leader.rebalance.enable): every
        partition whose preferred replica is live and in the ISR but not leading gets
        it back as leader. Response: the (topic, partition)s moved."""
        live = {b.broker_id for b in self.image.live_brokers()}
        records: list[Any] = []
        moved: list[tuple[str, int]] = []
        for topic in self.image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if len(records) >= max_elections:
                    break
                error, leader, _ = self._preferred(part, live)
                if error == ErrorCode.none:
                    records.append(r.PartitionChangeRecord(
                        partition_id=index, topic_id=topic.topic_id, leader=leader))
                    moved.append((topic.name, index))
        return ControllerResult(records, moved)

    @staticmethod
    def _preferred(part: Any, live: set[int]) -> tuple[ErrorCode, int, list[int] | None]:
        preferred = part.replicas[0]
        if part.leader == preferred:
            return ErrorCode.election_not_needed, -1, None
        if preferred not in live or preferred not in part.isr:
            return ErrorCode.preferred_leader_not_available, -1, None
        return ErrorCode.none, preferred, None

    @staticmethod
    def _unclean(part: Any, live: set[int]) -> tuple[ErrorCode, int, list[int] | None]:
        if part.leader != NO_LEADER:
            return ErrorCode.election_not_needed, -1, None
        clean = next((b for b in part.isr if b in live), None)
        if clean is not None:
            return ErrorCode.none, clean, None
        chosen = next((b for b in part.replicas if b in live), None)
        if chosen is None:
            return ErrorCode.eligible_leaders_not_available, -1, None
        return ErrorCode.none, chosen, [chosen]  # data the old ISR had may be lost

    def update_features(self, updates: Sequence[tuple[str, int, int]],
                        validate_only: bool = False) -> ControllerResult:
        """UpdateFeatures: (feature, max level, upgrade type 1 upgrade / 2 safe / 3 unsafe
        downgrade). All or nothing; response: {feature: (error, message)}."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        records: list[Any] = []
        for name, level, upgrade_type in updates:
            supported = SUPPORTED_FEATURES.get(name)
            current = self.image.features.get(name, 0)
            problem = None
            if supported is None:
                problem = f"The controller does not support the feature {name}"
            elif level != 0 and not supported[0] <= level <= supported[1]:
                problem = (f"{name} level {level} is outside the supported range "
                           f"{supported[0]}-{supported[1]}")
            elif level < current and upgrade_type == 1:
                problem = (f"Cannot downgrade {name} from {current} to {level} without "
                           "setting the upgrade type to safe or unsafe downgrade")
            elif name == METADATA_VERSION and level < current:
                problem = "Downgrading metadata.version is not supported"
            if problem is not None:
                results[name] = (ErrorCode.invalid_update_version, problem)
            else:
                results[name] = (ErrorCode.none, None)
                if level != current:
                    records.append(r.FeatureLevelRecord(name=name, feature_level=level))
        if validate_only or any(err != ErrorCode.none for err, _ in results.values()):
            records = []
        return ControllerResult(records, results)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ControllerResult:
        """A block of producer ids for a broker (AllocateProducerIds): (start, length)."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.epoch != broker_epoch:
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"Broker {broker_id} is not registered at epoch {broker_epoch}")
        start = self.image.next_producer_id
        record = r.ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                     next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult([record], (start, PRODUCER_ID_BLOCK_SIZE))

    # --- topics ----------------------------------------------------------------------

    def create_topics(self, topics: Sequence[NewTopic], validate_only: bool = False
                      ) -> ControllerResult:
        records: list[Any] = []
        results: list[TopicResult] = []
        seen: set[str] = set()
        planned = 0  # validate_only counts what it would write, as Kafka does
        for topic in topics:
            if topic.name in seen:
                results.append(TopicResult(topic.name, ErrorCode.invalid_request,
                                           f"Duplicate topic name {topic.name} in the request"))
                continue
            seen.add(topic.name)
            try:
                topic_records, result = self._create_topic(topic, records, planned)
            except BatchTooLarge:
                raise
            except ControllerError as e:
                results.append(TopicResult(topic.name, e.code, e.message))
                continue
            planned += len(topic_records)
            if not validate_only:
                records.extend(topic_records)
            results.append(result)
        return ControllerResult(records, results)

    def _create_topic(self, topic: NewTopic, pending: list[Any], planned: int
                      ) -> tuple[list[Any], TopicResult]:
        validate_topic_name(topic.name)
        if topic.name in self.image.topics_by_name:
            raise ControllerError(ErrorCode.topic_already_exists,
                                  f"Topic '{topic.name}' already exists.")
        collision = topic.name.replace(".", "_")
        pending_names = [rec.name for rec in pending if isinstance(rec, r.TopicRecord)]
        for existing in list(self.image.topics_by_name) + pending_names:
            if existing != topic.name and existing.replace(".", "_") == collision:
                raise ControllerError(ErrorCode.invalid_topic_exception,
                                      f"Topic '{topic.name}' collides with existing topic: "
                                      f"{existing}")
        try:
            validate_topic_configs(topic.configs)
        except ConfigError as e:
            raise ControllerError(ErrorCode.invalid_config, str(e)) from None
        brokers = self.image.live_brokers()
        fixed_records = 1 + sum(v is not None for v in topic.configs.values())
        if topic.assignments:
            check_user_op(planned + fixed_records + len(topic.assignments))
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise ControllerError(ErrorCode.invalid_request,
                                      "Both numPartitions or replicationFactor and "
                                      "replicasAssignments were set. Both cannot be used at "
                                      "the same time.")
            assignments = self._validate_assignments(topic.assignments, 0)
        else:
            partitions = (self.default_num_partitions if topic.num_partitions == -1
                          else topic.num_partitions)
            rf = (self.default_replication_factor if topic.replication_factor == -1
                  else topic.replication_factor)
            if partitions <= 0:
                raise ControllerError(ErrorCode.invalid_partitions,
                                      "Number of partitions was set to an invalid non-positive "
                                      "value.")
            if rf <= 0:
                raise ControllerError(ErrorCode.invalid_replication_factor,
                                      "Replication factor must be larger than 0, or -1 to use "
                                      "the default value.")
            check_user_op(planned + fixed_records + partitions)
            try:
                assignments = place(partitions, rf, brokers, self.rng)
            except ValueError as e:
                raise ControllerError(ErrorCode.invalid_replication_factor, str(e)) from None
        topic_id = self._uuid()
        records: list[Any] = [r.TopicRecord(name=topic.name, topic_id=topic_id)]
        for name, value in sorted(topic.configs.items()):
            if value is not None:
                records.append(r.ConfigRecord(resource_type=ConfigResourceType.TOPIC,
                                              resource_name=topic.name, name=name, value=value))
        records.extend(self._partition_record(topic_id, p, replicas)
                       for p, replicas in enumerate(assignments))
        return records, TopicResult(topic.name, topic_id=topic_id,
                                    num_partitions=len(assignments),
                                    replication_factor=len(assignments[0]))

    def _partition_record(self, topic_id: uuid.UUID, partition: int, replicas: list[int]
                          ) -> r.PartitionRecord:
        live = {b.broker_id for b in self.image.live_brokers()}
        isr = [b for b in replicas if b in live] or list(replicas)
        leader = next((b for b in replicas if b in live), NO_LEADER)
        return r.PartitionRecord(partition_id=partition, topic_id=topic_id,
                                 replicas=tuple(replicas), isr=tuple(isr), leader=leader,
                                 leader_epoch=0, partition_epoch=0)

    def _validate_assignments(self, assignments: Mapping[int, Sequence[int]], first: int
                              ) -> list[list[int]]:
        registered = set(self.image.brokers)
        expected = list(range(first, first + len(assignments)))
        if sorted(assignments) != expected:
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  "Partitions should be a consecutive 0-based integer sequence")
        result = []
        rf = None
        for p in expected:
            replicas = list(assignments[p])
            if not replicas:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"The manual partition assignment includes an empty "
                                      f"replica list for partition {p}.")
            if len(set(replicas)) != len(replicas):
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"The manual partition assignment includes the broker "
                                      f"{replicas} more than once.")
            unknown = [b for b in replicas if b not in registered]
            if unknown:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"The manual partition assignment includes broker "
                                      f"{unknown[0]}, but no such broker is registered.")
            if rf is not None and len(replicas) != rf:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      "The manual partition assignment includes a partition "
                                      f"with {len(replicas)} replica(s), but this is not "
                                      f"consistent with previous partitions, which have {rf} "
                                      "replica(s).")
            rf = len(replicas)
            result.append(replicas)
        return result

    def delete_topics(self, names: Sequence[str | None], ids: Sequence[uuid.UUID | None]
                      ) -> ControllerResult:
        """Delete topics by name or id; response: [(name, topic_id, error, message)]."""
        records: list[Any] = []
        results = []
        removed: set[uuid.UUID] = set()
        for name, topic_id in zip(names, ids):
            topic = (self.image.topics_by_name.get(name) if name
                     else self.image.topics_by_id.get(topic_id))  # type: ignore[arg-type]
            if topic is None:
                code = ErrorCode.unknown_topic_id if not name else \
                    ErrorCode.unknown_topic_or_partition
                msg = "This server does not host this topic ID." if not name else \
                    "This server does not host this topic-partition."
                results.append((name, topic_id, code, msg))
                continue
            if not self.delete_topic_enable:
                results.append((topic.name, topic.topic_id, ErrorCode.topic_deletion_disabled,
                                "Topic deletion is disabled."))
                continue
            if topic.topic_id not in removed:
                removed.add(topic.topic_id)
                records.append(r.RemoveTopicRecord(topic_id=topic.topic_id))
            results.append((topic.name, topic.topic_id, ErrorCode.none, None))
        check_user_op(len(records))
        return ControllerResult(records, results)

    def create_partitions(self, requests: Sequence[tuple[str, int, list[list[int]] | None]],
                          validate_only: bool = False) -> ControllerResult:
        """Add partitions: (topic, new total count, assignments or None) per topic."""
        records: list[Any] = []
        results = []
        planned = 0
        for name, count, assignments in requests:
            try:
                topic = self.image.topics_by_name.get(name)
                if topic is None:
                    raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                          f"The topic '{name}' does not exist.")
                current = len(topic.partitions)
                if count < current:
                    raise ControllerError(ErrorCode.invalid_partitions,
                                          f"Topic currently has {current} partitions, which is "
                                          f"higher than the requested {count}.")
                if count == current:
                    raise ControllerError(ErrorCode.invalid_partitions,
                                          f"Topic already has {current} partitions.")
                rf = len(next(iter(topic.partitions.values())).replicas)
                new = count - current
                planned += new
                check_user_op(planned)
                if assignments is not None:
                    if len(assignments) != new:
                        raise ControllerError(ErrorCode.invalid_replica_assignment,
                                              f"Attempted to add {new} additional partition(s), "
                                              f"but only {len(assignments)} assignment(s) were "
                                              "specified.")
                    placed = self._validate_assignments(
                        dict(enumerate(assignments, start=current)), current)
                else:
                    try:
                        placed = place(new, rf, self.image.live_brokers(), self.rng, current)
                    except ValueError as e:
                        raise ControllerError(ErrorCode.invalid_replication_factor,
                                              str(e)) from None
                if not validate_only:
                    records.extend(self._partition_record(topic.topic_id, current + i, replicas)
                                   for i, replicas in enumerate(placed))
                results.append((name, ErrorCode.none, None))
            except BatchTooLarge:
                raise
            except ControllerError as e:
                results.append((name, e.code, e.message))
        return ControllerResult(records, results)

    # --- configs ---------------------------------------------------------------------

    def _check_resource(self, resource_type: int, name: str) -> None:
        if resource_type == ConfigResourceType.TOPIC:
            if name not in self.image.topics_by_name:
                raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                      f"Topic {name} does not exist.")
        elif resource_type == ConfigResourceType.BROKER:
            if name and (not name.isdigit() or int(name) not in self.image.brokers):
                raise ControllerError(ErrorCode.invalid_request,
                                      f"Unexpected broker id {name}")
        else:
            raise ControllerError(ErrorCode.invalid_request,
                                  f"Unsupported resource type {resource_type}")

    def _validate_config(self, resource_type: int, name: str, value: str | None) -> None:
        try:
            if resource_type == ConfigResourceType.TOPIC:
                if name not in TOPIC_CONFIGS:
                    raise ControllerError(ErrorCode.invalid_config,
                                          f"Unknown topic config name: {name}")
                if value is not None:
                    TOPIC_CONFIGS[name].parse(value)
            else:
                _validate_dynamic_broker_config(name, value)
        except ConfigError as e:
            raise ControllerError(ErrorCode.invalid_config, str(e)) from None

    def alter_configs(self, resources: Sequence[tuple[int, str, dict[str, str | None]]],
                      validate_only: bool = False) -> ControllerResult:
        """Legacy AlterConfigs: each resource's dynamic configs become exactly the given set."""
        records: list[Any] = []
        results = []
        for resource_type, name, configs in resources:
            try:
                self._check_resource(resource_type, name)
                for key, value in configs.items():
                    self._validate_config(resource_type, key, value)
                current = self.image.configs.get((resource_type, name), {})
                changes = [(k, v) for k, v in configs.items() if current.get(k) != v]
                changes += [(k, None) for k in current if k not in configs]
                if not validate_only:
                    records.extend(r.ConfigRecord(resource_type=resource_type, resource_name=name,
                                                  name=k, value=v) for k, v in changes)
                results.append((resource_type, name, ErrorCode.none, None))
            except ControllerError as e:
                results.append((resource_type, name, e.code, e.message))
        check_user_op(len(records))
        return ControllerResult(records, results)

    def incremental_alter_configs(
            self, resources: Sequence[tuple[int, str, list[tuple[str, int, str | None]]]],
            validate_only: bool = False) -> ControllerResult:
        records: list[Any] = []
        results = []
        for resource_type, name, ops in resources:
            try:
                self._check_resource(resource_type, name)
                current = dict(self.image.configs.get((resource_type, name), {}))
                keys = [key for key, _, _ in ops]
                if len(set(keys)) != len(keys):
                    raise ControllerError(ErrorCode.invalid_request,
                                          "Error due to duplicate config keys")
                new = dict(current)
                for key, op, value in ops:
                    if op == OP_SET:
                        new[key] = value  # type: ignore[assignment]
                    elif op == OP_DELETE:
                        new.pop(key, None)
                    elif op in (OP_APPEND, OP_SUBTRACT):
                        new[key] = self._list_op(resource_type, name, key, op, value, current)
                    else:
                        raise ControllerError(ErrorCode.invalid_request,
                                              f"Unknown alter config operation {op}")
                    self._validate_config(resource_type, key, new.get(key))
                changes = [(k, v) for k, v in new.items() if current.get(k) != v]
                changes += [(k, None) for k in current if k not in new]
                if not validate_only:
                    records.extend(r.ConfigRecord(resource_type=resource_type, resource_name=name,
                                                  name=k, value=v) for k, v in changes)
                results.append((resource_type, name, ErrorCode.none, None))
            except ControllerError as e:
                results.append((resource_type, name, e.code, e.message))
        check_user_op(len(records))
        return ControllerResult(records, results)

    def _list_op(self, resource_type: int, name: str, key: str, op: int, value: str | None,
                 current: Mapping[str, str]) -> str:
        if resource_type != ConfigResourceType.TOPIC or key not in TOPIC_CONFIGS or \
                TOPIC_CONFIGS[key].type.name != "LIST":
            raise ControllerError(ErrorCode.invalid_config,
                                  f"Config value append is not allowed for config key: {key}")
        existing = current.get(key)
        items = ([v.strip() for v in existing.split(",") if v.strip()] if existing is not None
                 else list(TOPIC_CONFIGS[key].default))
        values = [v.strip() for v in (value or "").split(",") if v.strip()]
        if op == OP_APPEND:
            items += [v for v in values if v not in items]
        else:
            items = [v for v in items if v not in values]
        return ",".join(items)
