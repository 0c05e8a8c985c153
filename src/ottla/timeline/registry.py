"""SnapshotRegistry: the ordered snapshots every timeline structure of one owner shares."""

from __future__ import annotations

import bisect
import sys
import weakref
from typing import Any, Protocol

LATEST = sys.maxsize
"""The epoch that reads the current (possibly uncommitted) state."""


class Revertable(Protocol):
    def revert(self, delta: dict[Any, Any]) -> None:
        """Put back the saved values of one snapshot tier (oldest value wins)."""

    def reset(self) -> None:
        """Forget everything: the state before the first record."""


class Snapshot:
    """The state at ``epoch``, kept as the values changed since, per structure."""

    __slots__ = ("deltas", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.deltas: dict[int, tuple[Revertable, dict[Any, Any]]] = {}

    def delta_for(self, owner: Revertable) -> dict[Any, Any]:
        entry = self.deltas.get(id(owner))
        if entry is None:
            entry = self.deltas[id(owner)] = (owner, {})
        return entry[1]

    def saved(self, owner: Revertable) -> dict[Any, Any] | None:
        entry = self.deltas.get(id(owner))
        return None if entry is None else entry[1]


class SnapshotRegistry:
    """Snapshots in increasing epoch order and the structures that keep deltas in them."""

    def __init__(self) -> None:
        self._snapshots: list[Snapshot] = []
        self._epochs: list[int] = []
        # By identity: timeline maps compare by content, so a WeakSet would merge them.
        self._revertables: weakref.WeakValueDictionary[int, Any] = \
            weakref.WeakValueDictionary()

    def register(self, revertable: Revertable) -> None:
        self._revertables[id(revertable)] = revertable

    # --- creating and finding snapshots ---------------------------------------------

    def epochs(self) -> list[int]:
        return list(self._epochs)

    def has_snapshot(self, epoch: int) -> bool:
        i = bisect.bisect_left(self._epochs, epoch)
        return i < len(self._epochs) and self._epochs[i] == epoch

    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def latest(self) -> Snapshot | None:
        """Where a change made now saves the value it overwrites."""
        return self._snapshots[-1] if self._snapshots else None

    def get_or_create_snapshot(self, epoch: int) -> Snapshot:
        """The snapshot at ``epoch``; epochs only grow, so a smaller one is an error."""
        if self._epochs and epoch <= self._epochs[-1]:
            if epoch == self._epochs[-1]:
                return self._snapshots[-1]
            raise ValueError(f"cannot create a snapshot at epoch {epoch}: the latest is "
                             f"{self._epochs[-1]}")
        snapshot = Snapshot(epoch)
        self._snapshots.append(snapshot)
        self._epochs.append(epoch)
        return snapshot

    def idempotent_create_snapshot(self, epoch: int) -> None:
        """Create the snapshot unless it is already the latest one."""
        self.get_or_create_snapshot(epoch)

    def since(self, epoch: int) -> list[Snapshot]:
        """Snapshots at ``epoch`` and later, oldest first: the tiers a read at ``epoch``
        consults before the current state."""
        if epoch == LATEST:
            return []
        i = bisect.bisect_left(self._epochs, epoch)
        if i == len(self._epochs) or self._epochs[i] != epoch:
            raise KeyError(f"no snapshot at epoch {epoch}; have {self._epochs}")
        return self._snapshots[i:]

    # --- reverting and forgetting ---------------------------------------------------

    def revert_to_snapshot(self, epoch: int) -> None:
        """Make the current state the state at ``epoch`` and drop every later snapshot."""
        tiers = self.since(epoch)
        for snapshot in reversed(tiers):  # latest first, so the oldest saved value wins
            for owner, delta in snapshot.deltas.values():
                owner.revert(delta)
        tiers[0].deltas.clear()
        i = len(self._snapshots) - len(tiers) + 1
        del self._snapshots[i:]
        del self._epochs[i:]

    def delete_snapshot(self, epoch: int) -> None:
        """Forget one snapshot; reads at the previous one still see the right values."""
        i = bisect.bisect_left(self._epochs, epoch)
        if i == len(self._epochs) or self._epochs[i] != epoch:
            raise KeyError(f"no snapshot at epoch {epoch}")
        gone = self._snapshots.pop(i)
        self._epochs.pop(i)
        if i == 0:
            return  # nothing older reads through it
        previous = self._snapshots[i - 1]
        for owner, delta in gone.deltas.values():
            # A key unchanged between the previous snapshot and this one had, at the
            # previous epoch, the value saved here.
            target = previous.delta_for(owner)
            for key, value in delta.items():
                target.setdefault(key, value)

    def delete_snapshots_up_to(self, epoch: int) -> None:
        """Forget every snapshot older than ``epoch`` (they can no longer be reverted to:
        the log is committed past them)."""
        i = bisect.bisect_left(self._epochs, epoch)
        del self._snapshots[:i]
        del self._epochs[:i]

    def reset(self) -> None:
        """Drop all snapshots and empty every structure (before loading a log snapshot)."""
        self._snapshots.clear()
        self._epochs.clear()
        for revertable in list(self._revertables.values()):
            revertable.reset()
