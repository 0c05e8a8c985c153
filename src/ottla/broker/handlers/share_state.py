"""The share coordinator's RPCs (KIP-932), sent by share-partition leaders (and by the
group coordinator): Initialize, Read, Write, Delete and ReadSummary ShareGroupState. Each
partition is answered by the share coordinator shard that owns its
``group:topicId:partition`` key; a partition whose owner is another broker, or is still
loading, gets NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, which the sender retries
after finding the coordinator again. Only brokers send them: each needs CLUSTER_ACTION on
the cluster, else every partition is CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ottla.broker.broker import Broker
from ottla.coordinator.share.shard import PersisterStateBatch, SharePartitionKey
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import CLUSTER_ACTION, MSG_CLUSTER, authorize_cluster

PartitionAnswer = Callable[[SharePartitionKey, Any], Awaitable[dict[str, Any]]]


def _error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}


async def _each_partition(broker: Broker, ctx: RequestContext, req: Any,
                          answer: PartitionAnswer, defaults: dict[str, Any]
                          ) -> dict[str, Any]:
    """Run ``answer`` for every partition of the request; ``defaults`` fill the fields
    of a partition answered with an error."""
    if not authorize_cluster(ctx, CLUSTER_ACTION):
        raise KafkaError(ErrorCode.cluster_authorization_failed, MSG_CLUSTER)
    results = []
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            key = SharePartitionKey(req.group_id, topic.topic_id or uuid.UUID(int=0),
                                    p.partition)
            try:
                result = await answer(key, p)
            except KafkaError as e:
                result = {**defaults, **_error(e.code, e.message)}
            partitions.append({"partition": p.partition, **result})
        results.append({"topic_id": topic.topic_id, "partitions": partitions})
    return {"results": results}


def _batches(batches: tuple[PersisterStateBatch, ...] | list[PersisterStateBatch]
             ) -> list[dict[str, int]]:
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset,
             "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
            for b in batches]


async def handle_initialize_share_group_state(broker: Broker, ctx: RequestContext, req: Any
                                              ) -> dict[str, Any]:
    async def answer(key: SharePartitionKey, p: Any) -> dict[str, Any]:
        done = await broker.share_coordinator.initialize_state(key, p.state_epoch,
                                                               p.start_offset)
        return _error(done.error, done.message)
    return await _each_partition(broker, ctx, req, answer, {})


async def handle_read_share_group_state(broker: Broker, ctx: RequestContext, req: Any
                                        ) -> dict[str, Any]:
    async def answer(key: SharePartitionKey, p: Any) -> dict[str, Any]:
        read = await broker.share_coordinator.read_state(key, p.leader_epoch)
        return {**_error(read.error, read.message), "state_epoch": read.state_epoch,
                "start_offset": read.start_offset,
                "state_batches": _batches(read.state_batches)}
    return await _each_partition(broker, ctx, req, answer, {
        "state_epoch": 0, "start_offset": -1, "state_batches": []})


async def handle_write_share_group_state(broker: Broker, ctx: RequestContext, req: Any
                                         ) -> dict[str, Any]:
    async def answer(key: SharePartitionKey, p: Any) -> dict[str, Any]:
        batches = [PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                       b.delivery_count) for b in p.state_batches]
        done = await broker.share_coordinator.write_state(
            key, p.state_epoch, p.leader_epoch, p.start_offset,
            getattr(p, "delivery_complete_count", -1), batches)
        return _error(done.error, done.message)
    return await _each_partition(broker, ctx, req, answer, {})


async def handle_delete_share_group_state(broker: Broker, ctx: RequestContext, req: Any
                                          ) -> dict[str, Any]:
    async def answer(key: SharePartitionKey, p: Any) -> dict[str, Any]:
        done = await broker.share_coordinator.delete_state(key)
        return _error(done.error, done.message)
    return await _each_partition(broker, ctx, req, answer, {})


async def handle_read_share_group_state_summary(broker: Broker, ctx: RequestContext,
                                                req: Any) -> dict[str, Any]:
    async def answer(key: SharePartitionKey, p: Any) -> dict[str, Any]:
        read = broker.share_coordinator.read_state_summary(key, p.leader_epoch)
        return {**_error(read.error, read.message), "state_epoch": read.state_epoch,
                "leader_epoch": read.leader_epoch, "start_offset": read.start_offset,
                "delivery_complete_count": read.delivery_complete_count}
    return await _each_partition(broker, ctx, req, answer, {
        "state_epoch": 0, "leader_epoch": 0, "start_offset": -1,
        "delivery_complete_count": -1})


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0, handle_initialize_share_group_state),
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE, 0, 0, handle_read_share_group_state),
    ApiSpec(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1, handle_write_share_group_state),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0, handle_delete_share_group_state),
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1,
            handle_read_share_group_state_summary),
]
