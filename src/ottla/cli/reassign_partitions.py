"""``ottla reassign-partitions``: move partitions between brokers
(kafka-reassign-partitions.sh), with Kafka's JSON files.

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: print the current
  assignment and a proposed one spreading the topics' replicas over the brokers.
- ``--execute --reassignment-json-file F``: print the current assignment (for a
  rollback), then start the moves (AlterPartitionReassignments).
- ``--execute ... --throttle B``: the same, with replication throttled to B bytes/s on the
  brokers involved (``*.replication.throttled.rate``) for the moving replicas
  (``*.replication.throttled.replicas`` of their topics), as Kafka's tool sets them.
- ``--verify --reassignment-json-file F``: whether each move is completed or in progress;
  once all are completed it clears the throttles (unless ``--preserve-throttles``).
- ``--list``: the moves in progress; ``--cancel --reassignment-json-file F``: cancel them.

Files: ``{"version": 1, "topics": [{"topic": "t"}]}`` to move, and
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from ottla.cli.common import BrokerConnections, connect, fail, read_command_config
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode

Assignment = dict[tuple[str, int], list[int]]
REQUEST_TIMEOUT_MS = 60_000
RETRY_BACKOFF_S, RETRY_BACKOFF_MAX_S = 0.1, 1.0
"""Kafka's Admin defaults: retry.backoff.ms 100, retry.backoff.max.ms 1000."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reassign-partitions", help="move partitions between brokers "
                       "(kafka-reassign-partitions.sh)")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config",
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")
    actions = p.add_mutually_exclusive_group(required=True)
    for action in ("generate", "execute", "verify", "list", "cancel"):
        actions.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topics-to-move-json-file", help="with --generate")
    p.add_argument("--broker-list", help="with --generate: the brokers to spread over")
    p.add_argument("--reassignment-json-file", help="with --execute, --verify, --cancel")
    p.add_argument("--throttle", type=int, default=-1,
                   help="with --execute: throttle the moves' replication to this many "
                        "bytes/s per broker")
    p.add_argument("--additional", action="store_true",
                   help="with --execute: accepted (moves may be added to those in progress)")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify: keep the throttles after the moves complete")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="accepted; placement ignores racks here")
    p.set_defaults(run=run)


def _current(client: Any, topics: list[str] | None) -> Assignment:
    response = client.request(ApiKey.METADATA, 12, {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return {(t.name, p.partition_index): list(p.replica_nodes)
            for t in response.topics if t.error_code == 0 for p in t.partitions}


def _as_json(assignment: Assignment) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _read_reassignment(path: str) -> Assignment:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {(p["topic"], int(p["partition"])): [int(b) for b in p["replicas"]]
            for p in data["partitions"]}


def propose(current: Assignment, brokers: list[int]) -> Assignment:
    """Each topic's partitions spread round-robin over ``brokers``, keeping their
    replication factor, the first replica (the preferred leader) rotating."""
    proposed: Assignment = {}
    for (topic, partition), replicas in sorted(current.items()):
        rf = min(len(replicas), len(brokers))
        proposed[(topic, partition)] = [brokers[(partition + i) % len(brokers)]
                                        for i in range(rf)]
    return proposed


def run(args: argparse.Namespace) -> int:
    try:
        properties = read_command_config(args.command_config)
        with connect(args.bootstrap_server, "ottla-reassign-partitions", properties) \
                as client, BrokerConnections(client, "ottla-reassign-partitions",
                                             properties) as brokers:
            if args.generate:
                return _generate(client, args)
            if args.list:
                return _list(client)
            if not args.reassignment_json_file:
                return fail("--reassignment-json-file is required")
            wanted = _read_reassignment(args.reassignment_json_file)
            if args.execute:
                return _execute(brokers, wanted, args.throttle)
            if args.verify:
                return _verify(brokers, wanted, args.preserve_throttles)
            return _cancel(client, wanted)
    except (OSError, ConnectionError) as e:
        return fail(str(e))
    except (KeyError, ValueError) as e:
        return fail(f"bad JSON file: {e}")


def _generate(client: Any, args: argparse.Namespace) -> int:
    if not args.topics_to_move_json_file or not args.broker_list:
        return fail("--generate needs --topics-to-move-json-file and --broker-list")
    with open(args.topics_to_move_json_file, encoding="utf-8") as f:
        topics = [t["topic"] for t in json.load(f)["topics"]]
    brokers = [int(b) for b in args.broker_list.split(",")]
    current = _current(client, topics)
    missing = sorted(set(topics) - {t for t, _ in current})
    if missing:
        return fail(f"Topics {missing} do not exist")
    print("Current partition replica assignment")
    print(_as_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(_as_json(propose(current, brokers)))
    return 0


def _alter(client: Any, wanted: dict[tuple[str, int], list[int] | None]) -> list[str]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), replicas in sorted(wanted.items()):
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "replicas": replicas})
    response = client.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
        "timeout": REQUEST_TIMEOUT_MS, "topics": [{"name": t, "partitions": ps}
                                     for t, ps in topics.items()]})
    if response.error_code != 0:
        raise ConnectionError(f"the controller refused: {response.error_message}")
    return [f"{t.name}-{p.partition_index}: {p.error_message or p.error_code}"
            for t in response.responses for p in t.partitions if p.error_code != 0]


def _execute(brokers: BrokerConnections, wanted: Assignment, throttle: int) -> int:
    client = brokers.bootstrap
    current = _current(client, sorted({t for t, _ in wanted}))
    print("Current partition replica assignment\n")
    print(_as_json({tp: r for tp, r in current.items() if tp in wanted}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        _set_throttles(brokers, current, wanted, throttle)
    errors = _alter(client, dict(wanted))
    if errors:
        return fail("Error reassigning partition(s):\n" + "\n".join(errors))
    print("Successfully started partition reassignments for "
          + ",".join(f"{t}-{p}" for t, p in sorted(wanted)))
    return 0


def _in_progress(client: Any) -> dict[tuple[str, int], Any]:
    """The reassignments in progress. A retriable error (the controller moving, a
    forward timing out) is retried until the request timeout, as Kafka's Admin does;
    any other stops the tool: an answer without the list is not an empty list."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_MS / 1000
    backoff = RETRY_BACKOFF_S
    while True:
        response = client.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                                  {"timeout": REQUEST_TIMEOUT_MS, "topics": None})
        code = ErrorCode(response.error_code)
        if code == ErrorCode.none:
            return {(t.name, p.partition_index): p
                    for t in response.topics for p in t.partitions}
        if not code.retriable or time.monotonic() + backoff > deadline:
            raise ConnectionError(f"listing the partition reassignments failed: "
                                  f"{response.error_message or code.name}")
        time.sleep(backoff)
        backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)


def _verify(brokers: BrokerConnections, wanted: Assignment, preserve_throttles: bool
            ) -> int:
    client = brokers.bootstrap
    moving = _in_progress(client)
    current = _current(client, sorted({t for t, _ in wanted}))
    print("Status of partition reassignment:")
    done = True
    for (topic, partition), target in sorted(wanted.items()):
        name = f"{topic}-{partition}"
        if (topic, partition) in moving:
            done = False
            print(f"Reassignment of partition {name} is still in progress.")
        elif current.get((topic, partition)) == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{current.get((topic, partition))} rather than {target}.")
    if done and not preserve_throttles:
        _clear_throttles(brokers, sorted({t for t, _ in wanted}))
    return 0


LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1


def throttled_replicas(current: Assignment, wanted: Assignment
                       ) -> dict[str, tuple[str, str]]:
    """Per topic, Kafka's leader and follower throttle lists for the partitions that
    move: every current replica may send (``p:b`` as a leader), every new one fetches."""
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    for (topic, partition), target in wanted.items():
        sources = current.get((topic, partition), [])
        if sources == target:
            continue
        leaders.setdefault(topic, set()).update((partition, b) for b in sources)
        followers.setdefault(topic, set()).update(
            (partition, b) for b in target if b not in sources)
    return {topic: (",".join(f"{p}:{b}" for p, b in sorted(leaders[topic])),
                    ",".join(f"{p}:{b}" for p, b in sorted(followers.get(topic, ()))))
            for topic in leaders}


def _alter_configs(brokers: BrokerConnections, resources: list[dict[str, Any]]) -> None:
    """IncrementalAlterConfigs: the topics' in one request to any broker, each broker's
    own to that broker, as Kafka's Admin splits them."""
    groups: dict[int, tuple[Any, list[dict[str, Any]]]] = {}
    for resource in resources:
        client = brokers.to_broker(resource["resource_name"]) \
            if resource["resource_type"] == BROKER_RESOURCE else brokers.bootstrap
        groups.setdefault(id(client), (client, []))[1].append(resource)
    errors = []
    for client, group in groups.values():
        response = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
                                  {"resources": group, "validate_only": False})
        errors += [f"{r.resource_name}: {r.error_message or r.error_code}"
                   for r in response.responses if r.error_code != 0]
    if errors:
        raise ConnectionError("setting throttles failed: " + "; ".join(errors))


def _set_throttles(brokers: BrokerConnections, current: Assignment, wanted: Assignment,
                   rate: int) -> None:
    lists = throttled_replicas(current, wanted)
    moving = sorted({b for tp, target in wanted.items() if current.get(tp) != target
                     for b in (*current.get(tp, []), *target)})
    _alter_configs(brokers, [
        {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [
            {"name": LEADER_REPLICAS, "config_operation": SET, "value": leaders},
            {"name": FOLLOWER_REPLICAS, "config_operation": SET, "value": followers}]}
        for topic, (leaders, followers) in sorted(lists.items())] + [
        {"resource_type": BROKER_RESOURCE, "resource_name": str(b), "configs": [
            {"name": name, "config_operation": SET, "value": str(rate)}
            for name in BROKER_RATES]} for b in moving])
    print("Warning: You must run --verify periodically, until the reassignment completes, "
          "to ensure the throttle is removed.")
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def _clear_throttles(brokers: BrokerConnections, topics: list[str]) -> None:
    cluster = brokers.bootstrap.request(ApiKey.DESCRIBE_CLUSTER, 0, {
        "include_cluster_authorized_operations": False})
    broker_ids = sorted(b.broker_id for b in cluster.brokers)
    _alter_configs(brokers, [
        {"resource_type": BROKER_RESOURCE, "resource_name": str(b), "configs": [
            {"name": name, "config_operation": DELETE, "value": None}
            for name in BROKER_RATES]} for b in broker_ids] + [
        {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [
            {"name": name, "config_operation": DELETE, "value": None}
            for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS)]} for topic in topics])
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, broker_ids))}")
    for topic in topics:
        print(f"Clearing topic-level throttles on topic {topic}")


def _list(client: Any) -> int:
    moving = _in_progress(client)
    if not moving:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (topic, partition), p in sorted(moving.items()):
        print(f"{topic}-{partition}: replicas: {','.join(map(str, p.replicas))}. "
              f"adding: {','.join(map(str, p.adding_replicas))}. "
              f"removing: {','.join(map(str, p.removing_replicas))}.")
    return 0


def _cancel(client: Any, wanted: Assignment) -> int:
    errors = _alter(client, dict.fromkeys(wanted))
    if errors:
        return fail("Error cancelling partition reassignment(s):\n" + "\n".join(errors))
    print("Successfully cancelled partition reassignments for: "
          + ",".join(f"{t}-{p}" for t, p in sorted(wanted)))
    return 0
