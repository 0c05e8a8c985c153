"""``ottla reassign-partitions``: move partitions between brokers
(kafka-reassign-partitions.sh), with Kafka's JSON files.

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: print the current
  assignment and a proposed one spreading the topics' replicas over the brokers.
- ``--execute --reassignment-json-file F``: print the current assignment (for a
  rollback), then start the moves (AlterPartitionReassignments).
- ``--verify --reassignment-json-file F``: whether each move is completed or in progress.
- ``--list``: the moves in progress; ``--cancel --reassignment-json-file F``: cancel them.

Files: ``{"version": 1, "topics": [{"topic": "t"}]}`` to move, and
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ottla.cli.common import connect, fail
from ottla.protocol.api import ApiKey

Assignment = dict[tuple[str, int], list[int]]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reassign-partitions", help="move partitions between brokers "
                       "(kafka-reassign-partitions.sh)")
    p.add_argument("--bootstrap-server", required=True)
    actions = p.add_mutually_exclusive_group(required=True)
    for action in ("generate", "execute", "verify", "list", "cancel"):
        actions.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topics-to-move-json-file", help="with --generate")
    p.add_argument("--broker-list", help="with --generate: the brokers to spread over")
    p.add_argument("--reassignment-json-file", help="with --execute, --verify, --cancel")
    p.add_argument("--throttle", type=int, default=-1,
                   help="replication throttle in bytes/s (not enforced yet: refused)")
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
    if args.throttle >= 0:
        return fail("--throttle is not supported yet: replication is not rate-limited")
    try:
        with connect(args.bootstrap_server, "ottla-reassign-partitions") as client:
            if args.generate:
                return _generate(client, args)
            if args.list:
                return _list(client)
            if not args.reassignment_json_file:
                return fail("--reassignment-json-file is required")
            wanted = _read_reassignment(args.reassignment_json_file)
            if args.execute:
                return _execute(client, wanted)
            if args.verify:
                return _verify(client, wanted)
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
        "timeout": 60000, "topics": [{"name": t, "partitions": ps}
                                     for t, ps in topics.items()]})
    if response.error_code != 0:
        raise ConnectionError(f"the controller refused: {response.error_message}")
    return [f"{t.name}-{p.partition_index}: {p.error_message or p.error_code}"
            for t in response.responses for p in t.partitions if p.error_code != 0]


def _execute(client: Any, wanted: Assignment) -> int:
    current = _current(client, sorted({t for t, _ in wanted}))
    print("Current partition replica assignment\n")
    print(_as_json({tp: r for tp, r in current.items() if tp in wanted}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    errors = _alter(client, dict(wanted))
    if errors:
        return fail("Error reassigning partition(s):\n" + "\n".join(errors))
    print("Successfully started partition reassignments for "
          + ",".join(f"{t}-{p}" for t, p in sorted(wanted)))
    return 0


def _in_progress(client: Any) -> dict[tuple[str, int], Any]:
    response = client.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                              {"timeout": 60000, "topics": None})
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def _verify(client: Any, wanted: Assignment) -> int:
    moving = _in_progress(client)
    current = _current(client, sorted({t for t, _ in wanted}))
    print("Status of partition reassignment:")
    for (topic, partition), target in sorted(wanted.items()):
        name = f"{topic}-{partition}"
        if (topic, partition) in moving:
            print(f"Reassignment of partition {name} is still in progress.")
        elif current.get((topic, partition)) == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{current.get((topic, partition))} rather than {target}.")
    return 0


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
