"""Run a scenario on both targets, normalise, diff, and hold the differences against what
the scenario declared."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tests.oracle.diff import Difference, diff
from tests.oracle.model import SCENARIOS, Expect, Json, Scenario
from tests.oracle.normalise import Normaliser
from tests.oracle.target import Side, Target


@dataclass
class Outcome:
    scenario: Scenario
    raw: dict[Side, Json] = field(default_factory=dict)
    normalised: dict[Side, Json] = field(default_factory=dict)
    errors: dict[Side, str] = field(default_factory=dict)
    """The traceback of a scenario that raised on a side: never an agreement."""
    accepted: list[tuple[Difference, Expect]] = field(default_factory=list)
    unexpected: list[Difference] = field(default_factory=list)
    stale: list[Expect] = field(default_factory=list)
    """Declared differences that matched nothing: gone, so their declaration must go."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.errors or self.unexpected or self.stale)

    @property
    def bugs(self) -> list[Expect]:
        return list(dict.fromkeys(e for _, e in self.accepted if e.is_bug))

    @property
    def legitimate(self) -> list[Expect]:
        return list(dict.fromkeys(e for _, e in self.accepted if not e.is_bug))

    def report(self, limit: int = 40, accepted: bool = True) -> str:
        """What a reader needs: the verdict, then the unexpected differences (smallest
        paths first), stale declarations, and the accepted ones with their reasons."""
        s = self.scenario
        verdict = "ok" if self.ok else "FAIL"
        kinds = ("agrees" if not self.accepted else
                 f"{len(self.accepted)} accepted difference(s)")
        lines = [f"[{verdict}] {s.name} ({s.family}, {self.seconds:.1f} s): {kinds}"]
        for side, trace in self.errors.items():
            lines.append(f"  the scenario raised on {side}:\n" + _indent(trace, 4))
        if self.unexpected:
            lines.append(f"  {len(self.unexpected)} unexpected difference(s):")
            lines += [f"    {d}" for d in self.unexpected[:limit]]
            if len(self.unexpected) > limit:
                lines.append(f"    ... and {len(self.unexpected) - limit} more")
        for expect in self.stale:
            lines.append(f"  declared but not seen (remove it): {expect.path}: "
                         f"{expect.reason}")
        if accepted:
            by_expect: dict[Expect, list[Difference]] = {}
            for d, e in self.accepted:
                by_expect.setdefault(e, []).append(d)
            for e, ds in by_expect.items():
                lines.append(f"  accepted {e.path} ({len(ds)}): {e.reason}")
                lines += [f"      {d}" for d in ds[:3]]
                if len(ds) > 3:
                    lines.append(f"      ... and {len(ds) - 3} more")
        return "\n".join(lines)


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.rstrip().splitlines())


def compare(scenario: Scenario, kafka: Json, ottla: Json,
            topic_ids: dict[Side, dict[str, str]] | None = None) -> Outcome:
    """Normalise both results (each with its own aliases and topic ids), diff them, and
    sort each difference into accepted (the first ``Expect`` that matches) or
    unexpected."""
    outcome = Outcome(scenario, raw={"kafka": kafka, "ottla": ottla})
    for side, result in outcome.raw.items():
        normalise = Normaliser(scenario.compare_messages, scenario.normalise,
                               (topic_ids or {}).get(side, {}))
        outcome.normalised[side] = normalise(result)
    used: set[Expect] = set()
    for d in diff(outcome.normalised["kafka"], outcome.normalised["ottla"]):
        expect = next((e for e in scenario.expect if e.matches(d.path, d.kafka, d.ottla)),
                      None)
        if expect is None:
            outcome.unexpected.append(d)
        else:
            outcome.accepted.append((d, expect))
            used.add(expect)
    outcome.stale = [e for e in scenario.expect if e not in used]
    return outcome


def run_on(scenario: Scenario, target: Target) -> tuple[Json, str | None]:
    target.scenario = scenario.name
    target.topic_ids = {}
    try:
        return scenario.fn(target), None
    except Exception:
        return None, traceback.format_exc()
    finally:
        target.close()


def run_scenario(scenario: Scenario, kafka: Target, ottla: Target,
                 parallel: bool = True) -> Outcome:
    """Run ``scenario`` on both targets (at once, unless ``parallel`` is off: a scenario
    waits on timeouts as long on each side) and compare what they saw."""
    started = time.monotonic()
    kafka.now = ottla.now = int(time.time() * 1000)
    if parallel:
        with ThreadPoolExecutor(2, thread_name_prefix="oracle") as pool:
            on_kafka = pool.submit(run_on, scenario, kafka)
            on_ottla = pool.submit(run_on, scenario, ottla)
            (k, k_error), (o, o_error) = on_kafka.result(), on_ottla.result()
    else:
        k, k_error = run_on(scenario, kafka)
        o, o_error = run_on(scenario, ottla)
    outcome = compare(scenario, k, o, {"kafka": kafka.topic_ids, "ottla": ottla.topic_ids})
    for side, error in (("kafka", k_error), ("ottla", o_error)):
        if error is not None:
            outcome.errors[side] = error  # type: ignore[index]
    outcome.seconds = time.monotonic() - started
    return outcome


def select(names: Iterable[str] = (), every: bool = False) -> list[Scenario]:
    """The scenarios named (a name, a family, or an fnmatch pattern over names), all of
    them with ``every``, else the CI subset."""
    import fnmatch

    import tests.oracle.scenarios  # noqa: F401 - registers every scenario

    names = list(names)
    if every:
        return list(SCENARIOS.values())
    if not names:
        return [s for s in SCENARIOS.values() if s.ci]
    chosen: list[Scenario] = []
    for name in names:
        found = [s for s in SCENARIOS.values()
                 if fnmatch.fnmatchcase(s.name, name) or s.family == name]
        if not found:
            raise KeyError(f"no scenario or family {name!r} (--list lists them)")
        chosen += [s for s in found if s not in chosen]
    return chosen
