"""Metadata (with auto topic creation), DescribeCluster and DescribeTopicPartitions, served
from the broker's image.

Authorization (Kafka's KafkaApis): a topic is described only to a principal with DESCRIBE
on it: named topics it may not describe are TOPIC_AUTHORIZATION_FAILED (whether they
exist or not), and a request for all topics leaves them out; a missing topic is created
only with CREATE on the cluster or on it (else TOPIC_AUTHORIZATION_FAILED). The
``*authorized_operations`` fields report what the principal may do (everything a
resource type supports, without an authorizer); DescribeCluster's needs DESCRIBE on the
cluster (0 otherwise), and DescribeCluster itself needs nothing on a broker.
"""

from __future__ import annotations

import uuid
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.controller_client import create_topics
from ottla.common.topics import is_internal_topic, topic_name_problem
from ottla.metadata.image import NO_LEADER, MetadataImage, TopicImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CREATE,
    DESCRIBE,
    TOPIC,
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
    cluster_authorized_operations,
)

BROKERS, CONTROLLERS = 1, 2
"""DescribeCluster's endpoint types (KIP-919)."""


def broker_endpoints(image: MetadataImage, listener: str, include_fenced: bool = False
                     ) -> list[dict[str, Any]]:
    brokers = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        endpoint = b.endpoints.get(listener)
        if endpoint is None or (b.fenced and not include_fenced):
            continue
        brokers.append({"node_id": b.broker_id, "host": endpoint.host, "port": endpoint.port,
                        "rack": b.rack, "is_fenced": b.fenced})
    return brokers


def leader_endpoint(image: MetadataImage, leader: int, listener: str) -> dict[str, Any] | None:
    broker = image.brokers.get(leader)
    if broker is None or broker.fenced or listener not in broker.endpoints:
        return None
    endpoint = broker.endpoints[listener]
    return {"node_id": leader, "host": endpoint.host, "port": endpoint.port, "rack": broker.rack}


def topic_metadata(image: MetadataImage, topic: TopicImage, listener: str, *,
                   operations: int = AUTHORIZED_OPERATIONS_OMITTED) -> dict[str, Any]:
    partitions = []
    for index in sorted(topic.partitions):
        reg = topic.partitions[index]
        live = {b.broker_id for b in image.brokers.values() if not b.fenced}
        leader = reg.leader
        error = ErrorCode.none
        if leader == NO_LEADER:
            error = ErrorCode.leader_not_available
        elif leader_endpoint(image, leader, listener) is None:
            error = ErrorCode.listener_not_found if leader in live \
                else ErrorCode.leader_not_available
            leader = NO_LEADER
        partitions.append({
            "error_code": error, "partition_index": index, "leader_id": leader,
            "leader_epoch": reg.leader_epoch, "replica_nodes": reg.replicas,
            "isr_nodes": reg.isr,
            "offline_replicas": [b for b in reg.replicas if b not in live],
        })
    return {
        "error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.topic_id,
        "is_internal": is_internal_topic(topic.name), "partitions": partitions,
        "topic_authorized_operations": operations,
    }


def _unknown(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode,
             is_internal: bool = False) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": topic_id or uuid.UUID(int=0),
            "is_internal": is_internal, "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


async def handle_metadata(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    version = ctx.api_version
    image: MetadataImage = broker.image
    include_ops = bool(getattr(req, "include_topic_authorized_operations", False))

    def operations(name: str | None) -> int:
        return authorized_operations(ctx, TOPIC, name) if include_ops \
            else AUTHORIZED_OPERATIONS_OMITTED

    requested = req.topics
    if version < 12 and requested and any(
            t.name is None or (getattr(t, "topic_id", None) or uuid.UUID(int=0)).int
            for t in requested):
        raise KafkaError(ErrorCode.invalid_request, "Topic names can not be null and topic "
                         f"ids are not supported in requests for version {version}")
    if requested is None or (version == 0 and not requested):
        describable = authorized_names(ctx, DESCRIBE, TOPIC, image.topics_by_name,
                                       log_if_denied=False)  # a listing, as Kafka's
        topics = [topic_metadata(image, t, ctx.listener_name, operations=operations(t.name))
                  for t in sorted(image.topics_by_name.values(), key=lambda t: t.name)
                  if t.name in describable]
    else:
        allow_create = getattr(req, "allow_auto_topic_creation", True) and \
            broker.config["auto.create.topics.enable"]
        named = [t.name or _name_by_id(image, getattr(t, "topic_id", None))
                 for t in requested]
        describable = authorized_names(ctx, DESCRIBE, TOPIC, (n for n in named if n))
        missing = [t.name for t in requested
                   if t.name and t.name not in image.topics_by_name and t.name in describable]
        uncreatable: set[str] = set()
        if missing and allow_create and not authorize_cluster(ctx, CREATE,
                                                                log_if_denied=False):
            uncreatable = {n for n in missing if not authorize(ctx, CREATE, TOPIC, n)}
            missing = [n for n in missing if n not in uncreatable]
        creation_errors: dict[str, ErrorCode] = {}
        if missing and allow_create:
            creation_errors = await _auto_create(broker, missing, ctx)
        topics = []
        seen = set()
        for t, resolved in zip(requested, named):
            name = t.name
            topic_id = getattr(t, "topic_id", None)
            key = name or topic_id
            if key in seen:
                continue
            seen.add(key)
            if not name and topic_id is not None and topic_id.int != 0:
                topic = image.topics_by_id.get(topic_id)
                if topic is None:
                    topics.append(_unknown(None, topic_id, ErrorCode.unknown_topic_id))
                    continue
                if resolved not in describable:
                    # Topic ids are not secret: the id is echoed, the name is not.
                    topics.append(_unknown(None, topic_id, ErrorCode.topic_authorization_failed))
                    continue
            elif name not in describable:
                topics.append(_unknown(name, None, ErrorCode.topic_authorization_failed))
                continue
            else:
                topic = image.topics_by_name.get(name or "")
            if topic is None:
                if name in uncreatable:
                    topics.append(_unknown(name, None, ErrorCode.topic_authorization_failed,
                                           is_internal_topic(name or "")))
                    continue
                # As Kafka: a topic whose creation was asked for is LEADER_NOT_AVAILABLE
                # (retriable) until this broker's metadata has it.
                created = allow_create and name in missing
                error = creation_errors.get(name or "", ErrorCode.leader_not_available
                                            if created else _missing_topic_error(name or ""))
                topics.append({**_unknown(name, None, error),
                               "topic_authorized_operations": operations(name)})
            else:
                topics.append(topic_metadata(image, topic, ctx.listener_name,
                                             operations=operations(topic.name)))
    response = {
        "throttle_time": 0,
        "brokers": broker_endpoints(image, ctx.listener_name),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
        "error_code": ErrorCode.none,
    }
    response["cluster_authorized_operations"] = cluster_authorized_operations(
        ctx, bool(getattr(req, "include_cluster_authorized_operations", False)))
    return response


def _missing_topic_error(name: str) -> ErrorCode:
    """A topic the metadata does not have: as Kafka, INVALID_TOPIC_EXCEPTION if its name
    could never be a topic's (clients report a bad name instead of waiting for it)."""
    return ErrorCode.invalid_topic_exception if topic_name_problem(name) is not None \
        else ErrorCode.unknown_topic_or_partition


def _name_by_id(image: MetadataImage, topic_id: uuid.UUID | None) -> str | None:
    topic = image.topics_by_id.get(topic_id) if topic_id is not None else None
    return topic.name if topic is not None else None


async def _auto_create(broker: Broker, names: list[str], ctx: RequestContext
                       ) -> dict[str, ErrorCode]:
    """Create unknown topics with this broker's defaults; returns the errors by name."""
    errors: dict[str, ErrorCode] = {}
    valid = []
    for name in names:
        if topic_name_problem(name) is not None:
            errors[name] = ErrorCode.invalid_topic_exception
            continue
        if is_internal_topic(name):
            errors[name] = ErrorCode.unknown_topic_or_partition
            continue
        valid.append(broker.auto_created(name))
    if valid:
        for name, error in (await create_topics(broker.controller, valid, ctx)).items():
            if error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                errors[name] = (ErrorCode.invalid_replication_factor
                                if error == ErrorCode.invalid_replication_factor
                                else ErrorCode.unknown_topic_or_partition)
    return errors


def handle_describe_cluster(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """The brokers of the cluster (a controller listener describes the controllers:
    ``server.controller_apis.cluster``)."""
    endpoint_type = getattr(req, "endpoint_type", BROKERS)
    if endpoint_type != BROKERS:
        return unsupported_endpoint_type(broker.cluster_id, endpoint_type, BROKERS)
    include_fenced = bool(getattr(req, "include_fenced_brokers", False))
    return {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "endpoint_type": BROKERS, "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
                     "rack": b["rack"], "is_fenced": b["is_fenced"]}
                    for b in broker_endpoints(broker.image, ctx.listener_name, include_fenced)],
        "cluster_authorized_operations": cluster_authorized_operations(
            ctx, req.include_cluster_authorized_operations),
    }


def unsupported_endpoint_type(cluster_id: str, asked: int, served: int) -> dict[str, Any]:
    """DescribeCluster for endpoints a listener does not serve (KIP-919)."""
    return {"throttle_time": 0, "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": f"This listener serves endpoint type {served} "
                             f"({'controllers' if served == CONTROLLERS else 'brokers'})",
            "endpoint_type": asked, "cluster_id": cluster_id, "controller_id": -1,
            "brokers": [], "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def handle_describe_topic_partitions(broker: Broker, ctx: RequestContext, req: Any
                                     ) -> dict[str, Any]:
    """DescribeTopicPartitions (KIP-966's paged describe): topics in name order, their
    partitions in index order, at most ``response_partition_limit`` partitions (bounded by
    ``max.request.partition.size.limit``) per response, the rest named by
    ``next_cursor``. Without topics it describes them all; a cursor names where to go on
    and must be one of the topics asked for. Topics the principal may not DESCRIBE are
    left out of all topics, and answered TOPIC_AUTHORIZATION_FAILED after the others when
    named (Kafka's DescribeTopicPartitionsRequestHandler)."""
    image = broker.image
    limit = max(1, min(req.response_partition_limit,
                       broker.config["max.request.partition.size.limit"]))
    names = sorted({t.name for t in req.topics} if req.topics else image.topics_by_name)
    cursor = req.cursor
    start_partition = 0
    if cursor is not None:
        if req.topics and cursor.topic_name not in names:
            raise KafkaError(ErrorCode.invalid_request,
                             f"The cursor topic {cursor.topic_name} is not among the topics")
        names = [n for n in names if n >= cursor.topic_name]
        start_partition = max(0, cursor.partition_index)
    topics: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    next_cursor = None
    remaining = limit
    for name in names:
        if not authorize(ctx, DESCRIBE, TOPIC, name):
            if req.topics:
                refused.append(_unknown(name, None, ErrorCode.topic_authorization_failed))
            continue
        first = start_partition if cursor is not None and name == cursor.topic_name else 0
        if remaining == 0:  # the page is full: the cursor names the next topic, known or not
            next_cursor = {"topic_name": name, "partition_index": first}
            break
        topic = image.topics_by_name.get(name)
        if topic is None:
            topics.append({**_unknown(name, None, _missing_topic_error(name)),
                           "topic_authorized_operations": authorized_operations(
                               ctx, TOPIC, name)})
            continue
        described = topic_metadata(image, topic, ctx.listener_name,
                                   operations=authorized_operations(ctx, TOPIC, name))
        partitions = [p for p in described["partitions"] if p["partition_index"] >= first]
        if len(partitions) > remaining:
            next_cursor = {"topic_name": name,
                           "partition_index": partitions[remaining]["partition_index"]}
            partitions = partitions[:remaining]
        for p in partitions:
            registration = topic.partitions[p["partition_index"]]
            p["eligible_leader_replicas"] = registration.elr
            p["last_known_elr"] = registration.last_known_elr
        described["partitions"] = partitions
        topics.append(described)
        remaining -= len(partitions)
        if next_cursor is not None:
            break
    return {"throttle_time": 0, "topics": topics + refused, "next_cursor": next_cursor}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.METADATA, 0, 13, handle_metadata),
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 2, handle_describe_cluster),
    ApiSpec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, handle_describe_topic_partitions),
]
