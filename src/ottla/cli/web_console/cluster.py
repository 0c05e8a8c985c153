"""The cluster overview: brokers and the controller (DescribeCluster), the KRaft quorum
with each replica's lag (DescribeQuorum, as ``ottla metadata-quorum`` reads it), the
finalized features and the API versions the broker speaks (ApiVersions)."""

from __future__ import annotations

from dataclasses import dataclass

from ottla.cli.features import _level_name
from ottla.cli.web_console.connection import TIMEOUT, Connection, failing
from ottla.common.topics import METADATA_TOPIC


@dataclass
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None
    controller: bool


@dataclass
class QuorumReplica:
    node_id: int
    role: str
    """Leader, Follower (a voter) or Observer, as kafka-metadata-quorum.sh names them."""
    log_end_offset: int
    lag: int
    last_caught_up_ms: int


@dataclass
class Quorum:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    replicas: list[QuorumReplica]


@dataclass
class Feature:
    name: str
    supported: str
    finalized: str


@dataclass
class ApiRange:
    name: str
    key: int
    min_version: int
    max_version: int


@dataclass
class Overview:
    cluster_id: str
    brokers: list[Broker]
    controller_id: int
    quorum: Quorum | None
    quorum_error: str | None
    features: list[Feature]
    apis: list[ApiRange]


def overview(connection: Connection) -> Overview:
    with failing(f"The cluster at {connection.bootstrap} could not be described"):
        described = connection.admin().describe_cluster(request_timeout=TIMEOUT).result(
            TIMEOUT)
    controller_id = described.controller.id if described.controller is not None else -1
    brokers = [Broker(n.id, n.host, n.port, n.rack, n.id == controller_id)
               for n in sorted(described.nodes, key=lambda n: n.id)]
    quorum, quorum_error, features, apis = _from_protocol(connection)
    return Overview(described.cluster_id or "", brokers, controller_id, quorum,
                    quorum_error, features, apis)


def _from_protocol(connection: Connection
                   ) -> tuple[Quorum | None, str | None, list[Feature], list[ApiRange]]:
    from ottla.protocol.api import ApiKey

    with connection.protocol_client() as client:
        versions = client.api_versions()
        response = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
            "topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
    finalized = {f.name: f.max_version_level for f in versions.finalized_features}
    features = [Feature(f.name, f"{_level_name(f.name, f.min_version)} to "
                        f"{_level_name(f.name, f.max_version)}",
                        _level_name(f.name, finalized.get(f.name, 0)))
                for f in sorted(versions.supported_features, key=lambda f: f.name)]
    apis = [ApiRange(_api_name(k.api_key), k.api_key, k.min_version, k.max_version)
            for k in versions.api_keys]
    if response.error_code != 0:
        return None, f"DescribeQuorum failed: error {response.error_code}", features, apis
    partition = response.topics[0].partitions[0]
    if partition.error_code != 0:
        return None, partition.error_message or f"error {partition.error_code}", \
            features, apis
    replicas = []
    for status, group in (("Voter", partition.current_voters),
                          ("Observer", partition.observers)):
        for r in group:
            role = "Leader" if r.replica_id == partition.leader_id else \
                ("Follower" if status == "Voter" else "Observer")
            replicas.append(QuorumReplica(r.replica_id, role, r.log_end_offset,
                                          max(partition.high_watermark - r.log_end_offset, 0),
                                          r.last_caught_up_timestamp))
    return Quorum(partition.leader_id, partition.leader_epoch, partition.high_watermark,
                  replicas), None, features, apis


def _api_name(key: int) -> str:
    from ottla.protocol.api import ApiKey

    try:
        return "".join(w.title() for w in ApiKey(key).name.split("_"))
    except ValueError:
        return str(key)
