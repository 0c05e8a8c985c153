"""The groups of one shard, of every kind, by id.

Group ids are one namespace across kinds (a consumer group may take over an empty classic
group's id, keeping its offsets), so the kinds' managers share this one store instead of
each keeping a dict; each asks for the kind it serves with ``classic``, ``consumer`` or ``share``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ottla.coordinator.group.classic import ClassicGroup
from ottla.coordinator.group.consumer_group import ConsumerGroup
from ottla.coordinator.group.share_group import ShareGroup

Group = ClassicGroup | ConsumerGroup | ShareGroup


class GroupStore(Mapping[str, Group]):
    def __init__(self) -> None:
        self._groups: dict[str, Group] = {}

    def __getitem__(self, group_id: str) -> Group:
        return self._groups[group_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._groups

    def put(self, group: Group) -> None:
        """Add ``group``, replacing any group of any kind with its id."""
        self._groups[group.group_id] = group

    def remove(self, group_id: str) -> None:
        del self._groups[group_id]

    def classic(self, group_id: str) -> ClassicGroup | None:
        group = self._groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def consumer(self, group_id: str) -> ConsumerGroup | None:
        group = self._groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def share(self, group_id: str) -> ShareGroup | None:
        group = self._groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None
