"""Reversible in-memory state for the controller and the coordinators (seed 003).

A :class:`SnapshotRegistry` holds snapshots keyed by epoch (a log offset). Timeline
collections record, copy-on-write, the value each key had when it was first changed
after the latest snapshot, so a reader can see the state at any snapshot's epoch while
newer, uncommitted changes pile up, and the owner can revert to a snapshot to throw
them away (a controller renouncing leadership, an aborted metadata transaction).
"""

from ottla.timeline.registry import LATEST, SnapshotRegistry
from ottla.timeline.timeline_hash_map import TimelineHashMap, TimelineHashSet
from ottla.timeline.timeline_object import TimelineInteger, TimelineLong, TimelineObject

__all__ = [
    "LATEST",
    "SnapshotRegistry",
    "TimelineHashMap",
    "TimelineHashSet",
    "TimelineInteger",
    "TimelineLong",
    "TimelineObject",
]
