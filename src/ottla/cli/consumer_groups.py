"""``ottla consumer-groups``: kafka-consumer-groups.sh with Kafka's flags.

List, describe (offsets and lag, members, state), delete groups, delete offsets, and
reset offsets (--to-earliest/--to-latest/--to-offset/--to-datetime/--shift-by/
--to-current, --dry-run or --execute) of inactive groups.
"""

from __future__ import annotations

import argparse
import datetime
from typing import Any, NamedTuple

from ottla.cli.common import client_config, connect, fail, read_command_config
from ottla.protocol.errors import ErrorCode

TIMEOUT = 30.0
RESET_SCENARIOS = ("to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by",
                   "to_current")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, delete and reset consumer "
                       "groups (kafka-consumer-groups.sh)")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config", help="a file of client properties")
    actions = p.add_mutually_exclusive_group(required=True)
    for flag in ("--list", "--describe", "--delete", "--delete-offsets", "--reset-offsets"):
        actions.add_argument(flag, action="store_true")
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--topic", action="append", default=[],
                   help="TOPIC or TOPIC:P,P,... (reset and delete-offsets)")
    p.add_argument("--all-topics", action="store_true")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="with --list: filter by states; with --describe: show the state")
    p.add_argument("--type", nargs="?", const="", default=None, help="filter --list by type")
    p.add_argument("--members", action="store_true")
    p.add_argument("--offsets", action="store_true")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-current", action="store_true")
    p.add_argument("--to-offset", type=int)
    p.add_argument("--shift-by", type=int)
    p.add_argument("--to-datetime")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--execute", action="store_true")
    p.set_defaults(run=run)


def _conf(args: argparse.Namespace) -> dict[str, Any]:
    return client_config(args.bootstrap_server, read_command_config(args.command_config))


def _table(rows: list[list[Any]], header: list[str]) -> None:
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def run(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(args))
    if args.list:
        return _list(admin, args)
    groups = list(args.group)
    if args.all_groups:
        groups = [g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid]
    if not groups:
        return fail("Option [--group] or [--all-groups] is required.")
    if args.describe:
        return _describe(admin, args, groups)
    if args.delete:
        return _delete(admin, groups)
    if args.delete_offsets:
        return _delete_offsets(args, groups)
    return _reset(admin, args, groups)


def _list(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    kwargs: dict[str, Any] = {}
    if args.state:
        by_name = {_state_name(s).lower(): s for s in ConsumerGroupState}
        wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        unknown = wanted - set(by_name)
        if unknown:
            return fail(f"Invalid state list '{args.state}'. Valid states are: "
                        f"{', '.join(sorted(_state_name(s) for s in ConsumerGroupState))}")
        kwargs["states"] = {by_name[s] for s in wanted}
    if args.type:
        wanted_types = {t.strip().upper() for t in args.type.split(",") if t.strip()}
        kwargs["types"] = {ConsumerGroupType[t] for t in wanted_types}
    listed = admin.list_consumer_groups(**kwargs).result(TIMEOUT)
    groups = sorted(listed.valid, key=lambda g: g.group_id)
    if args.state is None and args.type is None:
        for g in groups:
            print(g.group_id)
        return 0
    _table([[g.group_id, _state_name(g.state), g.type.name.lower()] for g in groups],
           ["GROUP", "STATE", "TYPE"])
    return 0


def _state_name(state: Any) -> str:
    names = {"PREPARING_REBALANCING": "PreparingRebalance",
             "COMPLETING_REBALANCING": "CompletingRebalance"}
    return names.get(state.name, state.name.title())


def _describe(admin: Any, args: argparse.Namespace, groups: list[str]) -> int:
    from confluent_kafka import KafkaException

    status = 0
    descriptions = admin.describe_consumer_groups(groups)
    for group, future in descriptions.items():
        try:
            desc = future.result(TIMEOUT)
        except KafkaException as e:
            print(f"Error: Consumer group '{group}' could not be described: {e}")
            status = 1
            continue
        if args.state is not None:
            _table([[group, desc.coordinator.host + ":" + str(desc.coordinator.port),
                     desc.partition_assignor or "", _state_name(desc.state),
                     len(desc.members)]],
                   ["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"])
        elif args.members:
            header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            if args.verbose:
                header.append("ASSIGNMENT")
            rows = []
            for m in desc.members:
                parts = m.assignment.topic_partitions if m.assignment else []
                row = [group, m.member_id, m.host, m.client_id, len(parts)]
                if args.verbose:
                    row.append(",".join(f"{tp.topic}({tp.partition})" for tp in parts) or "-")
                rows.append(row)
            if not rows:
                print(f"Consumer group '{group}' has no active members.")
            _table(rows, header)
        else:
            _describe_offsets(admin, args, group, desc)
        print()
    return status


class LagRow(NamedTuple):
    """One partition of a group as ``--describe`` prints it: the committed offset, the
    log end, their difference and the member it is assigned to (None: none)."""

    topic: str
    partition: int
    current: int | None
    end: int | None
    lag: int | None
    member_id: str | None
    host: str | None
    client_id: str | None


def lag_rows(admin: Any, conf: dict[str, Any], group: str, desc: Any,
             timeout: float = TIMEOUT) -> list[LagRow]:
    """Committed offsets against log-end offsets for every partition the group has an
    offset for or is assigned (Kafka's ConsumerGroupCommand.collectGroupOffsets)."""
    owners = {}
    for m in desc.members:
        for tp in (m.assignment.topic_partitions if m.assignment else []):
            owners[(tp.topic, tp.partition)] = m
    committed = committed_offsets(admin, group, timeout)
    keys = sorted(set(committed) | set(owners))
    ends = watermarks(conf, keys, timeout)
    rows = []
    for key in keys:
        current = committed.get(key)
        end = ends.get(key, (None, None))[1]
        lag = end - current if current is not None and end is not None else None
        m = owners.get(key)
        rows.append(LagRow(key[0], key[1], current, end, lag,
                           m.member_id if m else None, m.host if m else None,
                           m.client_id if m else None))
    return rows


def _describe_offsets(admin: Any, args: argparse.Namespace, group: str, desc: Any) -> None:
    rows = lag_rows(admin, _conf(args), group, desc)
    if not desc.members:
        print(f"Consumer group '{group}' has no active members.")
    _table([[group, *row] for row in rows],
           ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID"])


def committed_offsets(admin: Any, group: str, timeout: float = TIMEOUT
                      ) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                               request_timeout=timeout)
    listed = result[group].result(timeout)
    return {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions
            if tp.offset >= 0}


def watermarks(conf: dict[str, Any], keys: list[tuple[str, int]], timeout: float = TIMEOUT
               ) -> dict[tuple[str, int], tuple[int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(conf | {"group.id": "ottla-consumer-groups-tool",
                                "enable.auto.commit": False})
    try:
        return {key: consumer.get_watermark_offsets(TopicPartition(*key), timeout=timeout)
                for key in keys}
    finally:
        consumer.close()


def _delete(admin: Any, groups: list[str]) -> int:
    from confluent_kafka import KafkaException

    failed = {}
    for group, future in admin.delete_consumer_groups(groups).items():
        try:
            future.result(TIMEOUT)
        except KafkaException as e:
            failed[group] = e.args[0].str()
    done = [g for g in groups if g not in failed]
    if done:
        names = ", ".join(f"'{g}'" for g in done)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    for group, error in failed.items():
        print(f"Error: Deletion of some consumer groups failed:\n* Group '{group}' could not "
              f"be deleted due to: {error}")
    return 1 if failed else 0


def _topic_partitions(args: argparse.Namespace, known: dict[str, int]
                      ) -> list[tuple[str, int]]:
    result = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if name not in known:
            raise SystemExit(f"Error: Topic '{name}' does not exist.")
        indexes = [int(p) for p in parts.split(",") if p] if parts else range(known[name])
        result.extend((name, p) for p in indexes)
    return result


def _delete_offsets(args: argparse.Namespace, groups: list[str]) -> int:
    from ottla.protocol.api import ApiKey

    if len(groups) != 1 or not args.topic:
        return fail("Option [--delete-offsets] takes exactly one [--group] and [--topic].")
    group = groups[0]
    from confluent_kafka.admin import AdminClient

    topics = AdminClient(_conf(args)).list_topics(timeout=TIMEOUT).topics
    partitions = _topic_partitions(args, {n: len(t.partitions) for n, t in topics.items()})
    properties = read_command_config(args.command_config)
    with connect(args.bootstrap_server, "ottla-consumer-groups", properties) as client:
        found = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if found.error_code != ErrorCode.none:
            return fail(f"Could not find the coordinator of group '{group}': "
                        f"{ErrorCode(found.error_code).name}")
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    with connect(f"{found.host}:{found.port}", "ottla-consumer-groups",
                 properties) as coordinator:
        response = coordinator.request(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]}
            for t, ps in by_topic.items()]})
    if response.error_code != ErrorCode.none:
        return fail(f"Deleting offsets of group '{group}' failed: "
                    f"{ErrorCode(response.error_code).name}")
    rows = [[t.name, p.partition_index,
             "Successful" if p.error_code == 0 else f"Error: {ErrorCode(p.error_code).name}"]
            for t in response.topics for p in t.partitions]
    print(f"Request succeed for deleting offsets from group {group}.")
    _table(rows, ["TOPIC", "PARTITION", "STATUS"])
    return 1 if any(r[2] != "Successful" for r in rows) else 0


def _reset(admin: Any, args: argparse.Namespace, groups: list[str]) -> int:
    scenarios = [s for s in RESET_SCENARIOS if getattr(args, s) not in (None, False)]
    if len(scenarios) != 1:
        return fail("Option [--reset-offsets] needs exactly one of --to-earliest, "
                    "--to-latest, --to-current, --to-offset, --shift-by, --to-datetime.")
    if not args.topic and not args.all_topics:
        return fail("Option [--reset-offsets] needs [--topic] or [--all-topics].")
    if not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.")
    scenario = scenarios[0]
    value = getattr(args, scenario)
    if scenario == "to_datetime":
        value = _parse_datetime(value)
    topics = admin.list_topics(timeout=TIMEOUT).topics
    known = {n: len(t.partitions) for n, t in topics.items()}
    status = 0
    for group, future in admin.describe_consumer_groups(groups).items():
        desc = future.result(TIMEOUT)
        if desc.members:
            print(f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                  f"but the current state is {_state_name(desc.state)}.")
            status = 1
            continue
        keys = None if args.all_topics else _topic_partitions(args, known)
        new = reset_offsets(admin, _conf(args), group, keys, scenario, value,
                            execute=args.execute)
        _table([[group, t, p, o] for (t, p), o in sorted(new.items())],
               ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])
    return status


def reset_offsets(admin: Any, conf: dict[str, Any], group: str,
                  keys: list[tuple[str, int]] | None, scenario: str, value: int | None,
                  *, execute: bool, timeout: float = TIMEOUT) -> dict[tuple[str, int], int]:
    """The new offset of each partition (``keys``; None: those the group has committed)
    under one of ``RESET_SCENARIOS``, clamped to the log as Kafka clamps it; ``value`` is
    the offset, shift or epoch milliseconds the scenario takes. With ``execute`` they are
    committed (the group must be inactive, as Kafka requires)."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

    committed = committed_offsets(admin, group, timeout)
    keys = sorted(committed) if keys is None else keys
    marks = watermarks(conf, keys, timeout)
    times: dict[tuple[str, int], int] = {}
    if scenario == "to_datetime":
        probe = Consumer(conf | {"group.id": "ottla-consumer-groups-tool"})
        try:
            found = probe.offsets_for_times([TopicPartition(t, p, value) for t, p in keys],
                                            timeout=timeout)
        finally:
            probe.close()
        times = {(tp.topic, tp.partition): tp.offset for tp in found}
    new: dict[tuple[str, int], int] = {}
    for key in keys:
        low, high = marks[key]
        current = committed.get(key, low)
        if scenario == "to_datetime":
            target = times.get(key, -1)
            target = high if target < 0 else target  # nothing that late: the end
        else:
            target = {"to_earliest": low, "to_latest": high, "to_current": current,
                      "to_offset": value, "shift_by": current + (value or 0)}[scenario]
        new[key] = min(max(target, low), high)
    if execute and new:
        result = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in new.items()])],
            request_timeout=timeout)
        result[group].result(timeout)
    return new


def _parse_datetime(text: str) -> int:
    """Kafka's YYYY-MM-DDTHH:mm:SS.sss with an optional zone (default: local time)."""
    value = datetime.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.astimezone()
    return int(value.timestamp() * 1000)
