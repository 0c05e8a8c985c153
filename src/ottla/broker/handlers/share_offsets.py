"""The share groups' offsets admin APIs (KIP-932, and KIP-1226's lag):
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets. As in Kafka
they are answered by the group coordinator service, which checks the group on its shard
and reads or writes the share-partition states through the persister.

Authorization (Kafka's KafkaApis): describing needs DESCRIBE on the group and on each
topic (refused when named, left out of all the group's); altering READ on the group and
on each topic; deleting DELETE on the group and READ on each topic."""

from __future__ import annotations

import uuid
from typing import Any

from ottla.broker.broker import Broker
from ottla.common.features import share_groups_enabled
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    DELETE,
    DESCRIBE,
    GROUP,
    MSG_GROUP,
    MSG_TOPIC,
    READ,
    TOPIC,
    authorize,
    authorized_names,
    enabled,
)

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
        if not authorize(ctx, DESCRIBE, GROUP, group.group_id):
            groups.append({"group_id": group.group_id, "topics": [],
                           "error_code": ErrorCode.group_authorization_failed,
                           "error_message": None})
            continue
        topics = None if group.topics is None else \
            [(t.topic_name, list(t.partitions)) for t in group.topics]
        describable = None if topics is None else \
            authorized_names(ctx, DESCRIBE, TOPIC, (name for name, _ in topics))
        described = await broker.share_offsets.describe_share_group_offsets(
            group.group_id, None if topics is None or describable is None
            else [(name, parts) for name, parts in topics if name in describable])
        if topics is None:
            if enabled(ctx):
                shown = authorized_names(ctx, DESCRIBE, TOPIC,
                                         (t["topic_name"] for t in described["topics"]))
                described["topics"] = [t for t in described["topics"]
                                       if t["topic_name"] in shown]
        elif described["error_code"] == ErrorCode.none:
            described["topics"] += [
                {"topic_name": name, "topic_id": uuid.UUID(int=0), "partitions": [
                    {"partition_index": p, "start_offset": -1, "leader_epoch": -1,
                     "lag": -1, "error_code": ErrorCode.topic_authorization_failed,
                     "error_message": MSG_TOPIC} for p in parts]}
                for name, parts in topics if name not in (describable or ())]
        groups.append(described)
    return {"throttle_time": 0, "groups": groups}


async def handle_alter_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any
                                           ) -> dict[str, Any]:
    disabled = _disabled(broker)
    if disabled is not None:
        return disabled
    if not authorize(ctx, READ, GROUP, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "error_message": MSG_GROUP, "responses": []}
    topics = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
              for t in req.topics]
    readable = authorized_names(ctx, READ, TOPIC, (name for name, _ in topics))
    altered = await broker.share_offsets.alter_share_group_offsets(
        req.group_id, [(name, parts) for name, parts in topics if name in readable])
    if altered["error_code"] == ErrorCode.none:
        altered["responses"] += [
            {"topic_name": name, "topic_id": uuid.UUID(int=0), "partitions": [
                {"partition_index": p, "error_code": ErrorCode.topic_authorization_failed,
                 "error_message": MSG_TOPIC} for p, _ in parts]}
            for name, parts in topics if name not in readable]
    return {"throttle_time": 0, **altered}


async def handle_delete_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any
                                            ) -> dict[str, Any]:
    disabled = _disabled(broker)
    if disabled is not None:
        return disabled
    if not authorize(ctx, DELETE, GROUP, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "error_message": MSG_GROUP, "responses": []}
    names = [t.topic_name for t in req.topics]
    readable = authorized_names(ctx, READ, TOPIC, names)
    deleted = await broker.share_offsets.delete_share_group_offsets(
        req.group_id, [name for name in names if name in readable])
    if deleted["error_code"] == ErrorCode.none:
        deleted["responses"] += [
            {"topic_name": name, "topic_id": uuid.UUID(int=0),
             "error_code": ErrorCode.topic_authorization_failed, "error_message": MSG_TOPIC}
            for name in names if name not in readable]
    return {"throttle_time": 0, **deleted}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, handle_describe_share_group_offsets),
    ApiSpec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, handle_alter_share_group_offsets),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, handle_delete_share_group_offsets),
]
