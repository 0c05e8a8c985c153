"""``python -m tests.simulation``: seeds parsed, clean runs pass, a broken core fails with
its seed, invariant and replay command, and a failure shrinks to a schedule no bigger
than its own, with fewer client operations, that replays exactly."""

from __future__ import annotations

import dataclasses
import io

import pytest

from ottla.controller.offset_control import OffsetControl
from ottla.coordinator.runtime import CoordinatorRuntime
from tests.simulation.runner import main, parse_seeds, replay_command, shrink
from tests.simulation.test_offset_commit_simulation import answered_at_append
from tests.simulation.workloads import WORKLOADS, Knobs, select


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out), out.getvalue()


def test_seeds_are_ranges_and_lists_each_once_in_order() -> None:
    assert parse_seeds("1-3,10,20-22") == [1, 2, 3, 10, 20, 21, 22]
    assert parse_seeds("7") == [7]
    assert parse_seeds("1-3,2-5") == [1, 2, 3, 4, 5]
    assert parse_seeds("100000-100002") == [100000, 100001, 100002]


@pytest.mark.parametrize("text", ["3-1", "a", "1-", "-4", "1,,2"])
def test_a_malformed_seed_range_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_seeds(text)
    code, out = run("--workload", "share", "--seeds", text)
    assert code == 2, out


def test_a_name_selects_a_workload_its_family_or_all() -> None:
    assert [w.name for w in select(["raft"])] == ["raft-3", "raft-5"]
    assert [w.name for w in select(["membership"])] == \
        ["membership-churn", "membership-grow", "membership-replace"]
    assert [w.name for w in select(["share", "share"])] == ["share"]
    assert len(select(["all"])) == len(WORKLOADS) == 12
    code, out = run("--workload", "nope", "--seeds", "1")
    assert code == 2 and "no workload" in out


def test_clean_workloads_over_a_few_seeds_exit_zero() -> None:
    code, out = run("--workload", "share,offset-commit", "--seeds", "1-3", "--jobs", "1")
    assert code == 0, out
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()
            if line.startswith(("share ", "offset-commit "))}
    assert rows == {"share": ["3", "0"], "offset-commit": ["3", "0"]}, out
    assert "6 runs" in out


def test_seeds_run_in_worker_processes_give_the_same_table() -> None:
    code, out = run("--workload", "partition", "--seeds", "1-4", "--jobs", "2")
    assert code == 0, out
    assert "on 2 process(es)" in out
    assert any(line.split()[:3] == ["partition", "4", "0"] for line in out.splitlines()), out


def test_a_seed_replays_exactly() -> None:
    w = WORKLOADS["transaction"]
    first, again = w.run(7, Knobs(full_trace=True)), w.run(7, Knobs(full_trace=True))
    assert first.ok and first.trace and first.trace == again.trace
    assert first.injected == again.injected and first.at_ms == again.at_ms


def test_a_fault_kind_switched_off_is_never_injected() -> None:
    w = WORKLOADS["partition"]
    normal = w.run(3)
    assert normal.injected.get("crash", 0) > 0, normal.injected
    without = w.run(3, Knobs(faults_off=frozenset({"crash"})))
    assert "crash" not in without.injected and without.injected, without.injected
    quiet = w.run(3, Knobs(faults_off=frozenset(w.fault_kinds)))
    assert quiet.ok and quiet.injected == {}


def test_trace_prints_the_notable_steps_of_a_quorum() -> None:
    code, out = run("--workload", "raft-3", "--seed", "5", "--trace")
    assert code == 0, out
    assert "leads epoch" in out and "healed" in out and "ok at" in out


def test_a_mutated_core_fails_with_its_seed_invariant_and_replay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault (c) of docs/testing.md's table (an OffsetCommit answered once appended), run
    in this process (``--jobs 1``): the runner exits 1 and names seed 1 and ACKED_VISIBLE,
    the invariant test_offset_commit_simulation.py expects for it."""
    monkeypatch.setattr(CoordinatorRuntime, "write", answered_at_append)
    code, out = run("--workload", "offset-commit", "--seeds", "1-2", "--jobs", "1")
    assert code == 1, out
    assert "offset-commit seed 1: ACKED_VISIBLE at" in out, out
    assert "replay: python -m tests.simulation --workload offset-commit --seed 1 --trace" \
        in out, out


def test_a_failure_shrinks_to_a_smaller_schedule_that_replays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CoordinatorRuntime, "write", answered_at_append)
    w = WORKLOADS["offset-commit"]
    original = w.run(1)
    assert original.invariant == "ACKED_VISIBLE", original

    shrunk = shrink(w, original)
    small = shrunk.smallest
    assert small.invariant == "ACKED_VISIBLE"
    assert small.chaos_ms <= original.chaos_ms
    assert small.faults_off >= original.faults_off
    assert small.faults_injected <= original.faults_injected
    assert (small.chaos_ms, len(small.faults_off)) != (original.chaos_ms, 0), \
        "nothing was shrunk"
    replayed = w.run(1, Knobs(small.chaos_ms, small.faults_off,
                              op_interval_ms=small.op_interval_ms))
    assert (replayed.invariant, replayed.at_ms, replayed.message) == \
        (small.invariant, small.at_ms, small.message)

    code, out = run("--workload", "offset-commit", "--seed", "1")
    assert code == 1
    assert f"replay it: {replay_command(small, w.chaos_ms)}" in out, out


def test_a_failure_shrinks_to_fewer_operations_that_still_fail(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The offset-commit mutation's seed 1 shrinks to a run whose members send fewer
    requests under chaos (spaced apart) and that still breaks ACKED_VISIBLE; the replay
    command printed names the spacing and, run, fails the same way with as many
    operations."""
    monkeypatch.setattr(CoordinatorRuntime, "write", answered_at_append)
    w = WORKLOADS["offset-commit"]
    original = w.run(1)
    assert original.invariant == "ACKED_VISIBLE" and original.operations, original

    small = shrink(w, original).smallest
    assert small.invariant == "ACKED_VISIBLE"
    assert small.op_interval_ms is not None and small.operations is not None
    assert small.operations < original.operations

    command = replay_command(small, w.chaos_ms)
    assert f"--op-interval-ms {small.op_interval_ms}" in command
    code, out = run("--workload", "offset-commit", "--seed", "1")
    assert code == 1 and f"replay it: {command}" in out, out
    assert f"{small.operations} operations (was {original.operations})" in out, out
    args = command.removeprefix("python -m tests.simulation ").split()
    code, out = run(*args, "--no-shrink")
    assert code == 1, out
    assert f"{small.operations} operations {small.op_interval_ms} ms apart" in out, out
    assert f"VIOLATION ACKED_VISIBLE at {small.at_ms} ms" in out, out


def test_operations_are_spaced_at_least_the_interval_asked() -> None:
    """A clean partition seed with produce requests at least 200 ms apart under chaos
    sends at most one per 200 ms of it, fewer than as the producer goes, and still
    passes."""
    w = WORKLOADS["partition"]
    normal = w.run(3)
    spaced = w.run(3, Knobs(op_interval_ms=200))
    assert normal.ok and spaced.ok, (normal.message, spaced.message)
    assert normal.operations is not None and spaced.operations is not None
    assert 0 < spaced.operations <= w.chaos_ms // 200 + 1 < normal.operations


@pytest.mark.parametrize(("name", "seed", "interval"), [
    ("raft-3", 1, 200), ("raft-5", 2, 200), ("metadata-3", 1, 200), ("metadata-5", 1, 200),
    ("membership-grow", 1, 2000), ("membership-churn", 2, 2000),
    ("membership-replace", 4, 2000), ("transaction", 1, 1000)])
def test_every_workload_spaces_its_operations_and_replays_spaced(
        name: str, seed: int, interval: int) -> None:
    """Spaced ``interval`` ms apart under chaos, a clean seed starts at most one operation
    (proposal, voter change, transaction) per interval of it, fewer than as the clients
    go, still passes, and replays exactly: the same steps, faults and count."""
    w = WORKLOADS[name]
    normal = w.run(seed)
    knobs = Knobs(op_interval_ms=interval, full_trace=True)
    spaced, again = w.run(seed, knobs), w.run(seed, knobs)
    assert normal.ok and spaced.ok, (normal.message, spaced.message)
    assert normal.operations is not None and spaced.operations is not None
    assert 0 < spaced.operations <= w.chaos_ms // interval + 1
    assert spaced.operations < normal.operations
    assert (again.trace, again.injected, again.at_ms, again.operations) == \
        (spaced.trace, spaced.injected, spaced.at_ms, spaced.operations)
    code, out = run("--workload", name, "--seed", str(seed), "--op-interval-ms",
                    str(interval))
    assert code == 0, out
    assert f"{spaced.operations} operations {interval} ms apart" in out, out


def test_a_workload_that_counts_no_operations_refuses_the_knob(
        monkeypatch: pytest.MonkeyPatch) -> None:
    uncounted = dataclasses.replace(WORKLOADS["raft-3"], name="uncounted", operations=None)
    monkeypatch.setitem(WORKLOADS, "uncounted", uncounted)
    code, out = run("--workload", "uncounted", "--seed", "1", "--op-interval-ms", "5")
    assert code == 2 and "uncounted count no operations" in out, out
    code, out = run("--workload", "raft-3", "--seed", "1", "--op-interval-ms", "0")
    assert code == 2 and "1 or more" in out, out


def test_a_metadata_failure_shrinks_to_fewer_proposals(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A controller that keeps its uncommitted records when it renounces breaks
    CONTROLLER_IS_COMMITTED; on seed 15 (299 operations) the shrinker thins the admin
    operations the active controllers propose under chaos, and the smaller run replays.
    (On most failing seeds switching fault kinds off and ending the chaos early shrink
    enough that spacing the operations finds nothing smaller.)"""
    def keeps_uncommitted(self: OffsetControl) -> None:
        self.claim_epoch = -1
        self.replayed_end = self.committed_end

    monkeypatch.setattr(OffsetControl, "renounce", keeps_uncommitted)
    w = WORKLOADS["metadata-3"]
    original = w.run(15)
    assert original.invariant == "CONTROLLER_IS_COMMITTED" and original.operations, original
    small = shrink(w, original).smallest
    assert small.invariant == "CONTROLLER_IS_COMMITTED"
    assert small.op_interval_ms is not None and small.operations is not None
    assert small.operations < original.operations
    replayed = w.run(original.seed, Knobs(small.chaos_ms, small.faults_off,
                                          op_interval_ms=small.op_interval_ms))
    assert (replayed.invariant, replayed.at_ms, replayed.operations) == \
        (small.invariant, small.at_ms, small.operations)
