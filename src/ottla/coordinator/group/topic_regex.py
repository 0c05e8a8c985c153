"""``SubscribedTopicRegex`` as Kafka reads it (KIP-848): RE2/J syntax, whole-name match.

Kafka's group coordinator compiles a member's regex with ``com.google.re2j.Pattern`` and
selects the topics whose whole name matches (``pattern.matcher(topic).matches()``); a
regex RE2/J cannot compile is INVALID_REGULAR_EXPRESSION
(``Utils.throwIfRegularExpressionIsInvalid``). Here the same syntax is compiled by RE2
itself (``google-re2``, whose grammar RE2/J ports), never by Python's ``re``: patterns
``re`` reads differently are refused as Kafka refuses them (backreferences, lookaround,
possessive quantifiers, ``\\Z``, verbose mode) or matched as RE2 matches them
(``\\pL``, ``[[:alpha:]]``, ``\\Q...\\E``, ``\\z``, flags in mid-pattern).

Where RE2 and RE2/J differ: RE2 accepts ``\\C`` (any byte), RE2/J does not; it is refused
here as Kafka refuses it. Topic names are ASCII, so RE2's UTF-8 and RE2/J's UTF-16 match
them alike.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable

import re2

log = logging.getLogger(__name__)

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid regex is the client's error, not the broker's


class InvalidTopicRegex(ValueError):
    """A regex RE2/J does not compile; ``description`` is what its parser says."""

    def __init__(self, pattern: str, description: str) -> None:
        super().__init__(f"SubscribedTopicRegex `{pattern}` is not a valid regular "
                         f"expression: {description}.")
        self.description = description


def _any_byte_escape(pattern: str) -> bool:
    """Whether ``pattern`` uses ``\\C`` outside ``\\Q...\\E`` (RE2/J: invalid escape)."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] != "\\":
            i += 1
            continue
        escaped = pattern[i + 1]
        if escaped == "C":
            return True
        if escaped == "Q":
            end = pattern.find("\\E", i + 2)
            if end < 0:
                return False
            i = end + 2
            continue
        i += 2
    return False


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> re2._Regexp:
    """The compiled regex, or InvalidTopicRegex with RE2's reason."""
    if _any_byte_escape(pattern):
        raise InvalidTopicRegex(pattern, "invalid escape sequence: \\C")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else "invalid"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidTopicRegex(pattern, str(reason)) from None


@functools.lru_cache(maxsize=64)
def _report_once(message: str) -> None:
    log.error("Ignoring a subscribed regex that does not compile: %s", message)


def topics_matching(pattern: str, topics: Iterable[str]) -> list[str]:
    """The topics ``pattern`` selects: those whose whole name matches, as RE2/J's
    ``Matcher.matches()``. A stored regex that no longer compiles (one an older Ottla
    accepted) selects nothing and is logged, as Kafka's coordinator ignores it."""
    try:
        regex = compile_topic_regex(pattern)
    except InvalidTopicRegex as e:
        _report_once(str(e))
        return []
    return [t for t in topics if regex.fullmatch(t) is not None]
