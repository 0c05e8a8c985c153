"""``ottla metadata-quorum``: describe and change the KRaft quorum
(kafka-metadata-quorum.sh).

``--bootstrap-server`` (a broker) or ``--bootstrap-controller`` (a controller listener),
then ``describe --status`` (leader, epoch, high watermark, lag, voters) or
``describe --replication`` (one row per voter and observer); ``add-controller`` (with
``--command-config`` the new controller's server.properties: its node.id, the
directory.id of its metadata log dir and its controller listeners) or
``remove-controller --controller-id N --controller-directory-id ID`` (KIP-853), sent to
the quorum's leader, answered once the new voter set is committed.
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
    add = actions.add_parser("add-controller",
                             help="add a controller to the KRaft controller cluster")
    add.add_argument("--dry-run", action="store_true",
                     help="print what would be done, but do not do it")
    add.set_defaults(run=run_add)
    remove = actions.add_parser("remove-controller",
                                help="remove a controller from the KRaft controller cluster")
    remove.add_argument("--controller-id", "-i", type=int, required=True,
                        help="the id of the controller to remove")
    remove.add_argument("--controller-directory-id", "-d", required=True,
                        help="the directory id of the controller to remove")
    remove.add_argument("--dry-run", action="store_true",
                        help="print what would be done, but do not do it")
    remove.set_defaults(run=run_remove)


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


def _controller(props: dict[str, str]) -> tuple[int, str, list[tuple[str, str, int]]]:
    """(node id, metadata directory id, controller endpoints) of a controller's
    server.properties, checked as Kafka's MetadataQuorumCommand does."""
    import re

    from ottla.storage.meta_properties import MetaProperties

    if "node.id" not in props:
        raise ValueError("node.id not found in configuration file. Is this a valid "
                         "controller configuration file?")
    node_id = int(props["node.id"])
    if node_id < 0:
        raise ValueError("node.id was negative in configuration file. Is this a valid "
                         "controller configuration file?")
    if "controller" not in props.get("process.roles", ""):
        raise ValueError("process.roles did not contain 'controller' in configuration file. "
                         "Is this a valid controller configuration file?")
    directory = props.get("metadata.log.dir") or \
        (props.get("log.dirs") or props.get("log.dir") or "").split(",")[0].strip()
    if not directory:
        raise ValueError("Neither metadata.log.dir nor log.dirs were found. Is this a valid "
                         "controller configuration file?")
    meta = MetaProperties.read(directory)
    if meta is None:
        raise ValueError(f"Unable to read meta.properties from {directory}")
    if not meta.directory_id:
        raise ValueError(f"No directory id found in {directory}")
    listeners: dict[str, tuple[str, int]] = {}
    for key in ("listeners", "advertised.listeners"):
        for entry in props.get(key, "").split(","):
            match = re.match(r"^\s*([^:]+)://(\[[^\]]*\]|[^:]*):(\d+)\s*$", entry)
            if match:
                listeners[match.group(1).upper()] = (match.group(2).strip("[]") or "localhost",
                                                     int(match.group(3)))
    if "controller.listener.names" not in props:
        raise ValueError("controller.listener.names was not found. Is this a valid controller "
                         "configuration file?")
    endpoints = []
    for name in props["controller.listener.names"].split(","):
        name = name.strip().upper()
        if name not in listeners:
            raise ValueError(f"Cannot find information about controller listener name: {name}")
        endpoints.append((name, *listeners[name]))
    return node_id, meta.directory_id, endpoints


def _leader_client(args: argparse.Namespace, properties: dict[str, str]) -> Any:
    """A client to the quorum's leader (AddRaftVoter and RemoveRaftVoter go to it)."""
    from ottla.protocol.api import ApiKey

    address = args.bootstrap_server or args.bootstrap_controller
    client = connect(address, "ottla-metadata-quorum", properties)
    if not args.bootstrap_controller:
        return client
    with client:
        response = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
            "topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
    leader = response.topics[0].partitions[0].leader_id
    for node in response.nodes:
        if node.node_id == leader and node.listeners:
            listener = node.listeners[0]
            return connect(f"{listener.host}:{listener.port}", "ottla-metadata-quorum",
                           properties)
    return connect(address, "ottla-metadata-quorum", properties)


def run_add(args: argparse.Namespace) -> int:
    from ottla.common.uuids import parse_kafka_uuid
    from ottla.protocol.api import ApiKey

    if not args.command_config:
        return fail("You must supply the configuration file of the controller you are adding "
                    "when using add-controller.")
    properties = read_command_config(args.command_config)
    try:
        node_id, directory_id, endpoints = _controller(properties)
    except ValueError as e:
        return fail(str(e))
    described = ", ".join(f"{name}://[{host}]:{port}" if ":" in host
                          else f"{name}://{host}:{port}" for name, host, port in endpoints)
    if not args.dry_run:
        try:
            with _leader_client(args, properties) as client:
                response = client.request(ApiKey.ADD_RAFT_VOTER, 0, {
                    "cluster_id": None, "timeout": 30_000, "voter_id": node_id,
                    "voter_directory_id": parse_kafka_uuid(directory_id),
                    "listeners": [{"name": name, "host": host, "port": port}
                                  for name, host, port in endpoints]})
        except (OSError, ConnectionError) as e:
            return fail(f"cannot add the controller: {e}")
        if response.error_code != 0:
            return fail(_error(response))
    print(f"{'DRY RUN of adding' if args.dry_run else 'Added'} controller {node_id} with "
          f"directory id {directory_id} and endpoints: {described}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    from ottla.common.uuids import parse_kafka_uuid
    from ottla.protocol.api import ApiKey

    if args.controller_id < 0:
        return fail(f"Invalid negative --controller-id: {args.controller_id}")
    try:
        directory = parse_kafka_uuid(args.controller_directory_id)
    except ValueError as e:
        return fail(f"Failed to parse --controller-directory-id: {e}")
    if not args.dry_run:
        try:
            with _leader_client(args, read_command_config(args.command_config)) as client:
                response = client.request(ApiKey.REMOVE_RAFT_VOTER, 0, {
                    "cluster_id": None, "voter_id": args.controller_id,
                    "voter_directory_id": directory})
        except (OSError, ConnectionError) as e:
            return fail(f"cannot remove the controller: {e}")
        if response.error_code != 0:
            return fail(_error(response))
    print(f"{'DRY RUN of removing ' if args.dry_run else 'Removed '}KRaft controller "
          f"{args.controller_id} with directory id {args.controller_directory_id}")
    return 0


def _error(response: Any) -> str:
    from ottla.protocol.errors import ErrorCode

    code = ErrorCode(response.error_code)
    return f"{code.name.upper()}: {response.error_message or code.name}"
