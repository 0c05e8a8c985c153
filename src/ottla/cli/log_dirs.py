"""``ottla log-dirs --describe``: partition sizes per log dir (kafka-log-dirs.sh)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ottla.cli.common import connect, fail, read_command_config


def add_parser(sub: Any) -> None:
    p = sub.add_parser("log-dirs", help="describe the log dirs of a broker (kafka-log-dirs.sh)")
    p.add_argument("action", nargs="?", choices=["describe"],
                   help="same as --describe")
    p.add_argument("--describe", action="store_true")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config",
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--topic-list", help="comma separated topics (default: all)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ottla.protocol.api import ApiKey

    if not args.describe and args.action != "describe":
        return fail("Exactly one of [--describe] must be given.")
    properties = read_command_config(args.command_config)
    with connect(args.bootstrap_server, "ottla-log-dirs", properties) as client:
        cluster = client.request(ApiKey.DESCRIBE_CLUSTER, 0, {
            "include_cluster_authorized_operations": False})
        topics = None
        if args.topic_list:
            names = [t for t in args.topic_list.split(",") if t]
            metadata = client.request(ApiKey.METADATA, 9, {
                "topics": [{"name": n} for n in names], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False})
            topics = [{"topic": t.name, "partitions": [p.partition_index for p in t.partitions]}
                      for t in metadata.topics]
    print("Querying brokers for log directories information")
    brokers = []
    for broker in cluster.brokers:
        with connect(f"{broker.host}:{broker.port}", "ottla-log-dirs", properties) as client:
            described = client.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": topics})
        brokers.append({"broker": broker.broker_id, "logDirs": [
            {"logDir": d.log_dir, "error": None if d.error_code == 0 else str(d.error_code),
             "partitions": [{"partition": f"{t.name}-{p.partition_index}",
                             "size": p.partition_size, "offsetLag": p.offset_lag,
                             "isFuture": p.is_future_key}
                            for t in d.topics for p in t.partitions]}
            for d in described.results]})
    print("Received log directory information from brokers "
          + ",".join(str(b["broker"]) for b in brokers))
    print(json.dumps({"version": 1, "brokers": brokers}))
    return 0
