"""The fault schedule: one seed, one schedule; every kind early; each fault healed
inside the window."""

from __future__ import annotations

from itertools import pairwise

from ottla.chaos.faults import KINDS, schedule


def test_a_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert schedule(7, 3, 120, [1, 2, 3]) == schedule(7, 3, 120, [1, 2, 3])
    assert schedule(7, 3, 120, [1, 2, 3]) != schedule(8, 3, 120, [1, 2, 3])


def test_every_kind_comes_once_before_any_comes_twice_and_all_end_in_the_window() -> None:
    for seed in range(20):
        faults = schedule(seed, 3, 300, [1, 2, 3])
        assert {f.kind for f in faults[:len(KINDS)]} == set(KINDS)
        assert all(f.at_s >= 3 and f.at_s + f.duration_s <= 300 for f in faults)
        assert all(a.at_s + a.duration_s < b.at_s for a, b in pairwise(faults))
        for f in faults:
            assert len(f.nodes) == {"kill": 1, "pause": 1, "leader-kill": 0, "disk-full": 1,
                                    "clock-skew": 1}.get(f.kind, 2)
            assert len(set(f.nodes)) == len(f.nodes) and set(f.nodes) <= {1, 2, 3}


def test_a_clock_skew_is_minutes_either_way() -> None:
    skews = {float(f.target) for seed in range(20)
             for f in schedule(seed, 3, 300, [1, 2, 3]) if f.kind == "clock-skew"}
    assert any(s < 0 for s in skews) and any(s > 0 for s in skews)
    assert all(30 <= abs(s) <= 600 for s in skews)


def test_only_the_kinds_asked_for() -> None:
    assert {f.kind for f in schedule(1, 0, 100, [1, 2, 3], ("pause", "cut"))} == \
        {"pause", "cut"}
    assert schedule(1, 0, 100, [1, 2, 3], ()) == []
