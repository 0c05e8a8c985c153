"""Consumer groups as ``ottla consumer-groups`` shows them: the list with state and
type, and per group its members, their assignment and the lag of every partition
(committed offset against log end, the CLI's own ``lag_rows``); offsets reset with the
CLI's ``reset_offsets`` and its choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ottla.cli.consumer_groups import LagRow, _state_name, lag_rows, reset_offsets
from ottla.cli.web_console.connection import TIMEOUT, Connection, ConsoleError, failing

if TYPE_CHECKING:
    from confluent_kafka.admin import ConsumerGroupDescription

RESET_CHOICES = ("to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by")
"""The CLI's scenarios a page offers (--to-current changes nothing)."""


@dataclass
class GroupSummary:
    group_id: str
    state: str
    type: str


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: list[str]


@dataclass
class GroupDetail:
    group_id: str
    state: str
    coordinator: str
    assignor: str
    members: list[Member]
    lag: list[LagRow]

    @property
    def total_lag(self) -> int:
        return sum(row.lag or 0 for row in self.lag)


def list_groups(connection: Connection) -> list[GroupSummary]:
    with failing("Listing groups failed"):
        listed = connection.admin().list_consumer_groups(request_timeout=TIMEOUT).result(
            TIMEOUT)
    return [GroupSummary(g.group_id, _state_name(g.state), g.type.name.lower())
            for g in sorted(listed.valid, key=lambda g: g.group_id)]


def describe(connection: Connection, group: str) -> GroupDetail:
    connection.check_reachable()
    try:
        desc, lag = _describe(connection, group)
    except ConsoleError as e:
        if e.status != 503:
            raise
        connection.renew_admin()
        desc, lag = _describe(connection, group)
    members = [Member(m.member_id, m.client_id, m.host,
                      [f"{tp.topic}-{tp.partition}" for tp in
                       (m.assignment.topic_partitions if m.assignment else [])])
               for m in desc.members]
    coordinator = f"{desc.coordinator.host}:{desc.coordinator.port} " \
        f"(id: {desc.coordinator.id})" if desc.coordinator is not None else "-"
    return GroupDetail(group, _state_name(desc.state), coordinator,
                       desc.partition_assignor or "", members, lag)


def _describe(connection: Connection, group: str) -> tuple[ConsumerGroupDescription,
                                                            list[LagRow]]:
    admin = connection.admin()
    with failing(f"Group '{group}' could not be described"):
        desc = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(
            TIMEOUT)
        return desc, lag_rows(admin, connection.conf, group, desc, TIMEOUT)


def reset(connection: Connection, group: str, scenario: str, value: int | None
          ) -> dict[tuple[str, int], int]:
    """Reset every partition the group has committed, as ``--reset-offsets --all-topics
    --execute`` would; Kafka refuses it while the group has members."""
    if scenario not in RESET_CHOICES:
        raise ConsoleError(f"Unknown reset choice {scenario!r}.")
    detail = describe(connection, group)
    if detail.members:
        raise ConsoleError(f"Assignments can only be reset if the group '{group}' is "
                           f"inactive, but the current state is {detail.state}.")
    with failing(f"Resetting offsets of '{group}' failed"):
        return reset_offsets(connection.admin(), connection.conf, group, None, scenario,
                             value, execute=True, timeout=TIMEOUT)
