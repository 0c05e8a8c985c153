"""The smallest paths at which two JSON results differ."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tests.oracle.model import MISSING, Json


@dataclass(frozen=True)
class Difference:
    path: str
    """'/'-joined dict keys and list indexes from the result's root."""
    kafka: Json
    ottla: Json

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: kafka {short(self.kafka)} | ottla {short(self.ottla)}"


def short(value: Json, limit: int = 160) -> str:
    if value == MISSING:
        return MISSING
    text = json.dumps(value, sort_keys=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def same(a: Json, b: Json) -> bool:
    """Equal as JSON values: ``True`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def diff(kafka: Json, ottla: Json, path: str = "") -> list[Difference]:
    """Every leaf where the two differ: dicts by key (a key one side lacks is one
    difference, its value whole), lists by index (the longer one's extra elements one
    each), anything else by value."""
    if isinstance(kafka, dict) and isinstance(ottla, dict):
        out: list[Difference] = []
        for key in [*kafka, *(k for k in ottla if k not in kafka)]:
            sub = f"{path}/{key}" if path else str(key)
            if key not in ottla:
                out.append(Difference(sub, kafka[key], MISSING))
            elif key not in kafka:
                out.append(Difference(sub, MISSING, ottla[key]))
            else:
                out += diff(kafka[key], ottla[key], sub)
        return out
    if isinstance(kafka, list) and isinstance(ottla, list):
        out = []
        for i in range(max(len(kafka), len(ottla))):
            sub = f"{path}/{i}" if path else str(i)
            if i >= len(ottla):
                out.append(Difference(sub, kafka[i], MISSING))
            elif i >= len(kafka):
                out.append(Difference(sub, MISSING, ottla[i]))
            else:
                out += diff(kafka[i], ottla[i], sub)
        return out
    return [] if same(kafka, ottla) else [Difference(path, kafka, ottla)]
