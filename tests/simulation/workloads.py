"""Every deterministic simulation as a workload: one seed in, one outcome out.

A workload runs one cluster of ``tests/simulation`` under faults for its chaos duration,
heals it, and waits (within a bound) for it to recover; the cluster's checker raises a
``Violation`` naming its invariant as soon as a rule breaks. The pytest modules and the
runner (``python -m tests.simulation``) both run seeds through the functions here, so a
seed means the same run in both.

``Knobs`` are what may vary beside the seed while keeping the run a function of its
inputs: the chaos duration (the run up to it is the same run as a longer one's: the
events are the same until the heal), the fault kinds switched off (a fault drawn of such a
kind is skipped, which changes the draws after it, deterministically), the least time
between two client operations under chaos (fewer operations: one due sooner waits, or is
skipped where it comes from a timer: the partition producer, a leader's proposals, the
membership steps; deterministic too), and whether the whole trace is kept rather than its
last steps.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from tests.simulation import (
    offset_commit_cluster,
    partition_cluster,
    raft_cluster,
    share_partition_cluster,
    transaction_cluster,
)
from tests.simulation.membership_cluster import WORKLOADS as MEMBERSHIP_WORKLOADS
from tests.simulation.membership_cluster import MembershipQuorum
from tests.simulation.metadata_cluster import MetadataQuorum
from tests.simulation.offset_commit_cluster import OffsetCommitCluster
from tests.simulation.partition_cluster import PartitionCluster
from tests.simulation.raft_cluster import Invariant, SimulatedQuorum, Violation
from tests.simulation.share_partition_cluster import ShareCluster
from tests.simulation.transaction_cluster import TransactionCluster
from tests.simulation.whole_cluster import WholeCluster

RAFT_CHAOS_MS = 15_000
RAFT_RECOVERY_BOUND_MS = 10_000
MEMBERSHIP_CHAOS_MS = 6_000
PARTITION_CHAOS_MS = 20_000
PARTITION_HEAL_BOUND_MS = 8_000
TRANSACTION_CHAOS_MS = 15_000
TRANSACTION_HEAL_BOUND_MS = 15_000
OFFSET_COMMIT_CHAOS_MS = 10_000
OFFSET_COMMIT_HEAL_BOUND_MS = 5_000
CLUSTER_CHAOS_MS = 20_000
CLUSTER_HEAL_BOUND_MS = 20_000
"""A controller elected, the partition's ISR whole again and a new write acknowledged."""
SHARE_CHAOS_MS = 8_000
SHARE_HEAL_BOUND_MS = 20_000
"""Enough for the backlog of the slowest share settings to be accepted."""


@dataclass(frozen=True)
class Knobs:
    """What a run may vary beside its seed (see the module's docstring)."""

    chaos_ms: int | None = None
    """Simulated time under faults; None: the workload's own."""
    faults_off: frozenset[str] = frozenset()
    full_trace: bool = False
    """Keep every notable step, not only the last ones a failure shows."""
    op_interval_ms: int | None = None
    """The least simulated time between two client operations started under chaos, over
    all the clients (``Workload.operations`` says what one is); None: as the clients go."""


class Traced(Protocol):
    """What every cluster has: its notable steps and the faults it injected, by kind."""

    now: int
    trace: collections.deque[tuple[int, str, tuple[Any, ...]]]
    faults_off: frozenset[str]
    injected: collections.Counter[str]

    def history(self) -> str: ...


@runtime_checkable
class Counted(Protocol):
    """A cluster whose clients count the operations they start under chaos, and start
    them at least ``op_interval_ms`` apart (None: as they go)."""

    operations: int
    op_interval_ms: int | None


C = TypeVar("C", bound=Traced)


def prepared(sim: C, knobs: Knobs) -> C:
    """``sim`` with the knobs applied (before it runs: faults come from its event loop)."""
    sim.faults_off = knobs.faults_off
    if knobs.full_trace:
        sim.trace = collections.deque(sim.trace)
    if knobs.op_interval_ms is not None:
        if not isinstance(sim, Counted):
            raise ValueError(f"{type(sim).__name__} does not count its operations")
        sim.op_interval_ms = knobs.op_interval_ms
    return sim


def chaos(knobs: Knobs, default: int) -> int:
    return default if knobs.chaos_ms is None else knobs.chaos_ms


# --- the runs, one function per cluster ------------------------------------------------------


def simulate_raft(seed: int, voters: int, knobs: Knobs = Knobs()
                  ) -> tuple[SimulatedQuorum, Exception | None]:
    """Nodes snapshot every 40 applied offsets and drop the log before it, so replicas
    that fall behind (partitioned, crashed) catch up through FetchSnapshot. Two
    observers (brokers) follow the log and must catch up too."""
    sim = prepared(SimulatedQuorum(seed, voters, observers=2), knobs)
    try:
        sim.run_until(chaos(knobs, RAFT_CHAOS_MS), chaos=True)
        committed_before = sim.committed_end
        sim.heal()
        deadline = sim.now + RAFT_RECOVERY_BOUND_MS
        while sim.now < deadline and (sim.leader() is None
                                      or sim.committed_end <= committed_before):
            sim.run_until(sim.now + 100, chaos=False)
        if sim.leader() is None:
            raise Violation(Invariant.RECOVERS, "no leader elected after the partition healed")
        if sim.committed_end <= committed_before:
            raise Violation(Invariant.RECOVERS, "nothing committed after healing")
        sim.run_until(sim.now + 3_000, chaos=False)
        # Every live node applied a prefix of the one committed log, and they agree.
        for n, applied in sim.applied.items():
            if sim.digest(applied) != sim.digest(sim.committed[:len(applied)]):
                raise Violation(Invariant.ONE_COMMITTED_LOG,
                                f"node {n} applied other entries than the committed log's")
        caught_up = [n for n in sim.voter_ids if sim.applied_end[n] >= sim.committed_end - 64]
        if len(caught_up) < voters // 2 + 1:
            raise Violation(Invariant.RECOVERS, f"only voters {caught_up} caught up with the "
                                                f"committed end {sim.committed_end}")
        for observer in sim.ids[voters:]:
            if sim.applied_end[observer] < committed_before:
                raise Violation(Invariant.RECOVERS, f"observer {observer} did not catch up")
    except Exception as e:
        return sim, e
    return sim, None


def simulate_metadata(seed: int, voters: int, knobs: Knobs = Knobs()
                      ) -> tuple[MetadataQuorum, Exception | None]:
    """Real QuorumControllers on the voters and an observer: every node's image has the
    same digest at every sampled offset, claims start from the committed state and
    renouncing reverts to it; metadata transactions end, abort or are left open and
    aborted by the next leader."""
    sim = prepared(MetadataQuorum(seed, voters, observers=1), knobs)
    try:
        sim.run_until(chaos(knobs, RAFT_CHAOS_MS), chaos=True)
        sim.heal()
        sim.run_until(sim.now + 5_000, chaos=False)
        if sim.leader() is None:
            raise Violation(Invariant.RECOVERS, "no leader 5 s after healing")
        observer = sim.ids[-1]
        if sim.applied_end[observer] < sim.committed_end - 64:
            raise Violation(Invariant.RECOVERS,
                            f"observer {observer} applied up to {sim.applied_end[observer]} of "
                            f"{sim.committed_end}")
    except Exception as e:
        return sim, e
    return sim, None


def simulate_membership(seed: int, workload: str, knobs: Knobs = Knobs()
                        ) -> tuple[MembershipQuorum, Exception | None]:
    """Chaos with the workload, then healing: a leader is elected and commits; once the
    workload stops, within a bound, every live node has the leader's voter set, a
    majority of the voters and every other node caught up, and all applied a prefix of
    one committed log."""
    sim = prepared(MembershipQuorum(seed, workload), knobs)
    try:
        sim.run_until(chaos(knobs, MEMBERSHIP_CHAOS_MS), chaos=True)
        committed_before = sim.committed_end
        sim.heal()
        deadline = sim.now + RAFT_RECOVERY_BOUND_MS
        while sim.now < deadline and (sim.leader() is None
                                      or sim.committed_end <= committed_before):
            sim.run_until(sim.now + 100, chaos=False)
        if sim.leader() is None:
            raise Violation(Invariant.RECOVERS, "no leader elected after the partition healed")
        if sim.committed_end <= committed_before:
            raise Violation(Invariant.RECOVERS, "nothing committed after healing")
        sim.run_until(sim.now + 2_000, chaos=False)  # a replacement under way completes
        sim.workload_on = False
        deadline = sim.now + RAFT_RECOVERY_BOUND_MS
        while sim.now < deadline and membership_unsettled(sim, committed_before) is not None:
            sim.run_until(sim.now + 100, chaos=False)
        unsettled = membership_unsettled(sim, committed_before)
        if unsettled is not None:
            raise Violation(Invariant.RECOVERS, unsettled)
        for n, applied in sim.applied.items():
            if sim.digest(applied) != sim.digest(sim.committed[:len(applied)]):
                raise Violation(Invariant.ONE_COMMITTED_LOG,
                                f"node {n} applied other entries than the committed log's")
    except Exception as e:
        return sim, e
    return sim, None


def membership_unsettled(sim: MembershipQuorum, committed_before: int) -> str | None:
    """What is still missing once the changes stopped, or None."""
    leader = sim.leader()
    if leader is None:
        return "no leader once the changes stopped"
    replica = sim.nodes[leader]
    assert replica is not None
    voters = replica.voter_set
    for n, other in sim.nodes.items():
        if other is not None and other.voter_set != voters:
            return f"node {n} has voters {other.voter_set}, the leader {voters}"
    caught_up = [v for v in voters.ids if sim.applied_end[v] >= sim.committed_end - 64]
    if len(caught_up) < voters.majority:
        return f"only voters {caught_up} of {voters} caught up with {sim.committed_end}"
    for n in sim.ids:
        if n not in voters.ids and sim.applied_end[n] < committed_before:
            return f"observer {n} did not catch up"
    return None


def simulate_partition(seed: int, knobs: Knobs = Knobs()
                       ) -> tuple[PartitionCluster, Exception | None]:
    """Faults, then heal (no faults, every broker started) and wait, up to
    ``PARTITION_HEAL_BOUND_MS``, for one leader with a full ISR, every replica's log equal
    to the leader's below its high watermark, and new writes acknowledged."""
    sim = prepared(PartitionCluster(seed), knobs)
    try:
        sim.run_until(chaos(knobs, PARTITION_CHAOS_MS), chaos=True)
        sim.heal()
        acked_before = sim.stats.acked
        deadline = sim.now + PARTITION_HEAL_BOUND_MS
        while sim.now < deadline and (sim.convergence_problem() is not None
                                      or sim.stats.acked <= acked_before):
            sim.run_until(sim.now + 100)
        problem = sim.convergence_problem()
        if problem is not None:
            raise partition_cluster.Violation(
                partition_cluster.Invariant.CONVERGES,
                f"not converged {PARTITION_HEAL_BOUND_MS} ms after healing: {problem}")
        if sim.stats.acked <= acked_before:
            raise partition_cluster.Violation(partition_cluster.Invariant.CONVERGES,
                                              "no write acknowledged after healing")
        sim.check_final()
    except Exception as e:
        return sim, e
    return sim, None


def simulate_cluster(seed: int, knobs: Knobs = Knobs()) -> tuple[WholeCluster, Exception | None]:
    """The whole cluster: set up without faults (brokers registered, the topic led), faults
    until ``chaos_ms`` of simulated time, then heal and wait, up to
    ``CLUSTER_HEAL_BOUND_MS``, for a controller, one leader with a full ISR, every replica's
    log equal to the leader's below its high watermark, and new writes acknowledged."""
    sim = prepared(WholeCluster(seed), knobs)
    try:
        sim.set_up()
        sim.start_chaos()
        sim.run_until(chaos(knobs, CLUSTER_CHAOS_MS), chaos=True)
        sim.heal()
        acked_before = sim.part.stats.acked
        deadline = sim.now + CLUSTER_HEAL_BOUND_MS
        while sim.now < deadline and (sim.convergence_problem() is not None
                                      or sim.part.stats.acked <= acked_before):
            sim.run_until(sim.now + 100, chaos=False)
        problem = sim.convergence_problem()
        if problem is not None:
            raise partition_cluster.Violation(
                partition_cluster.Invariant.CONVERGES,
                f"not converged {CLUSTER_HEAL_BOUND_MS} ms after healing: {problem}")
        if sim.part.stats.acked <= acked_before:
            raise partition_cluster.Violation(partition_cluster.Invariant.CONVERGES,
                                              "no write acknowledged after healing")
        sim.check_final()
    except Exception as e:
        return sim, e
    return sim, None


def simulate_transactions(seed: int, knobs: Knobs = Knobs()
                          ) -> tuple[TransactionCluster, Exception | None]:
    """Faults, then heal and wait, up to ``TRANSACTION_HEAL_BOUND_MS``, for every
    transaction to be complete everywhere; then the final checks."""
    sim = prepared(TransactionCluster(seed), knobs)
    try:
        sim.run_until(chaos(knobs, TRANSACTION_CHAOS_MS), chaos=True)
        sim.heal()
        deadline = sim.now + TRANSACTION_HEAL_BOUND_MS
        while sim.now < deadline and sim.convergence_problem() is not None:
            sim.run_until(sim.now + 100)
        problem = sim.convergence_problem()
        if problem is not None:
            raise transaction_cluster.Violation(
                transaction_cluster.Invariant.QUIET,
                f"not quiet {TRANSACTION_HEAL_BOUND_MS} ms after healing: {problem}")
        sim.check_final()
    except Exception as e:
        return sim, e
    return sim, None


def simulate_offset_commits(seed: int, knobs: Knobs = Knobs()
                            ) -> tuple[OffsetCommitCluster, Exception | None]:
    """Faults, then heal and wait, up to ``OFFSET_COMMIT_HEAL_BOUND_MS``, for every
    member's last commit to be acknowledged; then the final check."""
    sim = prepared(OffsetCommitCluster(seed), knobs)
    try:
        sim.run_until(chaos(knobs, OFFSET_COMMIT_CHAOS_MS), chaos=True)
        sim.heal()
        deadline = sim.now + OFFSET_COMMIT_HEAL_BOUND_MS
        while sim.now < deadline and sim.convergence_problem() is not None:
            sim.run_until(sim.now + 100)
        problem = sim.convergence_problem()
        if problem is not None:
            raise offset_commit_cluster.Violation(
                offset_commit_cluster.Invariant.QUIET,
                f"{OFFSET_COMMIT_HEAL_BOUND_MS} ms after healing: {problem}")
        sim.check_final()
    except Exception as e:
        return sim, e
    return sim, None


def simulate_share(seed: int, knobs: Knobs = Knobs()) -> tuple[ShareCluster, Exception | None]:
    """Faults, then heal and wait, up to ``SHARE_HEAL_BOUND_MS``, for the start offset to
    reach the log end."""
    sim = prepared(ShareCluster(seed), knobs)
    try:
        sim.run_until(chaos(knobs, SHARE_CHAOS_MS), chaos=True)
        sim.heal()
        deadline = sim.now + SHARE_HEAL_BOUND_MS
        while sim.now < deadline and sim.convergence_problem() is not None:
            sim.run_until(sim.now + 100)
        problem = sim.convergence_problem()
        if problem is not None:
            raise share_partition_cluster.Violation(
                share_partition_cluster.Invariant.QUIET,
                f"{SHARE_HEAL_BOUND_MS} ms after healing: {problem}")
    except Exception as e:
        return sim, e
    return sim, None


# --- the registry ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one run of a workload gave, small enough to pass between processes."""

    workload: str
    seed: int
    chaos_ms: int
    faults_off: frozenset[str]
    invariant: str | None
    """The broken invariant's name, the exception's type for a failure of the model
    (e.g. ``RaftError``), None when the run passed."""
    message: str
    at_ms: int
    """Simulated time when the run ended (at the violation when it failed)."""
    injected: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    """CPU time of the run (its process's: a measure of work that other load on the
    machine does not inflate)."""
    trace: str = ""
    """The notable steps (all of them with ``Knobs.full_trace``, else the last ones)."""
    operations: int | None = None
    """Client operations started under chaos; None for a workload that does not count
    them."""
    op_interval_ms: int | None = None
    """``Knobs.op_interval_ms`` of the run."""

    @property
    def ok(self) -> bool:
        return self.invariant is None

    @property
    def faults_injected(self) -> int:
        return sum(self.injected.values())


@dataclass(frozen=True)
class Workload:
    name: str
    chaos_ms: int
    fault_kinds: tuple[str, ...]
    simulate: Callable[[int, Knobs], tuple[Traced, Exception | None]]
    pytest: str
    """The pytest module that runs its CI seeds."""
    operations: str | None = None
    """What one of its client operations is, when its cluster counts them (``Counted``,
    ``Knobs.op_interval_ms`` spaces them); None when it does not."""

    def run(self, seed: int, knobs: Knobs = Knobs()) -> Outcome:
        """Run ``seed``; a failure is an outcome, never an exception."""
        chaos_ms = chaos(knobs, self.chaos_ms)
        started = time.process_time()
        sim, error = self.simulate(seed, Knobs(chaos_ms, knobs.faults_off, knobs.full_trace,
                                               knobs.op_interval_ms))
        seconds = time.process_time() - started
        invariant = None
        if error is not None:
            rule = getattr(error, "invariant", None)
            invariant = rule.name if rule is not None else type(error).__name__
        return Outcome(self.name, seed, chaos_ms, knobs.faults_off, invariant,
                       "" if error is None else str(error), sim.now, dict(sim.injected),
                       seconds, sim.history() if knobs.full_trace or error else "",
                       sim.operations if isinstance(sim, Counted) else None,
                       knobs.op_interval_ms)


def _membership(name: str) -> Callable[[int, Knobs], tuple[Traced, Exception | None]]:
    return lambda seed, knobs: simulate_membership(seed, name, knobs)


RAFT_KINDS = raft_cluster.FAULT_KINDS
RAFT_OPERATION = "a batch proposed by a leader"
METADATA_OPERATION = "an admin operation's records (or a metadata transaction's end) " \
    "proposed by the active controller"
MEMBERSHIP_OPERATION = "a request to the leader to add or remove a voter (sometimes two " \
    "at once)"
WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("raft-3", RAFT_CHAOS_MS, RAFT_KINDS,
             lambda seed, knobs: simulate_raft(seed, 3, knobs), "test_raft_simulation.py",
             RAFT_OPERATION),
    Workload("raft-5", RAFT_CHAOS_MS, RAFT_KINDS,
             lambda seed, knobs: simulate_raft(seed, 5, knobs), "test_raft_simulation.py",
             RAFT_OPERATION),
    Workload("metadata-3", RAFT_CHAOS_MS, RAFT_KINDS,
             lambda seed, knobs: simulate_metadata(seed, 3, knobs), "test_raft_simulation.py",
             METADATA_OPERATION),
    Workload("metadata-5", RAFT_CHAOS_MS, RAFT_KINDS,
             lambda seed, knobs: simulate_metadata(seed, 5, knobs), "test_raft_simulation.py",
             METADATA_OPERATION),
    *(Workload(f"membership-{name}", MEMBERSHIP_CHAOS_MS,
               RAFT_KINDS + (("wipe",) if name == "replace" else ()), _membership(name),
               "test_membership_simulation.py", MEMBERSHIP_OPERATION)
      for name in sorted(MEMBERSHIP_WORKLOADS)),
    Workload("partition", PARTITION_CHAOS_MS, PartitionCluster.FAULT_KINDS, simulate_partition,
             "test_partition_replication.py", "a produce request"),
    Workload("cluster", CLUSTER_CHAOS_MS, WholeCluster.FAULT_KINDS, simulate_cluster,
             "test_whole_cluster_simulation.py", "a produce request"),
    Workload("transaction", TRANSACTION_CHAOS_MS, TransactionCluster.FAULT_KINDS,
             simulate_transactions, "test_transaction_simulation.py",
             "a transaction begun by a producer"),
    Workload("offset-commit", OFFSET_COMMIT_CHAOS_MS, OffsetCommitCluster.FAULT_KINDS,
             simulate_offset_commits, "test_offset_commit_simulation.py",
             "a member's OffsetCommit or OffsetFetch"),
    Workload("share", SHARE_CHAOS_MS, ShareCluster.FAULT_KINDS, simulate_share,
             "test_share_simulation.py", "a batch produced"),
]}
"""Every workload by name; a name's prefix before ``-`` (``raft``, ``membership``) names
its family."""


def select(names: list[str]) -> list[Workload]:
    """The workloads ``names`` name: ``all``, a workload, or a family (``raft``: both
    sizes; ``membership``: grow, churn and replace). Raises ``KeyError`` for a name that
    names none."""
    chosen: list[Workload] = []
    for name in names:
        found = list(WORKLOADS.values()) if name == "all" else \
            [w for w in WORKLOADS.values() if w.name == name or w.name.startswith(f"{name}-")]
        if not found:
            raise KeyError(name)
        chosen += [w for w in found if w not in chosen]
    return chosen
