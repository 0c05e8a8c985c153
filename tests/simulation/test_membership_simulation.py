"""KRaft voter changes (KIP-853) under simulated faults, one test per seed.

Replay a failing seed with::

    OTTLA_SIM_SEED=<n> .venv/bin/pytest tests/simulation/test_membership_simulation.py -k fresh

``OTTLA_MEMBERSHIP_SEEDS`` sets how many fixed seeds run per workload (CI's budget by
default, ``SEEDS_PER_WORKLOAD``: over 500 in all); ``OTTLA_SIM_FRESH_SEEDS`` fresh ones
beside them, from a start drawn each run. ``OTTLA_SIM_SEED=<n>`` runs seed ``n`` with every
workload instead of the fixed seeds.
"""

from __future__ import annotations

import os

import pytest

from ottla.raft.messages import written_voters
from ottla.raft.quorum import RaftError, RaftReplica
from ottla.raft.voter_set import VoterSet
from tests.simulation.fresh import fresh_start
from tests.simulation.membership_cluster import WORKLOADS, MembershipQuorum
from tests.simulation.raft_cluster import Invariant, Violation
from tests.simulation.workloads import simulate_membership

SEEDS_PER_WORKLOAD = int(os.environ.get("OTTLA_MEMBERSHIP_SEEDS", "170"))
ONLY = os.environ.get("OTTLA_SIM_SEED")
FRESH = int(os.environ.get("OTTLA_SIM_FRESH_SEEDS", "1" if ONLY is not None else "12"))
FRESH_START = fresh_start(ONLY)
NAMES = sorted(WORKLOADS)


def cases() -> list[tuple[str, int]]:
    if ONLY is not None:
        return [(w, int(ONLY)) for w in NAMES]
    return [(w, n) for w in NAMES for n in range(1, SEEDS_PER_WORKLOAD + 1)]


def fresh_cases() -> list[tuple[str, int]]:
    if ONLY is not None:
        return [(w, FRESH_START + i) for i in range(FRESH) for w in NAMES]
    return [(NAMES[i % len(NAMES)], FRESH_START + i) for i in range(FRESH)]


CASES = cases() + fresh_cases()
IDS = [f"{w}, seed {seed}" for w, seed in cases()] + \
    [f"fresh: {w}, seed {seed}" for w, seed in fresh_cases()]


def failed(seed: int, workload: str, e: Exception) -> AssertionError:
    return AssertionError(
        f"seed {seed} ({workload}): {type(e).__name__}: {e}; replay: OTTLA_SIM_SEED={seed} "
        ".venv/bin/pytest tests/simulation/test_membership_simulation.py -k fresh")


def run_membership(seed: int, workload: str) -> MembershipQuorum:
    """``workloads.simulate_membership``; a failure raised with its seed and replay
    command."""
    sim, error = simulate_membership(seed, workload)
    if error is not None:
        raise failed(seed, workload, error) from error
    return sim


@pytest.mark.parametrize(("workload", "seed"), CASES, ids=IDS)
def test_voter_changes_are_safe_under_faults_and_recover(workload: str, seed: int) -> None:
    run_membership(seed, workload)


def test_the_workloads_change_the_voters_and_refuse_concurrent_changes() -> None:
    """A few seeds reach every kind of answer the rules give, and replace wiped disks."""
    results: dict[tuple[str, str], int] = {}
    wipes = changes = 0
    for workload in NAMES:
        for seed in range(1, 7):
            sim = run_membership(seed, workload)
            for key, count in sim.results.items():
                results[key] = results.get(key, 0) + count
            wipes += sim.wipes
            changes += len(sim.voter_entries())
    assert results.get(("add", "none"), 0) > 5 and results.get(("remove", "none"), 0) > 5, \
        results
    assert results.get(("add", "request_timed_out"), 0) > 0, results
    assert results.get(("remove", "request_timed_out"), 0) > 0, results
    assert wipes > 0 and changes > 20, (wipes, changes)


def test_a_quorum_grows_from_one_voter_to_three() -> None:
    """The committed voter sets go {1}, {1, 2}, {1, 2, 3} (the workload may remove a
    voter afterwards, at random)."""
    sim = MembershipQuorum(1, "grow")
    sim.run_until(5_000, chaos=False)
    assert sim.leader() is not None
    grown = [v.ids for e in sim.voter_entries()
             if (v := written_voters(e.payload)) is not None][:3]
    assert grown == [{1}, {1, 2}, {1, 2, 3}]


# --- the checker has teeth: each mutation fails some seed of the CI range ---------------


def assert_caught(tries: int, invariants: set[Invariant], replica_may_refuse: bool) -> None:
    """The first failing seed of the first ``tries`` per workload breaks one of
    ``invariants`` (or, with ``replica_may_refuse``, makes a replica refuse to truncate
    committed entries, a ``RaftError``): not only the recovery bound."""
    for n in range(1, tries + 1):
        for workload in NAMES:
            try:
                run_membership(n, workload)
            except AssertionError as e:
                violation = e.__cause__
                if isinstance(violation, RaftError) and replica_may_refuse:
                    return
                if isinstance(violation, Violation) and violation.invariant is Invariant.RECOVERS:
                    continue  # unavailability is not what these mutations break first
                assert isinstance(violation, Violation) and violation.invariant in invariants, \
                    f"caught by another rule: {e}"
                return
    raise AssertionError(f"none of the first {tries} seeds per workload caught it")


def test_a_voter_change_effective_at_commit_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The voter set taken from the committed log instead of the appended one: the
    replicas count another set than their logs' last (two leaders or lost entries follow
    only from rare schedules: none of the CI seeds reaches one)."""
    def at_commit(self: RaftReplica) -> VoterSet:
        return self._history.value_at(self.high_watermark - 1)

    monkeypatch.setattr(RaftReplica, "voter_set", property(at_commit))
    assert_caught(SEEDS_PER_WORKLOAD, {Invariant.VOTERS_AS_APPENDED}, False)


def test_two_voter_changes_in_flight_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader accepting a change while the previous one is not committed: a set two
    changes away from another has a majority disjoint from it, and committed entries
    are lost."""
    def never_pending(self: RaftReplica, now_ms: int) -> bool:
        return False

    def always_committed(self: RaftReplica) -> bool:
        return True

    monkeypatch.setattr(RaftReplica, "_change_pending", never_pending)
    monkeypatch.setattr(RaftReplica, "_voters_committed", always_committed)
    assert_caught(SEEDS_PER_WORKLOAD, {Invariant.ONE_LEADER_PER_EPOCH,
                                       Invariant.ONE_COMMITTED_LOG}, True)
