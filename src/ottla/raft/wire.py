"""Raft messages as Kafka's KRaft RPCs: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch
and FetchSnapshot on ``__cluster_metadata-0`` (KIP-595, KIP-630, KIP-996 pre-vote,
KIP-1166 high watermark in Fetch), and a voter's UpdateRaftVoter (KIP-853).

Pure functions between :mod:`ottla.raft.messages` and the field dicts and ``kio``
entities of the wire, so the replica stays free of encoding. Entries travel as the
record batches the leader's log holds (``Entry.raw``).
"""

from __future__ import annotations

from typing import Any

from ottla.common.topics import METADATA_TOPIC, METADATA_TOPIC_ID
from ottla.common.uuids import kafka_uuid_text, parse_kafka_uuid
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.raft.file_log import entries_of
from ottla.raft.messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RecordSerde,
    Snapshot,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
)

VOTE_VERSION = 2
BEGIN_QUORUM_EPOCH_VERSION = 1
END_QUORUM_EPOCH_VERSION = 1
FETCH_VERSION = 18
FETCH_SNAPSHOT_VERSION = 1
UPDATE_RAFT_VOTER_VERSION = 0
FETCH_MAX_BYTES = 8 << 20
SNAPSHOT_CHUNK_BYTES = 4 << 20

_ERRORS = {"fenced_leader_epoch": ErrorCode.fenced_leader_epoch,
           "not_leader": ErrorCode.not_leader_or_follower,
           "timeout": ErrorCode.request_timed_out}
_ERROR_NAMES = {code: name for name, code in _ERRORS.items()}


def _leader(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


def _uuid(directory_id: str | None) -> Any:
    """A directory id on the wire (the zero uuid for none)."""
    return parse_kafka_uuid(directory_id)


def _directory(value: Any) -> str | None:
    """A wire uuid as the core's directory id (None for the zero uuid or none)."""
    if value is None or value.int == 0:
        return None
    return kafka_uuid_text(value)


def _error_name(code: int) -> str | None:
    if code == ErrorCode.none:
        return None
    return _ERROR_NAMES.get(code, f"error {int(code)}")


# --- requests a replica sends ------------------------------------------------------------

def encode_request(message: Any, destination: int, cluster_id: str
                   ) -> tuple[int, int, dict[str, Any]]:
    """(api key, version, fields) of the RPC carrying ``message`` to ``destination``."""
    match message:
        case VoteRequest():
            return ApiKey.VOTE, VOTE_VERSION, {
                "cluster_id": cluster_id, "voter_id": destination,
                "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                    "partition_index": 0, "replica_epoch": message.epoch,
                    "replica_id": message.candidate_id,
                    "replica_directory_id": _uuid(message.candidate_directory_id),
                    "voter_directory_id": _uuid(message.voter_directory_id),
                    "last_offset_epoch": message.last_epoch,
                    "last_offset": message.end_offset, "pre_vote": message.pre_vote}]}]}
        case BeginQuorumEpoch():
            return ApiKey.BEGIN_QUORUM_EPOCH, BEGIN_QUORUM_EPOCH_VERSION, {
                "cluster_id": cluster_id, "voter_id": destination,
                "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                    "partition_index": 0,
                    "voter_directory_id": _uuid(message.voter_directory_id),
                    "leader_id": message.leader_id, "leader_epoch": message.epoch}]}],
                "leader_endpoints": []}
        case EndQuorumEpoch():
            return ApiKey.END_QUORUM_EPOCH, END_QUORUM_EPOCH_VERSION, {
                "cluster_id": cluster_id,
                "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                    "partition_index": 0, "leader_id": message.leader_id,
                    "leader_epoch": message.epoch,
                    "preferred_candidates": [
                        {"candidate_id": c, "candidate_directory_id": None}
                        for c in message.preferred_successors]}]}],
                "leader_endpoints": []}
        case FetchRequest():
            return ApiKey.FETCH, FETCH_VERSION, {
                "cluster_id": cluster_id,
                "replica_state": {"replica_id": message.replica_id, "replica_epoch": -1},
                "max_wait": message.max_wait_ms, "min_bytes": 0, "max_bytes": FETCH_MAX_BYTES,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [{
                    "partition": 0, "current_leader_epoch": message.epoch,
                    "fetch_offset": message.fetch_offset,
                    "last_fetched_epoch": message.last_fetched_epoch, "log_start_offset": -1,
                    "partition_max_bytes": FETCH_MAX_BYTES,
                    "replica_directory_id": _uuid(message.replica_directory_id),
                    "high_watermark": message.known_high_watermark}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        case UpdateVoterRequest():
            voter = message.voter
            low, high = voter.kraft_versions
            return ApiKey.UPDATE_RAFT_VOTER, UPDATE_RAFT_VOTER_VERSION, {
                "cluster_id": cluster_id, "current_leader_epoch": message.epoch,
                "voter_id": voter.key.id, "voter_directory_id": _uuid(voter.key.directory_id),
                "listeners": [{"name": e.listener, "host": e.host, "port": e.port}
                              for e in voter.endpoints],
                "k_raft_version_feature": {"min_supported_version": low,
                                           "max_supported_version": high}}
    raise TypeError(f"not a Raft request: {message!r}")


def fetch_snapshot_request(message: FetchSnapshotRequest, cluster_id: str, position: int
                           ) -> dict[str, Any]:
    """One chunk of a FetchSnapshot, from ``position``."""
    return {"cluster_id": cluster_id, "replica_id": message.replica_id,
            "max_bytes": SNAPSHOT_CHUNK_BYTES,
            "topics": [{"name": METADATA_TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": message.epoch,
                "snapshot_id": {"end_offset": message.end_offset,
                                "epoch": message.snapshot_epoch},
                "position": position, "replica_directory_id": None}]}]}


def decode_response(request: Any, source: int, response: Any, serde: RecordSerde
                    ) -> Any:
    """The Raft message a response to ``request`` from ``source`` carries, or None."""
    if isinstance(request, UpdateVoterRequest):
        leader = response.current_leader
        return UpdateVoterResponse(ErrorCode(response.error_code), _leader(leader.leader_id),
                                   leader.leader_epoch)
    if response.error_code != ErrorCode.none:
        return None
    match request:
        case VoteRequest():
            p = response.topics[0].partitions[0]
            if p.error_code not in (ErrorCode.none, ErrorCode.fenced_leader_epoch):
                return None
            return VoteResponse(source, p.leader_epoch, p.vote_granted, request.pre_vote,
                                _leader(p.leader_id))
        case FetchRequest():
            p = response.responses[0].partitions[0]
            records = p.records
            return FetchResponse(
                _leader(p.current_leader.leader_id), p.current_leader.leader_epoch,
                p.high_watermark, tuple(entries_of(records, serde)) if records else (),
                request.fetch_offset, p.diverging_epoch.epoch, p.diverging_epoch.end_offset,
                p.snapshot_id.end_offset, p.snapshot_id.epoch, _error_name(p.error_code))
    return None  # BeginQuorumEpoch and EndQuorumEpoch answers carry nothing we need


# --- requests a replica receives -----------------------------------------------------------

def decode_request(api_key: int, request: Any) -> tuple[int, Any] | None:
    """(source replica, Raft message) of an inbound KRaft RPC; None if it is not about
    ``__cluster_metadata-0``."""
    match api_key:
        case ApiKey.VOTE:
            p = _metadata_partition(request.topics, "topic_name")
            if p is None:
                return None
            pre_vote = bool(getattr(p, "pre_vote", False))  # v2+
            candidate = getattr(p, "replica_id", getattr(p, "candidate_id", -1))
            epoch = getattr(p, "replica_epoch", getattr(p, "candidate_epoch", -1))
            return candidate, VoteRequest(
                candidate, epoch, p.last_offset_epoch, p.last_offset, pre_vote,
                _directory(getattr(p, "replica_directory_id", None)),  # v2+
                _directory(getattr(p, "voter_directory_id", None)))
        case ApiKey.BEGIN_QUORUM_EPOCH:
            p = _metadata_partition(request.topics, "topic_name")
            if p is None:
                return None
            return p.leader_id, BeginQuorumEpoch(
                p.leader_id, p.leader_epoch,
                _directory(getattr(p, "voter_directory_id", None)))  # v1+
        case ApiKey.END_QUORUM_EPOCH:
            p = _metadata_partition(request.topics, "topic_name")
            if p is None:
                return None
            successors = tuple(c.candidate_id for c in p.preferred_candidates) \
                if hasattr(p, "preferred_candidates") else tuple(p.preferred_successors)
            return p.leader_id, EndQuorumEpoch(p.leader_id, p.leader_epoch, successors)
        case ApiKey.FETCH:
            topics = request.topics
            if len(topics) != 1 or len(topics[0].partitions) != 1 or \
                    topics[0].topic_id != METADATA_TOPIC_ID:
                return None
            p = topics[0].partitions[0]
            state = getattr(request, "replica_state", None)  # v15+
            replica_id = state.replica_id if state is not None else request.replica_id
            known = getattr(p, "high_watermark", -1)  # v18+
            return replica_id, FetchRequest(replica_id, p.current_leader_epoch, p.fetch_offset,
                                            p.last_fetched_epoch, int(request.max_wait
                                                                      .total_seconds() * 1000),
                                            known,
                                            _directory(getattr(p, "replica_directory_id", None)))
        case ApiKey.FETCH_SNAPSHOT:
            p = _metadata_partition(request.topics, "name")
            if p is None:
                return None
            return request.replica_id, FetchSnapshotRequest(
                request.replica_id, p.current_leader_epoch, p.snapshot_id.end_offset,
                p.snapshot_id.epoch)
    return None


def _metadata_partition(topics: Any, name_field: str) -> Any:
    if len(topics) != 1 or getattr(topics[0], name_field) != METADATA_TOPIC or \
            len(topics[0].partitions) != 1:
        return None
    p = topics[0].partitions[0]
    index = getattr(p, "partition_index", getattr(p, "partition", 0))
    return p if index == 0 else None


def vote_response(message: VoteResponse | None, error: ErrorCode = ErrorCode.none
                  ) -> dict[str, Any]:
    partition = {"partition_index": 0, "error_code": ErrorCode.none, "leader_id": -1,
                 "leader_epoch": -1, "vote_granted": False}
    if message is not None:
        partition.update(leader_id=-1 if message.leader_id is None else message.leader_id,
                         leader_epoch=message.epoch, vote_granted=message.granted)
    return {"error_code": error, "node_endpoints": [],
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]}


def epoch_response(leader_id: int | None, epoch: int, error: ErrorCode = ErrorCode.none
                   ) -> dict[str, Any]:
    """The answer to BeginQuorumEpoch and EndQuorumEpoch."""
    return {"error_code": error, "node_endpoints": [],
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                "partition_index": 0, "error_code": ErrorCode.none,
                "leader_id": -1 if leader_id is None else leader_id,
                "leader_epoch": epoch}]}]}


def fetch_response(message: FetchResponse | None, log_start_offset: int,
                   error: ErrorCode = ErrorCode.none,
                   leader_endpoint: tuple[int, str, int] | None = None) -> dict[str, Any]:
    """``leader_endpoint`` (id, host, port): where the leader listens (KIP-853's
    NodeEndpoints), so an observer that knows no voter yet can fetch from it."""
    partition: dict[str, Any] = {
        "partition_index": 0, "error_code": ErrorCode.none, "high_watermark": -1,
        "last_stable_offset": -1, "log_start_offset": log_start_offset,
        "diverging_epoch": {"epoch": -1, "end_offset": -1},
        "current_leader": {"leader_id": -1, "leader_epoch": -1},
        "snapshot_id": {"end_offset": -1, "epoch": -1}, "aborted_transactions": None,
        "preferred_read_replica": -1, "records": None}
    if message is not None:
        partition.update(
            error_code=_ERRORS.get(message.error or "", ErrorCode.none)
            if message.error else ErrorCode.none,
            high_watermark=message.high_watermark, last_stable_offset=message.high_watermark,
            diverging_epoch={"epoch": message.diverging_epoch,
                             "end_offset": message.diverging_end_offset},
            current_leader={"leader_id": -1 if message.leader_id is None
                            else message.leader_id, "leader_epoch": message.epoch},
            snapshot_id={"end_offset": message.snapshot_end_offset,
                         "epoch": message.snapshot_epoch},
            records=b"".join(e.raw or b"" for e in message.entries) or None)
    endpoints = [] if leader_endpoint is None else [
        {"node_id": leader_endpoint[0], "host": leader_endpoint[1],
         "port": leader_endpoint[2], "rack": None}]
    return {"throttle_time": 0, "error_code": error, "session_id": 0,
            "node_endpoints": endpoints,
            "responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}]}


def node_endpoints(response: Any) -> list[tuple[int, str, int]]:
    """The (id, host, port) a response's NodeEndpoints name."""
    return [(int(e.node_id), e.host, int(e.port))
            for e in getattr(response, "node_endpoints", None) or ()]


def fetch_snapshot_response(message: FetchSnapshotResponse | None, position: int,
                            max_bytes: int, error: ErrorCode = ErrorCode.none
                            ) -> dict[str, Any]:
    """One chunk of the snapshot the replica agreed to give, from ``position``."""
    partition: dict[str, Any] = {
        "index": 0, "error_code": ErrorCode.snapshot_not_found,
        "snapshot_id": {"end_offset": -1, "epoch": -1},
        "current_leader": {"leader_id": -1, "leader_epoch": -1}, "size": 0,
        "position": position, "unaligned_records": b""}
    if message is not None:
        partition["current_leader"] = {
            "leader_id": -1 if message.leader_id is None else message.leader_id,
            "leader_epoch": message.epoch}
        snapshot = message.snapshot
        if snapshot is not None:
            data = bytes(snapshot.data)
            if position > len(data):
                partition["error_code"] = ErrorCode.position_out_of_range
            else:
                partition.update(
                    error_code=ErrorCode.none, size=len(data),
                    snapshot_id={"end_offset": snapshot.end_offset, "epoch": snapshot.epoch},
                    unaligned_records=data[position:position + min(max_bytes,
                                                                   SNAPSHOT_CHUNK_BYTES)])
    return {"throttle_time": 0, "error_code": error, "node_endpoints": [],
            "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}]}


def snapshot_chunk(response: Any) -> tuple[int | None, int, Snapshot | None, int, bytes] | None:
    """(leader, epoch, snapshot id as an empty Snapshot, total size, chunk) of a
    FetchSnapshot answer, or None when it failed."""
    if response.error_code != ErrorCode.none:
        return None
    p = response.topics[0].partitions[0]
    leader = _leader(p.current_leader.leader_id)
    if p.error_code != ErrorCode.none:
        return leader, p.current_leader.leader_epoch, None, 0, b""
    snapshot = Snapshot(p.snapshot_id.end_offset, p.snapshot_id.epoch, b"")
    return leader, p.current_leader.leader_epoch, snapshot, p.size, bytes(p.unaligned_records)


def leader_endpoints(request: Any) -> list[tuple[str, str, int]]:
    """The (listener, host, port) a BeginQuorumEpoch's leader listens on (v1+)."""
    return [(e.name, e.host, int(e.port))
            for e in getattr(request, "leader_endpoints", None) or ()]
