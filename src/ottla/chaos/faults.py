"""The fault schedule of a chaos run, drawn from one seed: the same seed, duration and
nodes give the same faults at the same offsets from the start, so a run that found a bug
can be run again as it was (sans-I/O: the nemesis applies it).

Faults come one at a time, each healed before the next, cycling through every kind in
an order the seed shuffles, so even a short run injects each kind once.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

KINDS = ("kill", "leader-kill", "pause", "cut", "partition", "delay", "slow", "disk-full",
         "clock-skew")
"""kill -9 a node (restarted when healed); kill -9 the leader of the metadata quorum or
of a partition; SIGSTOP a node (SIGCONT when healed); cut every link between two nodes;
one-way partition (the first node cannot reach the second); delay or slow the links
between two nodes; fill a node's disk (freed, and the node restarted if it stopped, when
healed); jump a node's wall clock by minutes (back when healed)."""

SKEWS_S = (-600, -120, -30, 30, 120, 600)
"""clock-skew: how far a node's wall clock jumps, in seconds. Clocks of machines drift
apart by that much, and an NTP step jumps one by that much at once."""


@dataclass(frozen=True)
class Fault:
    at_s: float
    """Seconds after the workload started."""
    kind: str
    duration_s: float
    nodes: tuple[int, ...]
    """The nodes it strikes (none for leader-kill: the leader of then is the target)."""
    target: str = ""
    """leader-kill: ``quorum`` or ``partition``; delay: seconds; slow: bytes/s;
    clock-skew: seconds the node's wall clock is off (ahead when positive)."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def schedule(seed: int, start_s: float, end_s: float, nodes: list[int],
             kinds: tuple[str, ...] = KINDS, min_s: float = 2.0, max_s: float = 5.0,
             gap_s: tuple[float, float] = (1.5, 3.0)) -> list[Fault]:
    """Faults from ``start_s`` until ``end_s`` (each healed by then)."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    if not kinds:
        return faults
    order: list[str] = []
    at = start_s
    while True:
        duration = round(rng.uniform(min_s, max_s), 2)
        if at + duration > end_s:
            return faults
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop(0)
        pair = tuple(rng.sample(nodes, 2))
        target = ""
        if kind in ("kill", "pause", "disk-full"):
            pair = pair[:1]
        elif kind == "clock-skew":
            pair, target = pair[:1], str(rng.choice(SKEWS_S))
        elif kind == "leader-kill":
            pair, target = (), rng.choice(("quorum", "partition"))
        elif kind == "delay":
            target = str(round(rng.uniform(0.05, 0.5), 3))
        elif kind == "slow":
            target = str(rng.choice((20_000, 100_000, 500_000)))
        faults.append(Fault(round(at, 2), kind, duration, pair, target))
        at += duration + rng.uniform(*gap_s)
