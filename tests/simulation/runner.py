"""``python -m tests.simulation``: run seeds of the simulations, replay one, shrink it.

It lives beside the simulations, not in ``ottla``, because the clusters and their
checkers are test code (``src`` never imports ``tests``), as ``tests.oracle`` does.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO

from tests.simulation.workloads import WORKLOADS, Knobs, Outcome, Workload, select

COMMAND = "python -m tests.simulation"


def parse_seeds(text: str) -> list[int]:
    """``"1-100"``, ``"7"``, ``"1-3,10,20-22"``: the seeds, in order, each once."""
    seeds: dict[int, None] = {}
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"not a seed or range of seeds: {part!r}")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"an empty range of seeds: {part!r}")
        seeds.update(dict.fromkeys(range(first, last + 1)))
    return list(seeds)


def replay_command(outcome: Outcome, default_chaos_ms: int) -> str:
    """The command that runs ``outcome``'s seed with its knobs again, with its trace."""
    args = [COMMAND, "--workload", outcome.workload, "--seed", str(outcome.seed)]
    if outcome.chaos_ms != default_chaos_ms:
        args += ["--chaos-ms", str(outcome.chaos_ms)]
    if outcome.faults_off:
        args += ["--faults-off", ",".join(sorted(outcome.faults_off))]
    if outcome.op_interval_ms is not None:
        args += ["--op-interval-ms", str(outcome.op_interval_ms)]
    return " ".join([*args, "--trace"])


# --- running seeds ---------------------------------------------------------------------------


@dataclass
class Tally:
    """One workload's seeds: how many ran, how long they took, the failures."""

    seeds: int = 0
    seconds: float = 0.0
    """The runs' CPU time, summed: seeds over it are seeds a second per core."""
    injected: dict[str, int] = field(default_factory=dict)
    failures: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.seeds += 1
        self.seconds += outcome.seconds
        for kind, count in outcome.injected.items():
            self.injected[kind] = self.injected.get(kind, 0) + count
        if not outcome.ok:
            self.failures.append(outcome)


Task = tuple[str, int, Knobs]


def _run(task: Task) -> Outcome:
    name, seed, knobs = task
    return WORKLOADS[name].run(seed, knobs)


def outcomes(workloads: list[Workload], seeds: list[int], jobs: int, knobs: Knobs
             ) -> Iterator[Outcome]:
    """Every (workload, seed) run, in ``jobs`` processes (in this one for 1), as they end."""
    tasks: list[Task] = [(w.name, seed, knobs) for w in workloads for seed in seeds]
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(_run, tasks)
        return
    chunk = max(1, min(50, len(tasks) // (jobs * 8)))
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap_unordered(_run, tasks, chunksize=chunk)


def run_seeds(workloads: list[Workload], seeds: list[int], jobs: int, knobs: Knobs,
              out: TextIO) -> dict[str, Tally]:
    tallies = {w.name: Tally() for w in workloads}
    total = len(workloads) * len(seeds)
    started = last_report = time.monotonic()
    for done, outcome in enumerate(outcomes(workloads, seeds, jobs, knobs), 1):
        tallies[outcome.workload].add(outcome)
        if not outcome.ok:
            print(f"FAIL {outcome.workload} seed {outcome.seed}: {first_line(outcome.message)}",
                  file=out, flush=True)
        if time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            print(f"... {done}/{total} runs in {last_report - started:.0f} s", file=out,
                  flush=True)
    return tallies


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def summary(tallies: dict[str, Tally], wall_seconds: float, jobs: int) -> str:
    lines = [f"{'workload':<20} {'seeds':>7} {'failed':>7} {'cpu s':>9} {'seeds/s':>8}  "
             "faults injected"]
    for name, t in tallies.items():
        rate = t.seeds / t.seconds if t.seconds else 0.0
        faults = ", ".join(f"{k} {v}" for k, v in sorted(t.injected.items()))
        lines.append(f"{name:<20} {t.seeds:>7} {len(t.failures):>7} {t.seconds:>9.1f} "
                     f"{rate:>8.1f}  {faults}")
    runs = sum(t.seeds for t in tallies.values())
    lines.append(f"{runs} runs in {wall_seconds:.1f} s on {jobs} process(es)")
    failures = [f for t in tallies.values() for f in t.failures]
    if failures:
        lines.append("")
        lines.append(f"{len(failures)} violation(s):")
        for f in sorted(failures, key=lambda o: (o.workload, o.seed)):
            lines.append(f"  {f.workload} seed {f.seed}: {f.invariant} at {f.at_ms} ms: "
                         f"{first_line(f.message)}")
            lines.append(f"    replay: {replay_command(f, WORKLOADS[f.workload].chaos_ms)}")
    return "\n".join(lines)


# --- shrinking -------------------------------------------------------------------------------


CHAOS_GRAIN_MS = 100
"""The finest step of the chaos durations tried."""


@dataclass(frozen=True)
class Shrunk:
    original: Outcome
    smallest: Outcome
    runs: int


def shrink(workload: Workload, failing: Outcome, out: TextIO | None = None) -> Shrunk:
    """A smaller schedule of ``failing``'s seed that breaks the same invariant.

    Smaller means a shorter chaos duration, fewer fault kinds, no more faults injected
    and, for a workload that counts its client operations, fewer of them. First the
    chaos ends at the violation when it came under chaos (the run up to it is the same
    run); then each fault kind is switched off in turn, kept off if the seed still fails
    the same way; then the chaos ends at the violation again and its duration is
    bisected down (a shorter one that still fails is kept; failing is not monotonic in
    it, so this finds a small one, not the smallest). Then the operations are thinned:
    spaced at least their mean interval apart, then twice as far each time while the
    seed still fails with fewer of them, then bisected between the widest spacing that
    failed and the first that passed; and the chaos ends at the violation once more.
    Bounding the count instead would only cut the run before its violation: the clients
    must go on through the faults, only less often."""
    best, runs = failing, 0

    def attempt(chaos_ms: int, faults_off: frozenset[str], op_interval_ms: int | None = None,
                fewer_operations: bool = False) -> bool:
        nonlocal best, runs
        runs += 1
        spacing = op_interval_ms if op_interval_ms is not None else best.op_interval_ms
        tried = workload.run(failing.seed, Knobs(chaos_ms, faults_off,
                                                 op_interval_ms=spacing))
        kept = tried.invariant == failing.invariant and \
            tried.faults_injected <= best.faults_injected and \
            (not fewer_operations or (tried.operations or 0) < (best.operations or 0))
        if out is not None:
            print(f"  shrink: chaos {chaos_ms} ms, off [{','.join(sorted(faults_off))}]"
                  + (f", operations {spacing} ms apart ({tried.operations})"
                     if spacing is not None else "")
                  + f": {tried.invariant or 'passes'}{' (kept)' if kept else ''}",
                  file=out, flush=True)
        if kept:
            best = tried
        return kept

    def bisect_chaos() -> None:
        low, high = 0, best.chaos_ms
        while high - low > CHAOS_GRAIN_MS:
            middle = (low + high) // 2 // CHAOS_GRAIN_MS * CHAOS_GRAIN_MS
            if middle <= low:
                break
            if attempt(middle, best.faults_off):
                high = middle
            else:
                low = middle

    def thin_operations() -> None:
        if not best.operations:
            return
        failed = 0
        spacing = max(1, best.chaos_ms // best.operations)
        while spacing <= best.chaos_ms:
            if not attempt(best.chaos_ms, best.faults_off, spacing, fewer_operations=True):
                break
            failed, spacing = spacing, spacing * 2
        else:
            return
        low, high = failed, spacing
        while high - low > max(1, low // 8):
            middle = (low + high) // 2
            if attempt(best.chaos_ms, best.faults_off, middle, fewer_operations=True):
                low = middle
            else:
                high = middle

    def end_chaos_at_violation() -> None:
        if best.at_ms < best.chaos_ms:
            attempt(best.at_ms, best.faults_off)

    end_chaos_at_violation()
    for kind in workload.fault_kinds:
        if kind not in best.faults_off:
            attempt(best.chaos_ms, best.faults_off | {kind})
    end_chaos_at_violation()
    bisect_chaos()
    thin_operations()
    end_chaos_at_violation()
    return Shrunk(failing, best, runs)


# --- the command -----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=COMMAND, description="Run Ottla's deterministic simulations over seeds, or "
        "replay one seed with its trace and shrink it when it fails.")
    p.add_argument("--workload", default="all", help="all, a workload or a family, or a "
                   f"comma-separated list ({', '.join(WORKLOADS)}; raft, metadata, "
                   "membership name their families)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seeds", default="1-100", help="seeds: ranges and lists, e.g. "
                       "1-1000 or 1-10,42 (default 1-100)")
    which.add_argument("--seed", type=int, help="replay this one seed (with --trace: print "
                       "its trace); a failure is shrunk")
    p.add_argument("--trace", action="store_true", help="print every notable step of the run")
    p.add_argument("--no-shrink", action="store_true", help="do not shrink a failing --seed")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="processes (default: the cores, %(default)s)")
    p.add_argument("--chaos-ms", type=int, help="simulated time under faults (default: the "
                   "workload's)")
    p.add_argument("--faults-off", default="", help="fault kinds not injected, comma-separated")
    p.add_argument("--op-interval-ms", type=int, help="the least simulated time between two "
                   "client operations under chaos (default: as the clients go), for the "
                   "workloads that count them: " + "; ".join(
                       f"{', '.join(names)}: {what}" for what, names in counted().items()))
    return p


def counted() -> dict[str, list[str]]:
    """What an operation is -> the workloads counting that, in the registry's order."""
    names: dict[str, list[str]] = {}
    for w in WORKLOADS.values():
        if w.operations:
            names.setdefault(w.operations, []).append(w.name)
    return names


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    """0 if every run passed, 1 on a violation, 2 on bad arguments."""
    args = parser().parse_args(argv)
    try:
        workloads = select([n.strip() for n in args.workload.split(",") if n.strip()])
        seeds = [args.seed] if args.seed is not None else parse_seeds(args.seeds)
    except KeyError as e:
        print(f"no workload {e}; the workloads: all, {', '.join(WORKLOADS)}", file=out)
        return 2
    except ValueError as e:
        print(e, file=out)
        return 2
    faults_off = frozenset(k.strip() for k in args.faults_off.split(",") if k.strip())
    kinds = {k for w in workloads for k in w.fault_kinds}
    if faults_off - kinds:
        print(f"no fault kind {', '.join(sorted(faults_off - kinds))} in these workloads; "
              f"theirs: {', '.join(sorted(kinds))}", file=out)
        return 2
    if args.op_interval_ms is not None:
        uncounted = [w.name for w in workloads if w.operations is None]
        if args.op_interval_ms < 1:
            print("--op-interval-ms: 1 or more", file=out)
            return 2
        if uncounted:
            counted = ", ".join(w.name for w in WORKLOADS.values() if w.operations)
            print(f"--op-interval-ms: {', '.join(uncounted)} count no operations; the "
                  f"workloads that do: {counted}", file=out)
            return 2
    knobs = Knobs(args.chaos_ms, faults_off, full_trace=args.trace,
                  op_interval_ms=args.op_interval_ms)
    if args.seed is not None:
        return replay(workloads, args.seed, knobs, not args.no_shrink, out)
    started = time.monotonic()
    tallies = run_seeds(workloads, seeds, max(1, args.jobs), knobs, out)
    print(summary(tallies, time.monotonic() - started, max(1, args.jobs)), file=out)
    return 1 if any(t.failures for t in tallies.values()) else 0


def replay(workloads: list[Workload], seed: int, knobs: Knobs, shrinking: bool,
           out: TextIO) -> int:
    failed = False
    for w in workloads:
        outcome = w.run(seed, knobs)
        off = f", faults off: {', '.join(sorted(knobs.faults_off))}" if knobs.faults_off else ""
        ops = "" if outcome.operations is None else f", {outcome.operations} operations" + (
            f" {outcome.op_interval_ms} ms apart" if outcome.op_interval_ms is not None else "")
        print(f"== {w.name} seed {seed} (chaos {outcome.chaos_ms} ms{off}{ops})", file=out)
        if knobs.full_trace:
            print(outcome.trace, file=out)
        faults = ", ".join(f"{k} {v}" for k, v in sorted(outcome.injected.items()))
        print(f"faults injected: {faults or 'none'}; {outcome.seconds:.2f} s of CPU", file=out)
        if outcome.ok:
            print(f"ok at {outcome.at_ms} ms", file=out)
            continue
        failed = True
        print(f"VIOLATION {outcome.invariant} at {outcome.at_ms} ms: {outcome.message}",
              file=out)
        if not knobs.full_trace:
            print(f"the last steps:\n{outcome.trace}", file=out)
        print(f"replay: {replay_command(outcome, w.chaos_ms)}", file=out)
        if shrinking:
            shrunk = shrink(w, outcome, out)
            s = shrunk.smallest
            print(f"smallest failing schedule ({shrunk.runs} runs tried): chaos "
                  f"{s.chaos_ms} ms (was {outcome.chaos_ms}), fault kinds "
                  f"{len(w.fault_kinds) - len(s.faults_off)} of {len(w.fault_kinds)} "
                  f"(off: {', '.join(sorted(s.faults_off)) or 'none'}), "
                  f"{s.faults_injected} faults injected (was {outcome.faults_injected}), "
                  + (f"{s.operations} operations (was {outcome.operations}), "
                     if s.operations is not None else "")
                  + f"{s.invariant} at {s.at_ms} ms", file=out)
            print(f"replay it: {replay_command(s, w.chaos_ms)}", file=out)
    return 1 if failed else 0
