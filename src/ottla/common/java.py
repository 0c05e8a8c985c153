"""Java's behaviour where Kafka's tools and messages show it: ``String.hashCode``, the
iteration order of a ``java.util.HashMap`` (a map printed in Kafka's order),
``Double.toString`` and ``Double.parseDouble``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import TypeVar

K = TypeVar("K")

DEFAULT_CAPACITY = 16
LOAD_FACTOR = 0.75


def string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def int32(value: int) -> int:
    """``value`` wrapped to a Java ``int``."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``capacity`` (at least 1)."""
    size = 1
    while size < capacity:
        size <<= 1
    return size


def hash_map_order(keys: Iterable[K], hash_of: Callable[[K], int],
                   initial_capacity: int | None = None) -> list[K]:
    """The distinct ``keys`` in the order a ``HashMap`` they were put into (in this order,
    into ``new HashMap<>(initial_capacity)``, or ``new HashMap<>()`` for None) iterates
    them: by bucket of the final table, then by insertion (a bucket's chain keeps it
    through resizes). ``hash_of`` is the keys' ``hashCode``."""
    distinct = list(dict.fromkeys(keys))
    threshold = 0 if initial_capacity is None else _table_size_for(initial_capacity)
    capacity = 0
    for size in range(1, len(distinct) + 1):
        if capacity == 0:  # the first put allocates the table
            capacity = threshold if threshold > 0 else DEFAULT_CAPACITY
            threshold = int(capacity * LOAD_FACTOR)
        if size > threshold:
            old = capacity
            capacity *= 2
            threshold = threshold * 2 if old >= DEFAULT_CAPACITY else int(capacity * LOAD_FACTOR)

    def bucket(key: K) -> int:
        h = hash_of(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(distinct, key=bucket)


def hash_set_order(keys: Iterable[K], hash_of: Callable[[K], int]) -> list[K]:
    """The order of ``new HashSet<>(collection)`` of ``keys`` (its capacity comes from the
    collection's size)."""
    items = list(keys)
    return hash_map_order(items, hash_of, max(int(len(items) / LOAD_FACTOR) + 1, 16))


def double_str(value: float) -> str:
    """Java's ``Double.toString``: the shortest digits that read back as the value,
    ``1048576.0`` in plain notation from 10^-3 up to 10^7, ``1.048576E7`` outside."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    scale = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{scale}"


_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")


def parse_double(text: str) -> float:
    """Java's ``Double.parseDouble`` (decimal forms): surrounding whitespace ignored, an
    ``f``/``d`` suffix allowed, ``NaN`` and ``Infinity`` spelled as Java spells them.
    Raises ValueError for what Java refuses (``inf``, ``1_000``, an empty string)."""
    stripped = text.strip(" \t\n\r\x0b\x0c\x00")
    if not _DOUBLE.fullmatch(stripped):
        raise ValueError(f"For input string: \"{text}\"")
    if stripped[-1] in "fFdD":
        stripped = stripped[:-1]
    return float(stripped.replace("Infinity", "inf"))
