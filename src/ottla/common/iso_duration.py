"""ISO-8601 durations read exactly as Java's ``java.time.Duration.parse`` reads them.

Kafka takes such a duration in ``share.auto.offset.reset=by_duration:<duration>``, and what
Java accepts, and only that, must be accepted here: ``PnDTnHnMn.nS`` with days, hours,
minutes and seconds only (no years, months or weeks), each part optionally signed, a sign
before the ``P`` that negates the whole, ``.`` or ``,`` before up to nine digits of a second,
letters in either case, and 64-bit arithmetic on the seconds that fails rather than grows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_NANOS_PER_SECOND = 1_000_000_000

# Java's Duration.Lazy.PATTERN (CASE_INSENSITIVE, ASCII digits only).
_PATTERN = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE | re.ASCII)


class DurationParseError(ValueError):
    """Java's DateTimeParseException: the text is not a Duration."""


@dataclass(frozen=True, slots=True)
class Duration:
    """Java's Duration: whole seconds (a signed 64-bit count) and 0..999,999,999 nanos."""

    seconds: int
    nanos: int = 0

    @property
    def is_negative(self) -> bool:
        return self.seconds < 0

    def to_millis(self) -> int:
        """The length in milliseconds, truncated toward zero as Java's ``toMillis``."""
        total = self.seconds * _NANOS_PER_SECOND + self.nanos
        return total // 1_000_000 if total >= 0 else -((-total) // 1_000_000)


def _exact(value: int, what: str, text: str) -> int:
    """Java's Math.*Exact: a result outside a long is an overflow, not a bigger number."""
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise DurationParseError(f"Text cannot be parsed to a Duration: {what}: {text}")
    return value


def _number(text: str, part: str | None, multiplier: int, what: str) -> int:
    if part is None:
        return 0
    return _exact(_exact(int(part), what, text) * multiplier, what, text)


def parse_duration(text: str) -> Duration:
    """``text`` as Java's ``Duration.parse(text)``; raises DurationParseError where Java
    throws (no match, a ``T`` with no time after it, no part at all, or an overflow)."""
    match = _PATTERN.fullmatch(text)
    if match is None or match.group(3) == "T" or \
            all(match.group(i) is None for i in (2, 4, 5, 6)):
        raise DurationParseError(f"Text cannot be parsed to a Duration: {text}")
    days = _number(text, match.group(2), 86400, "days")
    hours = _number(text, match.group(4), 3600, "hours")
    minutes = _number(text, match.group(5), 60, "minutes")
    seconds = _number(text, match.group(6), 1, "seconds")
    fraction = match.group(7) or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    if match.group(6) is not None and match.group(6).startswith("-"):
        nanos = -nanos  # "PT-1.5S" is minus one and a half seconds
    total = _exact(days + _exact(hours + _exact(minutes + seconds, "overflow", text),
                                 "overflow", text), "overflow", text)
    # Duration.ofSeconds(total, nanos): nanos below zero borrow a second.
    whole = _exact(total + nanos // _NANOS_PER_SECOND, "overflow", text)
    nanos %= _NANOS_PER_SECOND
    if match.group(1) == "-":  # Duration.negated()
        exact = -(whole * _NANOS_PER_SECOND + nanos)
        whole, nanos = _exact(exact // _NANOS_PER_SECOND, "overflow", text), \
            exact % _NANOS_PER_SECOND
    return Duration(whole, nanos)
