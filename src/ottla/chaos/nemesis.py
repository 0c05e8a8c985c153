"""Applies a fault schedule to a running ChaosCluster on a thread of its own, heals each
fault when its time is up, and logs what it did (with the leaders it struck)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

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
                             "start_ns": start, "end_ns": healed})

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
        return fault.nodes

    def heal(self, wait: bool = False) -> None:
        """Links healed, paused nodes resumed, killed nodes restarted; with ``wait``
        until they are ready (between faults the schedule goes on while they start)."""
        self.cluster.network.heal()
        for node in sorted(self._paused):
            self.cluster.resume(node)
        self._paused.clear()
        for node in sorted(self._killed):
            self.cluster.restart(node, wait=False)
        self._killed.clear()
        if wait:
            for node in self.cluster.nodes.values():
                node.wait_ready(120)

    def stop(self) -> None:
        """No more faults; the one under way is healed and every node is ready."""
        self._stop.set()
        self._thread.join(120)
        self.heal(wait=True)
