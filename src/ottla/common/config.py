"""Kafka-style configuration definitions: typed keys, defaults, validators, docs.

The same machinery serves broker configs (``server.properties``) and topic configs, so
both parse values the way Kafka's ``ConfigDef`` does and both can describe themselves to
DescribeConfigs (type, default, documentation).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ottla.common.java import double_str

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigType(IntEnum):
    """Kafka's config value types, numbered as DescribeConfigs v3+ reports them."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key and the reason."""


Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(f"Invalid value {value} for configuration {name}: "
                              f"Value must be at least {minimum}")
    return check


def off_or_at_least(minimum: float) -> Validator:
    """-1 (the feature is off) or at least ``minimum``."""
    def check(name: str, value: Any) -> None:
        if value is not None and value != -1 and value < minimum:
            raise ConfigError(f"Invalid value {value} for configuration {name}: "
                              f"Value must be -1 or at least {minimum}")
    return check


def between(low: float, high: float) -> Validator:
    """Kafka's ``Range.between``: its messages name the bound that was crossed."""
    def check(name: str, value: Any) -> None:
        if value is not None and value < low:
            raise ConfigError(f"Invalid value {value} for configuration {name}: "
                              f"Value must be at least {low}")
        if value is not None and value > high:
            raise ConfigError(f"Invalid value {value} for configuration {name}: "
                              f"Value must be no more than {high}")
    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    allowed = choices if case_sensitive else tuple(c.lower() for c in choices)

    def check(name: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is None:
                continue
            if (v if case_sensitive else str(v).lower()) not in allowed:
                raise ConfigError(f"Invalid value {v} for configuration {name}: "
                                  f"String must be one of: {', '.join(choices)}")
    return check


def non_duplicate_values(name: str, value: Any) -> None:
    """Kafka's ``ValidList.anyNonDuplicateValues``: a list naming no value twice."""
    if value is not None and len(set(value)) != len(value):
        raise ConfigError(f"Configuration '{name}' values must not be duplicated.")


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str = ""
    validator: Validator | None = None
    sensitive: bool = False
    read_only: bool = False
    """Read-only keys can only be set in server.properties, not through AlterConfigs."""
    synonyms: tuple[str, ...] = field(default=())
    """For a topic config, the broker configs that supply its default, most specific first."""
    no_default: bool = False
    """Kafka defines the key without a default (NO_DEFAULT_VALUE): Ottla's default stands in
    until it is set, and DescribeConfigs lists no DEFAULT_CONFIG synonym for it."""
    kafka_type: ConfigType | None = None
    """The type DescribeConfigs gives when Kafka's differs from how Ottla parses the value
    (``listener.security.protocol.map``: one STRING to Kafka, a list here)."""

    @property
    def described_type(self) -> ConfigType:
        return self.kafka_type or self.type

    def parse(self, raw: Any) -> Any:
        """Convert a string (or an already typed value) to this key's type and validate it."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def render(self, value: Any) -> str | None:
        return render_value(self.type, value)


_TRUE = {"true"}
_FALSE = {"false"}


def parse_value(name: str, type_: ConfigType, raw: Any) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, str):
        return list(raw) if type_ == ConfigType.LIST and not isinstance(raw, list) else raw
    text = raw.strip()
    try:
        if type_ == ConfigType.BOOLEAN:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(text)
        if type_ in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            value = int(text)
            limit = {ConfigType.INT: INT_MAX, ConfigType.SHORT: 2**15 - 1}.get(type_, LONG_MAX)
            if not -limit - 1 <= value <= limit:
                raise ValueError(text)
            return value
        if type_ == ConfigType.DOUBLE:
            return float(text)
        if type_ == ConfigType.LIST:
            return [item.strip() for item in text.split(",") if item.strip()]
    except ValueError:
        # Kafka's ConfigDef.parseType words, a number out of its type's range included.
        reason = "Expected value to be either true or false" \
            if type_ == ConfigType.BOOLEAN else f"Not a number of type {type_.name}"
        raise ConfigError(f"Invalid value {raw} for configuration {name}: {reason}") from None
    return raw


def render_value(type_: ConfigType, value: Any) -> str | None:
    if value is None:
        return None
    if type_ == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if type_ == ConfigType.LIST:
        return ",".join(str(v) for v in value)
    if type_ == ConfigType.DOUBLE:
        return double_str(float(value))  # as Kafka renders it: 1.7976931348623157E308
    return str(value)


class ConfigDef:
    """An ordered set of config keys."""

    def __init__(self, keys: Iterable[ConfigKey]) -> None:
        self.keys: dict[str, ConfigKey] = {k.name: k for k in keys}

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def __getitem__(self, name: str) -> ConfigKey:
        return self.keys[name]

    def parse(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Parse the known keys of ``raw``; unknown keys are the caller's concern."""
        return {name: self.keys[name].parse(value) for name, value in raw.items()
                if name in self.keys}


def load_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value`` or ``key: value``, ``#``/``!`` comments,
    backslash line continuations and escapes."""
    props: dict[str, str] = {}
    logical: list[str] = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        continued = (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1
        logical.append(stripped[:-1] if continued else stripped)
        if continued:
            continue
        entry = "".join(logical)
        logical = []
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]\s*(.*)$", entry)
        key, value = (match.group(1), match.group(2)) if match else (entry, "")
        props[_unescape(key)] = _unescape(value)
    return props


def _unescape(text: str) -> str:
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: _escape_char(m.group(1)), text)


def _escape_char(code: str) -> str:
    if code.startswith("u") and len(code) == 5:
        return chr(int(code[1:], 16))
    return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(code, code)
