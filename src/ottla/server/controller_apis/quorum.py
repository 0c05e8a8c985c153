"""The KRaft RPCs between the replicas of ``__cluster_metadata`` (Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) on the controller listener, and
DescribeQuorum, the state of the quorum (KIP-595, KIP-853), which the leader answers
(brokers forward it here).

The KRaft RPCs need CLUSTER_ACTION on the cluster (the other replicas' principals: make
them super users), DescribeQuorum DESCRIBE; a denied request gets
CLUSTER_AUTHORIZATION_FAILED at its top level (Kafka's ControllerApis)."""

from __future__ import annotations

from typing import Any

from ottla.common.topics import METADATA_TOPIC
from ottla.common.uuids import parse_kafka_uuid
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import CLUSTER_ACTION, DESCRIBE, MSG_CLUSTER, deny_cluster
from ottla.server.controller_apis.services import ControllerServices


def _replica(r: Any) -> dict[str, Any]:
    return {"replica_id": r.replica_id, "replica_directory_id": parse_kafka_uuid(r.directory_id),
            "log_end_offset": r.log_end_offset, "last_fetch_timestamp": r.last_fetch_ms,
            "last_caught_up_timestamp": r.last_caught_up_ms}


async def handle_vote(controller: ControllerServices, ctx: RequestContext,
                      req: Any) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    return await controller.raft.inbound(ApiKey.VOTE, req)


async def handle_begin_quorum_epoch(controller: ControllerServices, ctx: RequestContext,
                                    req: Any) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    return await controller.raft.inbound(ApiKey.BEGIN_QUORUM_EPOCH, req)


async def handle_end_quorum_epoch(controller: ControllerServices, ctx: RequestContext,
                                  req: Any) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    return await controller.raft.inbound(ApiKey.END_QUORUM_EPOCH, req)


async def handle_raft_fetch(controller: ControllerServices, ctx: RequestContext,
                            req: Any) -> dict[str, Any]:
    """A follower or an observer fetching the metadata log; the leader may hold it until
    there is something new (long polling)."""
    if deny_cluster(ctx, req, CLUSTER_ACTION, None) is not None:
        # FetchRequest.getErrorResponse from v13: the top-level error, no partitions.
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "session_id": 0, "responses": [], "node_endpoints": []}
    return await controller.raft.inbound(ApiKey.FETCH, req)


async def handle_fetch_snapshot(controller: ControllerServices, ctx: RequestContext,
                                req: Any) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    return await controller.raft.inbound(ApiKey.FETCH_SNAPSHOT, req)


async def handle_describe_quorum(controller: ControllerServices, ctx: RequestContext,
                                 req: Any) -> Any:
    denied = deny_cluster(ctx, req, DESCRIBE, MSG_CLUSTER)
    if denied is not None:
        return denied
    topics = req.topics
    valid = len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC and \
        len(topics[0].partitions) == 1 and topics[0].partitions[0].partition_index == 0
    if not valid:
        partitions = [{"partition_index": p.partition_index,
                       "error_code": ErrorCode.unknown_topic_or_partition,
                       "error_message": "DescribeQuorum only describes __cluster_metadata-0",
                       "leader_id": -1, "leader_epoch": -1, "high_watermark": -1,
                       "current_voters": [], "observers": []}
                      for t in topics for p in t.partitions]
        return {"error_code": ErrorCode.none, "error_message": None, "nodes": [],
                "topics": [{"topic_name": t.topic_name, "partitions": partitions}
                           for t in topics[:1]]}
    if not controller.raft.is_leader:
        return await controller.channel.forward(ctx, req)  # only the leader knows it all
    quorum = controller.channel.describe_quorum()
    return {
        "error_code": ErrorCode.none, "error_message": None,
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
            "partition_index": 0, "error_code": ErrorCode.none, "error_message": None,
            "leader_id": quorum.leader_id, "leader_epoch": quorum.leader_epoch,
            "high_watermark": quorum.high_watermark,
            "current_voters": [_replica(v) for v in quorum.voters],
            "observers": [_replica(o) for o in quorum.observers]}]}],
        "nodes": [{"node_id": node, "listeners": [
            {"name": name, "host": host, "port": port} for name, host, port in listeners]}
            for node, listeners in sorted(quorum.endpoints.items())],
    }


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.VOTE, 0, 2, handle_vote),
    ApiSpec(ApiKey.BEGIN_QUORUM_EPOCH, 0, 1, handle_begin_quorum_epoch),
    ApiSpec(ApiKey.END_QUORUM_EPOCH, 0, 1, handle_end_quorum_epoch),
    ApiSpec(ApiKey.FETCH, 13, 18, handle_raft_fetch),
    ApiSpec(ApiKey.FETCH_SNAPSHOT, 0, 1, handle_fetch_snapshot),
    ApiSpec(ApiKey.DESCRIBE_QUORUM, 0, 2, handle_describe_quorum),
]
