"""The group APIs: FindCoordinator, the classic protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup), the consumer and share group protocols (KIP-848, KIP-932), offsets
(OffsetCommit, OffsetFetch, OffsetDelete) and group administration (ListGroups,
DescribeGroups, DeleteGroups). Each request is routed to the shard of the group's
``__consumer_offsets`` partition; errors of the routing itself (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) are answered here.

Authorization (Kafka's KafkaApis), before the coordinator sees a request: a member's
requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the heartbeats of KIP-848 and
share groups, OffsetCommit) need READ on the group, and then READ (commits) or DESCRIBE
(subscriptions) on the topics; FindCoordinator DESCRIBE on the group or transactional id
(CLUSTER_ACTION for share-state keys); OffsetFetch and the describe APIs DESCRIBE on each
group (and on the topics they show, which are filtered or refused); ListGroups lists the
groups the principal may DESCRIBE (all of them with DESCRIBE on the cluster);
DeleteGroups and OffsetDelete need DELETE on the group.
"""

from __future__ import annotations

from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.handlers.metadata import leader_endpoint
from ottla.common.features import consumer_groups_enabled, share_groups_enabled
from ottla.coordinator.group.consumer_protocol import HeartbeatRequest
from ottla.coordinator.group.responses import (
    DescribedConsumerGroup,
    DescribedGroup,
    DescribedShareGroup,
    GroupErrors,
    JoinGroupResponse,
    LeaveGroupAnswer,
    OffsetDeleteAnswer,
    PartitionErrors,
)
from ottla.coordinator.group.shard import JoinRequest
from ottla.coordinator.group.share_group_manager import ShareHeartbeatRequest
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import ms
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_ACTION,
    DELETE,
    DESCRIBE,
    GROUP,
    MSG_CLUSTER,
    MSG_GROUP,
    MSG_TXN,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
    enabled,
)

GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2


# --- FindCoordinator --------------------------------------------------------------------

def _find(broker: Broker, ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    result = {"key": key, "node_id": -1, "host": "", "port": -1,
              "error_code": ErrorCode.none, "error_message": None}
    try:
        if key_type not in (GROUP_KEY, TRANSACTION_KEY, SHARE_KEY):
            raise KafkaError(ErrorCode.invalid_request, f"Unknown key type {key_type}")
        old = ctx.api_version < 4  # the message only in the top-level answer of v0-3
        if key_type == GROUP_KEY and not authorize(ctx, DESCRIBE, GROUP, key):
            raise KafkaError(ErrorCode.group_authorization_failed, MSG_GROUP if old else None)
        if key_type == TRANSACTION_KEY and not authorize(ctx, DESCRIBE, TRANSACTIONAL_ID, key):
            raise KafkaError(ErrorCode.transactional_id_authorization_failed,
                             MSG_TXN if old else None)
        if key_type == SHARE_KEY and ctx.api_version < 6:
            raise KafkaError(ErrorCode.invalid_request,
                             "Share coordinators are found with FindCoordinator v6+")
        if not key:
            raise KafkaError(ErrorCode.invalid_request,
                             "The group id is empty" if key_type == GROUP_KEY
                             else "The transactional id is empty" if key_type == TRANSACTION_KEY
                             else "The share-partition key is empty")
        if key_type == SHARE_KEY and not _share_key_valid(key):
            raise KafkaError(ErrorCode.invalid_request,
                             f"{key!r} is not a share-partition key (group:topicId:partition)")
        service = {GROUP_KEY: broker.group_coordinator,
                   TRANSACTION_KEY: broker.transaction_coordinator,
                   SHARE_KEY: broker.share_coordinator}[key_type]
        if service is None:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             "The coordinator is not available")
        leader = service.coordinator_for(key)
        endpoint = leader_endpoint(broker.image, leader, ctx.listener_name)
        if endpoint is None:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             "The coordinator is not available")
        result.update(node_id=leader, host=endpoint["host"], port=endpoint["port"])
    except KafkaError as e:
        result.update(error_code=e.code, error_message=e.message)
    return result


def _share_key_valid(key: str) -> bool:
    """Kafka's SharePartitionKey.validate: a group id, a topic id and a partition."""
    parts = key.rsplit(":", 2)
    return len(parts) == 3 and bool(parts[0]) and bool(parts[1]) and parts[2].isdigit()


def handle_find_coordinator(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    key_type = getattr(req, "key_type", GROUP_KEY)
    if key_type == SHARE_KEY and ctx.api_version >= 6 and req.coordinator_keys and \
            not authorize_cluster(ctx, CLUSTER_ACTION):
        # Only brokers find share coordinators; Kafka's check throws for the whole batch.
        raise KafkaError(ErrorCode.cluster_authorization_failed, MSG_CLUSTER)
    if ctx.api_version >= 4:
        return {"throttle_time": 0, "coordinators": [
            _find(broker, ctx, key_type, key) for key in req.coordinator_keys]}
    found = _find(broker, ctx, key_type, req.key)
    del found["key"]
    return {"throttle_time": 0, **found}


def _protocol_strings(response: dict[str, Any], version: int, names: tuple[str, ...]) -> None:
    """Old versions have non-nullable strings where newer ones send null."""
    for name in names:
        if response.get(name) is None:
            response[name] = ""


# --- the classic protocol ----------------------------------------------------------------

async def handle_join_group(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    version = ctx.api_version
    session_timeout = ms(req.session_timeout)
    rebalance_timeout = ms(req.rebalance_timeout) if version >= 1 else session_timeout
    join = JoinRequest(
        group_id=req.group_id, member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        session_timeout_ms=session_timeout, rebalance_timeout_ms=rebalance_timeout,
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}", version=version)
    response: JoinGroupResponse
    if not authorize(ctx, READ, GROUP, req.group_id):
        response = {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                    "generation_id": -1, "protocol_type": None, "protocol_name": None,
                    "leader": "", "skip_assignment": False, "member_id": "", "members": []}
        if version < 7:
            _protocol_strings(response, version, ("protocol_name",))
        return response
    try:
        response = await broker.group_coordinator.write(
            req.group_id, lambda shard, now, reply: shard.join_group(now, join, reply),
            reply_with_callback=True)
    except KafkaError as e:
        response = {"throttle_time": 0, "error_code": e.code, "generation_id": -1,
                    "protocol_type": None, "protocol_name": None, "leader": "",
                    "skip_assignment": False, "member_id": req.member_id, "members": []}
    if version < 7:
        _protocol_strings(response, version, ("protocol_name",))
    return response


def _sync_error(error: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "protocol_type": None,
            "protocol_name": None, "assignment": b""}


async def handle_sync_group(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.api_version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        # Mandatory from v5, checked before the group's ACLs.
        return _sync_error(ErrorCode.inconsistent_group_protocol)
    if not authorize(ctx, READ, GROUP, req.group_id):
        return _sync_error(ErrorCode.group_authorization_failed)
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    try:
        return await broker.group_coordinator.write(
            req.group_id, lambda shard, now, reply: shard.sync_group(
                now, req.group_id, req.generation_id, req.member_id,
                getattr(req, "group_instance_id", None), getattr(req, "protocol_type", None),
                getattr(req, "protocol_name", None), assignments, reply),
            reply_with_callback=True)
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "protocol_type": None,
                "protocol_name": None, "assignment": b""}


async def handle_heartbeat(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    error: ErrorCode
    if not authorize(ctx, READ, GROUP, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    try:
        error = await broker.group_coordinator.write(
            req.group_id, lambda shard, now: shard.heartbeat(
                now, req.group_id, req.generation_id, req.member_id,
                getattr(req, "group_instance_id", None)))
    except KafkaError as e:
        error = e.code
        if error == ErrorCode.coordinator_load_in_progress:
            error = ErrorCode.none  # Kafka: do not make clients storm a loading coordinator
    return {"throttle_time": 0, "error_code": error}


async def handle_leave_group(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    version = ctx.api_version
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    answer: LeaveGroupAnswer
    if not authorize(ctx, READ, GROUP, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "members": []}
    try:
        answer = await broker.group_coordinator.write(
            req.group_id, lambda shard, now: shard.leave_group(now, req.group_id, members))
    except KafkaError as e:
        answer = LeaveGroupAnswer(e.code, [])
    error = answer.error
    if version < 3 and error == ErrorCode.none and answer.members:
        error = answer.members[0].error
    return {"throttle_time": 0, "error_code": error, "members": [
        {"member_id": m.member_id, "group_instance_id": m.instance_id, "error_code": m.error}
        for m in answer.members]}


# --- offsets --------------------------------------------------------------------------------

def _unknown_partitions(image: MetadataImage, topics: Any) -> set[tuple[str, int]]:
    """The partitions of an OffsetCommit (or OffsetDelete) that the metadata image does not
    know. Kafka's
    KafkaApis answers them UNKNOWN_TOPIC_OR_PARTITION before the group coordinator sees
    the request, so no offset is stored for a topic that does not exist (a typo in an
    admin's AlterConsumerGroupOffsets, a topic deleted under a consumer)."""
    unknown = set()
    for t in topics:
        topic = image.topics_by_name.get(t.name)
        for p in t.partitions:
            if topic is None or p.partition_index not in topic.partitions:
                unknown.add((t.name, p.partition_index))
    return unknown


async def handle_offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    version = ctx.api_version
    if not authorize(ctx, READ, GROUP, req.group_id):
        raise KafkaError(ErrorCode.group_authorization_failed)  # for every partition
    readable = authorized_names(ctx, READ, TOPIC, (t.name for t in req.topics))
    denied = {(t.name, p.partition_index) for t in req.topics if t.name not in readable
              for p in t.partitions}
    unknown = _unknown_partitions(broker.image, req.topics) - denied
    offsets = [(t.name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in req.topics for p in t.partitions
               if (t.name, p.partition_index) not in unknown | denied]
    results: PartitionErrors = {tp: ErrorCode.unknown_topic_or_partition for tp in unknown}
    results.update(dict.fromkeys(denied, ErrorCode.topic_authorization_failed))
    if offsets:  # with none left, Kafka answers without asking the coordinator
        try:
            results.update(await broker.group_coordinator.write(
                req.group_id, lambda shard, now: shard.commit_offsets(
                    now, req.group_id, req.generation_id_or_member_epoch, req.member_id,
                    getattr(req, "group_instance_id", None), offsets, version)))
        except KafkaError as e:
            results.update({(t, p): e.code for t, p, *_ in offsets})
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": results[(t.name, p.partition_index)]} for p in t.partitions]}
        for t in req.topics]}


def _fetch_group(broker: Broker, ctx: RequestContext, group_id: str, topics: Any,
                 member_id: str | None = None, member_epoch: int = -1,
                 require_stable: bool = False) -> dict[str, Any]:
    """One group's committed offsets; with ``require_stable`` (KIP-447) a partition an
    open transaction is about to change answers UNSTABLE_OFFSET_COMMIT, which the
    client retries, instead of an offset it would then read past. Without DESCRIBE on
    the group it is GROUP_AUTHORIZATION_FAILED (in each partition asked for, for v1);
    topics the principal may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED when named and
    left out of all the group's."""
    if not authorize(ctx, DESCRIBE, GROUP, group_id):
        error = ErrorCode.group_authorization_failed
        return {"group_id": group_id, "error_code": error, "topics": [] if topics is None
                or ctx.api_version >= 2 else [
                    {"name": t.name, "partitions": [
                        {"partition_index": p, "committed_offset": -1,
                         "committed_leader_epoch": -1, "metadata": "", "error_code": error}
                        for p in t.partition_indexes]} for t in topics]}
    describable = None
    refused: list[Any] = []
    if enabled(ctx) and topics is not None:
        describable = authorized_names(ctx, DESCRIBE, TOPIC, (t.name for t in topics))
        refused = [t for t in topics if t.name not in describable]
        topics = [t for t in topics if t.name in describable]
    answer = _fetch_offsets(broker, group_id, topics, member_id, member_epoch,
                            require_stable)
    if enabled(ctx) and describable is None and answer["error_code"] == ErrorCode.none:
        shown = authorized_names(ctx, DESCRIBE, TOPIC, (t["name"] for t in answer["topics"]))
        answer["topics"] = [t for t in answer["topics"] if t["name"] in shown]
    answer["topics"] += [{"name": t.name, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
         "metadata": "", "error_code": ErrorCode.topic_authorization_failed}
        for p in t.partition_indexes]} for t in refused]
    return answer


def _fetch_offsets(broker: Broker, group_id: str, topics: Any, member_id: str | None,
                   member_epoch: int, require_stable: bool) -> dict[str, Any]:
    requested = None if topics is None else \
        [(t.name, list(t.partition_indexes)) for t in topics]
    unstable: set[tuple[str, int]] = set()
    try:
        found, unstable = broker.group_coordinator.read(
            group_id, lambda shard: (
                shard.fetch_offsets(group_id, requested, member_id, member_epoch),
                shard.unstable_offsets(group_id, requested) if require_stable else set()))
        error = ErrorCode.none
    except KafkaError as e:
        error = e.code
        found = [(name, [(p, -1, -1, "") for p in parts]) for name, parts in requested or []]
    return {"group_id": group_id, "error_code": error, "topics": [
        {"name": name, "partitions": [
            {"partition_index": p, "committed_offset": offset,
             "committed_leader_epoch": epoch, "metadata": metadata,
             "error_code": ErrorCode.none} if (name, p) not in unstable else
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
             "metadata": "", "error_code": ErrorCode.unstable_offset_commit}
            for p, offset, epoch, metadata in parts]}
        for name, parts in found]}


def handle_offset_fetch(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.api_version >= 8:
        return {"throttle_time": 0, "groups": [
            _fetch_group(broker, ctx, g.group_id, g.topics, getattr(g, "member_id", None),
                         getattr(g, "member_epoch", -1), req.require_stable)
            for g in req.groups]}
    group = _fetch_group(broker, ctx, req.group_id, req.topics,
                         require_stable=getattr(req, "require_stable", False))
    return {"throttle_time": 0, "topics": group["topics"], "error_code": group["error_code"]}


async def handle_offset_delete(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize(ctx, DELETE, GROUP, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "topics": []}
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]
    readable = authorized_names(ctx, READ, TOPIC, (name for name, _ in topics))
    # Partitions the metadata does not know are answered here, as Kafka's KafkaApis does;
    # the coordinator still sees the request (an unknown group is its error to give).
    unknown = _unknown_partitions(broker.image, (t for t in req.topics if t.name in readable))
    wanted = [(name, kept) for name, parts in topics if name in readable
              if (kept := [p for p in parts if (name, p) not in unknown])]
    answer: OffsetDeleteAnswer
    try:
        answer = await broker.group_coordinator.write(
            req.group_id, lambda shard, now: shard.delete_offsets(now, req.group_id, wanted))
    except KafkaError as e:
        answer = OffsetDeleteAnswer(e.code, {})
    answer.partitions.update(dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition))
    for name, parts in topics:
        if name not in readable:
            answer.partitions.update(
                dict.fromkeys(((name, p) for p in parts), ErrorCode.topic_authorization_failed))
    return {"throttle_time": 0, "error_code": answer.error, "topics": [
        {"name": name, "partitions": [
            {"partition_index": p,
             "error_code": answer.partitions.get((name, p), ErrorCode.none)}
            for p in parts]} for name, parts in topics]
        if answer.error == ErrorCode.none else []}


# --- administration ---------------------------------------------------------------------

async def handle_list_groups(broker: Broker, ctx: RequestContext, req: Any
                             ) -> dict[str, Any]:
    states = {s.lower() for s in getattr(req, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(req, "types_filter", ()) or ()}
    groups = await broker.group_coordinator.read_every_shard(
        lambda shard: shard.list_groups(states, types))
    if enabled(ctx) and not authorize_cluster(ctx, DESCRIBE, log_if_denied=False):
        shown = authorized_names(ctx, DESCRIBE, GROUP, (g["group_id"] for g in groups),
                                 log_if_denied=False)
        groups = [g for g in groups if g["group_id"] in shown]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}


async def handle_describe_groups(broker: Broker, ctx: RequestContext, req: Any
                                 ) -> dict[str, Any]:
    version = ctx.api_version
    include_ops = bool(getattr(req, "include_authorized_operations", False))
    groups: list[DescribedGroup] = []
    for group_id in req.groups:
        described: DescribedGroup | None
        if not authorize(ctx, DESCRIBE, GROUP, group_id):
            groups.append({"error_code": ErrorCode.group_authorization_failed,
                           "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": [], "error_message": None,
                           "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        try:
            described = await broker.group_coordinator.read_committed(
                group_id, lambda shard, g=group_id: shard.describe_group(g))
            if described is None:
                described = {"error_code": ErrorCode.group_id_not_found if version >= 6
                             else ErrorCode.none, "group_id": group_id,
                             "group_state": "Dead", "protocol_type": "", "protocol_data": "",
                             "members": []}
        except KafkaError as e:
            described = {"error_code": e.code, "group_id": group_id, "group_state": "",
                         "protocol_type": "", "protocol_data": "", "members": []}
        described["authorized_operations"] = \
            authorized_operations(ctx, GROUP, group_id) \
            if include_ops and described["error_code"] == ErrorCode.none \
            else AUTHORIZED_OPERATIONS_OMITTED
        described["error_message"] = None
        groups.append(described)
    return {"throttle_time": 0, "groups": groups}


async def handle_delete_groups(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    for group_id in dict.fromkeys(req.groups_names):
        if not authorize(ctx, DELETE, GROUP, group_id):
            results.append({"group_id": group_id,
                            "error_code": ErrorCode.group_authorization_failed})
            continue
        try:
            # An empty share group's share-partition states go first (Kafka's
            # deleteShareGroups); if one cannot be deleted, the group stays.
            await broker.share_offsets.delete_share_group_states(group_id)
            outcome: GroupErrors = await broker.group_coordinator.write(
                group_id, lambda shard, now, g=group_id: shard.delete_groups(now, [g]))
            error = outcome[group_id]
        except KafkaError as e:
            error = e.code
        results.append({"group_id": group_id, "error_code": error})
    return {"throttle_time": 0, "results": results}


# --- the consumer protocol (KIP-848) -----------------------------------------------------

def _heartbeat_error(error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
            "assignment": None}


def _describable(ctx: RequestContext) -> Any:
    """Whether the request's principal may DESCRIBE a topic (asked when the group's
    coordinator resolves the member's regular expression; a filter, so its denials are
    not audited at INFO, as Kafka's TopicRegexResolver's)."""
    return lambda topic: authorize(ctx, DESCRIBE, TOPIC, topic, log_if_denied=False)


def _subscription_denial(ctx: RequestContext, topics: Any) -> dict[str, Any] | None:
    """A heartbeat subscribing by name needs DESCRIBE on every topic it names (Kafka's
    consumer and share group heartbeats, after READ on the group)."""
    if topics and len(authorized_names(ctx, DESCRIBE, TOPIC, topics)) < len(set(topics)):
        return _heartbeat_error(ErrorCode.topic_authorization_failed)
    return None


def consumer_protocol_enabled(broker: Broker) -> bool:
    """Kafka's ``KafkaApis.isConsumerGroupProtocolEnabled``: "consumer" among
    ``group.coordinator.rebalance.protocols`` and group.version 1 or more finalized. Only
    the two KIP-848 APIs ask: the groups themselves stay with their coordinator, whose
    session timers fence members that can no longer heartbeat, as Kafka's do."""
    return ("consumer" in broker.config["group.coordinator.rebalance.protocols"]
            and consumer_groups_enabled(broker.image.features))


async def handle_consumer_group_heartbeat(broker: Broker, ctx: RequestContext, req: Any
                                          ) -> dict[str, Any]:
    if not consumer_protocol_enabled(broker):
        # Kafka's ConsumerGroupHeartbeatRequest.getErrorResponse: the code, no message.
        return _heartbeat_error(ErrorCode.unsupported_version)
    if not authorize(ctx, READ, GROUP, req.group_id):
        return _heartbeat_error(ErrorCode.group_authorization_failed)
    denied = _subscription_denial(ctx, req.subscribed_topic_names)
    if denied is not None:
        return denied
    owned = None
    if req.topic_partitions is not None:
        owned = {tp.topic_id: set(tp.partitions) for tp in req.topic_partitions
                 if tp.partitions}
    heartbeat = HeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=ms(req.rebalance_timeout),
        subscribed_topic_names=None if req.subscribed_topic_names is None
        else tuple(req.subscribed_topic_names),
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor, owned=owned, client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}", client_generated_member_id=ctx.api_version >= 1,
        regex_topics_visible=_describable(ctx) if enabled(ctx) else None)
    try:
        return await broker.group_coordinator.write(
            req.group_id, lambda shard, now: shard.consumer_group_heartbeat(now, heartbeat))
    except KafkaError as e:
        return _heartbeat_error(e.code, e.message)


DESCRIBED_TOPICS_REFUSED = ("The group has described topic(s) that the client is not "
                            "authorized to describe.")


def _described(ctx: RequestContext, include_ops: bool, described: dict[str, Any],
               assignments: tuple[str, ...]) -> dict[str, Any]:
    """A described consumer or share group as the principal may see it: its
    ``authorized_operations`` if asked for; and, with an authorizer, the whole entry
    replaced by TOPIC_AUTHORIZATION_FAILED if a topic of its members' assignments may
    not be described (Kafka's KafkaApis)."""
    if described["error_code"] != ErrorCode.none:
        return described
    if include_ops:
        described["authorized_operations"] = \
            authorized_operations(ctx, GROUP, described["group_id"])
    if enabled(ctx):
        topics = {tp["topic_name"] for m in described["members"] for field in assignments
                  for tp in (m.get(field) or {}).get("topic_partitions", ())}
        if len(authorized_names(ctx, DESCRIBE, TOPIC, topics)) < len(topics):
            return {**described, "error_code": ErrorCode.topic_authorization_failed,
                    "error_message": DESCRIBED_TOPICS_REFUSED, "group_state": "",
                    "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                    "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    return described


def _group_refused(group_id: str) -> dict[str, Any]:
    return {"error_code": ErrorCode.group_authorization_failed, "error_message": None,
            "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


async def handle_consumer_group_describe(broker: Broker, ctx: RequestContext, req: Any
                                         ) -> dict[str, Any]:
    if not consumer_protocol_enabled(broker):
        return {"throttle_time": 0, "groups": _unsupported_groups(req.group_ids)}
    groups: list[DescribedConsumerGroup] = []
    include_ops = bool(req.include_authorized_operations)
    for group_id in req.group_ids:
        described: DescribedConsumerGroup | None
        if not authorize(ctx, DESCRIBE, GROUP, group_id):
            groups.append(_group_refused(group_id))  # type: ignore[arg-type]
            continue
        try:
            described, exists = await broker.group_coordinator.read_committed(
                group_id, lambda shard, g=group_id: (
                    shard.describe_consumer_group(g), g in shard.group_metadata.groups))
            if described is None:
                # Kafka's GroupMetadataManager.consumerGroup words the two cases apart.
                raise KafkaError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group." if exists
                                 else f"Group {group_id} not found.")
        except KafkaError as e:
            described = {"error_code": e.code, "error_message": e.message,
                         "group_id": group_id, "group_state": "Dead", "group_epoch": -1,
                         "assignment_epoch": -1, "assignor_name": "", "members": [],
                         "authorized_operations": -2147483648}
        groups.append(_described(ctx, include_ops, described,  # type: ignore[arg-type]
                                 ("assignment", "target_assignment")))
    return {"throttle_time": 0, "groups": groups}


def _unsupported_groups(group_ids: list[str]) -> list[Any]:
    """Kafka's ConsumerGroupDescribeRequest and ShareGroupDescribeRequest
    ``getErrorResponse``: every group UNSUPPORTED_VERSION, the other fields at their
    defaults."""
    return [{"error_code": ErrorCode.unsupported_version, "error_message": None,
             "group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
             "assignor_name": "", "members": [], "authorized_operations": -2147483648}
            for group_id in group_ids]


# --- share groups (KIP-932) ----------------------------------------------------------------

async def handle_share_group_heartbeat(broker: Broker, ctx: RequestContext, req: Any
                                       ) -> dict[str, Any]:
    if not share_groups_enabled(broker.image.features):
        # Kafka's KafkaApis with share.version 0: UNSUPPORTED_VERSION and no message.
        return {"throttle_time": 0, "error_code": ErrorCode.unsupported_version,
                "error_message": None, "member_id": None, "member_epoch": 0,
                "heartbeat_interval": 0, "assignment": None}
    if not authorize(ctx, READ, GROUP, req.group_id):
        return _heartbeat_error(ErrorCode.group_authorization_failed)
    if not req.member_id or len(req.member_id) > 36:
        return _heartbeat_error(ErrorCode.invalid_request, "Invalid member id in the request.")
    denied = _subscription_denial(ctx, req.subscribed_topic_names)
    if denied is not None:
        return denied
    heartbeat = ShareHeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        rack_id=req.rack_id,
        subscribed_topic_names=None if req.subscribed_topic_names is None
        else tuple(req.subscribed_topic_names),
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}")
    try:
        return await broker.group_coordinator.write(
            req.group_id, lambda shard, now: shard.share_group_heartbeat(now, heartbeat))
    except KafkaError as e:
        return _heartbeat_error(e.code, e.message)


async def handle_share_group_describe(broker: Broker, ctx: RequestContext, req: Any
                                      ) -> dict[str, Any]:
    if not share_groups_enabled(broker.image.features):
        return {"throttle_time": 0, "groups": _unsupported_groups(req.group_ids)}
    groups: list[DescribedShareGroup] = []
    include_ops = bool(req.include_authorized_operations)
    for group_id in req.group_ids:
        described: DescribedShareGroup
        if not authorize(ctx, DESCRIBE, GROUP, group_id):
            groups.append(_group_refused(group_id))  # type: ignore[arg-type]
            continue
        try:
            described = await broker.group_coordinator.read_committed(
                group_id, lambda shard, g=group_id: shard.describe_share_group(g))
        except KafkaError as e:
            described = {"error_code": e.code, "error_message": e.message,
                         "group_id": group_id, "group_state": "Dead", "group_epoch": -1,
                         "assignment_epoch": -1, "assignor_name": "", "members": [],
                         "authorized_operations": -2147483648}
        groups.append(_described(ctx, include_ops, described,  # type: ignore[arg-type]
                                 ("assignment",)))
    return {"throttle_time": 0, "groups": groups}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.FIND_COORDINATOR, 0, 6, handle_find_coordinator),
    ApiSpec(ApiKey.JOIN_GROUP, 0, 9, handle_join_group),
    ApiSpec(ApiKey.SYNC_GROUP, 0, 5, handle_sync_group),
    ApiSpec(ApiKey.HEARTBEAT, 0, 4, handle_heartbeat),
    ApiSpec(ApiKey.LEAVE_GROUP, 0, 5, handle_leave_group),
    ApiSpec(ApiKey.OFFSET_COMMIT, 2, 9, handle_offset_commit),
    ApiSpec(ApiKey.OFFSET_FETCH, 1, 9, handle_offset_fetch),
    ApiSpec(ApiKey.OFFSET_DELETE, 0, 0, handle_offset_delete),
    ApiSpec(ApiKey.LIST_GROUPS, 0, 5, handle_list_groups),
    ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 6, handle_describe_groups),
    ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, handle_delete_groups),
    ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, handle_consumer_group_heartbeat),
    ApiSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, handle_consumer_group_describe),
    ApiSpec(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, handle_share_group_heartbeat),
    ApiSpec(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, handle_share_group_describe),
]
