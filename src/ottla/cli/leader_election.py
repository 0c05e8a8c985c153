"""``ottla leader-election``: preferred or unclean leader elections (kafka-leader-election.sh).

``--election-type PREFERRED|UNCLEAN`` with ``--all-topic-partitions``, ``--topic T
[--partition P]`` or ``--path-to-json-file F`` (``{"partitions": [{"topic": ..,
"partition": ..}]}``); the result is printed as Kafka's tool prints it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ottla.cli.common import client_config, fail, read_command_config
from ottla.protocol.errors import ErrorCode


def add_parser(sub: Any) -> None:
    p = sub.add_parser("leader-election", help="elect preferred or unclean leaders "
                       "(kafka-leader-election.sh)")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--admin.config", dest="admin_config",
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--election-type", required=True, type=str.upper,
                   choices=["PREFERRED", "UNCLEAN"])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--topic")
    which.add_argument("--path-to-json-file")
    p.add_argument("--partition", type=int, help="with --topic")
    p.set_defaults(run=run)


def _partitions(args: argparse.Namespace, admin: Any) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file:
        with open(args.path_to_json_file, encoding="utf-8") as f:
            data = json.load(f)
        return [(p["topic"], int(p["partition"])) for p in data["partitions"]]
    if args.partition is not None:
        return [(args.topic, args.partition)]
    topic = admin.list_topics(args.topic, timeout=30).topics.get(args.topic)
    if topic is None or topic.error is not None:
        raise ValueError(f"topic {args.topic} does not exist")
    return [(args.topic, p) for p in sorted(topic.partitions)]


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import ElectionType, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    if args.partition is not None and not args.topic:
        return fail("--partition needs --topic")
    admin = AdminClient(client_config(args.bootstrap_server,
                                      read_command_config(args.admin_config)))
    try:
        wanted = _partitions(args, admin)
    except (ValueError, KeyError, OSError) as e:
        return fail(str(e))
    kind = ElectionType[args.election_type]
    request = None if wanted is None else [TopicPartition(t, p) for t, p in wanted]
    try:
        result = admin.elect_leaders(kind, request).result(60)
    except KafkaException as e:
        return fail(f"leader election failed: {e}")
    done, not_needed, failed = [], [], []
    for tp, error in sorted(result.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        name = f"{tp.topic}-{tp.partition}"
        if error is None:
            done.append(name)
        elif error.code() == ErrorCode.election_not_needed:
            not_needed.append(name)
        else:
            failed.append(f"{name}: {error.str()}")
    if done:
        print(f"Successfully completed leader election ({args.election_type}) for "
              f"partitions {', '.join(done)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if not done and not not_needed and not failed:
        print("No partitions needed a leader election.")
    for line in failed:
        print(f"Error completing leader election ({args.election_type}) for partition: "
              f"{line}")
    return 1 if failed else 0
