"""``ottla metadata-quorum``: describe the KRaft quorum (kafka-metadata-quorum.sh).

``--bootstrap-server`` (a broker) or ``--bootstrap-controller`` (a controller listener),
then ``describe --status`` (leader, epoch, high watermark, lag, voters) or
``describe --replication`` (one row per voter and observer).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from ottla.cli.common import connect, fail, read_command_config
from ottla.common.topics import METADATA_TOPIC
from ottla.common.uuids import kafka_uuid_text


def add_parser(sub: Any) -> None:
    p = sub.add_parser("metadata-quorum",
                       help="describe the metadata quorum (kafka-metadata-quorum.sh)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", help="a broker, host:port")
    where.add_argument("--bootstrap-controller", help="a controller listener, host:port")
    p.add_argument("--command-config",
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    describe = actions.add_parser("describe", help="describe the quorum")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true")
    what.add_argument("--replication", action="store_true")
    describe.add_argument("--human-readable", action="store_true",
                          help="timestamps as 'N ms ago' rather than epoch milliseconds")
    describe.set_defaults(run=run)


def _directory_id(value: Any) -> str:
    return "" if value is None else kafka_uuid_text(value)


def run(args: argparse.Namespace) -> int:
    from ottla.protocol.api import ApiKey

    address = args.bootstrap_server or args.bootstrap_controller
    try:
        with connect(address, "ottla-metadata-quorum",
                     read_command_config(args.command_config)) as client:
            response = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
                "topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
            cluster = client.request(ApiKey.DESCRIBE_CLUSTER, 1, {
                "include_cluster_authorized_operations": False,
                "endpoint_type": 2 if args.bootstrap_controller else 1})
    except (OSError, ConnectionError) as e:
        return fail(f"cannot describe the quorum through {address}: {e}")
    partition = response.topics[0].partitions[0]
    if partition.error_code != 0:
        return fail(f"DescribeQuorum failed: {partition.error_message or partition.error_code}")
    endpoints = {n.node_id: [f"{ln.name}://{ln.host}:{ln.port}" for ln in n.listeners]
                 for n in response.nodes}
    if args.status:
        print_status(cluster.cluster_id, partition, endpoints)
    else:
        print_replication(partition, args.human_readable)
    return 0


def print_status(cluster_id: str, partition: Any, endpoints: dict[int, list[str]]) -> None:
    leader = next((v for v in partition.current_voters
                   if v.replica_id == partition.leader_id), None)
    followers = [r for r in (*partition.current_voters, *partition.observers)
                 if r.replica_id != partition.leader_id]
    max_lag = max((partition.high_watermark - r.log_end_offset for r in followers), default=0)
    lag_time = 0
    if followers and leader is not None:
        worst = max(followers, key=lambda r: partition.high_watermark - r.log_end_offset)
        lag_time = leader.last_caught_up_timestamp - worst.last_caught_up_timestamp \
            if worst.last_caught_up_timestamp >= 0 and leader.last_caught_up_timestamp >= 0 \
            else -1
    voters = [{"id": v.replica_id, "directoryId": _directory_id(v.replica_directory_id),
               "endpoints": endpoints.get(v.replica_id, [])} for v in partition.current_voters]
    observers = [{"id": o.replica_id, "directoryId": _directory_id(o.replica_directory_id)}
                 for o in partition.observers]
    for name, value in (("ClusterId", cluster_id), ("LeaderId", partition.leader_id),
                        ("LeaderEpoch", partition.leader_epoch),
                        ("HighWatermark", partition.high_watermark),
                        ("MaxFollowerLag", max(max_lag, 0)),
                        ("MaxFollowerLagTimeMs", lag_time),
                        ("CurrentVoters", json.dumps(voters)),
                        ("CurrentObservers", json.dumps(observers))):
        print(f"{name + ':':<24}{value}")


def print_replication(partition: Any, human: bool) -> None:
    now = int(time.time() * 1000)

    def stamp(ms: int) -> str:
        if ms < 0:
            return "-1"
        return f"{max(now - ms, 0)} ms ago" if human else str(ms)

    rows = [["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
             "LastCaughtUpTimestamp", "Status"]]
    for status, replicas in (("Voter", partition.current_voters),
                             ("Observer", partition.observers)):
        for r in replicas:
            role = "Leader" if r.replica_id == partition.leader_id else \
                ("Follower" if status == "Voter" else "Observer")
            rows.append([str(r.replica_id), _directory_id(r.replica_directory_id),
                         str(r.log_end_offset),
                         str(max(partition.high_watermark - r.log_end_offset, 0)),
                         stamp(r.last_fetch_timestamp), stamp(r.last_caught_up_timestamp),
                         role])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
