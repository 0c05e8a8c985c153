"""What a scenario is: a function of a ``Target`` with the differences it accepts, in a
registry the runner and the test read."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from tests.oracle.target import Target

Json: TypeAlias = "bool | int | float | str | list[Json] | dict[str, Json] | None"
"""What a scenario returns, and what the harness compares."""


class _Any:
    """Matches any value: an ``Expect`` that does not pin one side."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()
MISSING = "<missing>"
"""The value a diff shows for a key or list element one side lacks."""


@dataclass(frozen=True, eq=False)
class Expect:
    """A difference a scenario accepts: every differing path that matches ``path`` (an
    ``fnmatch`` pattern over the '/'-joined path, ``*`` crossing '/') and whose values are
    ``kafka`` and ``ottla`` (``ANY`` by default). A ``reason`` starting ``BUG:`` is Ottla's
    bug, accepted only so that the run stays green and the bug visible; the others are
    legitimate differences. An Expect that matches nothing fails the run: the difference
    it described is gone, so the declaration (and the docs' table) must go too."""

    path: str
    reason: str
    kafka: Any = ANY
    ottla: Any = ANY

    @property
    def is_bug(self) -> bool:
        return self.reason.startswith("BUG:")

    def matches(self, path: str, kafka: Json, ottla: Json) -> bool:
        return (fnmatch.fnmatchcase(path, self.path)
                and (self.kafka is ANY or self.kafka == kafka)
                and (self.ottla is ANY or self.ottla == ottla))


def bug(path: str, reason: str, **pins: Any) -> Expect:
    """An accepted difference that is Ottla's bug (reported, not fixed here)."""
    return Expect(path, f"BUG: {reason}", **pins)


@dataclass(frozen=True)
class Normalise:
    """A per-scenario normalisation: each value at a path matching ``path`` (fnmatch, as
    ``Expect``) is replaced by ``how(value)`` on both sides before the diff, for what
    differs legitimately in this scenario only (``reason`` says why)."""

    path: str
    how: Callable[[Json], Json]
    reason: str


ScenarioFn: TypeAlias = "Callable[[Target], Json]"


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    fn: ScenarioFn
    doc: str
    ci: bool = False
    expect: tuple[Expect, ...] = ()
    normalise: tuple[Normalise, ...] = ()
    compare_messages: bool = False
    """Compare ``error_message`` fields verbatim (otherwise only whether there is one)."""


SCENARIOS: dict[str, Scenario] = {}


@dataclass
class _Registration:
    family: str
    ci: bool = False
    expect: tuple[Expect, ...] = ()
    normalise: tuple[Normalise, ...] = ()
    compare_messages: bool = False
    name: str | None = field(default=None)

    def __call__(self, fn: ScenarioFn) -> ScenarioFn:
        name = self.name or fn.__name__.replace("_", "-")
        if name in SCENARIOS:
            raise ValueError(f"two scenarios named {name}")
        SCENARIOS[name] = Scenario(name, self.family, fn, (fn.__doc__ or "").strip(),
                                   self.ci, self.expect, self.normalise,
                                   self.compare_messages)
        return fn


def scenario(family: str, *, ci: bool = False, expect: tuple[Expect, ...] = (),
             normalise: tuple[Normalise, ...] = (), compare_messages: bool = False,
             name: str | None = None) -> _Registration:
    """Register a scenario: ``family`` groups it in the docs' table, ``ci`` puts it in the
    subset tests/integration/test_oracle.py runs by default; its name is the function's,
    with dashes."""
    return _Registration(family, ci, tuple(expect), tuple(normalise), compare_messages, name)
