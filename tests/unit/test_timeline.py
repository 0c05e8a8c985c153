"""Timeline structures: reads at snapshots, revert, snapshot deletion, reset."""

from __future__ import annotations

import gc
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ottla.timeline import (
    LATEST,
    SnapshotRegistry,
    TimelineHashMap,
    TimelineHashSet,
    TimelineInteger,
    TimelineObject,
)


def test_map_reads_at_several_epochs_and_reverts():
    registry = SnapshotRegistry()
    topics = TimelineHashMap(registry)
    topics["a"] = 1
    registry.get_or_create_snapshot(10)
    topics["b"] = 2
    topics["a"] = 100
    registry.get_or_create_snapshot(20)
    del topics["b"]
    topics["c"] = 3

    assert topics.at(10) == {"a": 1}
    assert topics.at(20) == {"a": 100, "b": 2}
    assert topics.at(LATEST) == dict(topics) == {"a": 100, "c": 3}
    assert topics.get_at("b", 20) == 2
    assert topics.get_at("b", 10) is None
    assert topics.get_at("c", 20, "gone") == "gone"

    registry.revert_to_snapshot(20)
    assert dict(topics) == {"a": 100, "b": 2}
    assert registry.epochs() == [10, 20]
    registry.revert_to_snapshot(10)
    assert dict(topics) == {"a": 1}
    assert registry.epochs() == [10]


def test_objects_integers_and_sets_follow_the_same_snapshots():
    registry = SnapshotRegistry()
    version = TimelineObject(registry, "3.9")
    epoch = TimelineInteger(registry)
    fenced = TimelineHashSet(registry)
    registry.get_or_create_snapshot(5)
    version.set("4.0")
    epoch.increment(3)
    fenced.add(2)
    assert (version.get(5), version.get()) == ("3.9", "4.0")
    assert (epoch.get(5), epoch.get()) == (0, 3)
    assert fenced.at(5) == set() and fenced.contains_at(2, LATEST)
    registry.revert_to_snapshot(5)
    assert (version.get(), epoch.get(), set(fenced)) == ("3.9", 0, set())


def test_snapshot_epochs_only_grow_and_unknown_epochs_are_errors():
    registry = SnapshotRegistry()
    registry.get_or_create_snapshot(7)
    registry.idempotent_create_snapshot(7)
    with pytest.raises(ValueError):
        registry.get_or_create_snapshot(6)
    with pytest.raises(KeyError):
        TimelineHashMap(registry).at(8)
    with pytest.raises(KeyError):
        registry.revert_to_snapshot(3)


def test_reset_empties_every_structure_and_snapshot():
    registry = SnapshotRegistry()
    a, b = TimelineHashMap(registry), TimelineHashMap(registry)  # equal, yet both reset
    counter = TimelineInteger(registry, 5)
    a[1] = 1
    b[1] = 1
    counter.set(9)
    registry.get_or_create_snapshot(1)
    registry.reset()
    assert (len(a), len(b), counter.get(), registry.epochs()) == (0, 0, 5, [])


def test_dropped_structures_are_not_kept_alive_by_the_registry():
    registry = SnapshotRegistry()
    dropped = TimelineHashMap(registry)
    dropped["x"] = 1
    registry.get_or_create_snapshot(1)
    alive = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert alive() is None, "the registry keeps a structure nobody uses"
    registry.reset()  # and resetting does not trip over the one that went


_set = st.tuples(st.just("set"), st.integers(0, 3), st.integers(0, 99))
_del = st.tuples(st.just("del"), st.integers(0, 3))
_snapshot = st.tuples(st.just("snapshot"))
# Weighted so that snapshots live long enough to be read, deleted one by one and merged.
ops = st.lists(st.one_of(
    _set, _set, _set, _del, _snapshot, _snapshot,
    st.tuples(st.just("delete_snapshot"), st.integers(1, 8)),
    st.tuples(st.just("delete_up_to"), st.integers(0, 3)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops, st.data())
def test_map_matches_a_model_of_copied_dicts(operations, data):
    """Every read at every live snapshot equals a copy taken when it was created; a
    revert to any of them restores that copy."""
    registry = SnapshotRegistry()
    timeline: TimelineHashMap[int, int] = TimelineHashMap(registry)
    counter = TimelineInteger(registry)
    model: dict[int, int] = {}
    copies: dict[int, tuple[dict[int, int], int]] = {}
    epoch = 0
    for op in operations:
        if op[0] == "set":
            timeline[op[1]] = op[2]
            model[op[1]] = op[2]
            counter.increment()
        elif op[0] == "del" and op[1] in model:
            del timeline[op[1]]
            del model[op[1]]
        elif op[0] == "snapshot":
            epoch += 1
            registry.get_or_create_snapshot(epoch)
            copies[epoch] = (dict(model), counter.get())
        elif op[0] == "delete_snapshot" and op[1] in copies:
            registry.delete_snapshot(op[1])
            del copies[op[1]]
        elif op[0] == "delete_up_to":
            registry.delete_snapshots_up_to(op[1])
            copies = {e: c for e, c in copies.items() if e >= op[1]}
        assert dict(timeline) == model
        assert registry.epochs() == sorted(copies)
        for e, (copy, count) in copies.items():
            assert timeline.at(e) == copy
            assert all(timeline.get_at(k, e) == copy.get(k) for k in range(4))
            assert counter.get(e) == count
    if copies:
        target = data.draw(st.sampled_from(sorted(copies)))
        registry.revert_to_snapshot(target)
        assert dict(timeline) == copies[target][0]
        assert counter.get() == copies[target][1]
        assert registry.epochs() == [e for e in sorted(copies) if e <= target]
        for e in registry.epochs():
            assert timeline.at(e) == copies[e][0]
