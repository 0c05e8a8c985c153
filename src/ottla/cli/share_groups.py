"""``ottla share-groups``: kafka-share-groups.sh, with Kafka's flags and output.

- ``--list [--state [STATES]]``: the share groups (ListGroups of type share, to every
  broker), with their states if asked.
- ``--describe --group G|--all-groups [--offsets|--members|--state] [--verbose]``: the
  start offset and lag of each share-partition (the default), the members and their
  assignments, or the group's state and coordinator.
- ``--reset-offsets --group G --topic T[:P,...]|--all-topics --to-earliest|--to-latest|
  --to-datetime DT --dry-run|--execute``: new start offsets for an empty (or new) group.
- ``--delete --group G|--all-groups``: delete empty share groups.
- ``--delete-offsets --group G --topic T``: delete an empty group's offsets of topics.

confluent-kafka's AdminClient has no share-group calls, so the tool speaks the wire
protocol as Kafka's Admin client does: ListGroups to every broker, the group APIs to the
group's coordinator, ListOffsets to the partitions' leaders.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

from ottla.cli.consumer_groups import _parse_datetime
from ottla.cli.transactions import Cluster, Retry, ToolError, retrying
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode

GROUP_KEY = 0
EARLIEST, LATEST = -2, -1
SHARE_STATES = ("Dead", "Empty", "Stable")
_RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
              ErrorCode.not_coordinator, ErrorCode.not_leader_or_follower,
              ErrorCode.leader_not_available, ErrorCode.unknown_leader_epoch}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("share-groups", help="list, describe, reset and delete share groups "
                       "(kafka-share-groups.sh)",
                       description="This tool helps to list, describe, reset and delete "
                                   "share groups.")
    p.add_argument("--bootstrap-server", required=True,
                   help="REQUIRED: The server(s) to connect to.")
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="List all share groups.")
    actions.add_argument("--describe", action="store_true",
                         help="Describe share group, members and offset information.")
    actions.add_argument("--delete", action="store_true", help="Delete share group.")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="Reset offsets of share group (instances must be inactive).")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="Delete offsets of share group.")
    p.add_argument("--group", action="append", default=[],
                   help="The share group we wish to act on.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all share groups.")
    p.add_argument("--topic", action="append", default=[],
                   help="The topic whose offset information should be deleted or included "
                        "in the reset offset process ('topic1:0,1,2' for partitions).")
    p.add_argument("--all-topics", action="store_true",
                   help="Consider all topics assigned to a share group in the "
                        "'reset-offsets' process.")
    p.add_argument("--members", action="store_true", help="Describe members of the group.")
    p.add_argument("--offsets", action="store_true",
                   help="Describe the group's share-partitions and their offsets (default).")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="With --describe, the state of the group; with --list, the groups "
                        "in these states (Empty, Stable, Dead).")
    p.add_argument("--verbose", action="store_true",
                   help="Provide additional information when describing the group.")
    p.add_argument("--timeout", type=int, default=30000,
                   help="The timeout in milliseconds for the cluster to answer.")
    p.add_argument("--to-earliest", action="store_true",
                   help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-datetime", help="Reset offsets to offset from datetime. Format: "
                                         "'YYYY-MM-DDThh:mm:ss.sss'")
    p.add_argument("--dry-run", action="store_true",
                   help="Only show results without executing changes on share groups.")
    p.add_argument("--execute", action="store_true", help="Execute operation.")
    p.set_defaults(run=run)


class ResetRefused(ToolError):
    """A reset the group's state or its coordinator refuses: the tool says it as a usage
    error, as Kafka's does."""


def _usage(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def _print_error(message: str) -> None:
    """Kafka's ShareGroupCommand.printError: on standard output, after a blank line."""
    print(f"\nError: {message}")


def check_args(args: argparse.Namespace) -> str | None:
    """Kafka's ShareGroupCommandOptions.checkArgs: the message of a misuse, or None."""
    if args.describe:
        if not args.group and not args.all_groups:
            return "Option [describe] takes one of these options: [all-groups], [group]"
        if sum(map(bool, (args.members, args.offsets, args.state is not None))) > 1:
            return ("Option [describe] takes at most one of these options: [members], "
                    "[offsets], [state]")
        if args.state:
            return "Option [describe] does not take a value for [state]"
    if args.delete:
        if not args.group and not args.all_groups:
            return "Option [delete] takes the options [group] or [all-groups]"
        if args.group and args.all_groups:
            return "Option [delete] takes either [group] or [all-groups], not both."
        if args.topic:
            return "Option [delete] does not take the option: [topic]"
    if args.delete_offsets and (len(args.group) != 1 or not args.topic):
        return "Option [delete-offsets] takes the following options: [group], [topic]"
    if args.reset_offsets:
        if args.dry_run and args.execute:
            return "Option [reset-offsets] only accepts one of [execute] and [dry-run]"
        if not args.dry_run and not args.execute:
            return "Option [reset-offsets] takes the option: [execute] or [dry-run]"
        if len(args.group) != 1:
            return "Option [reset-offsets] takes the option: [group]"
        if not args.topic and not args.all_topics:
            return "Option [reset-offsets] takes one of these options: [all-topics], [topic]"
        scenarios = [args.to_earliest, args.to_latest, args.to_datetime is not None]
        if sum(scenarios) != 1:
            return ("Option [reset-offsets] takes one of these options: [to-datetime], "
                    "[to-earliest], [to-latest]")
    if args.group and args.all_groups:
        return 'Option "[group]" can\'t be used with option "[all-groups]"'
    return None


def run(args: argparse.Namespace) -> int:
    misuse = check_args(args)
    if misuse is not None:
        return _usage(misuse)
    timeout_s = args.timeout / 1000
    try:
        with Cluster(args.bootstrap_server) as cluster:
            tool = ShareGroups(cluster, timeout_s)
            if args.list:
                return tool.list_groups(args.state)
            groups = sorted(set(args.group))
            if args.all_groups:
                groups = sorted(g for g, _ in tool.listings())
            if args.describe:
                return tool.describe(groups, args)
            if args.delete:
                return tool.delete(groups)
            if args.delete_offsets:
                return tool.delete_offsets(groups[0], args.topic)
            return tool.reset_offsets(groups[0], args)
    except (ToolError, OSError) as e:
        _print_error(f"Executing share group command failed due to {e}")
        return 1


# --- the group, as ShareGroupDescribe tells ---------------------------------------------------

@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: dict[str, list[int]]


@dataclass(slots=True)
class Description:
    group_id: str
    state: str
    group_epoch: int = -1
    assignment_epoch: int = -1
    members: list[Member] = field(default_factory=list)
    coordinator: str = ""


class ShareGroups:
    def __init__(self, cluster: Cluster, timeout_s: float) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s

    def _coordinated(self, group_id: str, api: ApiKey, version: int, body: dict[str, Any],
                     error_of: Any) -> Any:
        """``api`` to the group's coordinator, asked again (the coordinator found again)
        while it answers retriably, as the admin client does."""
        def ask() -> tuple[int, Any]:
            node = self.cluster.coordinator(group_id, GROUP_KEY)
            response = self.cluster.client(node).request(api, version, body)
            error = ErrorCode(error_of(response))
            if error in _RETRIABLE:
                raise Retry(error.name)
            return node, response
        return retrying(ask, self.timeout_s)

    def listings(self, states: list[str] | None = None) -> list[tuple[str, str]]:
        """(group id, state) of every share group: ListGroups to each broker."""
        found: dict[str, str] = {}
        for node in sorted(self.cluster.brokers):
            def ask(node: int = node) -> Any:
                response = self.cluster.client(node).request(ApiKey.LIST_GROUPS, 5, {
                    "states_filter": states or [], "types_filter": ["share"]})
                if ErrorCode(response.error_code) in _RETRIABLE:
                    raise Retry(ErrorCode(response.error_code).name)
                return response
            for group in retrying(ask, self.timeout_s).groups:
                found[group.group_id] = group.group_state
        return sorted(found.items())

    def describe_group(self, group_id: str) -> Description:
        """The group as ShareGroupDescribe answers; a group that does not exist is Dead."""
        node, response = self._coordinated(
            group_id, ApiKey.SHARE_GROUP_DESCRIBE, 1,
            {"group_ids": [group_id], "include_authorized_operations": False},
            lambda r: r.groups[0].error_code)
        described = response.groups[0]
        coordinator = f"{self.cluster.brokers[node]}  ({node})"
        error = ErrorCode(described.error_code)
        if error == ErrorCode.group_id_not_found:
            return Description(group_id, "Dead", coordinator=coordinator)
        if error != ErrorCode.none:
            raise ToolError(described.error_message or error.name)
        members = [Member(m.member_id, m.client_id, m.client_host, m.member_epoch,
                          {tp.topic_name: sorted(tp.partitions)
                           for tp in m.assignment.topic_partitions})
                   for m in described.members]
        return Description(group_id, described.group_state, described.group_epoch,
                           described.assignment_epoch, members, coordinator)

    def start_offsets(self, group_id: str) -> dict[tuple[str, int], tuple[int, int, int]]:
        """(start offset, leader epoch, lag) of every share-partition the group has
        state for: DescribeShareGroupOffsets with no topics; -1 where unknown."""
        _, response = self._coordinated(
            group_id, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
            {"groups": [{"group_id": group_id, "topics": None}]},
            lambda r: r.groups[0].error_code)
        group = response.groups[0]
        if ErrorCode(group.error_code) != ErrorCode.none:
            raise ToolError(group.error_message or ErrorCode(group.error_code).name)
        return {(t.topic_name, p.partition_index):
                (p.start_offset, p.leader_epoch, p.lag) if p.error_code == 0 else (-1, -1, -1)
                for t in group.topics for p in t.partitions}

    # --- --list ---------------------------------------------------------------------------

    def list_groups(self, state: str | None) -> int:
        if state is None:
            for group_id, _ in self.listings():
                print(group_id)
            return 0
        wanted = [s.strip() for s in state.split(",") if s.strip()]
        by_name = {s.lower(): s for s in SHARE_STATES}
        if any(s.lower() not in by_name for s in wanted):
            return _usage(f"Invalid state list '{state}'. Valid states are: "
                          f"{', '.join(SHARE_STATES)}")
        listed = self.listings([by_name[s.lower()] for s in wanted])
        width = max([15, *(len(g) for g, _ in listed)])
        print(f"{'GROUP':<{width}} STATE")
        for group_id, group_state in listed:
            print(f"{group_id:<{width}} {group_state}")
        return 0

    # --- --describe -----------------------------------------------------------------------

    def describe(self, groups: list[str], args: argparse.Namespace) -> int:
        status = 0
        for group_id in groups:
            description = self.describe_group(group_id)
            if description.state == "Dead":
                status = 1
            if args.members:
                self._print_members(description, args.verbose)
            elif args.state is not None:
                self._print_state(description, args.verbose)
            elif description.state == "Dead":
                _print_error(f"Share group '{group_id}' does not exist.")
            else:
                self._print_offsets(group_id, self.start_offsets(group_id), args.verbose)
        return status

    @staticmethod
    def _note_empty(description: Description) -> bool:
        """Kafka's maybePrintEmptyGroupState: whether the group has something to show."""
        if description.state == "Dead":
            _print_error(f"Share group '{description.group_id}' does not exist.")
        elif description.state == "Empty":
            print(f"\nShare group '{description.group_id}' has no active members.",
                  file=sys.stderr)
        return description.state != "Dead"

    def _print_state(self, description: Description, verbose: bool) -> None:
        self._note_empty(description)
        group_len = max(15, len(description.group_id))
        coordinator_len = max(25, len(description.coordinator))
        head = f"{{:<{group_len}}} {{:<{coordinator_len}}} {{:<15}} "
        print()
        if verbose:
            row = head + "{:<12} {:<17} {}"
            print(row.format("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH",
                             "ASSIGNMENT-EPOCH", "#MEMBERS"))
            print(row.format(description.group_id, description.coordinator,
                             description.state, description.group_epoch,
                             description.assignment_epoch, len(description.members)))
        else:
            row = head + "{}"
            print(row.format("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"))
            print(row.format(description.group_id, description.coordinator,
                             description.state, len(description.members)))

    def _print_members(self, description: Description, verbose: bool) -> None:
        if not self._note_empty(description) or not description.members:
            return
        members = sorted(description.members, key=lambda m: m.member_id)
        widths = [max(15, len(description.group_id)),
                  max([15, *(len(m.member_id) for m in members)]),
                  max([15, *(len(m.host) for m in members)]),
                  max([15, *(len(m.client_id) for m in members)]), 12]
        headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if verbose:
            widths.append(13)
            headers.append("MEMBER-EPOCH")
        print()
        print(_row([*headers, "ASSIGNMENT"], widths))
        for m in members:
            values: list[Any] = [description.group_id, m.member_id, m.host, m.client_id,
                                 sum(len(ps) for ps in m.assignment.values())]
            if verbose:
                values.append(m.member_epoch)
            print(_row([*values, assignment_text(m.assignment)], widths))

    @staticmethod
    def _print_offsets(group_id: str, offsets: dict[tuple[str, int], tuple[int, int, int]],
                       verbose: bool) -> None:
        widths = [max(15, len(group_id)),
                  max([15, *(len(topic) for topic, _ in offsets)]), 10]
        headers = ["GROUP", "TOPIC", "PARTITION"]
        if verbose:
            widths.append(13)
            headers.append("LEADER-EPOCH")
        widths.append(13)
        print()
        print(_row([*headers, "START-OFFSET", "LAG"], widths))
        for (topic, partition), (start, epoch, lag) in sorted(offsets.items()):
            values: list[Any] = [group_id, topic, partition]
            if verbose:
                values.append(_known(epoch))
            print(_row([*values, _known(start), _known(lag)], widths))

    # --- --delete, --delete-offsets -------------------------------------------------------

    def delete(self, groups: list[str]) -> int:
        """Kafka's deleteShareGroups: groups that are not empty share groups are refused
        before asking; the rest go to DeleteGroups."""
        states = dict(self.listings())
        failed: dict[str, str] = {}
        for group_id in groups:
            state = states.get(group_id)
            if state is None:
                failed[group_id] = f"Group '{group_id}' is not a share group."
            elif state == "Dead":
                failed[group_id] = f"Share group '{group_id}' group state is DEAD."
            elif state != "Empty":
                failed[group_id] = f"Share group '{group_id}' is not EMPTY."
        done = []
        for group_id in (g for g in groups if g not in failed):
            _, response = self._coordinated(
                group_id, ApiKey.DELETE_GROUPS, 2, {"groups_names": [group_id]},
                lambda r: r.results[0].error_code)
            error = ErrorCode(response.results[0].error_code)
            if error == ErrorCode.none:
                done.append(group_id)
            else:
                failed[group_id] = error.name
        if not failed:
            print(f"Deletion of requested share groups ({_quoted(done)}) was successful.")
            return 0
        _print_error("Deletion of some share groups failed:")
        for group_id, error_text in failed.items():
            print(f"* Group '{group_id}' could not be deleted due to: {error_text}")
        if done:
            print(f"\nThese share groups were deleted successfully: {_quoted(done)}")
        return 1

    def delete_offsets(self, group_id: str, topics: list[str]) -> int:
        _, response = self._coordinated(
            group_id, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0,
            {"group_id": group_id, "topics": [{"topic_name": t} for t in sorted(set(topics))]},
            lambda r: r.error_code)
        error = ErrorCode(response.error_code)
        results: dict[str, str | None] = {}
        if error != ErrorCode.none:
            message = response.error_message or error.name
            _print_error(message)
            results = dict.fromkeys(topics, message)
        else:
            for t in response.responses:
                code = ErrorCode(t.error_code)
                results[t.topic_name] = None if code == ErrorCode.none else \
                    (t.error_message or code.name)
        width = max([15, *(len(t) for t in results)])
        print()
        print(f"{'TOPIC':<{width}} STATUS")
        for topic, problem in sorted(results.items()):
            print(f"{topic:<{width}} " +
                  ("Successful" if problem is None else f"Error: {problem}"))
        return 0 if error == ErrorCode.none and all(p is None for p in results.values()) \
            else 1

    # --- --reset-offsets ------------------------------------------------------------------

    def reset_offsets(self, group_id: str, args: argparse.Namespace) -> int:
        """Kafka's resetOffsets: --dry-run shows the new start offsets, --execute sets
        them too."""
        to = "earliest" if args.to_earliest else "latest" if args.to_latest else "datetime"
        when = _parse_datetime(args.to_datetime) if to == "datetime" else None
        try:
            offsets = self.reset(group_id, None if args.all_topics else args.topic, to, when,
                                 execute=args.execute)
        except ResetRefused as e:
            return _usage(str(e))
        self._print_reset(group_id, offsets)
        return 0

    def reset(self, group_id: str, topics: list[str] | None, to: str,
              when: int | None = None, execute: bool = True) -> dict[tuple[str, int], int]:
        """The new start offsets of the group's share-partitions (``topics`` as
        ``--topic`` takes them, or None: every partition it has a start offset for) ``to``
        "earliest", "latest" or "datetime" (``when``, epoch milliseconds), set with
        AlterShareGroupOffsets if ``execute``. The group must have no members (one that
        does not exist yet gets its offsets before its first use): ResetRefused else, and
        when the coordinator refuses."""
        description = self.describe_group(group_id)
        if description.state not in ("Empty", "Dead"):
            raise ResetRefused(f"Share group '{group_id}' is not empty.")
        if topics is None:
            partitions = sorted(self.start_offsets(group_id))
        else:
            partitions = self._parse_partitions(topics)
        self._check_partitions(partitions)
        if to == "earliest":
            offsets = self._list_offsets(partitions, EARLIEST)
        elif to == "latest":
            offsets = self._list_offsets(partitions, LATEST)
        else:
            if when is None:
                raise ResetRefused("to-datetime needs a date-time.")
            offsets = self._offsets_for_time(partitions, when)
        if execute:
            problem = self._alter(group_id, offsets)
            if problem is not None:
                raise ResetRefused(problem)
        return offsets

    def _parse_partitions(self, topics: list[str]) -> list[tuple[str, int]]:
        partitions = []
        for spec in topics:
            name, sep, indexes = spec.partition(":")
            if sep:
                try:
                    partitions.extend((name, int(p)) for p in indexes.split(","))
                except ValueError as e:
                    raise ToolError(f"Invalid topic arg '{spec}', expected topic name and "
                                    "partitions") from e
                continue
            self.cluster.refresh([name])
            found = sorted(p for t, p in self.cluster.partitions if t == name)
            if not found:
                raise ToolError("This server does not host this topic-partition.")
            partitions.extend((name, p) for p in found)
        return sorted(set(partitions))

    def _check_partitions(self, partitions: list[tuple[str, int]]) -> None:
        """Kafka's checkAllTopicPartitionsValid."""
        self.cluster.refresh(sorted({t for t, _ in partitions}))
        missing = [tp for tp in partitions if tp not in self.cluster.partitions]
        if missing:
            raise ToolError(f'The partitions "{_tp_list(missing)}" do not exist')
        leaderless = [tp for tp in partitions if self.cluster.partitions[tp].leader < 0]
        if leaderless:
            raise ToolError(f'The partitions "{_tp_list(leaderless)}" have no leader')

    def _list_offsets(self, partitions: list[tuple[str, int]], timestamp: int
                      ) -> dict[tuple[str, int], int]:
        """ListOffsets (read_uncommitted) to each partition's leader."""
        offsets: dict[tuple[str, int], int] = {}
        for tp in partitions:
            def ask(tp: tuple[str, int] = tp) -> int:
                leader = self.cluster.leader(*tp)
                response = self.cluster.client(leader).request(ApiKey.LIST_OFFSETS, 7, {
                    "replica_id": -1, "isolation_level": 0, "topics": [
                        {"name": tp[0], "partitions": [{"partition_index": tp[1],
                                                        "current_leader_epoch": -1,
                                                        "timestamp": timestamp}]}]})
                answer = response.topics[0].partitions[0]
                error = ErrorCode(answer.error_code)
                if error in _RETRIABLE:
                    raise Retry(error.name)
                if error != ErrorCode.none:
                    raise ToolError(f"{error.name} listing offsets of {tp[0]}-{tp[1]}")
                return int(answer.offset)
            offsets[tp] = retrying(ask, self.timeout_s)
        return offsets

    def _offsets_for_time(self, partitions: list[tuple[str, int]], timestamp: int
                          ) -> dict[tuple[str, int], int]:
        """The first offset at or after ``timestamp``; the log end where there is none
        (Kafka's warning)."""
        offsets = self._list_offsets(partitions, timestamp)
        empty = [tp for tp, offset in offsets.items() if offset < 0]
        for topic, partition in empty:
            print(f"\nWarn: Partition {partition} from topic {topic} is empty. Falling back "
                  "to latest known offset.")
        offsets.update(self._list_offsets(empty, LATEST))
        return offsets

    def _alter(self, group_id: str, offsets: dict[tuple[str, int], int]) -> str | None:
        """AlterShareGroupOffsets; the first error, in Kafka's words."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": partition,
                                                   "start_offset": offset})
        _, response = self._coordinated(
            group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0,
            {"group_id": group_id, "topics": [{"topic_name": t, "partitions": ps}
                                              for t, ps in by_topic.items()]},
            lambda r: r.error_code)
        error = ErrorCode(response.error_code)
        if error != ErrorCode.none:
            return response.error_message or error.name
        for t in response.responses:
            for p in t.partitions:
                if ErrorCode(p.error_code) != ErrorCode.none:
                    return p.error_message or ErrorCode(p.error_code).name
        return None

    @staticmethod
    def _print_reset(group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """Kafka's OffsetsUtils.printOffsetsToReset."""
        widths = [max(15, len(group_id)), max([15, *(len(t) for t, _ in offsets)]), 10]
        if offsets:
            print()
            print(_row(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], widths))
        for (topic, partition), offset in sorted(offsets.items()):
            print(_row([group_id, topic, partition, offset], widths))
        if not offsets:
            print()


def _row(values: list[Any], widths: list[int]) -> str:
    """Kafka's printf of ``%-Ws`` columns separated by a space, the last one as it is."""
    cells = [f"{v!s:<{w}}" for v, w in zip(values, widths, strict=False)]
    return " ".join([*cells, *map(str, values[len(widths):])])


def _known(value: int) -> str:
    return "-" if value < 0 else str(value)


def _quoted(groups: list[str]) -> str:
    return ", ".join(f"'{g}'" for g in groups)


def _tp_list(partitions: list[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in partitions)


def assignment_text(assignment: dict[str, list[int]]) -> str:
    """Kafka's getAssignmentString: ``topic:0,1;other:2``, topics sorted."""
    return ";".join(f"{topic}:{','.join(map(str, sorted(ps)))}"
                    for topic, ps in sorted(assignment.items()) if ps)
