"""Topics, partitions and who leads them (Kafka's ReplicationControlManager): creating and
deleting topics, adding partitions, placing replicas, AlterPartition from leaders,
preferred and unclean elections, and what fencing or unfencing a broker does to the
partitions, and where each replica lives: the log dirs brokers assign replicas to and
report offline (KIP-858). Every leader and ISR change is decided by
``PartitionChangeBuilder``, and a replica whose log dir is offline is never elected."""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ottla.common.config import ConfigError
from ottla.common.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    directory_assignment_supported,
)
from ottla.common.topic_configs import validate_topic_configs
from ottla.common.topics import NewTopic, topic_name_problem
from ottla.controller.partition_change import Election, PartitionChangeBuilder
from ottla.controller.placement import place
from ottla.controller.results import (
    TOO_MANY_NEW_PARTITIONS,
    TOO_MANY_PARTITIONS,
    BatchTooLarge,
    ControllerError,
    ControllerResult,
    PartitionChangeQuota,
    check_user_op,
    no_quota,
)
from ottla.metadata import directory_id
from ottla.metadata import records as r
from ottla.metadata.image import (
    NO_LEADER,
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from ottla.metadata.isr_change import IsrChange
from ottla.protocol.errors import ErrorCode


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


_ELECTION_MESSAGES = {
    ErrorCode.election_not_needed: "Leader election not needed for {tp}",
    ErrorCode.preferred_leader_not_available:
        "Preferred replica {preferred} of {tp} is not live or not in the ISR",
    ErrorCode.eligible_leaders_not_available: "No live replica of {tp} can lead",
}


@dataclass(slots=True)
class DirectoryAssignment:
    """One directory of an AssignReplicasToDirs request: the partitions, by topic id, a
    broker placed in it."""

    directory: uuid.UUID
    topics: list[tuple[uuid.UUID, list[int]]]


@dataclass(slots=True)
class DirectoryAssignmentResult:
    """The answer for one directory: per topic id, per partition, an error code."""

    directory: uuid.UUID
    topics: list[tuple[uuid.UUID, list[tuple[int, ErrorCode]]]] = field(default_factory=list)


class LeaderAcceptor(Container[int]):
    """Who may lead a partition (Kafka's ``ReplicationControlManager.LeaderAcceptor``): a
    live broker whose replica of it is in a log dir that is online, as its registration
    says (less ``offline``, dirs being reported offline in the same operation). A
    directory not known or not yet assigned counts as online."""

    __slots__ = ("image", "live", "offline", "part")

    def __init__(self, live: Container[int], image: MetadataImage,
                 part: PartitionRegistration,
                 offline: Mapping[int, Collection[uuid.UUID]] | None = None) -> None:
        self.live = live
        self.image = image
        self.part = part
        self.offline = offline or {}

    def __contains__(self, broker_id: object) -> bool:
        if not isinstance(broker_id, int) or broker_id not in self.live:
            return False
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return True  # a broker registering in this operation (alike before replay)
        part = self.part
        directory = part.directory(broker_id) if broker_id in part.replicas \
            else directory_id.UNASSIGNED
        if directory in self.offline.get(broker_id, ()):
            return False
        return registration.has_online_dir(directory)


def validate_topic_name(name: str) -> None:
    problem = topic_name_problem(name)
    if problem is not None:
        raise ControllerError(ErrorCode.invalid_topic_exception, problem)


def _no_such_partition(name: str, index: int) -> tuple[ErrorCode, str]:
    return ErrorCode.unknown_topic_or_partition, f"{name}-{index} does not exist"


class ReplicationControlManager:
    def __init__(self, image: MetadataImage, rng: random.Random, *,
                 default_num_partitions: int = 1, default_replication_factor: int = 1,
                 delete_topic_enable: bool = True,
                 unclean_leader_election_enable: bool = False,
                 default_min_insync_replicas: int = 1) -> None:
        self.image = image
        self.rng = rng
        self.default_min_insync_replicas = default_min_insync_replicas
        self.unclean_leader_election_enable = unclean_leader_election_enable
        """The node's static ``unclean.leader.election.enable``; dynamic cluster and
        topic configs override it."""
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable

    def _uuid(self) -> uuid.UUID:
        while True:
            value = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if value not in self.image.topics_by_id:
                return value

    def _live(self) -> set[int]:
        return {b.broker_id for b in self.image.live_brokers()}

    def _partition(self, name: str, index: int
                   ) -> tuple[TopicImage, PartitionRegistration] | None:
        topic = self.image.topics_by_name.get(name)
        part = topic.partitions.get(index) if topic is not None else None
        return None if topic is None or part is None else (topic, part)

    # --- topics ----------------------------------------------------------------------

    def create_topics(self, topics: Sequence[NewTopic], validate_only: bool = False,
                      quota: PartitionChangeQuota = no_quota) -> ControllerResult:
        """Create topics; a topic is charged to ``quota`` once it is valid, even when
        only validated, as Kafka charges it."""
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
                topic_records, result = self._create_topic(topic, records, planned, quota)
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

    def _create_topic(self, topic: NewTopic, pending: list[Any], planned: int,
                      quota: PartitionChangeQuota) -> tuple[list[Any], TopicResult]:
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
        nulls = [key for key, value in topic.configs.items() if value is None]
        if nulls:  # Kafka's ControllerConfigurationValidator
            raise ControllerError(ErrorCode.invalid_config, "Null value not supported for "
                                  f"topic configs: {','.join(nulls)}")
        try:
            validate_topic_configs(topic.configs)
        except ConfigError as e:
            raise ControllerError(ErrorCode.invalid_config, str(e)) from None
        brokers = self.image.live_brokers()
        fixed_records = 1 + sum(v is not None for v in topic.configs.values())
        if topic.assignments:
            check_user_op(planned + fixed_records + len(topic.assignments), TOO_MANY_PARTITIONS)
            if topic.replication_factor != -1:
                raise ControllerError(ErrorCode.invalid_request,
                                      "A manual partition assignment was specified, but "
                                      "replication factor was not set to -1.")
            if topic.num_partitions != -1:
                raise ControllerError(ErrorCode.invalid_request,
                                      "A manual partition assignment was specified, but "
                                      "numPartitions was not set to -1.")
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
            check_user_op(planned + fixed_records + partitions, TOO_MANY_PARTITIONS)
            try:
                assignments = place(partitions, rf, brokers, self.rng)
            except ValueError as e:
                raise ControllerError(ErrorCode.invalid_replication_factor, str(e)) from None
        quota(len(assignments))
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
        live = self._live()
        isr = [b for b in replicas if b in live] or list(replicas)
        leader = next((b for b in replicas if b in live), NO_LEADER)
        directories = tuple(self.default_dir(b) for b in replicas) \
            if self.directories_tracked else ()
        return r.PartitionRecord(partition_id=partition, topic_id=topic_id,
                                 replicas=tuple(replicas), isr=tuple(isr), leader=leader,
                                 leader_epoch=0, partition_epoch=0, directories=directories)

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
                twice = next(b for i, b in enumerate(replicas) if b in replicas[:i])
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"The manual partition assignment includes the broker "
                                      f"{twice} more than once.")
            unknown = [b for b in replicas if b not in registered]
            if unknown:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"The manual partition assignment includes broker "
                                      f"{unknown[0]}, but no such broker is registered.")
            self._check_not_all_cordoned(replicas)
            if rf is not None and len(replicas) != rf:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      "The manual partition assignment includes a partition "
                                      f"with {len(replicas)} replica(s), but this is not "
                                      f"consistent with previous partitions, which have {rf} "
                                      "replica(s).")
            rf = len(replicas)
            result.append(replicas)
        return result

    def _check_not_all_cordoned(self, replicas: Sequence[int]) -> None:
        """A manual assignment may not name a broker whose every log dir is cordoned
        (KIP-1066; Kafka's ``validateManualPartitionAssignment``, lowest id first)."""
        for broker_id in sorted(replicas):
            registration = self.image.brokers.get(broker_id)
            if registration is not None and not registration.has_uncordoned_dirs:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"The manual partition assignment includes broker "
                                      f"{broker_id}, but all its log directories are "
                                      "cordoned.")

    def delete_topics(self, names: Sequence[str | None], ids: Sequence[uuid.UUID | None],
                      quota: PartitionChangeQuota = no_quota) -> ControllerResult:
        """Delete topics by name or id; response: [(name, topic_id, error, message)]."""
        records: list[Any] = []
        results = []
        removed: set[uuid.UUID] = set()
        for name, topic_id in zip(names, ids):
            by_name = name is not None
            topic = (self.image.topics_by_name.get(name) if by_name
                     else self.image.topics_by_id.get(topic_id))  # type: ignore[arg-type]
            if topic is None:
                code = ErrorCode.unknown_topic_or_partition if by_name else \
                    ErrorCode.unknown_topic_id
                msg = "This server does not host this topic-partition." if by_name else \
                    "This server does not host this topic ID."
                results.append((name, topic_id, code, msg))
                continue
            if not self.delete_topic_enable:
                results.append((topic.name, topic.topic_id, ErrorCode.topic_deletion_disabled,
                                "Topic deletion is disabled."))
                continue
            try:
                quota(len(topic.partitions))
            except ControllerError as e:
                results.append((topic.name, topic.topic_id, e.code, e.message))
                continue
            if topic.topic_id not in removed:
                removed.add(topic.topic_id)
                records.append(r.RemoveTopicRecord(topic_id=topic.topic_id))
            results.append((topic.name, topic.topic_id, ErrorCode.none, None))
        check_user_op(len(records))
        return ControllerResult(records, results)

    def create_partitions(self, requests: Sequence[tuple[str, int, list[list[int]] | None]],
                          validate_only: bool = False,
                          quota: PartitionChangeQuota = no_quota) -> ControllerResult:
        """Add partitions: (topic, new total count, assignments or None) per topic."""
        records: list[Any] = []
        results = []
        planned = 0
        for name, count, assignments in requests:
            try:
                topic = self.image.topics_by_name.get(name)
                if topic is None:  # Kafka's answer has no message
                    results.append((name, ErrorCode.unknown_topic_or_partition, None))
                    continue
                current = len(topic.partitions)
                # Kafka's ReplicationControlManager.createPartitions, word for word.
                if count == current:
                    raise ControllerError(ErrorCode.invalid_partitions,
                                          f"Topic already has {current} partition(s).")
                if count < current:
                    raise ControllerError(ErrorCode.invalid_partitions,
                                          f"The topic {name} currently has {current} "
                                          f"partition(s); {count} would not be an increase.")
                rf = len(next(iter(topic.partitions.values())).replicas)
                new = count - current
                planned += new
                check_user_op(planned, TOO_MANY_NEW_PARTITIONS)
                if assignments is not None and len(assignments) != new:
                    raise ControllerError(ErrorCode.invalid_replica_assignment,
                                          f"Attempted to add {new} additional partition(s), "
                                          f"but only {len(assignments)} assignment(s) were "
                                          "specified.")
                quota(new)
                if assignments is not None:
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

    # --- leaders and ISRs ----------------------------------------------------------------

    def unclean_allowed(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` for ``topic``: its own config, else the
        cluster's dynamic default, else this controller's static config."""
        for configs in (self.image.topic_configs(topic), self.image.broker_configs(None)):
            value = configs.get("unclean.leader.election.enable")
            if value is not None:
                return value.strip().lower() == "true"
        return self.unclean_leader_election_enable

    def _election(self, topic: str) -> Election:
        return Election.UNCLEAN if self.unclean_allowed(topic) else Election.ONLINE

    @property
    def elr_enabled(self) -> bool:
        """KIP-966's Eligible Leader Replicas, on at ``eligible.leader.replicas.version``
        1."""
        return self.image.features.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= 1

    def min_insync_replicas(self, topic: str) -> int:
        """``min.insync.replicas`` of ``topic``: its config, the cluster's dynamic
        default, or this controller's."""
        for configs in (self.image.topic_configs(topic), self.image.broker_configs(None)):
            value = configs.get("min.insync.replicas")
            if value is not None:
                try:
                    return int(value)
                except ValueError:
                    break
        return self.default_min_insync_replicas

    @property
    def directories_tracked(self) -> bool:
        """Whether replicas' log dirs are tracked (KIP-858, metadata.version 3.7-IV2)."""
        return directory_assignment_supported(self.image.features)

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """Where a new replica on ``broker_id`` goes (Kafka's ``ClusterControlManager.
        defaultDir``): the broker's one online log dir, else ``UNASSIGNED`` until the
        broker says (AssignReplicasToDirs)."""
        registration = self.image.brokers.get(broker_id)
        return directory_id.UNASSIGNED if registration is None else registration.default_dir

    def _builder(self, topic: TopicImage, index: int, part: PartitionRegistration,
                 live: Collection[int], election: Election = Election.ONLINE,
                 offline: Mapping[int, Collection[uuid.UUID]] | None = None
                 ) -> PartitionChangeBuilder:
        """The change builder of a partition: only live replicas in online log dirs may
        lead it, ELR is kept when the feature is on, and replicas' dirs are tracked from
        metadata.version 3.7-IV2."""
        builder = PartitionChangeBuilder(topic.topic_id, index, part,
                                         LeaderAcceptor(live, self.image, part, offline),
                                         election)
        if self.elr_enabled:
            builder.with_elr(self.min_insync_replicas(topic.name))
        if self.directories_tracked:
            builder.with_default_dir(self.default_dir)
        return builder

    def _leader_and_isr_updates(self, partitions: Iterable[tuple[TopicImage, int,
                                                                 PartitionRegistration]],
                                gone: set[int], unclean: Collection[int] = ()
                                ) -> list[Any]:
        """Kafka's ``generateLeaderAndIsrUpdates``: ``gone`` leave the ISR of each of
        ``partitions`` (unless that would empty it without ELR) and may not lead it; a
        partition they led goes to another live in-sync replica in an online log dir,
        or to none."""
        live = self._live() - gone
        records: list[Any] = []
        for topic, index, part in partitions:
            isr = [b for b in part.isr if b not in gone]
            if not isr and not self.elr_enabled:
                isr = list(part.isr)  # the last member stays, to be elected again
            record = self._builder(topic, index, part, live, self._election(topic.name)) \
                .with_isr(isr).with_unclean_shutdown(unclean).build()
            if record is not None:
                records.append(record)
        return records

    def handle_brokers_fenced(self, broker_ids: set[int],
                              unclean_shutdown: Collection[int] = ()) -> list[Any]:
        """``broker_ids`` leave the ISR of every partition they are in sync for, unless
        that would empty it (Kafka's ``handleBrokerFenced``), and the partitions they led
        go to another live in-sync replica (or none): a dead follower must not hold back
        the high watermark of ``acks=all`` writes, and an idle partition's leader never
        notices one (a follower at the log end counts as caught up).

        With Eligible Leader Replicas on, brokers in ``unclean_shutdown`` (a new
        incarnation whose last shutdown was not clean, Kafka's
        ``handleBrokerUncleanShutdown``) also leave every ELR: their logs may have lost
        what they acknowledged, so electing them would lose committed records."""
        unclean = set(unclean_shutdown) if self.elr_enabled else set()
        gone = broker_ids | unclean
        return self._leader_and_isr_updates(
            ((topic, index, part) for topic in self.image.topics_by_id.values()
             for index, part in topic.partitions.items()
             if part.leader in gone or not gone.isdisjoint(part.isr) or
             not unclean.isdisjoint(part.elr)),
            gone, unclean)

    def handle_directories_offline(self, broker_id: int, broker_epoch: int,
                                   offline_dirs: Collection[uuid.UUID],
                                   decided: Collection[tuple[uuid.UUID, int]] = ()
                                   ) -> list[Any]:
        """A heartbeat names ``offline_dirs`` (Kafka's ``handleDirectoriesOffline``):
        for the dirs among them that the broker's registration still has online, every
        partition whose replica on the broker lives there loses the broker from its ISR
        and, if the broker led it, gets another leader, as if the broker were fenced for
        that partition alone; a BrokerRegistrationChangeRecord keeps the broker's other
        dirs online. Partitions in ``decided`` already have a change in the same
        operation (the broker fenced or unfenced by the heartbeat)."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or not self.directories_tracked:
            return []
        newly_offline = {d for d in broker.directories if d in offline_dirs}
        if not newly_offline:
            return []
        records = self._leader_and_isr_updates(
            ((topic, index, part) for topic in self.image.topics_by_id.values()
             for index, part in topic.partitions.items()
             if broker_id in part.replicas and part.directory(broker_id) in newly_offline
             and (topic.topic_id, index) not in decided),
            {broker_id})
        records.append(r.BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=broker_epoch,
            log_dirs=tuple(d for d in broker.directories if d not in offline_dirs)))
        return records

    def assign_replicas_to_dirs(self, broker_id: int, broker_epoch: int,
                                assignments: Sequence[DirectoryAssignment]
                                ) -> ControllerResult:
        """AssignReplicasToDirs (Kafka's ``handleAssignReplicasToDirs``): a broker says
        in which of its log dirs it put replicas. Each partition of the broker gets the
        directory in its record; one assigned to a dir already offline also leaves the
        ISR and its leadership, as ``handle_directories_offline`` would have done.
        Response: a DirectoryAssignmentResult per directory."""
        if not self.directories_tracked:
            raise ControllerError(ErrorCode.unsupported_version,
                                  "Directory assignment is not supported yet.")
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"No broker registration found for broker {broker_id}")
        if broker.epoch != broker_epoch:
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"Expected broker epoch {broker.epoch}, but got broker "
                                  f"epoch {broker_epoch}")
        placed: dict[tuple[uuid.UUID, int], tuple[TopicImage, uuid.UUID]] = {}
        results = []
        for assignment in assignments:
            result = DirectoryAssignmentResult(assignment.directory)
            for topic_id, indexes in assignment.topics:
                topic = self.image.topics_by_id.get(topic_id)
                answers = []
                for index in indexes:
                    part = topic.partitions.get(index) if topic is not None else None
                    if topic is None:
                        error = ErrorCode.unknown_topic_id
                    elif part is None:
                        error = ErrorCode.unknown_topic_or_partition
                    elif broker_id not in part.replicas:
                        error = ErrorCode.not_leader_or_follower
                    else:
                        error = ErrorCode.none
                        placed[(topic_id, index)] = (topic, assignment.directory)
                    answers.append((index, error))
                result.topics.append((topic_id, answers))
            results.append(result)
        live = self._live()
        records: list[Any] = []
        for (_, index), (topic, directory) in placed.items():
            part = topic.partitions[index]
            if broker.has_online_dir(directory):
                builder = self._builder(topic, index, part, live)
            else:  # the dir failed before the broker could say it held the replica
                isr = [b for b in part.isr if b != broker_id]
                if not isr and not self.elr_enabled:
                    isr = list(part.isr)
                builder = self._builder(topic, index, part, live - {broker_id},
                                        self._election(topic.name)).with_isr(isr)
            record = builder.with_directory(broker_id, directory).build()
            if record is not None:
                records.append(record)
        return ControllerResult(records, results)

    def handle_broker_unfenced(self, broker_id: int,
                               offline_dirs: Collection[uuid.UUID] = ()) -> list[Any]:
        """Partitions without a leader that ``broker_id`` is in sync for, eligible for
        (ELR) or was the last leader of (last known ELR) get it; where unclean elections
        are allowed, so do those it is merely a replica of. Not those
        whose replica on it is in an offline log dir (or in ``offline_dirs``, being
        reported offline by the same heartbeat)."""
        live = self._live() | {broker_id}
        offline = {broker_id: offline_dirs} if offline_dirs else None
        records: list[Any] = []
        for topic in self.image.topics_by_id.values():
            for index, part in topic.partitions.items():
                if part.leader != NO_LEADER or broker_id not in part.replicas:
                    continue
                election = self._election(topic.name)
                if broker_id in part.isr or broker_id in part.elr or \
                        part.last_known_elr == [broker_id] or election is Election.UNCLEAN:
                    record = self._builder(topic, index, part, live, election,
                                           offline).build()
                    if record is not None:
                        records.append(record)
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
            key = change.key
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
            isr = change.isr
            builder = self._builder(topic, change.partition, part, self._live() | {broker_id}) \
                .with_isr(isr).with_recovery_state(change.leader_recovery_state)
            self._maybe_complete_reassignment(builder, part, isr)
            leader, isr = builder.leader_and_isr()
            record = builder.build()
            epoch = part.partition_epoch
            if record is not None:
                records.append(record)
                epoch += 1
            results[key] = AlterPartitionResult(
                ErrorCode.none, leader,
                part.leader_epoch + (1 if leader != part.leader else 0), isr,
                change.leader_recovery_state, epoch)
        return ControllerResult(records, (ErrorCode.none, results))

    # --- reassignments (KIP-455) ----------------------------------------------------------

    @staticmethod
    def _maybe_complete_reassignment(builder: PartitionChangeBuilder,
                                     part: PartitionRegistration, isr: Sequence[int]) -> None:
        """A reassignment is complete once every replica it adds is in sync and some of
        the target set is: the replicas leaving go, with their ISR places."""
        if not (part.adding_replicas or part.removing_replicas):
            return
        target = [b for b in part.replicas if b not in part.removing_replicas]
        if all(b in isr for b in part.adding_replicas) and any(b in isr for b in target):
            builder.with_replicas(target)

    def alter_partition_reassignments(
            self, requests: Sequence[tuple[str, int, Sequence[int] | None]],
            allow_replication_factor_change: bool = True) -> ControllerResult:
        """AlterPartitionReassignments: move each partition to its target replicas (or,
        with None, cancel its reassignment). Response: {(topic, partition): (error,
        message)}. New replicas join as followers; the move completes when they are all in
        the ISR (at once when it only removes or reorders replicas)."""
        live = self._live()
        records: list[Any] = []
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        for name, index, target in requests:
            found = self._partition(name, index)
            if found is None:
                results[(name, index)] = _no_such_partition(name, index)
                continue
            topic, part = found
            try:
                record = self._reassign(topic, index, part, target, live,
                                        allow_replication_factor_change)
            except ControllerError as e:
                results[(name, index)] = (e.code, e.message)
                continue
            if record is not None:
                records.append(record)
            results[(name, index)] = (ErrorCode.none, None)
        return ControllerResult(records, results)

    def _reassign(self, topic: TopicImage, index: int, part: PartitionRegistration,
                  target: Sequence[int] | None, live: set[int],
                  allow_replication_factor_change: bool) -> Any:
        in_progress = bool(part.adding_replicas or part.removing_replicas)
        original = [b for b in part.replicas if b not in part.adding_replicas]
        builder = self._builder(topic, index, part, live)
        if target is None:
            if not in_progress:
                raise ControllerError(ErrorCode.no_reassignment_in_progress,
                                      f"No reassignment of partition {index} is in progress")
            return builder.with_replicas(original).build()
        target = list(target)
        if not target or len(set(target)) != len(target):
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  "The target replicas must be distinct and not empty")
        unknown = [b for b in target if b not in self.image.brokers]
        if unknown:
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  f"The target replicas include unknown brokers {unknown}")
        self._check_not_all_cordoned(target)
        if not allow_replication_factor_change and len(target) != len(original):
            raise ControllerError(ErrorCode.invalid_replication_factor,
                                  f"The replication factor would change from "
                                  f"{len(original)} to {len(target)}")
        adding = [b for b in target if b not in original]
        removing = [b for b in original if b not in target]
        if not adding and any(b in part.isr for b in target):
            return builder.with_replicas(target).build()  # nothing to wait for
        return builder.with_replicas(target + removing, adding, removing).build()

    def list_partition_reassignments(self, partitions: Sequence[tuple[str, int]] | None
                                     ) -> ControllerResult:
        """ListPartitionReassignments: {(topic, partition): (replicas, adding, removing)}
        of the reassignments in progress (among ``partitions``, or all)."""
        found: dict[tuple[str, int], tuple[list[int], list[int], list[int]]] = {}
        if partitions is None:
            partitions = [(t.name, p) for t in self.image.topics_by_id.values()
                          for p in t.partitions]
        for name, index in partitions:
            topic = self.image.topics_by_name.get(name)
            part = topic.partitions.get(index) if topic is not None else None
            if part is not None and (part.adding_replicas or part.removing_replicas):
                found[(name, index)] = (list(part.replicas), list(part.adding_replicas),
                                        list(part.removing_replicas))
        return ControllerResult([], found)

    def _check_isr_change(self, broker_id: int, part: PartitionRegistration,
                          change: IsrChange) -> ErrorCode:
        if change.leader_epoch != part.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if broker_id != part.leader:
            return ErrorCode.invalid_request
        if change.partition_epoch != part.partition_epoch:
            return ErrorCode.invalid_update_version
        if change.leader_recovery_state not in (0, 1) or \
                (part.leader_recovery_state == 0 and change.leader_recovery_state == 1):
            return ErrorCode.invalid_request
        members = change.isr
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
        live = self._live()
        everything = partitions is None
        if partitions is None:
            partitions = [(t.name, p) for t in self.image.topics_by_id.values()
                          for p in t.partitions]
        records: list[Any] = []
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        for name, index in partitions:
            found = self._partition(name, index)
            if found is None:
                results[(name, index)] = _no_such_partition(name, index)
                continue
            topic, part = found
            acceptor = LeaderAcceptor(live, self.image, part)
            if election_type == 0:
                error = self._preferred_problem(part, acceptor)
                election = Election.PREFERRED
            else:
                error = self._unclean_problem(part, acceptor)
                election = Election.UNCLEAN
            if error == ErrorCode.none:
                record = self._builder(topic, index, part, live, election).build()
                if record is not None:
                    records.append(record)
            if not (everything and error != ErrorCode.none):
                results[(name, index)] = (error, _ELECTION_MESSAGES.get(error, "").format(
                    tp=f"{name}-{index}", preferred=part.replicas[0]) or None)
        check_user_op(len(records))
        return ControllerResult(records, results)

    def balance_partition_leaders(self, max_elections: int = 1000) -> ControllerResult:
        """The periodic preferred-leader election (auto.leader.rebalance.enable): every
        partition whose preferred replica is live and in the ISR but not leading gets
        it back as leader. Response: the (topic, partition)s moved."""
        live = self._live()
        records: list[Any] = []
        moved: list[tuple[str, int]] = []
        for topic in self.image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if len(records) >= max_elections:
                    break
                if self._preferred_problem(part, LeaderAcceptor(live, self.image, part)) \
                        != ErrorCode.none:
                    continue
                record = self._builder(topic, index, part, live, Election.PREFERRED).build()
                if record is not None:
                    records.append(record)
                    moved.append((topic.name, index))
        return ControllerResult(records, moved)

    @staticmethod
    def _preferred_problem(part: PartitionRegistration, live: Container[int]) -> ErrorCode:
        """Why a preferred election of ``part`` cannot or need not happen (or none);
        ``live``: who may lead it."""
        preferred = part.replicas[0]
        if part.leader == preferred:
            return ErrorCode.election_not_needed
        if preferred not in live or preferred not in part.isr:
            return ErrorCode.preferred_leader_not_available
        return ErrorCode.none

    @staticmethod
    def _unclean_problem(part: PartitionRegistration, live: Container[int]) -> ErrorCode:
        """Why an unclean election of ``part`` cannot or need not happen (or none)."""
        if part.leader != NO_LEADER:
            return ErrorCode.election_not_needed
        if not any(b in live for b in part.replicas):
            return ErrorCode.eligible_leaders_not_available
        return ErrorCode.none
