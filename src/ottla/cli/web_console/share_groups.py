"""Share groups (KIP-932) as ``ottla share-groups`` shows them: the list with states, and
per group its members, their assignment and each share-partition's start offset and lag;
start offsets reset as ``--reset-offsets --all-topics --execute`` resets them.
confluent-kafka's AdminClient has no share-group calls, so this is the CLI's own
ShareGroups over the wire protocol."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from ottla.cli.share_groups import Member, ShareGroups
from ottla.cli.transactions import Cluster, ToolError
from ottla.cli.web_console.connection import TIMEOUT, Connection, ConsoleError

T = TypeVar("T")


@dataclass
class ShareOffset:
    topic: str
    partition: int
    start_offset: int
    lag: int
    """-1: not known (as kafka-share-groups.sh prints "-")."""


@dataclass
class ShareGroupDetail:
    group_id: str
    state: str
    coordinator: str
    group_epoch: int
    assignment_epoch: int
    members: list[Member]
    offsets: list[ShareOffset]


@contextmanager
def _tool(connection: Connection, what: str) -> Iterator[ShareGroups]:
    try:
        with Cluster(connection.bootstrap, connection.properties) as cluster:
            yield ShareGroups(cluster, TIMEOUT)
    except (ToolError, OSError, ConnectionError) as e:
        raise ConsoleError(f"{what}: {e}", 400 if isinstance(e, ToolError) else 503) from e
    except SystemExit as e:  # the tools' connect() ends them on an authentication error
        raise ConsoleError(f"{what}: {str(e.code).removeprefix('error: ')}") from e


def _ask(connection: Connection, what: str, fn: Callable[[ShareGroups], T]) -> T:
    with _tool(connection, what) as tool:
        return fn(tool)


def list_groups(connection: Connection) -> list[tuple[str, str]]:
    """(group id, state) of every share group."""
    return _ask(connection, "Listing share groups failed", lambda t: t.listings())


def describe(connection: Connection, group: str) -> ShareGroupDetail:
    def read(tool: ShareGroups) -> ShareGroupDetail:
        desc = tool.describe_group(group)
        if desc.state == "Dead":
            raise ConsoleError(f"Share group '{group}' does not exist.")
        offsets = [ShareOffset(t, p, start, lag) for (t, p), (start, _, lag)
                   in sorted(tool.start_offsets(group).items())]
        return ShareGroupDetail(group, desc.state, desc.coordinator, desc.group_epoch,
                                desc.assignment_epoch, desc.members, offsets)
    return _ask(connection, f"Share group '{group}' could not be described", read)


RESET_CHOICES = ("to_earliest", "to_latest", "to_datetime")
"""kafka-share-groups.sh's reset scenarios."""


def reset(connection: Connection, group: str, scenario: str, timestamp: int | None
          ) -> dict[tuple[str, int], int]:
    """Reset the start offset of every share-partition the group has, as the CLI does;
    Kafka refuses it while the group has members."""
    if scenario not in RESET_CHOICES:
        raise ConsoleError(f"Unknown reset choice {scenario!r}.")
    return _ask(connection, f"Resetting offsets of share group '{group}' failed",
                lambda t: t.reset(group, None, scenario.removeprefix("to_"), timestamp))
