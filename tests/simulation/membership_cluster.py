"""Voter changes (KIP-853) on the simulated quorum, under its crashes, partitions and loss.

The quorum runs with ``kraft.version`` 1: every node has a directory id and the voter set
lives in the log. Beside the proposals and the faults, a membership workload asks the
leader, now and then, to add a caught-up observer, to remove a voter (the leader
itself, sometimes), or, straight after one change, to make a second one (which the
leader must refuse while the first is in flight). Workloads:

- ``grow``: one voter and two observers; the quorum grows to three, then churns;
- ``churn``: three voters and two spare nodes; the target size wanders between 1 and 5;
- ``replace``: three voters and a spare; now and then a voter's disk is wiped (kill -9,
  an empty log, a fresh directory id and quorum state) and the workload removes its old
  key and adds the new one, as an operator replacing a dead controller does.

Wipes happen only when the quorum is whole: three or more committed voters, every key
the node's current one, and no log anywhere holding a change the others lack, since
losing a disk in the middle of a change (or two at once) may lose committed entries in
any Raft, which is not what is checked here.

Checked as the run goes, beside the quorum's invariants: the voter set a replica has at
its high watermark is the one the committed log says (``Invariant.VOTERS_AGREE``), and
the set it counts (majorities, elections) is the last one its disk holds, committed or
not, as KIP-853 specifies (``Invariant.VOTERS_AS_APPENDED``, read from the simulated
disk, not from the replica).
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections import Counter
from typing import Any

from ottla.raft.messages import Entry, written_voters
from ottla.raft.quorum import RaftConfig, RaftReplica, VoterChangeResult
from ottla.raft.voter_set import ReplicaKey, VoterNode, VoterSet
from tests.simulation.raft_cluster import (
    Invariant,
    SimulatedDisk,
    SimulatedQuorum,
    Violation,
)

WORKLOADS: dict[str, tuple[int, int, tuple[int, int]]] = {
    # name: (nodes, initial voters, (smallest, largest) target size)
    "grow": (3, 1, (3, 3)),
    "churn": (5, 3, (1, 5)),
    "replace": (4, 3, (3, 3)),
}
MEMBER_EVERY_MS = (100, 800)
WIPE_CHANCE = 0.08


class MembershipQuorum(SimulatedQuorum):
    proposals_are_operations = False
    """Its operations are the voter changes asked of the leader: a member step that asks
    one (or two at once) under chaos is one, and ``op_interval_ms`` skips a step due
    sooner (its timer goes on; a wipe it draws still happens); the proposals go as they
    do, as the changes need a live log."""

    def __init__(self, seed: int, workload: str) -> None:
        nodes, initial, self.sizes = WORKLOADS[workload]
        self.workload = workload
        self.dirs = {n: f"dir-{n}-0" for n in range(1, nodes + 1)}
        self.bootstrap = VoterSet(tuple(VoterNode(ReplicaKey(n, self.dirs[n]))
                                        for n in range(1, initial + 1)))
        self.ops_rng = random.Random(seed * 7919 + 17)
        self.target = self.ops_rng.randint(*self.sizes)
        self.request_ids = itertools.count(1)
        self.requests: dict[int, str] = {}  # request id -> "add" / "remove"
        self.results: Counter[tuple[str, str]] = Counter()
        self.wipes = 0
        self.wiping_allowed = True
        self.workload_on = True
        self.committed_voter_offsets: list[int] = []
        self.committed_voter_sets: list[VoterSet] = []
        self._scanned = 0
        super().__init__(seed, initial, observers=nodes - initial)

    def make_replica(self, n: int, epoch: int, voted: int | None) -> RaftReplica:
        return RaftReplica(n, self.bootstrap, self.logs[n], random.Random(self.rng.random()),
                           RaftConfig(), epoch=epoch, voted_for=voted,
                           directory_id=self.dirs[n], kraft_version=1)

    # --- the committed voter sets, and each replica's ------------------------------------

    def committed_voters_at(self, offset: int) -> VoterSet:
        for i in range(self._scanned, len(self.committed)):
            voters = written_voters(self.committed[i].payload)
            if voters is not None:
                self.committed_voter_offsets.append(self.committed_bases[i])
                self.committed_voter_sets.append(voters)
        self._scanned = len(self.committed)
        i = bisect.bisect_right(self.committed_voter_offsets, offset)
        return self.committed_voter_sets[i - 1] if i else self.bootstrap

    def on_state(self, n: int, replica: RaftReplica) -> None:
        for result in replica.take_voter_change_results():
            self.record(result)
        hw = replica.high_watermark
        mine, committed = replica.voter_set_at(hw - 1), self.committed_voters_at(hw - 1)
        if mine != committed:
            raise Violation(Invariant.VOTERS_AGREE,
                            f"node {n} has voters {mine} at its high watermark {hw}, the "
                            f"committed log {committed}")
        appended = self.last_voters_of_log(n)
        if replica.voter_set != appended:
            raise Violation(Invariant.VOTERS_AS_APPENDED,
                            f"node {n} counts voters {replica.voter_set}, its log's last "
                            f"VotersRecord says {appended}")

    def record(self, result: VoterChangeResult) -> None:
        kind = self.requests.pop(result.request_id, "update")
        self.note("{} {}: {}", kind, result.request_id, result.error.name)
        self.results[(kind, result.error.name)] += 1

    def last_voters_of_log(self, n: int) -> VoterSet:
        log = self.logs[n]
        for entry in reversed(log.entries):
            voters = written_voters(entry.payload)
            if voters is not None:
                return voters
        if log.snapshot is not None and log.snapshot.voters is not None:
            return log.snapshot.voters
        return self.bootstrap

    def check_durable(self, n: int, replica: RaftReplica) -> None:
        """A wiped disk loses entries it acknowledged (a fetch it sent before may even
        count after), which no Raft's durability covers: the check ends at the first
        wipe, the other rules go on."""
        if not self.wipes:
            super().check_durable(n, replica)

    # --- the workload ----------------------------------------------------------------------

    def start_workload(self, chaos: bool) -> None:
        self.schedule(self.now + self.ops_rng.randint(*MEMBER_EVERY_MS), "member", None)

    def on_event(self, kind: str, data: Any, chaos: bool) -> None:
        if kind != "member":
            return
        try:
            if self.workload_on:
                self.membership_step(chaos)
        finally:  # also after a step a disk fault interrupts (``DiskFailure``)
            self.schedule(self.now + self.ops_rng.randint(*MEMBER_EVERY_MS), "member", None)

    def current_leader(self) -> tuple[int, RaftReplica] | None:
        leaders = [(r.epoch, n, r) for n, r in self.nodes.items() if r is not None and
                   r.is_leader]
        if not leaders:
            return None
        _, n, r = max(leaders, key=lambda t: (t[0], t[1]))
        return n, r

    def membership_step(self, chaos: bool) -> None:
        if chaos and self.workload == "replace" and self.wiping_allowed and \
                "wipe" not in self.faults_off and \
                self.ops_rng.random() < WIPE_CHANCE and self.safe_to_wipe():
            self.wipe(self.ops_rng.choice(sorted(self.committed_voters_at(1 << 62).ids)))
            return
        found = self.current_leader()
        if found is None:
            return
        if chaos and self.op_interval_ms is not None and self.now < self.next_operation_ms:
            return
        n, replica = found
        asked = self.change(n, replica)
        if self.ops_rng.random() < 0.3:
            asked = self.change(n, replica) or asked  # a second one while the first is in flight
        if chaos and asked:
            self.operations += 1
            self.next_operation_ms = self.now + (self.op_interval_ms or 0)

    def change(self, n: int, replica: RaftReplica) -> bool:
        """Ask the leader for a change towards the target size; False if none is due."""
        voters = replica.voter_set
        stale = [k for k in voters.keys if k.directory_id != self.dirs[k.id]]
        if self.ops_rng.random() < 0.1:
            self.target = self.ops_rng.randint(*self.sizes)
        size = len(voters.nodes)
        spare = [m for m in sorted(self.logs) if m not in voters.ids and
                 self.nodes[m] is not None]
        if stale:
            self.remove(n, replica, stale[0])
        elif size < self.target and spare:
            self.add(n, replica, self.ops_rng.choice(spare))
        elif size > self.target or (size > 1 and self.ops_rng.random() < 0.3):
            # Not the leader from two voters: were it to crash before that commits, the
            # other voter, without the record, would campaign among the two and need
            # the removed leader's vote, which its longer log refuses (Kafka too).
            keys = [k for k in voters.keys if size > 2 or k.id != n]
            self.remove(n, replica, self.ops_rng.choice(keys))
        else:
            return False
        return True

    def add(self, n: int, replica: RaftReplica, m: int) -> None:
        request_id = next(self.request_ids)
        self.requests[request_id] = "add"
        self.note("leader {} asked to add {} (add {})", n, m, request_id)
        result = replica.add_voter(request_id, VoterNode(ReplicaKey(m, self.dirs[m])),
                                   self.clock(n))
        self.after_change(n, replica, result)

    def remove(self, n: int, replica: RaftReplica, key: ReplicaKey) -> None:
        request_id = next(self.request_ids)
        self.requests[request_id] = "remove"
        self.note("leader {} asked to remove {} (remove {})", n, key.id, request_id)
        self.after_change(n, replica, replica.remove_voter(request_id, key, self.clock(n)))

    def after_change(self, n: int, replica: RaftReplica, result: VoterChangeResult | None
                     ) -> None:
        if result is not None:
            self.record(result)
        self.after(n, replica.tick(self.clock(n)))

    def safe_to_wipe(self) -> bool:
        committed = self.committed_voters_at(1 << 62)
        if len(committed.nodes) < 3 or \
                any(k.directory_id != self.dirs[k.id] for k in committed.keys):
            return False
        return all(self.last_voters_of_log(m) == committed for m in self.logs)

    def wipe(self, n: int) -> None:
        """kill -9 and a new disk: the node comes back empty, with a new directory id."""
        if self.nodes[n] is not None:
            self.crash(n)
        self.wipes += 1
        self.injected["wipe"] += 1
        self.note("node {}'s disk wiped", n)
        self.logs[n] = SimulatedDisk()
        self.durable[n] = (0, None)
        self.dirs[n] = f"dir-{n}-{self.wipes}"
        self.applied[n] = []
        self.applied_end[n] = 0
        self.schedule(self.now + self.ops_rng.randint(100, 2000), "restart", n)

    # --- recovery --------------------------------------------------------------------------

    def leader(self) -> int | None:
        found = self.current_leader()
        if found is None:
            return None
        n, replica = found
        voters = [self.nodes[v] for v in replica.voters]
        if all(v is not None and v.epoch == replica.epoch for v in voters):
            return n
        return None

    def voter_entries(self) -> list[Entry]:
        return [e for e in self.committed if written_voters(e.payload) is not None]
