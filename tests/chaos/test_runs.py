"""Short bounded chaos runs through the real command (``ottla chaos run``): a cluster of
three real nodes whose links pass through the fault proxy, real clients, faults of each
kind asked for really injected, and no violation of Kafka's guarantees in the history.
The checker is shown to see bugs: a run whose final read deliberately leaves out an
acknowledged record fails, and so do mutations of a real run's history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ottla.chaos.checker import check
from ottla.chaos.history import load
from ottla.chaos.workloads import COPY_STOP_S

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ALLOWANCE_NS = 10 * 10**9
"""The rebalance allowance the runner checks ownership with (the session timeout)."""


def chaos_run(report: Path, *args: str, timeout: float = 240) -> tuple[int, dict[str, Any]]:
    """Run ``ottla chaos run`` to ``report``: its exit code and report.json."""
    done = subprocess.run(
        [sys.executable, "-m", "ottla", "chaos", "run", "--report", str(report), *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ})
    path = report / "report.json"
    assert path.exists(), f"no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.returncode, json.loads(path.read_text())


def assert_faults_injected(report: dict[str, Any], kinds: list[str]) -> None:
    assert report["nemesis_errors"] == []
    for kind in kinds:
        assert report["faults"].get(kind, 0) > 0, (kind, report["fault_log"])
    assert sum(report["leader_changes"].values()) > 0, report["leader_changes"]
    assert report["exit_codes"] == {"1": 0, "2": 0, "3": 0}


def test_acknowledged_writes_survive_kills_pauses_and_partitions(tmp_path: Path) -> None:
    kinds = ["kill", "pause", "partition"]
    code, report = chaos_run(tmp_path / "produce", "--workload", "produce",
                             "--duration", "30", "--seed", "11", "--faults", ",".join(kinds))
    assert report["violations"] == [] and code == 0
    assert report["checks"]["lost-write"] == 0
    acked = report["operations_by_kind"]["produce"]["ok"]
    assert acked > 3000 and report["operations_by_kind"]["read"]["ok"] >= acked
    assert_faults_injected(report, kinds)

    # the checker refutes the same history with one bug planted in it
    ops = load(str(tmp_path / "produce" / "history.jsonl"))
    assert check(ops).valid
    reads = [i for i, op in enumerate(ops) if op.kind == "read"]
    lost = ops[:reads[100]] + ops[reads[100] + 1:]
    assert [v.check for v in check(lost).violations] == ["lost-write"]
    duplicated = [*ops, replace(ops[reads[100]], index=len(ops), offset=10**9)]
    assert [v.check for v in check(duplicated).violations] == ["duplicate"]
    acked_ops = [i for i, op in enumerate(ops) if op.kind == "produce" and op.outcome == "ok"
                 and op.partition == ops[reads[0]].partition]
    a, b = acked_ops[10], acked_ops[11]
    swapped = list(ops)
    swapped[a] = replace(ops[a], offset=ops[b].offset)
    swapped[b] = replace(ops[b], offset=ops[a].offset)
    assert {v.check for v in check(swapped).violations} == {"offsets", "lost-write"}


def test_a_group_commits_forward_through_leader_kills_cuts_and_slow_links(
        tmp_path: Path) -> None:
    kinds = ["leader-kill", "cut", "slow"]
    code, report = chaos_run(tmp_path / "group", "--workload", "group", "--duration", "30",
                             "--seed", "12", "--faults", ",".join(kinds))
    assert report["violations"] == [] and code == 0
    ops = report["operations_by_kind"]
    assert ops["commit"]["ok"] > 10 and ops["poll"]["ok"] > 1000 and ops["assign"]["ok"] >= 1
    assert ops["committed"] == {"ok": 1}
    assert_faults_injected(report, kinds)

    # the checker refutes the same history with one bug planted in it
    history = load(str(tmp_path / "group" / "history.jsonl"))
    assert check(history, ALLOWANCE_NS).valid
    committed = next(op for op in history if op.kind == "committed")
    assert committed.offsets
    partition, offset = next(iter(committed.offsets.items()))
    back = replace(committed, index=len(history), invoke_ns=committed.complete_ns + 1,
                   complete_ns=committed.complete_ns + 2, offsets={partition: offset - 1})
    assert [v.check for v in check([*history, back], ALLOWANCE_NS).violations] == \
        ["committed-offsets"]
    # a member that never gave up what it was first assigned: owned twice once handed over
    first = next(op for op in history if op.kind == "assign" and op.partitions)
    kept = [op for op in history if not (op.kind == "revoke" and op.process == first.process)]
    handed_over = any(op.kind == "assign" and op.process != first.process
                      and set(op.partitions or ()) & set(first.partitions or ())
                      and op.complete_ns + ALLOWANCE_NS < history[-1].complete_ns
                      for op in history)
    assert handed_over  # members join and leave: partitions change hands
    assert "ownership" in {v.check for v in check(kept, ALLOWANCE_NS).violations}


def node_logs(report_dir: Path) -> dict[int, str]:
    """Each node's log (one file a node: its restarts append to it)."""
    return {int(path.name.split("-")[1]): path.read_text(errors="replace")
            for path in (report_dir / "cluster").glob("ottla-*.log")}


def test_a_node_whose_disk_fills_stops_and_comes_back_without_losing_a_write(
        tmp_path: Path) -> None:
    """A full disk fails the node's next write with ENOSPC: its only log dir goes
    offline and the node stops, as a Kafka broker halts when all its log dirs have
    failed; freed and started again, it recovers its log and rejoins, and no
    acknowledged write is lost."""
    code, report = chaos_run(tmp_path / "disk", "--workload", "produce", "--duration", "22",
                             "--seed", "5", "--faults", "disk-full")
    assert report["violations"] == [] and code == 0
    assert report["nemesis_errors"] == [] and report["faults"]["disk-full"] >= 2
    acked = report["operations_by_kind"]["produce"]["ok"]
    assert acked > 1000 and report["operations_by_kind"]["read"]["ok"] >= acked
    logs = node_logs(tmp_path / "disk")
    filled = {f["nodes"][0] for f in report["fault_log"]}
    assert all(f["filled_bytes"] > 200 * 2**20 for f in report["fault_log"])
    failed = [n for n in filled if "No space left on device" in logs[n]]
    assert failed, report["fault_log"]
    for node in failed:
        assert "all log dirs in" in logs[node] and "have failed" in logs[node]
        assert logs[node].count(f"Ottla node {node} started") >= 2  # it came back
    assert report["exit_codes"] == {"1": 0, "2": 0, "3": 0}
    data = tmp_path / "disk" / "cluster"
    assert not any(os.path.ismount(data / f"node-{n}") for n in (1, 2, 3))
    assert all((data / f"node-{n}" / "meta.properties").exists() for n in (1, 2, 3))


def test_wall_clocks_jumping_minutes_either_way_lose_no_write_and_no_commit(
        tmp_path: Path) -> None:
    """One node's wall clock at a time jumps (30 s to 10 min, ahead or back) and back:
    the node stamps records with the skewed clock (LogAppendTime, read back by the
    harness), and neither the writes nor the group's commits break Kafka's
    guarantees."""
    code, report = chaos_run(tmp_path / "clock", "--workload", "all", "--duration", "22",
                             "--seed", "6", "--faults", "clock-skew", timeout=420)
    assert report["violations"] == [] and code == 0
    assert report["nemesis_errors"] == [] and report["faults"]["clock-skew"] >= 2
    targets = {float(f["target"]) for f in report["fault_log"]}
    assert min(targets) < 0 < max(targets)
    observed = [(float(f["target"]), f["observed_skew_s"]) for f in report["fault_log"]
                if "observed_skew_s" in f]
    assert observed, report["fault_log"]
    assert all(abs(seen - target) < 5 for target, seen in observed), observed
    ops = report["operations_by_kind"]
    # Enough for the checks to have something to hold: the group's commits are what
    # slows most on a loaded machine (members rejoin as the skewed node's sessions
    # move), so two of them (a commit that could go back) are asked for, not a rate.
    assert ops["produce"]["ok"] > 1000 and ops["commit"]["ok"] >= 2
    assert report["exit_codes"] == {"1": 0, "2": 0, "3": 0}


@pytest.mark.parametrize(("mutation", "check_name", "excerpt_kinds"), [
    ("lose-write", "lost-write", ["produce", "read-end"]),
    ("duplicate", "duplicate", ["produce", "read", "read"]),
])
def test_a_run_whose_final_read_is_broken_fails(tmp_path: Path, mutation: str,
                                                check_name: str,
                                                excerpt_kinds: list[str]) -> None:
    """The final read leaves out an acknowledged record, or reads one twice."""
    code, report = chaos_run(tmp_path / "broken", "--workload", "produce", "--duration", "5",
                             "--faults", "", "--mutate", mutation)
    assert code == 1
    assert report["checks"][check_name] == 1 and report["violation_count"] == 1
    (violation,) = report["violations"]
    excerpt = [json.loads(line) for line in violation["excerpt"]]
    assert [op["kind"] for op in excerpt] == excerpt_kinds
    assert excerpt[0]["outcome"] == "ok"
    assert all(op["partition"] == excerpt[0]["partition"] for op in excerpt)
    assert report["smallest_violation"] == violation


def test_transactional_copies_are_exactly_once_through_leader_kills_pauses_and_partitions(
        tmp_path: Path) -> None:
    """Copy loops (read_committed consumers in a group, transactional producers sending
    the offsets with the records, one transaction in five aborted on purpose) under
    faults: no aborted or partial transaction read, none committed lost, every source
    record below the group's committed offsets copied exactly once, no dependency
    cycle."""
    kinds = ["leader-kill", "kill", "pause", "partition"]
    code, report = chaos_run(tmp_path / "txn", "--workload", "transactional",
                             "--duration", "30", "--seed", "21", "--faults", ",".join(kinds))
    assert report["violations"] == [] and code == 0
    ops = report["operations_by_kind"]
    # How many transactions fit in 30 s depends on the machine's load (each one is a
    # few round trips to two coordinators; faults stall them for seconds): a few
    # commits, and the abort on purpose of copier-0's third transaction (seed 21). A
    # client call wedged past its timeout (librdkafka #5456: send_offsets_to_transaction
    # waiting for a group coordinator that was killed) costs its producer, not the run:
    # the copiers stop within their bound, however loaded the machine.
    assert ops["txn-commit"]["ok"] >= 5 and ops["txn-abort"]["ok"] >= 1
    assert report["timings"]["workload_s"] <= 30 + COPY_STOP_S
    assert ops["txn-read"]["ok"] > 100 and ops["committed"] == {"ok": 1}
    assert_faults_injected(report, kinds)

    # the checker refutes the same history with an aborted record made visible
    history = load(str(tmp_path / "txn" / "history.jsonl"))
    assert check(history).valid
    aborted = {op.txn for op in history if op.kind == "txn-abort" and op.outcome == "ok"}
    written = next(op for op in history if op.kind == "txn-produce" and op.txn in aborted)
    leaked = replace(written, index=len(history), process="reader", kind="txn-read",
                     txn=None)
    assert [v.check for v in check([*history, leaked]).violations] == ["aborted-read"]


def test_share_group_records_are_accepted_once_and_never_lost_through_kills_and_cuts(
        tmp_path: Path) -> None:
    """Share consumers acknowledging at random (accept, release, reject), one leaving
    and another joining every 10 s, under faults; then a last member accepts what is
    left: every record accepted at most once, each accepted, rejected or archived at the
    delivery count limit, no delivery beyond it."""
    kinds = ["leader-kill", "kill", "pause", "cut"]
    code, report = chaos_run(tmp_path / "share", "--workload", "share", "--duration", "30",
                             "--seed", "22", "--faults", ",".join(kinds))
    assert report["violations"] == [] and code == 0
    ops = report["operations_by_kind"]
    assert ops["acquire"]["ok"] > ops["produce"]["ok"] > 1000
    assert_faults_injected(report, kinds)

    history = load(str(tmp_path / "share" / "history.jsonl"))
    assert {op.ack for op in history if op.kind == "ack"} == {"accept", "release", "reject"}
    assert max(op.delivery_count or 0 for op in history if op.kind == "acquire") > 1
    # the checker refutes the same history with one record's acceptance taken out (the
    # members may have finished every record before the last one joins, so it is not
    # the drain's acceptances that are taken out: it may have had none)
    delivered: dict[tuple[str | None, int | None, int | None], int] = {}
    for op in history:
        if op.kind == "acquire":
            key = (op.topic, op.partition, op.offset)
            delivered[key] = max(delivered.get(key, 0), op.delivery_count or 0)
    taken = next(op for op in history if op.kind == "ack" and op.ack == "accept"
                 and op.outcome == "ok" and delivered[op.topic, op.partition, op.offset] < 3)
    unfinished = [op for op in history if not (
        op.kind == "ack" and op.ack in ("accept", "reject")
        and (op.topic, op.partition, op.offset) == (taken.topic, taken.partition, taken.offset))]
    assert check(unfinished, share_delivery_limit=3).checks["share-lost"] == 1


@pytest.mark.parametrize(("workload", "mutation", "check_name"), [
    ("transactional", "read-uncommitted", "aborted-read"),
    ("share", "accept-twice", "share-accepted-twice"),
])
def test_a_run_that_reads_aborted_data_or_accepts_twice_fails(
        tmp_path: Path, workload: str, mutation: str, check_name: str) -> None:
    """The sink's final read is read_uncommitted, or one share record's acceptance is
    recorded twice: the run must fail on that check."""
    code, report = chaos_run(tmp_path / "broken", "--workload", workload, "--duration", "8",
                             "--faults", "", "--mutate", mutation, "--seed", "3")
    assert code == 1
    assert report["checks"][check_name] >= 1
    assert check_name in {v["check"] for v in report["violations"]}
