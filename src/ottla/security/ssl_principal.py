"""``ssl.principal.mapping.rules``: a TLS client's distinguished name to a principal name,
as Kafka's SslPrincipalMapper. Rules are tried in order; ``DEFAULT`` keeps the DN, and
``RULE:pattern/replacement/[LU]`` applies where the pattern matches the whole DN
(``$1`` in the replacement is the first group; ``L``/``U`` lower- or upper-case it)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")


class NoMatchingRule(ValueError):
    """No rule applies to the DN: the client is refused (Kafka's NoMatchingRule)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        assert self.pattern is not None
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = match.expand(self.replacement)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" \
            else result


class SslPrincipalMapper:
    def __init__(self, rules: str | None) -> None:
        self.text = rules or "DEFAULT"
        self.rules = _parse(self.text)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            found = rule.apply(dn)
            if found is not None:
                return found
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.text}")


def _parse(text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _SPLITTER.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"Invalid rule: {text[pos:]}")
        if match.group(6):
            raise ValueError(f"Invalid rule: {match.group(6)}")
        if match.group(2):
            rules.append(_Rule(True))
        else:
            pattern = match.group(3).replace("\\/", "/")
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(4).replace("\\/", "/"))
            rules.append(_Rule(False, re.compile(pattern), replacement, match.group(5)))
        pos = match.end()
    return rules
