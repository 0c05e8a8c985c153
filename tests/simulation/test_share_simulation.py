r"""Share consumers (KIP-932) acquiring, acknowledging and timing out on one share-partition
whose leader changes, with delivery limits, failed state writes and a dead-letter queue,
one test per seed (issue 34, fault (d)).

Replay a failing seed (fixed or fresh) alone with::

    OTTLA_SHARE_SIM_SEED=<n> .venv/bin/pytest -k fresh \
        tests/simulation/test_share_simulation.py

Each leader keeps the in-flight records in the real ``SharePartition``;
``share_partition_cluster`` says what is real and what is modelled, and which invariants
are checked as a run goes. A failure names the broken ``Invariant``, ends with the last
steps of the run and the replay command.

The seeds 1..``OTTLA_SHARE_SIM_SEEDS`` (``DEFAULT_SEEDS``) run every time; beside them
``OTTLA_SHARE_SIM_FRESH_SEEDS`` fresh ones (``DEFAULT_FRESH``), from a start drawn at
random each run (ids ``fresh seed <n>``). ``OTTLA_SHARE_SIM_SEED=<n>`` runs seed ``n``
instead of the fixed seeds and starts the fresh ones at ``n`` (one of them, unless
``OTTLA_SHARE_SIM_FRESH_SEEDS`` says more). ``OTTLA_SHARE_SIM_CHAOS_MS`` sets how long
each seed is under faults.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import pytest

from ottla.broker.share.share_partition import (
    InFlightState,
    PendingUpdate,
    RecordState,
    SharePartition,
)
from ottla.coordinator.share.state import PersisterStateBatch
from ottla.protocol.errors import ErrorCode
from tests.simulation.fresh import fresh_start
from tests.simulation.share_partition_cluster import (
    Invariant,
    ShareCluster,
    Stats,
    Violation,
)
from tests.simulation.workloads import SHARE_CHAOS_MS, Knobs, simulate_share

DEFAULT_SEEDS = 100
DEFAULT_FRESH = 20
SEEDS = int(os.environ.get("OTTLA_SHARE_SIM_SEEDS", str(DEFAULT_SEEDS)))
ONLY = os.environ.get("OTTLA_SHARE_SIM_SEED")
FRESH = int(os.environ.get("OTTLA_SHARE_SIM_FRESH_SEEDS",
                           "1" if ONLY is not None else str(DEFAULT_FRESH)))
FRESH_START = fresh_start(ONLY)
"""The first fresh seed: ``OTTLA_SHARE_SIM_SEED``, or drawn anew each run."""
CHAOS_MS = int(os.environ.get("OTTLA_SHARE_SIM_CHAOS_MS", str(SHARE_CHAOS_MS)))
COVERAGE_SEEDS = 20

CASES = [int(ONLY)] if ONLY is not None else list(range(1, SEEDS + 1))
FRESH_CASES = [FRESH_START + i for i in range(FRESH)]


def replay(seed: int) -> str:
    chaos = f"OTTLA_SHARE_SIM_CHAOS_MS={CHAOS_MS} " \
        if "OTTLA_SHARE_SIM_CHAOS_MS" in os.environ else ""
    return (f"replay: {chaos}OTTLA_SHARE_SIM_SEED={seed} .venv/bin/pytest "
            "tests/simulation/test_share_simulation.py -k fresh")


class Failure(NamedTuple):
    error: Exception
    report: str


def simulate(seed: int) -> tuple[ShareCluster, Failure | None]:
    """``workloads.simulate_share`` for ``CHAOS_MS``: the cluster and what broke (None if
    nothing)."""
    sim, error = simulate_share(seed, Knobs(chaos_ms=CHAOS_MS))
    if error is None:
        return sim, None
    return sim, Failure(error, f"seed {seed} at {sim.now} ms: {type(error).__name__}: "
                               f"{error}; {replay(seed)}\nThe last steps:\n{sim.history()}")


@pytest.mark.parametrize("seed", CASES + FRESH_CASES, ids=[f"seed {s}" for s in CASES]
                         + [f"fresh seed {s}" for s in FRESH_CASES])
def test_share_records_are_held_once_and_settled_once(seed: int) -> None:
    _, failure = simulate(seed)
    if failure is not None:
        pytest.fail(failure.report, pytrace=False)


def test_the_runs_reach_expiry_limits_leader_changes_and_dead_letters() -> None:
    """A handful of seeds is enough for every path the checker relies on to happen."""
    total = Stats()
    for seed in range(1, COVERAGE_SEEDS + 1):
        stats = simulate(seed)[0].stats
        for name, value in vars(stats).items():
            setattr(total, name, getattr(total, name) + value)
    for name, value in vars(total).items():
        assert value > 0, f"no run had {name}: {vars(total)}"


# --- the checker has teeth: a broken rule fails the first seeds ----------------------------


def assert_caught(seeds: int, invariant: Invariant) -> None:
    """The first of seeds 1..``seeds`` that fails does so by breaking ``invariant``."""
    for seed in range(1, seeds + 1):
        failure = simulate(seed)[1]
        if failure is None:
            continue
        assert isinstance(failure.error, Violation), f"not a violation: {failure.report}"
        assert failure.error.invariant is invariant, (
            f"caught by {failure.error.invariant.name}, not by {invariant.name}: "
            f"{failure.report}")
        return
    raise AssertionError(f"none of the first {seeds} seeds caught it")


def test_an_acknowledgement_from_a_member_that_does_not_hold_the_record_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34's fault (d): an acknowledgement is applied whoever holds the record, so a
    member whose lock ran out settles a record redelivered to another."""
    settle = SharePartition._settle

    def any_member(self: SharePartition, state: InFlightState, member_id: str, kind: int,
                   renewed_until: int) -> None:
        if state.state is RecordState.ACQUIRED:
            state.member_id = member_id  # the holder is not checked
        settle(self, state, member_id, kind, renewed_until)

    monkeypatch.setattr(SharePartition, "_settle", any_member)
    assert_caught(10, Invariant.ACK_BY_HOLDER)


def test_a_renewal_that_does_not_extend_the_lock_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A RENEW (KIP-1222) answered with success that keeps the old lock: the lock timer
    takes the record from a member told it still holds it, and refuses its
    acknowledgement (or hands the record to another member)."""
    settle = SharePartition._settle

    def not_renewed(self: SharePartition, state: InFlightState, member_id: str, kind: int,
                    renewed_until: int) -> None:
        settle(self, state, member_id, kind, state.lock_deadline_ms)

    monkeypatch.setattr(SharePartition, "_settle", not_renewed)
    assert_caught(10, Invariant.ACK_BY_HOLDER)


def test_a_delivery_limit_that_is_not_enforced_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Records made available again whatever their delivery count: one past
    ``group.share.delivery.count.limit`` is delivered again instead of archived."""
    move = InFlightState.move

    def unlimited(self: InFlightState, target: RecordState, max_delivery_count: int,
                  dead_letter: bool = False) -> None:
        move(self, target, 1 << 30, dead_letter)

    monkeypatch.setattr(InFlightState, "move", unlimited)
    assert_caught(10, Invariant.DELIVERY_LIMIT)


def test_an_acknowledgement_written_with_the_start_offset_it_would_give_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ottla until November 2026 (chaos run seed 22, share-accepted-twice): a write
    carrying the start offset its acknowledgement would give, stored by the coordinator
    though the leader was told it failed, drops the stored state below it; the leader's
    next write moves the start offset back, and a record accepted before is stored as
    never delivered. Kafka writes the start offset as it is."""
    begin = SharePartition.begin_acknowledge

    def ahead(self: SharePartition, member_id: str, acknowledgements: list[
            tuple[int, int, list[int]]], now_ms: int = 0) -> PendingUpdate | ErrorCode:
        update = begin(self, member_id, acknowledgements, now_ms)
        if isinstance(update, ErrorCode):
            return update
        start = self.start_offset  # through the terminal records being written
        for first, last, state in self._runs():
            if last < start:
                continue
            if first > start or not state.state.terminal:
                break
            start = last + 1
        update.batches = [PersisterStateBatch(max(b.first_offset, start), b.last_offset,
                                              b.delivery_state, b.delivery_count)
                          for b in update.batches if b.last_offset >= start]
        update.start_offset = start
        update.delivery_complete_count = self._complete_above(start)
        return update

    monkeypatch.setattr(SharePartition, "begin_acknowledge", ahead)
    assert_caught(60, Invariant.ACCEPTED_ONCE)
