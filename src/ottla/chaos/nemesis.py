"""Applies a fault schedule to a running ChaosCluster on a thread of its own, heals each
fault when its time is up, and logs what it did (with the leaders it struck)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from ottla.chaos.clocks import REREAD_S
from ottla.chaos.cluster import ChaosCluster
from ottla.chaos.faults import Fault

log = logging.getLogger(__name__)


class Nemesis:
    def __init__(self, cluster: ChaosCluster, faults: list[Fault], started_ns: int,
                 partition_leaders: Callable[[], dict[int, int]]) -> None:
        self.cluster = cluster
        self.faults = faults
        self.started_ns = started_ns
        self.partition_leaders = partition_leaders
        self.log: list[dict[str, object]] = []
        self.injected: Counter[str] = Counter()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._killed: set[int] = set()
        self._paused: set[int] = set()
        self._full: set[int] = set()
        self._filled: set[int] = set()
        """Nodes whose disk was filled: one that stops because of it, even after the
        fault was healed (it was shutting down), is started again at the next heal."""
        self._skewed: set[int] = set()
        self._notes: dict[str, object] = {}
        """What the fault under way did, for its entry in the log (a disk-full node
        that stopped, a clock-skew's offset as the node stamps records)."""

    def start(self) -> Nemesis:
        self._thread.start()
        return self

    def _wait_until(self, at_s: float) -> bool:
        left = self.started_ns / 1e9 + at_s - time.monotonic()
        return not self._stop.wait(left) if left > 0 else not self._stop.is_set()

    def _run(self) -> None:
        for fault in self.faults:
            if not self._wait_until(fault.at_s):
                break
            start = time.monotonic_ns()
            self._notes = {}
            try:
                struck = self._inject(fault)
            except Exception as e:  # the run goes on; the report says it
                self.errors.append(f"{fault.kind} at {fault.at_s}s: {e!r}")
                log.exception("injecting %s", fault)
                continue
            self.injected[fault.kind] += 1
            # as long as scheduled, even when it began late (a restart took its time)
            self._wait_until((start - self.started_ns) / 1e9 + fault.duration_s)
            healed = time.monotonic_ns()
            try:
                self.heal()
            except Exception as e:
                self.errors.append(f"healing {fault.kind}: {e!r}")
            self.log.append({**fault.to_dict(), "nodes": list(struck),
                             "start_ns": start, "end_ns": healed, **self._notes})

    def _inject(self, fault: Fault) -> tuple[int, ...]:
        network = self.cluster.network
        if fault.kind == "leader-kill":
            if fault.target == "quorum":
                leader = self.cluster.quorum_leader()
            else:
                leader = self.partition_leaders().get(0, -1)
            if leader < 0:
                raise RuntimeError(f"no {fault.target} leader to kill")
            self.cluster.kill9(leader)
            self._killed.add(leader)
            return (leader,)
        if fault.kind == "kill":
            self.cluster.kill9(fault.nodes[0])
            self._killed.add(fault.nodes[0])
        elif fault.kind == "pause":
            self.cluster.pause(fault.nodes[0])
            self._paused.add(fault.nodes[0])
        elif fault.kind == "cut":
            network.cut(*fault.nodes)
        elif fault.kind == "partition":
            network.partition_one_way(*fault.nodes)
        elif fault.kind == "delay":
            network.delay(*fault.nodes, float(fault.target))
        elif fault.kind == "slow":
            network.slow(*fault.nodes, float(fault.target))
        elif fault.kind == "disk-full":
            self._full.add(fault.nodes[0])
            self._filled.add(fault.nodes[0])
            self._notes["filled_bytes"] = self.cluster.fill_disk(fault.nodes[0])
        elif fault.kind == "clock-skew":
            self._skewed.add(fault.nodes[0])
            self.cluster.skew_clock(fault.nodes[0], float(fault.target))
            try:  # the clock the node stamps records with, as a client sees it
                self._notes["observed_skew_s"] = self._observed_skew(fault.nodes[0],
                                                                     float(fault.target))
            except Exception as e:  # a finding, not the nemesis's failure
                self._notes["probe_error"] = repr(e)
        return fault.nodes

    def _observed_skew(self, node: int, target: float) -> float:
        """The node's clock offset once it has read its new one (within REREAD_S), or as
        it still is a second after that."""
        deadline = time.monotonic() + REREAD_S + 1
        while True:
            seen = self.cluster.clock_offset(node)
            if abs(seen - target) < 1 or time.monotonic() >= deadline:
                return seen
            time.sleep(0.1)

    def heal(self, wait: bool = False) -> None:
        """Links healed, paused nodes resumed, killed nodes restarted, full disks freed
        (and their nodes restarted if they stopped), skewed clocks set right; with
        ``wait`` until they are ready (between faults the schedule goes on while they
        start)."""
        self.cluster.network.heal()
        for node in sorted(self._paused):
            self.cluster.resume(node)
        self._paused.clear()
        for node in sorted(self._killed):
            self.cluster.restart(node, wait=False)
        self._killed.clear()
        for node in sorted(self._full):
            code = self._exit_code(node)
            self._notes.update(stopped=code is not None, exit_code=code)
            self.cluster.free_disk(node)
        self._full.clear()
        self._restart_stopped()
        for node in sorted(self._skewed):
            self.cluster.skew_clock(node, 0)
        self._skewed.clear()
        if wait:
            for i, node in self.cluster.nodes.items():
                try:
                    node.wait_ready(120)
                except RuntimeError:  # it stopped: a disk filled before may be why
                    if i not in self._filled or self._exit_code(i) is None:
                        raise
                    self._restart_stopped()
                    node.wait_ready(120)

    def _exit_code(self, node: int) -> int | None:
        """The node's exit code if it stopped on its own (not if kill -9ed: no process)."""
        proc = self.cluster.nodes[node].proc
        return proc.poll() if proc is not None else None

    def _restart_stopped(self) -> None:
        for node in sorted(self._filled):
            code = self._exit_code(node)
            if code is not None:
                log.info("node %d stopped (%s) after its disk filled: starting it again",
                         node, code)
                self.cluster.restart(node, wait=False)

    def stop(self) -> None:
        """No more faults; the one under way is healed and every node is ready."""
        self._stop.set()
        self._thread.join(120)
        self.heal(wait=True)
