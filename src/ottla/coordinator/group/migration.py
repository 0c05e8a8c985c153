"""Online migration between the group protocols (KIP-848; Kafka's convertToConsumerGroup,
convertToClassicGroup and their validation under ``group.consumer.migration.policy``).

A user rolls consumers from ``group.protocol=classic`` to ``consumer`` one at a time: the
first ConsumerGroupHeartbeat to a non-empty classic group converts it into a consumer group
whose classic members keep their assignments (``upgrade``); when the last consumer-protocol
member leaves a group whose other members all speak the classic protocol, it turns back
into a classic group, which then rebalances (``downgrade``). The records are those Kafka
writes: the old group's tombstones, then the new group's records, in one batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.classic import ClassicGroup, ClassicMember, ClassicState
from ottla.coordinator.group.classic_group_manager import ClassicGroupManager
from ottla.coordinator.group.config import GroupConfig, MigrationPolicy
from ottla.coordinator.group.consumer_group import (
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    to_topic_partitions,
)
from ottla.coordinator.group.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerGroupConfig,
    MalformedProtocol,
    TopicsView,
    by_id,
    by_name,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

Topics = Mapping[str, tuple[uuid.UUID, int]]


class GroupMigration:
    """The policy and the conversions, for the consumer manager that meets their triggers
    (a heartbeat to a classic group, a fenced member) and the classic manager that hands
    a group over or takes one back."""

    def __init__(self, config: GroupConfig, consumer_config: ConsumerGroupConfig,
                 classic: ClassicGroupManager, topics: TopicsView) -> None:
        self._policy = config.migration_policy
        self._classic_max_size = config.max_size
        self._consumer_max_size = consumer_config.max_size
        self._classic = classic
        self._topics = topics

    def classic_joins_allowed(self) -> bool:
        """Under ``disabled`` a consumer group takes no classic member (KAFKA-20640: the
        group could never become single-protocol again); under any other policy classic
        members join a consumer group and live in it."""
        return self._policy is not MigrationPolicy.DISABLED

    # --- classic -> consumer -------------------------------------------------------------

    def upgrade(self, classic: ClassicGroup, records: list[rec.CoordinatorRecord]
                ) -> ConsumerGroup:
        """The consumer group a non-empty classic group becomes when a consumer-protocol
        member joins it; appends the records that make it so. Raises GROUP_ID_NOT_FOUND,
        as Kafka does, when the policy or the group does not allow it. Nothing changes
        until the caller stores the group."""
        group_id = classic.group_id
        if not self._policy.upgrade_enabled:
            log.info("Cannot upgrade classic group %s to consumer group because the online "
                     "upgrade is disabled.", group_id)
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a consumer group.")
        if classic.protocol_type != PROTOCOL_TYPE or classic.protocol_name is None:
            log.info("Cannot upgrade classic group %s to consumer group because the group "
                     "does not use the consumer embedded protocol.", group_id)
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a consumer group.")
        if len(classic.members) > self._consumer_max_size:
            log.info("Cannot upgrade classic group %s to consumer group because the group "
                     "size exceeds the consumer group maximum size.", group_id)
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a consumer group.")
        try:
            group = consumer_group_from_classic(classic, self._topics())
        except MalformedProtocol as e:
            log.warning("Cannot upgrade classic group %s to consumer group: %s", group_id, e)
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Cannot upgrade the classic group {group_id} to consumer group "
                             "because the embedded consumer protocol is malformed.") from None
        records.append(rec.CoordinatorRecord(rec.GroupMetadataKey(group=group_id), None))
        records.extend(consumer_group_records(group))
        log.info("Upgrading classic group %s (generation %d) to a consumer group", group_id,
                 classic.generation_id)
        return group

    def upgraded(self, classic: ClassicGroup) -> None:
        """The conversion is stored: the classic group's parked requests and timers go."""
        self._classic.release_upgraded(classic)

    # --- consumer -> classic --------------------------------------------------------------

    def can_downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        if not group.all_members_use_classic_except(leaving_member_id):
            return False
        if len(group.members) <= 1:
            return False
        if not self._policy.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group because the online "
                     "downgrade is disabled.", group.group_id)
            return False
        if len(group.members) - 1 > self._classic_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group "
                     "size is greater than classic group max size.", group.group_id)
            return False
        return True

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str, now_ms: int
                  ) -> list[rec.CoordinatorRecord] | None:
        """Replace ``group`` by the classic group of its remaining (classic) members, which
        then rebalances; the records, or None if an embedded protocol does not parse."""
        try:
            classic = classic_group_from_consumer(group, leaving_member_id, self._topics(),
                                                  now_ms)
        except MalformedProtocol as e:
            log.warning("Cannot downgrade the consumer group %s: %s", group.group_id, e)
            return None
        log.info("Downgrading consumer group %s (epoch %d) to a classic group",
                 group.group_id, group.group_epoch)
        records = consumer_group_tombstones(group)
        records.append(classic.to_record(now_ms))
        records.extend(self._classic.adopt_downgraded(classic, now_ms))
        return records


def consumer_group_from_classic(classic: ClassicGroup, topics: Topics) -> ConsumerGroup:
    """Kafka's ConsumerGroup.fromClassicGroup: every member keeps what the last generation
    assigned it (its target too) at the generation's epoch, so nothing moves until the new
    member's join bumps the group epoch; members that were mid-rebalance are then asked to
    rejoin by their heartbeats."""
    assert classic.protocol_name is not None
    generation = classic.generation_id
    group = ConsumerGroup(classic.group_id, group_epoch=generation,
                          assignment_epoch=generation)
    for member in classic.members.values():
        subscription = decode_subscription(member.metadata(classic.protocol_name))
        assigned = by_id(decode_assignment(member.assignment), topics)
        group.put_member(ConsumerMember(
            member.member_id, instance_id=member.group_instance_id,
            rack_id=subscription.rack_id, client_id=member.client_id,
            client_host=member.client_host, subscribed_topic_names=subscription.topics,
            rebalance_timeout_ms=member.rebalance_timeout_ms, member_epoch=generation,
            previous_member_epoch=generation, state=MemberState.STABLE, assigned=assigned,
            classic=ClassicMetadata(member.session_timeout_ms, tuple(member.protocols))))
        group.target[member.member_id] = {t: set(ps) for t, ps in assigned.items()}
    return group


def consumer_group_records(group: ConsumerGroup) -> list[rec.CoordinatorRecord]:
    """Kafka's createConsumerGroupRecords: subscriptions, epoch, target, current."""
    group_id = group.group_id
    records = [m.metadata_record(group_id) for m in group.members.values()]
    records.append(rec.CoordinatorRecord(rec.ConsumerGroupMetadataKey(group_id=group_id),
                                         rec.ConsumerGroupMetadataValue(epoch=group.group_epoch)))
    records.extend(rec.CoordinatorRecord(
        rec.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
        rec.ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=to_topic_partitions(group.target.get(member_id, {}))))
        for member_id in group.members)
    records.append(rec.CoordinatorRecord(
        rec.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
        rec.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.assignment_epoch)))
    records.extend(m.assignment_record(group_id) for m in group.members.values())
    return records


def consumer_group_tombstones(group: ConsumerGroup) -> list[rec.CoordinatorRecord]:
    """Kafka's createGroupTombstoneRecords: every member's current assignment, target and
    subscription, then the group's target epoch and epoch."""
    group_id = group.group_id
    members = list(group.members)
    records = [rec.CoordinatorRecord(rec.ConsumerGroupCurrentMemberAssignmentKey(
        group_id=group_id, member_id=m), None) for m in members]
    records += [rec.CoordinatorRecord(rec.ConsumerGroupTargetAssignmentMemberKey(
        group_id=group_id, member_id=m), None) for m in members]
    records.append(rec.CoordinatorRecord(
        rec.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None))
    records += [rec.CoordinatorRecord(rec.ConsumerGroupMemberMetadataKey(
        group_id=group_id, member_id=m), None) for m in members]
    records.append(rec.CoordinatorRecord(rec.ConsumerGroupMetadataKey(group_id=group_id),
                                         None))
    return records


def classic_group_from_consumer(group: ConsumerGroup, leaving_member_id: str, topics: Topics,
                                now_ms: int) -> ClassicGroup:
    """Kafka's ClassicGroup.fromConsumerGroup: a stable group of the remaining members at
    the group epoch, each holding its target assignment in its own protocol version."""
    classic = ClassicGroup(group.group_id, state=ClassicState.STABLE,
                           generation_id=group.group_epoch, protocol_type=PROTOCOL_TYPE,
                           current_state_timestamp=now_ms)
    for member in group.members.values():
        if member.member_id == leaving_member_id or member.classic is None:
            continue
        classic.add(ClassicMember(
            member.member_id, member.instance_id, member.client_id, member.client_host,
            member.rebalance_timeout_ms, member.classic.session_timeout_ms, PROTOCOL_TYPE,
            list(member.classic.protocols)))
    if not classic.candidate_protocols():
        raise MalformedProtocol("the classic members share no protocol")
    protocol = classic.select_protocol()
    classic.protocol_name = protocol
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        version = protocol_version(member.metadata(protocol))
        member.assignment = encode_assignment(
            by_name(group.target.get(member.member_id, {}), topics), version)
    return classic
