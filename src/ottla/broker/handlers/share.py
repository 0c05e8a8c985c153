"""Share groups on the partition leaders (KIP-932): ShareFetch, which acquires records for
a member (with acknowledgements riding on it), and ShareAcknowledge.

Authorization (Kafka's KafkaApis): READ on the group (else GROUP_AUTHORIZATION_FAILED
for the whole request, before the member or its session is looked at), then READ on each
topic fetched from or acknowledged (else that partition's error, or acknowledgement
error, is TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import uuid
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.share.partition_manager import (
    FetchLimits,
    ShareFetchResult,
    ShareFetchResults,
)
from ottla.broker.share.session import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, TopicIdPartition
from ottla.broker.share.share_partition import AcknowledgeType
from ottla.common.features import share_groups_enabled
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import ms
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import GROUP, READ, TOPIC, authorize, authorized_names, enabled

RECORD_LIMIT = 1
"""ShareFetch v2's ShareAcquireMode for share.acquire.mode=record_limit (0: batch_optimized)."""


def _known(broker: Broker, topic_id: uuid.UUID) -> bool:
    return topic_id in broker.image.topics_by_id


def _unreadable(broker: Broker, ctx: RequestContext, topic_ids: Any) -> set[uuid.UUID]:
    """The known topics among ``topic_ids`` the principal may not READ."""
    if not enabled(ctx):
        return set()
    topics = broker.image.topics_by_id
    names = {tid: topics[tid].name for tid in set(topic_ids) if tid in topics}
    readable = authorized_names(ctx, READ, TOPIC, names.values())
    return {tid for tid, name in names.items() if name not in readable}


async def _acknowledge(broker: Broker, session: ShareSession, topics: Any,
                       renew: bool = False, unreadable: set[uuid.UUID] | None = None
                       ) -> dict[TopicIdPartition, ErrorCode]:
    """Apply the request's acknowledgement batches (each once its state is written);
    each partition's outcome. RENEW (KIP-1222) only in a request that says IsRenewAck."""
    manager = broker.share_partitions
    outcome: dict[TopicIdPartition, ErrorCode] = {}
    for topic in topics:
        for p in topic.partitions:
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                       for b in p.acknowledgement_batches]
            if not batches:
                continue
            tip = (topic.topic_id, p.partition_index)
            if not _known(broker, topic.topic_id):
                outcome[tip] = ErrorCode.unknown_topic_id
                continue
            if p.partition_index not in broker.image.topics_by_id[topic.topic_id].partitions:
                outcome[tip] = ErrorCode.unknown_topic_or_partition  # as Kafka
                continue
            if unreadable and topic.topic_id in unreadable:
                outcome[tip] = ErrorCode.topic_authorization_failed
                continue
            if not renew and any(AcknowledgeType.RENEW in types for _, _, types in batches):
                outcome[tip] = ErrorCode.invalid_request
                continue
            outcome[tip] = await manager.acknowledge(session.group_id, session.member_id,
                                                     tip, batches)
    return outcome


def _session_error(error: KafkaError) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error.code, "error_message": error.message,
            "responses": [], "node_endpoints": [], "acquisition_lock_timeout": 0}


async def handle_share_fetch(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not share_groups_enabled(broker.image.features):  # Kafka's answer at share.version 0
        return _session_error(KafkaError(ErrorCode.unsupported_version))
    manager = broker.share_partitions
    if not req.group_id:
        return _session_error(KafkaError(ErrorCode.invalid_request,
                                         "Invalid group id in the request."))
    if not authorize(ctx, READ, GROUP, req.group_id):
        return _session_error(KafkaError(ErrorCode.group_authorization_failed))
    if not req.member_id:
        return _session_error(KafkaError(ErrorCode.invalid_request,
                                         "Invalid member id in the request."))
    try:
        session = manager.session(req.group_id, req.member_id, req.share_session_epoch)
    except KafkaError as e:
        return _session_error(e)
    session.connection = (ctx.listener_name, ctx.client_host, ctx.client_port)
    for topic in req.forgotten_topics_data:
        for index in topic.partitions:
            session.partitions.discard((topic.topic_id, index))
    requested: list[TopicIdPartition] = []
    for topic in req.topics:
        for p in topic.partitions:
            requested.append((topic.topic_id, p.partition_index))
            if _known(broker, topic.topic_id):
                session.partitions.add((topic.topic_id, p.partition_index))
    renew = getattr(req, "is_renew_ack", False)
    unreadable = _unreadable(broker, ctx, [tip[0] for tip in session.partitions] +
                             [tip[0] for tip in requested])
    acks = await _acknowledge(broker, session, req.topics, renew, unreadable)
    if req.share_session_epoch == FINAL_EPOCH:
        lock_ms = manager.lock_duration_ms(session)  # Kafka's answer: the lock, even now
        manager.close(session)
        return _fetch_response(requested, {}, acks, lock_ms)
    if renew:  # KIP-1222: a fetch that renews locks acquires nothing
        return _fetch_response(requested, {}, acks, manager.lock_duration_ms(session))
    # The session's partitions in a stable order; unknown topics of this request are
    # answered UNKNOWN_TOPIC_ID.
    partitions = sorted({tip for tip in session.partitions
                         if _known(broker, tip[0]) and tip[0] not in unreadable},
                        key=lambda tip: (str(tip[0]), tip[1]))
    limits = FetchLimits(
        max_bytes=req.max_bytes,
        max_records=req.max_records,
        record_limit=getattr(req, "share_acquire_mode", 0) == RECORD_LIMIT)
    results = await manager.fetch(session, partitions, limits, max(0, ms(req.max_wait)))
    for tip in requested:
        if not _known(broker, tip[0]):
            results[tip] = ShareFetchResult(error=ErrorCode.unknown_topic_id)
    for tip in session.partitions | set(requested):
        if tip[0] in unreadable:
            results[tip] = ShareFetchResult(error=ErrorCode.topic_authorization_failed)
    return _fetch_response(requested, results, acks, manager.lock_duration_ms(session))


def _fetch_response(requested: list[TopicIdPartition], results: ShareFetchResults,
                    acks: dict[TopicIdPartition, ErrorCode], lock_ms: int
                    ) -> dict[str, Any]:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    asked = set(requested)
    for key in sorted(set(results) | set(acks) | asked,
                      key=lambda k: (str(k[0]), k[1])):
        result = results.get(key, ShareFetchResult())
        if key not in asked and key not in acks and not result.acquired and \
                result.error == ErrorCode.none:
            continue  # nothing new for a partition the session already had
        by_topic.setdefault(key[0], []).append({
            "partition_index": key[1], "error_code": result.error, "error_message": None,
            "acknowledge_error_code": acks.get(key, ErrorCode.none),
            "acknowledge_error_message": None,
            "current_leader": {"leader_id": -1, "leader_epoch": -1},
            "records": result.records if result.acquired else b"",
            "acquired_records": [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                  "delivery_count": a.delivery_count}
                                 for a in result.acquired]})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "acquisition_lock_timeout": lock_ms,
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": []}


async def handle_share_acknowledge(broker: Broker, ctx: RequestContext, req: Any
                                   ) -> dict[str, Any]:
    if not share_groups_enabled(broker.image.features):  # Kafka's answer at share.version 0
        return _session_error(KafkaError(ErrorCode.unsupported_version))
    manager = broker.share_partitions
    if not req.group_id:
        return _session_error(KafkaError(ErrorCode.invalid_request,
                                         "Invalid group id in the request."))
    if not authorize(ctx, READ, GROUP, req.group_id):
        return _session_error(KafkaError(ErrorCode.group_authorization_failed))
    if not req.member_id:
        return _session_error(KafkaError(ErrorCode.invalid_request,
                                         "Invalid member id in the request."))
    if req.share_session_epoch == INITIAL_EPOCH:
        return _session_error(KafkaError(ErrorCode.invalid_share_session_epoch,
                                         "ShareAcknowledge cannot open a share session"))
    try:
        session = manager.session(req.group_id, req.member_id, req.share_session_epoch)
    except KafkaError as e:
        return _session_error(e)
    acks = await _acknowledge(broker, session, req.topics, getattr(req, "is_renew_ack", False),
                              _unreadable(broker, ctx, [t.topic_id for t in req.topics]))
    if req.share_session_epoch == FINAL_EPOCH:
        manager.close(session)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, index), error in acks.items():
        by_topic.setdefault(topic_id, []).append({
            "partition_index": index, "error_code": error, "error_message": None,
            "current_leader": {"leader_id": -1, "leader_epoch": -1}})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": [], "acquisition_lock_timeout": manager.lock_duration_ms(session)}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.SHARE_FETCH, 1, 2, handle_share_fetch),
    ApiSpec(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, handle_share_acknowledge),
]
