"""The KRaft RPCs between the replicas of ``__cluster_metadata`` (Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) on the controller listener, and
DescribeQuorum, the state of the quorum (KIP-595, KIP-853), which the leader answers
(brokers forward it here).

AddRaftVoter and RemoveRaftVoter (KIP-853) change the voters through the leader, which
answers when the new set commits; UpdateRaftVoter is a voter telling the leader its
endpoints.

The KRaft RPCs and UpdateRaftVoter need CLUSTER_ACTION on the cluster (the other
replicas' principals: make them super users), DescribeQuorum DESCRIBE, AddRaftVoter and
RemoveRaftVoter ALTER; a denied request gets CLUSTER_AUTHORIZATION_FAILED at its top
level (Kafka's ControllerApis)."""

from __future__ import annotations

from typing import Any

from ottla.common.java import hash_map_order, string_hash
from ottla.common.topics import METADATA_TOPIC
from ottla.common.uuids import kafka_uuid_text, parse_kafka_uuid
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.raft.voter_set import Endpoint, ReplicaKey, VoterNode
from ottla.security.auth_helper import (
    ALTER,
    CLUSTER_ACTION,
    DESCRIBE,
    MSG_CLUSTER,
    deny_cluster,
)
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


def _voter_key(voter_id: int, directory: Any) -> ReplicaKey:
    return ReplicaKey(voter_id, None if directory is None or directory.int == 0
                      else kafka_uuid_text(directory))


def _change_response(error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "error_message": message}


def _endpoints(listeners: Any) -> tuple[Endpoint, ...]:
    """A request's listeners as Kafka's Endpoints keeps them: names upper-cased
    (ListenerName.normalised), the last of a name winning."""
    named = {e.name.upper(): Endpoint(e.name.upper(), e.host, int(e.port)) for e in listeners}
    return tuple(named.values())


def kafka_endpoints(endpoints: tuple[Endpoint, ...]) -> str:
    """Kafka's ``Endpoints.toString``: a HashMap of ListenerName to an unresolved
    InetSocketAddress."""
    names = hash_map_order([e.listener for e in endpoints], string_hash, len(endpoints))
    by_name = {e.listener: e for e in endpoints}
    return "Endpoints(endpoints={" + ", ".join(
        f"ListenerName({n})={by_name[n].host}/<unresolved>:{by_name[n].port}"
        for n in names) + "})"


def _cluster_refusal(raft: Any, cluster_id: str | None) -> dict[str, Any] | None:
    if cluster_id in (None, raft.cluster_id):
        return None
    return _change_response(ErrorCode.inconsistent_cluster_id,
                            f"The given id \"{cluster_id}\" doesn't match the "
                            f"cluster id \"{raft.cluster_id}\"")


async def handle_add_raft_voter(controller: ControllerServices, ctx: RequestContext,
                                req: Any) -> dict[str, Any]:
    """As Kafka's KafkaRaftClient.handleAddVoterRequest: the cluster id, leadership, the
    voter and its listener for the quorum, then the leader's checks (``add_voter``),
    which append the new set and answer once it commits (v1 ``ack_when_committed``
    false: once it is appended). Nothing awaits between the checks here and the
    leader's, so leadership cannot change in between."""
    denied = deny_cluster(ctx, req, ALTER, MSG_CLUSTER)
    if denied is not None:
        return denied
    raft = controller.raft
    refused = _cluster_refusal(raft, req.cluster_id)
    if refused is not None:
        return refused
    if not raft.is_leader:
        return _change_response(ErrorCode.not_leader_or_follower, None)
    key = _voter_key(req.voter_id, req.voter_directory_id)
    if key.id < 0 or key.directory_id is None:
        return _change_response(ErrorCode.invalid_request,
                                "Add voter request didn't include a valid voter")
    endpoints = _endpoints(req.listeners)
    if not any(e.listener == raft.listener.upper() for e in endpoints):
        return _change_response(ErrorCode.invalid_request,
                                "Add voter request didn't include the endpoint "
                                f"({kafka_endpoints(endpoints)}) for the default listener "
                                f"ListenerName({raft.listener.upper()})")
    result = await raft.add_voter(VoterNode(key, endpoints), req.timeout.total_seconds(),
                                  getattr(req, "ack_when_committed", True))
    return _change_response(result.error, result.message)


async def handle_remove_raft_voter(controller: ControllerServices, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    """As Kafka's handleRemoveVoterRequest: the cluster id, then the leader's checks
    (``remove_voter``), answered once the new set commits."""
    denied = deny_cluster(ctx, req, ALTER, MSG_CLUSTER)
    if denied is not None:
        return denied
    raft = controller.raft
    refused = _cluster_refusal(raft, req.cluster_id)
    if refused is not None:
        return refused
    result = await raft.remove_voter(_voter_key(req.voter_id, req.voter_directory_id),
                                     raft.config.request_timeout_ms / 1000)
    return _change_response(result.error, result.message)


async def handle_update_raft_voter(controller: ControllerServices, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    """As Kafka's handleUpdateVoterRequest, in its order: the cluster id, the epoch and
    leadership, the voter and its listener for the quorum, then ``update_voter`` (which
    checks the voter and its kraft versions). The response has no message."""
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    raft = controller.raft
    error = ErrorCode.none
    if req.cluster_id not in (None, raft.cluster_id):
        error = ErrorCode.inconsistent_cluster_id
    elif req.current_leader_epoch < raft.epoch:
        error = ErrorCode.fenced_leader_epoch
    elif req.current_leader_epoch > raft.epoch:
        error = ErrorCode.unknown_leader_epoch
    elif not raft.is_leader:
        error = ErrorCode.not_leader_or_follower
    else:
        feature = req.k_raft_version_feature
        voter = VoterNode(_voter_key(req.voter_id, req.voter_directory_id),
                          _endpoints(req.listeners),
                          (int(feature.min_supported_version),
                           int(feature.max_supported_version)))
        if not any(e.listener == raft.listener.upper() for e in voter.endpoints):
            error = ErrorCode.invalid_request  # as a missing directory id (update_voter)
        else:
            error = (await raft.update_voter(voter)).error
    leader = raft.leader_id
    address = raft.address(leader) if leader is not None else None
    return {"throttle_time": 0, "error_code": error, "current_leader": {
        "leader_id": -1 if leader is None else leader, "leader_epoch": raft.epoch,
        "host": address[0] if address else "", "port": address[1] if address else -1}}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.VOTE, 0, 2, handle_vote),
    ApiSpec(ApiKey.BEGIN_QUORUM_EPOCH, 0, 1, handle_begin_quorum_epoch),
    ApiSpec(ApiKey.END_QUORUM_EPOCH, 0, 1, handle_end_quorum_epoch),
    ApiSpec(ApiKey.FETCH, 13, 18, handle_raft_fetch),
    ApiSpec(ApiKey.FETCH_SNAPSHOT, 0, 1, handle_fetch_snapshot),
    ApiSpec(ApiKey.DESCRIBE_QUORUM, 0, 2, handle_describe_quorum),
    ApiSpec(ApiKey.ADD_RAFT_VOTER, 0, 1, handle_add_raft_voter),
    ApiSpec(ApiKey.REMOVE_RAFT_VOTER, 0, 0, handle_remove_raft_voter),
    ApiSpec(ApiKey.UPDATE_RAFT_VOTER, 0, 0, handle_update_raft_voter),
]
