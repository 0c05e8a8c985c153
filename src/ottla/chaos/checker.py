"""Kafka's guarantees, proved or refuted from a history alone (sans-I/O: operations in,
violations out; the times are the ones recorded, never a clock of the checker's).

Each check returns the violations it found, each with the few operations that show it:

- ``lost-write``: an acknowledged (``ok``) produce is absent from the final full read of
  its partition, or read at another partition or offset than the one acknowledged.
  ``info`` produces may be missing; ``fail`` ones must be.
- ``duplicate``: a value appears more than once in the log (idempotent producers),
  unless its copies were written in two epochs of one producer (``renumbered``): Kafka's
  idempotence holds within a producer epoch, and a client that bumps its epoch and sends
  a possibly written batch again under new sequence numbers writes a second copy no
  broker may recognise (librdkafka does, confluentinc/librdkafka#4953). Such copies are
  reported apart, not as violations; copies of unknown provenance are violations.
- ``offsets``: offsets of a partition's final read are not strictly increasing, two
  acknowledged records share an offset, or a producer's acknowledged records of one
  partition are not in its send order.
- ``committed-offsets``: a group's committed offset of a partition went backwards between
  operations that did not overlap in time, without a recorded ``reset`` in between.
- ``ownership``: two members of a group owned one partition at once for longer than the
  rebalance allowance (ownership from the end of ``assign`` to the start of ``revoke``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from ottla.chaos.history import Op, by_kind

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Violation:
    """A broken guarantee and the smallest excerpt of the history that shows it."""

    check: str
    message: str
    ops: tuple[Op, ...]

    def to_dict(self) -> dict[str, object]:
        return {"check": self.check, "message": self.message,
                "excerpt": [op.to_json() for op in self.ops]}


@dataclass
class Result:
    """What the checks found: operations checked, and violations by check."""

    operations: int
    violations: list[Violation] = field(default_factory=list)
    checks: dict[str, int] = field(default_factory=dict)
    renumbered: list[Violation] = field(default_factory=list)
    """Copies written in two epochs of a producer: the client's doing, not a violation."""

    @property
    def valid(self) -> bool:
        return not self.violations

    def smallest(self) -> Violation | None:
        """The violation shown by the fewest operations (the one to read first)."""
        return min(self.violations, key=lambda v: len(v.ops), default=None)


def check_writes(ops: Sequence[Op]) -> list[Violation]:
    """Lost writes and failed writes made visible: every ``ok`` produce is read once at
    the partition and offset it was acknowledged at; no ``fail`` produce is read."""
    reads: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for op in by_kind(ops, "read"):
        if op.value is not None and op.topic is not None:
            reads[op.topic, op.value].append(op)
    ends = {(op.topic, op.partition): op for op in by_kind(ops, "read-end")
            if op.outcome == "ok" and op.topic is not None and op.partition is not None}
    violations: list[Violation] = []
    for op in by_kind(ops, "produce"):
        if op.topic is None or op.value is None:
            continue
        found = reads.get((op.topic, op.value), [])
        if op.outcome == "fail" and found:
            violations.append(Violation("lost-write", f"{op.value!r} failed but was read",
                                        (op, found[0])))
        if op.outcome != "ok":
            continue
        if not found:
            end = ends.get((op.topic, op.partition))
            if end is None:
                violations.append(Violation(
                    "lost-write", f"{op.value!r} was acknowledged but the final read of "
                    f"{op.topic}-{op.partition} did not reach the partition's end", (op,)))
            else:
                violations.append(Violation(
                    "lost-write", f"{op.value!r} acknowledged at {op.topic}-{op.partition}@"
                    f"{op.offset} is missing from the final read (to offset {end.offset})",
                    (op, end)))
            continue
        moved = [r for r in found if (r.partition, r.offset) != (op.partition, op.offset)]
        if op.offset is not None and len(moved) == len(found):
            r = found[0]
            violations.append(Violation(
                "lost-write", f"{op.value!r} acknowledged at {op.topic}-{op.partition}@"
                f"{op.offset} was read at {r.topic}-{r.partition}@{r.offset}", (op, r)))
    return violations


def _copies(ops: Sequence[Op]) -> list[tuple[Op, Op, Op | None]]:
    """Each record read again: (its first read, the later one, the produce of it)."""
    seen: dict[tuple[str, str], Op] = {}
    produced = {(op.topic, op.value): op for op in by_kind(ops, "produce")}
    copies = []
    for op in by_kind(ops, "read"):
        if op.topic is None or op.value is None:
            continue
        first = seen.setdefault((op.topic, op.value), op)
        if first is not op:
            copies.append((first, op, produced.get((op.topic, op.value))))
    return copies


def _across_epochs(first: Op, again: Op) -> bool:
    """Both copies from one producer, written in two of its epochs."""
    return first.producer_id is not None and first.producer_id >= 0 and \
        first.producer_id == again.producer_id and \
        first.producer_epoch is not None and again.producer_epoch is not None and \
        first.producer_epoch != again.producer_epoch


def _duplicates(ops: Sequence[Op], renumbered: bool) -> list[Violation]:
    found = []
    for first, again, source in _copies(ops):
        if _across_epochs(first, again) != renumbered:
            continue
        where = (f"{again.value!r} is in the log at {first.topic}-{first.partition}"
                 f"@{first.offset} and at {again.topic}-{again.partition}@{again.offset}")
        if renumbered:
            where += (f", written by producer {first.producer_id} in epochs "
                      f"{first.producer_epoch} and {again.producer_epoch}")
        excerpt = (source, first, again) if source is not None else (first, again)
        found.append(Violation("renumbered" if renumbered else "duplicate", where, excerpt))
    return found


def check_duplicates(ops: Sequence[Op]) -> list[Violation]:
    """No value is in the log twice: an idempotent producer's retries are written once
    (copies from two epochs of one producer are ``renumbered`` instead)."""
    return _duplicates(ops, renumbered=False)


def renumbered(ops: Sequence[Op]) -> list[Violation]:
    """Copies a producer wrote in two of its epochs: its client sent a possibly written
    batch again after bumping its epoch, which no broker can recognise."""
    return _duplicates(ops, renumbered=True)


def check_offsets(ops: Sequence[Op]) -> list[Violation]:
    """Offsets of a partition unique and increasing in the log; a producer's acknowledged
    records of one partition in the order it sent them."""
    violations: list[Violation] = []
    last_read: dict[TopicPartition, Op] = {}
    for op in by_kind(ops, "read"):
        if op.topic is None or op.partition is None or op.offset is None:
            continue
        previous = last_read.get((op.topic, op.partition))
        if previous is not None and previous.offset is not None \
                and op.offset <= previous.offset:
            violations.append(Violation(
                "offsets", f"{op.topic}-{op.partition} read offset {op.offset} after "
                f"{previous.offset}", (previous, op)))
        last_read[op.topic, op.partition] = op
    acked = [op for op in by_kind(ops, "produce")
             if op.outcome == "ok" and op.offset is not None and op.partition is not None]
    at: dict[tuple[str | None, int | None, int | None], Op] = {}
    for op in acked:
        other = at.setdefault((op.topic, op.partition, op.offset), op)
        if other is not op:
            violations.append(Violation(
                "offsets", f"{other.value!r} and {op.value!r} were both acknowledged at "
                f"{op.topic}-{op.partition}@{op.offset}", (other, op)))
    streams: dict[tuple[str, str | None, int | None], list[Op]] = defaultdict(list)
    for op in acked:
        streams[op.process, op.topic, op.partition].append(op)
    for stream in streams.values():
        stream.sort(key=lambda o: (o.sequence if o.sequence is not None else -1, o.invoke_ns))
        for before, after in pairwise(stream):
            if after.offset is not None and before.offset is not None \
                    and after.offset <= before.offset:
                violations.append(Violation(
                    "offsets", f"{before.process} sent {before.value!r} before "
                    f"{after.value!r} to {after.topic}-{after.partition} but they were "
                    f"acknowledged at offsets {before.offset} and {after.offset}",
                    (before, after)))
    return violations


def check_committed_offsets(ops: Sequence[Op]) -> list[Violation]:
    """A group's committed offset of a partition never goes back: an ``ok`` commit or
    read of the committed offsets that began after another completed sees an offset at
    least as high, unless a ``reset`` of that partition overlaps the two."""
    series: dict[tuple[str | None, str | None, int], list[Op]] = defaultdict(list)
    resets: dict[tuple[str | None, str | None, int], list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind in ("commit", "committed", "reset") and op.outcome == "ok" and op.offsets:
            for partition in op.offsets:
                key = (op.group, op.topic, partition)
                (resets if op.kind == "reset" else series)[key].append(op)
    violations: list[Violation] = []
    for key, observed in series.items():
        partition = key[2]
        completions = sorted(observed, key=lambda o: o.complete_ns)
        window = resets.get(key, [])
        done = 0
        highest: Op | None = None
        for op in sorted(observed, key=lambda o: o.invoke_ns):
            while done < len(completions) and completions[done].complete_ns < op.invoke_ns:
                c = completions[done]
                if highest is None or _offset(c, partition) >= _offset(highest, partition) \
                        or _reset_between(window, highest, c):
                    highest = c
                done += 1
            if highest is None or _offset(op, partition) >= _offset(highest, partition):
                continue
            if _reset_between(window, highest, op):
                continue
            violations.append(Violation(
                "committed-offsets", f"group {op.group} {op.topic}-{partition}: committed "
                f"offset {_offset(op, partition)} ({op.kind}) after "
                f"{_offset(highest, partition)} ({highest.kind})", (highest, op)))
    return violations


def _offset(op: Op, partition: int) -> int:
    assert op.offsets is not None
    return op.offsets[partition]


def _reset_between(resets: Iterable[Op], before: Op, after: Op) -> bool:
    return any(r.complete_ns > before.invoke_ns and r.invoke_ns < after.complete_ns
               for r in resets)


def check_ownership(ops: Sequence[Op], allowance_ns: int) -> list[Violation]:
    """Members of one group never own a partition at once for longer than
    ``allowance_ns``: from the end of its ``assign`` to the start of its ``revoke`` (or
    the end of the history) a member owns what it was assigned."""
    end_of_history = max((op.complete_ns for op in ops), default=0)
    held: dict[tuple[str, str, str | None, int], Op] = {}
    spans: dict[tuple[str, str | None, int], list[tuple[int, int, Op, Op | None]]] = \
        defaultdict(list)
    for op in sorted(by_kind(ops, "assign", "revoke"),
                     key=lambda o: o.complete_ns if o.kind == "assign" else o.invoke_ns):
        if op.group is None or not op.partitions:
            continue
        for partition in op.partitions:
            member = (op.group, op.process, op.topic, partition)
            if op.kind == "assign" and op.outcome == "ok":
                held.setdefault(member, op)
            elif op.kind == "revoke" and member in held:
                start = held.pop(member)
                spans[op.group, op.topic, partition].append(
                    (start.complete_ns, op.invoke_ns, start, op))
    for (group, _, topic, partition), start in held.items():
        spans[group, topic, partition].append((start.complete_ns, end_of_history, start, None))
    violations: list[Violation] = []
    for (group, topic, partition), owned in spans.items():
        owned.sort(key=lambda s: s[0])
        for i, (_, a_end, a_op, a_rev) in enumerate(owned):
            for b_start, b_end, b_op, _ in owned[i + 1:]:
                if b_start >= a_end:
                    break
                overlap = min(a_end, b_end) - b_start
                if b_op.process != a_op.process and overlap > allowance_ns:
                    excerpt = (a_op, b_op) if a_rev is None else (a_op, b_op, a_rev)
                    violations.append(Violation(
                        "ownership", f"group {group}: {a_op.process} and {b_op.process} "
                        f"both owned {topic}-{partition} for {overlap / 1e9:.3f} s",
                        excerpt))
    return violations


CHECKS: dict[str, Callable[[Sequence[Op]], list[Violation]]] = {
    "lost-write": check_writes,
    "duplicate": check_duplicates,
    "offsets": check_offsets,
    "committed-offsets": check_committed_offsets,
}


def check(ops: Sequence[Op], ownership_allowance_ns: int = 0) -> Result:
    """Every check over ``ops``; ``checks`` counts the violations of each."""
    result = Result(operations=len(ops))
    found = {name: run(ops) for name, run in CHECKS.items()}
    found["ownership"] = check_ownership(ops, ownership_allowance_ns)
    result.renumbered = renumbered(ops)
    for name, violations in found.items():
        result.checks[name] = len(violations)
        result.violations += violations
    return result
