"""The share groups' offsets admin APIs (KIP-932, and KIP-1226's lag):
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets. As in Kafka
they are answered by the group coordinator service, which checks the group on its shard
and reads or writes the share-partition states through the persister."""

from __future__ import annotations

from typing import Any

from ottla.broker.broker import Broker
from ottla.common.features import share_groups_enabled
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext

UNSUPPORTED_VERSION = "The version of API is not supported."
"""Kafka's message for UNSUPPORTED_VERSION: what these APIs answer with share.version 0
(KafkaApis' isShareGroupProtocolEnabled)."""


def _disabled(broker: Broker) -> dict[str, Any] | None:
    if share_groups_enabled(broker.image.features):
        return None
    return {"throttle_time": 0, "error_code": ErrorCode.unsupported_version,
            "error_message": UNSUPPORTED_VERSION, "responses": []}


async def handle_describe_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any
                                              ) -> dict[str, Any]:
    """Each group's offsets; topics null is every share-partition the group has state
    for (version 1 adds the lag, which version 0 leaves out)."""
    if not share_groups_enabled(broker.image.features):
        return {"throttle_time": 0, "groups": [
            {"group_id": g.group_id, "topics": [], "error_code": ErrorCode.unsupported_version,
             "error_message": None} for g in req.groups]}
    groups = []
    for group in req.groups:
        topics = None if group.topics is None else \
            [(t.topic_name, list(t.partitions)) for t in group.topics]
        groups.append(await broker.share_offsets.describe_share_group_offsets(
            group.group_id, topics))
    return {"throttle_time": 0, "groups": groups}


async def handle_alter_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any
                                           ) -> dict[str, Any]:
    disabled = _disabled(broker)
    if disabled is not None:
        return disabled
    topics = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
              for t in req.topics]
    altered = await broker.share_offsets.alter_share_group_offsets(req.group_id, topics)
    return {"throttle_time": 0, **altered}


async def handle_delete_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any
                                            ) -> dict[str, Any]:
    disabled = _disabled(broker)
    if disabled is not None:
        return disabled
    deleted = await broker.share_offsets.delete_share_group_offsets(
        req.group_id, [t.topic_name for t in req.topics])
    return {"throttle_time": 0, **deleted}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, handle_describe_share_group_offsets),
    ApiSpec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, handle_alter_share_group_offsets),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, handle_delete_share_group_offsets),
]
