"""``ottla topics``: create, list, describe, alter and delete topics (kafka-topics.sh)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ottla.cli.common import (
    client_config,
    client_uuid_text,
    fail,
    parse_properties,
    read_command_config,
)

TIMEOUT = 30.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="manage topics (kafka-topics.sh)",
                       description="Create, delete, describe, or change a topic.")
    p.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    actions = p.add_mutually_exclusive_group(required=True)
    for action in ("create", "list", "describe", "delete", "alter"):
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    p.add_argument("--topic", help="the topic (a regex for --list/--describe/--delete)")
    p.add_argument("--partitions", type=int, help="partition count (create/alter)")
    p.add_argument("--replication-factor", type=int, help="replication factor (create)")
    p.add_argument("--replica-assignment",
                   help="broker_id_for_part1_replica1:broker_id_for_part1_replica2,...")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="a topic config override (create)")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--topics-with-overrides", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is exactly min.insync.replicas")
    p.add_argument("--command-config", help="a properties file of client configs")
    p.set_defaults(run=run)


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(args.bootstrap_server,
                                     read_command_config(args.command_config)))


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = _admin(args)
    try:
        if args.create:
            return _create(admin, args)
        if args.list:
            return _list(admin, args)
        if args.describe:
            return _describe(admin, args)
        if args.delete:
            return _delete(admin, args)
        return _alter(admin, args)
    except KafkaException as e:
        return fail(str(e.args[0]) if e.args else str(e))


def _matching(admin: Any, pattern: str | None, *, exclude_internal: bool) -> list[str]:
    import re

    names = sorted(admin.list_topics(timeout=TIMEOUT).topics)
    if exclude_internal:
        names = [n for n in names if not n.startswith("__")]
    if pattern is not None:
        regex = re.compile(pattern)
        names = [n for n in names if regex.fullmatch(n)]
    return names


def _create(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    if not args.topic:
        return fail("--topic is required with --create")
    configs = parse_properties(args.config, "--config")
    if args.replica_assignment:
        assignment = [[int(b) for b in part.split(":")]
                      for part in args.replica_assignment.split(",")]
        new = NewTopic(args.topic, replica_assignment=assignment, config=configs)
    else:
        new = NewTopic(args.topic, num_partitions=args.partitions or -1,
                       replication_factor=args.replication_factor or -1, config=configs)
    future = admin.create_topics([new], operation_timeout=TIMEOUT)[args.topic]
    try:
        future.result()
    except Exception as e:
        if args.if_not_exists and "already exists" in str(e):
            return 0
        return fail(_message(e))
    print(f"Created topic {args.topic}.")
    return 0


def _message(e: Exception) -> str:
    err = e.args[0] if e.args else e
    return getattr(err, "str", lambda: str(err))()


def _list(admin: Any, args: argparse.Namespace) -> int:
    for name in _matching(admin, args.topic, exclude_internal=args.exclude_internal):
        print(name)
    return 0


def _describe(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource, ConfigSource

    names = _matching(admin, args.topic, exclude_internal=args.exclude_internal)
    if args.topic and not names and "*" not in args.topic and "." not in args.topic:
        return fail(f"Topic '{args.topic}' does not exist as expected")
    if not names:
        return 0
    descriptions = admin.describe_topics(TopicCollection(names), request_timeout=TIMEOUT)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    configs = admin.describe_configs(resources, request_timeout=TIMEOUT)
    config_by_topic = {res.name: fut.result() for res, fut in configs.items()}
    for name in names:
        desc = descriptions[name].result()
        overrides = {k: v.value for k, v in config_by_topic[name].items()
                     if v.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        if args.topics_with_overrides and not overrides:
            continue
        partitions = desc.partitions
        rf = len(partitions[0].replicas) if partitions else 0
        min_isr_entry = config_by_topic[name].get("min.insync.replicas")
        min_isr = int(min_isr_entry.value) if min_isr_entry is not None else 1
        only_partitions = args.under_replicated_partitions or args.unavailable_partitions \
            or args.under_min_isr_partitions or args.at_min_isr_partitions
        config_text = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
        if not only_partitions:
            print(f"Topic: {name}\tTopicId: {client_uuid_text(desc.topic_id)}\tPartitionCount: "
                  f"{len(partitions)}\tReplicationFactor: {rf}\tConfigs: {config_text}")
        if args.topics_with_overrides:
            continue
        for p in partitions:
            leader = p.leader.id if p.leader is not None else -1
            replicas = [r.id for r in p.replicas]
            isr = [r.id for r in p.isr]
            if args.under_replicated_partitions and len(isr) >= len(replicas):
                continue
            if args.unavailable_partitions and leader != -1:
                continue
            if args.under_min_isr_partitions and len(isr) >= min_isr:
                continue
            if args.at_min_isr_partitions and len(isr) != min_isr:
                continue
            print(f"\tTopic: {name}\tPartition: {p.id}\tLeader: {leader if leader >= 0 else 'none'}"
                  f"\tReplicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}"
                  "\tElr: \tLastKnownElr: ")
    return 0


def _delete(admin: Any, args: argparse.Namespace) -> int:
    if not args.topic:
        return fail("--topic is required with --delete")
    names = _matching(admin, args.topic, exclude_internal=True)
    if not names:
        if args.if_exists:
            return 0
        return fail(f"Topic '{args.topic}' does not exist as expected")
    for name, future in admin.delete_topics(names, operation_timeout=TIMEOUT).items():
        try:
            future.result()
        except Exception as e:
            return fail(f"{name}: {_message(e)}")
    return 0


def _alter(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    if not args.topic or args.partitions is None:
        return fail("--alter needs --topic and --partitions")
    names = _matching(admin, args.topic, exclude_internal=True)
    if not names:
        if args.if_exists:
            return 0
        return fail(f"Topic '{args.topic}' does not exist as expected")
    futures = admin.create_partitions([NewPartitions(n, args.partitions) for n in names],
                                      operation_timeout=TIMEOUT)
    for name, future in futures.items():
        try:
            future.result()
        except Exception as e:
            return fail(f"{name}: {_message(e)}")
    print("Adding partitions succeeded!", file=sys.stdout)
    return 0
