"""TimelineHashMap and TimelineHashSet: dicts and sets readable at any snapshot.

The current tier is a plain dict; each snapshot tier saves, per key, the value the key
had when it was first changed after that snapshot (``ABSENT`` if it did not exist). A
read at epoch E walks the tiers from E forward and takes the first saved value, else
the current one, as Kafka's SnapshottableHashTable does.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, MutableMapping, MutableSet
from typing import Any, TypeVar

from ottla.timeline.registry import LATEST, SnapshotRegistry

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class TimelineHashMap(MutableMapping[K, V]):
    """A mapping whose reads default to the latest state; ``*_at`` read a snapshot."""

    def __init__(self, registry: SnapshotRegistry) -> None:
        self._registry = registry
        self._current: dict[K, V] = {}
        registry.register(self)

    # --- latest state -----------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        return self._current[key]

    def __setitem__(self, key: K, value: V) -> None:
        self._save(key)
        self._current[key] = value

    def __delitem__(self, key: K) -> None:
        if key not in self._current:
            raise KeyError(key)
        self._save(key)
        del self._current[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._current)

    def __len__(self) -> int:
        return len(self._current)

    def __contains__(self, key: object) -> bool:
        return key in self._current

    def _save(self, key: K) -> None:
        snapshot = self._registry.latest()
        if snapshot is not None:
            delta = snapshot.delta_for(self)
            if key not in delta:
                delta[key] = self._current.get(key, ABSENT)

    # --- reads at a snapshot ----------------------------------------------------------

    def get_at(self, key: K, epoch: int, default: Any = None) -> Any:
        for snapshot in self._registry.since(epoch):
            saved = snapshot.saved(self)
            if saved is not None and key in saved:
                value = saved[key]
                return default if value is ABSENT else value
        return self._current.get(key, default)

    def at(self, epoch: int) -> dict[K, V]:
        """The whole mapping as of ``epoch`` (a copy)."""
        if epoch == LATEST:
            return dict(self._current)
        state = dict(self._current)
        for snapshot in reversed(self._registry.since(epoch)):
            for key, value in (snapshot.saved(self) or {}).items():
                if value is ABSENT:
                    state.pop(key, None)
                else:
                    state[key] = value
        return state

    # --- Revertable ---------------------------------------------------------------------

    def revert(self, delta: dict[Any, Any]) -> None:
        for key, value in delta.items():
            if value is ABSENT:
                self._current.pop(key, None)
            else:
                self._current[key] = value

    def reset(self) -> None:
        self._current.clear()

    def __repr__(self) -> str:
        return f"TimelineHashMap({self._current!r})"


class TimelineHashSet(MutableSet[K]):
    """A set with the same snapshot reads, kept as a map of members to ``True``."""

    def __init__(self, registry: SnapshotRegistry) -> None:
        self._map: TimelineHashMap[K, bool] = TimelineHashMap(registry)

    def __contains__(self, item: object) -> bool:
        return item in self._map

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def add(self, item: K) -> None:
        if item not in self._map:
            self._map[item] = True

    def discard(self, item: K) -> None:
        if item in self._map:
            del self._map[item]

    def contains_at(self, item: K, epoch: int) -> bool:
        return bool(self._map.get_at(item, epoch, False))

    def at(self, epoch: int) -> set[K]:
        return set(self._map.at(epoch))

    def __repr__(self) -> str:
        return f"TimelineHashSet({set(self._map)!r})"
