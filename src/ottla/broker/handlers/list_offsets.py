"""ListOffsets (earliest, latest, by timestamp, max timestamp), OffsetForLeaderEpoch and
DeleteRecords: the APIs that ask a broker about its partitions' logs.

Authorization (Kafka's KafkaApis): ListOffsets needs DESCRIBE on each topic,
OffsetForLeaderEpoch CLUSTER_ACTION on the cluster (followers) or DESCRIBE on each topic
(consumers), DeleteRecords DELETE on each topic (a refused topic's partitions are
TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.replication.partition import READ_COMMITTED, READ_UNCOMMITTED, Partition
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    CLUSTER_ACTION,
    DELETE,
    DESCRIBE,
    TOPIC,
    authorize_cluster,
    authorized_names,
    enabled,
)
from ottla.storage.leader_epoch import earliest_epoch, epoch_end_offset

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
"""KIP-1023 (ListOffsets v11): the first offset not yet in remote storage; without tiered
storage Kafka's ``UnifiedLog`` answers no offset, as for LATEST_TIERED."""

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
"""ListOffsets' replica id from a debugging tool, which a follower answers too (Kafka's
``ListOffsetsRequest.DEBUGGING_REPLICA_ID``)."""


NOT_FOUND = (-1, -1, -1)
"""(timestamp, offset, leader epoch) when no offset answers."""


def _last_fetchable_offset(partition: Partition, isolation: int, client: bool) -> int:
    """Where what ListOffsets may answer ends (Kafka's ``Partition.fetchOffsetForTimestamp``):
    a consumer's (replica id -1) read ends at the last stable offset under read_committed,
    else at the high watermark; a debugging tool's at the log end."""
    if not client:
        return partition.log.log_end_offset
    if isolation == READ_COMMITTED:
        return partition.last_stable_offset
    return partition.high_watermark


def _lagging_error(partition: Partition, client: bool, current_leader_epoch: int
                  ) -> KafkaError | None:
    """OFFSET_NOT_AVAILABLE for a consumer while this new leader's high watermark is
    behind the start of its epoch (Kafka's ``Partition.fetchOffsetForTimestamp``): the
    offsets it could answer may still move back, so the client retries."""
    start = partition.lagging_epoch_start_offset
    if not client or start is None:
        return None
    epoch = "unknown epoch" if current_leader_epoch < 0 else f"epoch {current_leader_epoch}"
    return KafkaError(ErrorCode.offset_not_available, (
        f"Failed to fetch offsets for partition {partition.topic}-{partition.index} with "
        f"leader {epoch} as this partition's high watermark ({partition.high_watermark}) "
        f"is lagging behind the start offset from the beginning of this epoch ({start})."))


def _offset_for(partition: Partition, timestamp: int, isolation: int, client: bool,
                current_leader_epoch: int = -1) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) that ListOffsets answers for one partition. As
    Kafka's ``ReplicaManager.fetchOffset``, a record found by timestamp or as the max
    timestamp that a fetch could not return yet (at or past the last fetchable offset: an
    open transaction's under read_committed, one not replicated) is no answer; while a new
    leader's high watermark lags its epoch start, LATEST and such a lookup are
    OFFSET_NOT_AVAILABLE for a consumer (EARLIEST is answered)."""
    log = partition.log
    cache = log.leader_epoch_cache
    if timestamp in (EARLIEST, EARLIEST_LOCAL):  # the same without tiered storage
        offset = log.log_start_offset
        return -1, offset, earliest_epoch(partition.epoch_entries, offset)
    fetchable = _last_fetchable_offset(partition, isolation, client)
    lagging = _lagging_error(partition, client, current_leader_epoch)
    if timestamp == LATEST:
        if lagging is not None:
            raise lagging
        return -1, fetchable, partition.leader_epoch  # as Kafka: the current leader's epoch
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # no tiered storage
        return NOT_FOUND
    if timestamp == MAX_TIMESTAMP:
        found: tuple[int, int] | None = log.max_timestamp_and_offset()
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"Invalid timestamp {timestamp}")
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found[1] >= fetchable:
        if lagging is not None:
            raise lagging
        return NOT_FOUND
    if found[1] < 0:
        return NOT_FOUND
    return found[0], found[1], cache.epoch_for_offset(found[1])


def handle_list_offsets(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    isolation = getattr(req, "isolation_level", READ_UNCOMMITTED)
    topics = []
    named = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)
    describable = authorized_names(ctx, DESCRIBE, TOPIC, (t.name for t in req.topics))
    answered: set[tuple[str, int]] = set()
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            if (topic.name, p.partition_index) in answered:
                continue  # as Kafka: a partition named twice is answered once
            answered.add((topic.name, p.partition_index))
            result = {"partition_index": p.partition_index, "error_code": ErrorCode.none,
                      "timestamp": -1, "offset": -1, "leader_epoch": -1}
            try:
                if topic.name not in describable:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if named[(topic.name, p.partition_index)] > 1:
                    raise KafkaError(ErrorCode.invalid_request, "Duplicate partition")
                if p.timestamp == MAX_TIMESTAMP and ctx.api_version < 7:
                    # KIP-734: the max timestamp is asked from v7 on.
                    raise KafkaError(ErrorCode.unsupported_version)
                partition = broker.replica_manager.require(topic.name, p.partition_index,
                                                           broker.image)
                current_leader_epoch = getattr(p, "current_leader_epoch", -1)
                partition.check_leader_epoch(current_leader_epoch,
                                             require_leader=req.replica_id != DEBUGGING_REPLICA_ID)
                ts, offset, epoch = _offset_for(partition, p.timestamp, isolation,
                                                req.replica_id == CONSUMER_REPLICA_ID,
                                                current_leader_epoch)
                result.update(timestamp=ts, offset=offset, leader_epoch=epoch)
            except KafkaError as e:
                result["error_code"] = e.code
            partitions.append(result)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def handle_offset_for_leader_epoch(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    describable = None
    if enabled(ctx) and not authorize_cluster(ctx, CLUSTER_ACTION, log_if_denied=False):
        describable = authorized_names(ctx, DESCRIBE, TOPIC, (t.topic for t in req.topics))
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            result = {"error_code": ErrorCode.none, "partition": p.partition,
                      "leader_epoch": -1, "end_offset": -1}
            try:
                if describable is not None and topic.topic not in describable:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                partition = broker.replica_manager.require(topic.topic, p.partition,
                                                           broker.image)
                partition.check_leader_epoch(p.current_leader_epoch)
                # As Kafka's cache: a leader's epoch ends at its log end from the moment
                # it leads (an empty partition's epoch 0 ends at 0), not once written.
                epoch, end = epoch_end_offset(partition.epoch_entries, p.leader_epoch,
                                              partition.log.log_end_offset)
                result.update(leader_epoch=epoch, end_offset=end)
            except KafkaError as e:
                result["error_code"] = e.code
            partitions.append(result)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def handle_delete_records(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    deletable = authorized_names(ctx, DELETE, TOPIC, (t.name for t in req.topics))
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            result = {"partition_index": p.partition_index, "low_watermark": -1,
                      "error_code": ErrorCode.none}
            try:
                if topic.name not in deletable:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                partition = broker.replica_manager.require(topic.name, p.partition_index,
                                                           broker.image)
                partition.check_leader_epoch(-1)
                offset = partition.high_watermark if p.offset == -1 else p.offset
                if offset < 0:
                    raise KafkaError(ErrorCode.offset_out_of_range, "Negative offset")
                result["low_watermark"] = partition.log.delete_records_before(offset)
            except KafkaError as e:
                result["error_code"] = e.code
            partitions.append(result)
        topics.append({"name": topic.name, "partitions": partitions})
    # The new log start offsets must survive a crash: checkpoint them now.
    broker.replica_manager.log_manager.checkpoint()
    return {"throttle_time": 0, "topics": topics}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.LIST_OFFSETS, 1, 11, handle_list_offsets),
    ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, handle_offset_for_leader_epoch),
    ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, handle_delete_records),
]
