"""TimelineObject, TimelineInteger and TimelineLong: one reversible value."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ottla.timeline.registry import LATEST, SnapshotRegistry

T = TypeVar("T")
_VALUE = "value"  # the one key of this structure's deltas


class TimelineObject(Generic[T]):
    """A value with a history: ``get(epoch)`` reads it as of a snapshot."""

    def __init__(self, registry: SnapshotRegistry, initial: T) -> None:
        self._registry = registry
        self._initial = initial
        self._value = initial
        registry.register(self)

    def get(self, epoch: int = LATEST) -> T:
        for snapshot in self._registry.since(epoch):
            saved = snapshot.saved(self)
            if saved:
                return saved[_VALUE]
        return self._value

    def set(self, value: T) -> None:
        snapshot = self._registry.latest()
        if snapshot is not None:
            snapshot.delta_for(self).setdefault(_VALUE, self._value)
        self._value = value

    def revert(self, delta: dict[Any, Any]) -> None:
        if _VALUE in delta:
            self._value = delta[_VALUE]

    def reset(self) -> None:
        self._value = self._initial

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value!r})"


class TimelineInteger(TimelineObject[int]):
    def __init__(self, registry: SnapshotRegistry, initial: int = 0) -> None:
        super().__init__(registry, initial)

    def increment(self, by: int = 1) -> int:
        self.set(self._value + by)
        return self._value

    def decrement(self, by: int = 1) -> int:
        return self.increment(-by)


class TimelineLong(TimelineInteger):
    """Kafka's 64-bit sibling; Python ints need no separate type beyond the name."""
