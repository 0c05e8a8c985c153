"""Server-side assignors of the consumer protocol (KIP-848): ``uniform`` and ``range``.

An assignor maps each member to the partitions it should own (the target assignment),
given every member's subscribed topics and the previous target, which it keeps where it
can (stickiness) so that a rebalance moves as few partitions as possible.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed: frozenset[uuid.UUID]
    """Topic ids the member subscribes to (resolved from names and regexes)."""
    previous: Mapping[uuid.UUID, frozenset[int]]
    """The member's previous target assignment."""


def _empty(members: Mapping[str, MemberSpec]) -> dict[str, Assignment]:
    return {m: {} for m in members}


def uniform(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
            ) -> dict[str, Assignment]:
    """Spread partitions so that member counts differ by at most one where subscriptions
    allow, keeping every member's previous partitions up to its share."""
    result = _empty(members)
    if not members:
        return result
    counts = dict.fromkeys(members, 0)
    eligible: dict[uuid.UUID, list[str]] = {
        t: sorted(m for m, spec in members.items() if t in spec.subscribed) for t in partitions}
    total = sum(partitions[t] for t, ms in eligible.items() if ms)
    subscribers = [m for m, spec in members.items()
                   if any(t in partitions for t in spec.subscribed)]
    floor = total // max(1, len(subscribers))
    extra = total - floor * len(subscribers)  # how many members may hold floor + 1
    assigned: set[tuple[uuid.UUID, int]] = set()
    # Keep previous partitions, largest previous owners first, within the quotas.
    for member in sorted(members, key=lambda m: (-sum(len(p) for p in
                                                      members[m].previous.values()), m)):
        spec = members[member]
        limit = floor + 1 if extra > 0 else floor
        kept = 0
        for topic in sorted(spec.previous, key=str):
            if topic not in spec.subscribed or topic not in partitions:
                continue
            for p in sorted(spec.previous[topic]):
                if kept >= limit or p >= partitions[topic] or \
                        (topic, p) in assigned:
                    continue
                result[member].setdefault(topic, set()).add(p)
                assigned.add((topic, p))
                kept += 1
        counts[member] = kept
        if kept > floor:
            extra -= 1
    # Hand out the rest to the least loaded eligible member.
    for topic in sorted(partitions, key=str):
        candidates = eligible[topic]
        if not candidates:
            continue
        for p in range(partitions[topic]):
            if (topic, p) in assigned:
                continue
            member = min(candidates, key=lambda m: (counts[m], m))
            result[member].setdefault(topic, set()).add(p)
            counts[member] += 1
    return result


def range_(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
           ) -> dict[str, Assignment]:
    """Per topic, contiguous ranges to the subscribed members in member-id order, so that
    topics with the same partition count are co-partitioned."""
    result = _empty(members)
    for topic, count in partitions.items():
        subscribers = sorted(m for m, spec in members.items() if topic in spec.subscribed)
        if not subscribers:
            continue
        size, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            n = size + (1 if i < extra else 0)
            if n:
                result[member][topic] = set(range(start, start + n))
            start += n
    return result


ASSIGNORS = {"uniform": uniform, "range": range_}
