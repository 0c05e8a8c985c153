"""Share groups on the partition leaders (KIP-932): ShareFetch, which acquires records for
a member (with acknowledgements riding on it), and ShareAcknowledge."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.share.partition_manager import FINAL_EPOCH, ShareFetchResult, ShareSession
from ottla.broker.share.share_partition import AcknowledgeType
from ottla.common.features import share_groups_enabled
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import ms
from ottla.protocol.requests import ApiSpec, RequestContext

TopicPartition = tuple[str, int]
RECORD_LIMIT = 1
"""ShareFetch v2's ShareAcquireMode for share.acquire.mode=record_limit (0: batch_optimized)."""


def _name(broker: Broker, topic_id: uuid.UUID) -> str | None:
    topic = broker.image.topics_by_id.get(topic_id)
    return topic.name if topic is not None else None


async def _acknowledge(broker: Broker, session: ShareSession, topics: Any,
                       renew: bool = False) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    """Apply the request's acknowledgement batches (each once its state is written);
    each partition's outcome. RENEW (KIP-1222) only in a request that says IsRenewAck."""
    manager = broker.share_partitions
    outcome: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for topic in topics:
        name = _name(broker, topic.topic_id)
        for p in topic.partitions:
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                       for b in p.acknowledgement_batches]
            if not batches:
                continue
            if name is None:
                outcome[(topic.topic_id, p.partition_index)] = ErrorCode.unknown_topic_id
                continue
            if not renew and any(AcknowledgeType.RENEW in types for _, _, types in batches):
                outcome[(topic.topic_id, p.partition_index)] = ErrorCode.invalid_request
                continue
            outcome[(topic.topic_id, p.partition_index)] = await manager.acknowledge(
                session.group_id, session.member_id, (name, p.partition_index), batches)
    return outcome


def _session_error(version: int, error: KafkaError, fetch: bool) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error.code, "error_message": error.message,
            "responses": [], "node_endpoints": [], "acquisition_lock_timeout": 0}


async def handle_share_fetch(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not share_groups_enabled(broker.image.features):  # Kafka's answer at share.version 0
        return _session_error(ctx.api_version, KafkaError(ErrorCode.unsupported_version), True)
    manager = broker.share_partitions
    if not req.group_id or not req.member_id:
        return _session_error(ctx.api_version, KafkaError(
            ErrorCode.invalid_request, "ShareFetch needs a group id and a member id"), True)
    try:
        session = manager.session(req.group_id, req.member_id, req.share_session_epoch)
    except KafkaError as e:
        return _session_error(ctx.api_version, e, True)
    session.connection = (ctx.listener_name, ctx.client_host, ctx.client_port)
    for topic in req.forgotten_topics_data:
        name = _name(broker, topic.topic_id)
        for index in topic.partitions:
            if name is not None:
                session.partitions.discard((name, index))
    requested: dict[tuple[uuid.UUID, int], TopicPartition | None] = {}
    for topic in req.topics:
        name = _name(broker, topic.topic_id)
        for p in topic.partitions:
            requested[(topic.topic_id, p.partition_index)] = \
                (name, p.partition_index) if name is not None else None
            if name is not None:
                session.partitions.add((name, p.partition_index))
    renew = getattr(req, "is_renew_ack", False)
    acks = await _acknowledge(broker, session, req.topics, renew)
    if req.share_session_epoch == FINAL_EPOCH:
        manager.close(session)
        return _fetch_response(broker, requested, {}, acks, 0)
    if renew:  # KIP-1222: a fetch that renews locks acquires nothing
        return _fetch_response(broker, requested, {}, acks, _lock_ms(manager, session))
    if acks:
        # Fetches already waiting take what the acknowledgements freed, and the next
        # records, before this member does (Kafka completes its delayed share fetches
        # when acknowledgements finish): else a member that acknowledges always fetches
        # first and the others starve.
        await asyncio.sleep(0)
    keys = {(topic_id, index) for topic_id, indexes in _session_topics(broker, session)
            for index in indexes}
    keys |= set(requested)
    max_records = req.max_records if getattr(req, "max_records", 0) > 0 else 500
    record_limit = getattr(req, "share_acquire_mode", 0) == RECORD_LIMIT
    deadline = broker.now_ms() + max(0, ms(req.max_wait))
    while True:
        results = await _acquire_all(broker, session, keys, req.max_bytes, max_records,
                                     record_limit)
        if any(r.acquired or r.error != ErrorCode.none for r in results.values()) or \
                broker.now_ms() >= deadline:
            break
        await manager.changed((deadline - broker.now_ms()) / 1000)
    return _fetch_response(broker, requested, results, acks, _lock_ms(manager, session))


def _lock_ms(manager: Any, session: ShareSession) -> int:
    """The acquisition lock of the session's share-partitions (AcquisitionLockTimeoutMs)."""
    held = manager.partitions
    return max((held[(session.group_id, *tp)].lock_duration_ms for tp in session.partitions
                if (session.group_id, *tp) in held), default=30_000)


def _session_topics(broker: Broker, session: ShareSession
                    ) -> list[tuple[uuid.UUID, list[int]]]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for name, index in session.partitions:
        topic = broker.image.topics_by_name.get(name)
        if topic is not None:
            by_topic.setdefault(topic.topic_id, []).append(index)
    return list(by_topic.items())


async def _acquire_all(broker: Broker, session: ShareSession,
                       keys: set[tuple[uuid.UUID, int]], max_bytes: int, max_records: int,
                       record_limit: bool) -> dict[tuple[uuid.UUID, int], ShareFetchResult]:
    results: dict[tuple[uuid.UUID, int], ShareFetchResult] = {}
    budget = max_records
    for topic_id, index in sorted(keys, key=lambda k: (str(k[0]), k[1])):
        name = _name(broker, topic_id)
        if name is None:
            results[(topic_id, index)] = ShareFetchResult(error=ErrorCode.unknown_topic_id)
            continue
        if budget <= 0:
            results[(topic_id, index)] = ShareFetchResult()
            continue
        try:
            result = await broker.share_partitions.acquire(
                session.group_id, session.member_id, (name, index), max_bytes, budget,
                record_limit)
        except KafkaError as e:
            result = ShareFetchResult(error=e.code)
        budget -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
        results[(topic_id, index)] = result
    return results


def _fetch_response(broker: Broker, requested: dict[tuple[uuid.UUID, int], Any],
                    results: dict[tuple[uuid.UUID, int], ShareFetchResult],
                    acks: dict[tuple[uuid.UUID, int], ErrorCode], lock_ms: int
                    ) -> dict[str, Any]:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for key in sorted(set(results) | set(acks) | set(requested),
                      key=lambda k: (str(k[0]), k[1])):
        result = results.get(key, ShareFetchResult())
        if key not in requested and key not in acks and not result.acquired and \
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
        return _session_error(ctx.api_version, KafkaError(ErrorCode.unsupported_version), False)
    manager = broker.share_partitions
    if not req.group_id or not req.member_id:
        return _session_error(ctx.api_version, KafkaError(
            ErrorCode.invalid_request, "ShareAcknowledge needs a group id and a member id"),
            False)
    if req.share_session_epoch == 0:
        return _session_error(ctx.api_version, KafkaError(
            ErrorCode.invalid_share_session_epoch,
            "ShareAcknowledge cannot open a share session"), False)
    try:
        session = manager.session(req.group_id, req.member_id, req.share_session_epoch)
    except KafkaError as e:
        return _session_error(ctx.api_version, e, False)
    acks = await _acknowledge(broker, session, req.topics, getattr(req, "is_renew_ack", False))
    if req.share_session_epoch == FINAL_EPOCH:
        manager.close(session)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, index), error in acks.items():
        by_topic.setdefault(topic_id, []).append({
            "partition_index": index, "error_code": error, "error_message": None,
            "current_leader": {"leader_id": -1, "leader_epoch": -1}})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": [], "acquisition_lock_timeout": _lock_ms(manager, session)}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.SHARE_FETCH, 1, 2, handle_share_fetch),
    ApiSpec(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, handle_share_acknowledge),
]
