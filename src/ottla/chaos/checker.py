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

Transactions (the copy loop; ``txn-*`` operations):

- ``aborted-read``: a read_committed consumer read a record of an aborted transaction.
- ``partial-txn``: the final read_committed read saw some of a transaction's records and
  not the others (a transaction is seen whole or not at all, across partitions).
- ``lost-commit``: a committed transaction's records are absent from the final read.
- ``exactly-once``: a source record below the copy group's committed offset is not in
  the sink exactly once, or one at or above it is there already.
- ``txn-cycle``: the graph of committed transactions (write-read, read-write and
  write-write dependencies over the copy group's offsets, real-time order) has a cycle;
  the smallest one is the excerpt.

Share groups (``acquire`` / ``ack``):

- ``share-accepted-twice``: a record accepted twice, or delivered again once accepted or
  rejected.
- ``share-lost``: a record of the log never accepted, rejected or archived by the
  delivery count limit.
- ``share-delivery-count``: a record delivered more times than the limit.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise

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
    "aborted-read": lambda ops: Transactions(ops).aborted_reads(),
    "partial-txn": lambda ops: Transactions(ops).partial(),
    "lost-commit": lambda ops: Transactions(ops).lost_commits(),
    "exactly-once": lambda ops: Transactions(ops).exactly_once(),
    "txn-cycle": lambda ops: Transactions(ops).cycles(),
    "share-accepted-twice": lambda ops: ShareHistory(ops).accepted_twice(),
}

SHARE_DELIVERY_COUNT_LIMIT = 5
"""Kafka's default group.share.delivery.count.limit."""


def check(ops: Sequence[Op], ownership_allowance_ns: int = 0,
          share_delivery_limit: int = SHARE_DELIVERY_COUNT_LIMIT) -> Result:
    """Every check over ``ops``; ``checks`` counts the violations of each."""
    result = Result(operations=len(ops))
    found = {name: run(ops) for name, run in CHECKS.items()}
    found["ownership"] = check_ownership(ops, ownership_allowance_ns)
    share = ShareHistory(ops)
    found["share-lost"] = share.lost(share_delivery_limit)
    found["share-delivery-count"] = share.delivery_counts(share_delivery_limit)
    result.renumbered = renumbered(ops)
    for name, violations in found.items():
        result.checks[name] = len(violations)
        result.violations += violations
    return result


FINAL_COMMITTED = "final-read-committed"
"""The process of the final read_committed read of the sink (workloads.py)."""


def source_of(sink_value: str) -> str:
    """The source value of a copied record (``txn/source value``)."""
    return sink_value.partition("/")[2]


def txn_of(sink_value: str) -> str:
    return sink_value.partition("/")[0]


@dataclass
class Txn:
    """One transaction of the copy loop as the history tells it."""

    id: str
    begin: Op | None = None
    polls: list[Op] = field(default_factory=list)
    produces: list[Op] = field(default_factory=list)
    commit: Op | None = None
    abort: Op | None = None

    @property
    def aborted(self) -> bool:
        """Certainly aborted: abort_transaction succeeded and no commit may have."""
        return self.abort is not None and self.abort.outcome == "ok" and \
            (self.commit is None or self.commit.outcome == "fail")

    def reads(self) -> dict[int, Op]:
        """The first source record it read of each partition."""
        first: dict[int, Op] = {}
        for op in self.polls:
            if op.partition is not None and op.offset is not None and (
                    op.partition not in first or op.offset < (first[op.partition].offset or 0)):
                first[op.partition] = op
        return first

    def shown_by(self) -> Op:
        for op in (self.commit, self.abort, self.begin):
            if op is not None:
                return op
        return self.produces[0]


class Transactions:
    """The copy loop's transactions, the sink's read_committed reads and the final one."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.txns: dict[str, Txn] = {}
        self.reads: list[Op] = []
        self.final: dict[str, list[Op]] = defaultdict(list)
        self.ends: dict[tuple[str | None, int | None], Op] = {}
        self.sink: str | None = None
        self.source: str | None = None
        self.group: str | None = None
        self._ops = ops
        for op in ops:
            if op.kind == "txn-read" and op.value is not None:
                self.reads.append(op)
                if op.process == FINAL_COMMITTED:
                    self.final[op.value].append(op)
            elif op.kind == "read-end" and op.process == FINAL_COMMITTED:
                self.ends[op.topic, op.partition] = op
            if op.txn is None:
                continue
            txn = self.txns.setdefault(op.txn, Txn(op.txn))
            if op.kind == "txn-begin":
                txn.begin = op
            elif op.kind == "poll":
                txn.polls.append(op)
                self.source, self.group = op.topic, op.group
            elif op.kind == "txn-produce":
                txn.produces.append(op)
                self.sink = op.topic
            elif op.kind == "txn-commit":
                txn.commit = op
            elif op.kind == "txn-abort":
                txn.abort = op

    def _read_whole(self, partition: int | None) -> bool:
        end = self.ends.get((self.sink, partition))
        return end is not None and end.outcome == "ok"

    def aborted_reads(self) -> list[Violation]:
        violations = []
        for op in self.reads:
            txn = self.txns.get(txn_of(op.value or ""))
            if txn is not None and txn.aborted:
                assert txn.abort is not None
                violations.append(Violation(
                    "aborted-read", f"{op.process} read {op.value!r} at {op.topic}-"
                    f"{op.partition}@{op.offset}, written by aborted transaction {txn.id}",
                    tuple(o for o in (txn.begin, txn.commit, txn.abort, op) if o is not None)))
        return violations

    def _seen_and_missing(self, txn: Txn) -> tuple[list[Op], list[Op]]:
        """Its delivered records the final read saw, and those it did not (of partitions
        it read whole)."""
        seen, missing = [], []
        for op in txn.produces:
            if op.outcome != "ok" or op.value is None:
                continue
            if op.value in self.final:
                seen.append(op)
            elif self._read_whole(op.partition):
                missing.append(op)
        return seen, missing

    def partial(self) -> list[Violation]:
        violations = []
        for txn in self.txns.values():
            seen, missing = self._seen_and_missing(txn)
            if seen and missing:
                violations.append(Violation(
                    "partial-txn", f"transaction {txn.id}: {len(seen)} of its records are "
                    f"in the sink, {len(missing)} not (e.g. {missing[0].value!r} at "
                    f"{missing[0].topic}-{missing[0].partition}@{missing[0].offset})",
                    (txn.shown_by(), self.final[seen[0].value or ""][0], missing[0])))
        return violations

    def lost_commits(self) -> list[Violation]:
        violations = []
        for txn in self.txns.values():
            if txn.commit is None or txn.commit.outcome != "ok":
                continue
            seen, missing = self._seen_and_missing(txn)
            if missing and not seen:
                end = self.ends[self.sink, missing[0].partition]
                violations.append(Violation(
                    "lost-commit", f"transaction {txn.id} committed but none of its "
                    f"records is in the sink (e.g. {missing[0].value!r} at "
                    f"{missing[0].topic}-{missing[0].partition}@{missing[0].offset})",
                    (txn.commit, missing[0], end)))
        return violations

    def _committed_offsets(self, ops: Sequence[Op]) -> Op | None:
        return next((op for op in by_kind(ops, "committed") if op.outcome == "ok"
                     and op.group == self.group and op.topic == self.source), None)

    def exactly_once(self, ops: Sequence[Op] | None = None) -> list[Violation]:
        """Each source record the group's committed offsets cover is in the sink once,
        and none above them is; judged when both final reads reached every end."""
        everything = ops if ops is not None else self._ops
        committed = self._committed_offsets(everything)
        if committed is None or committed.offsets is None or self.sink is None or \
                not self.ends or not all(e.outcome == "ok" for e in self.ends.values()):
            return []
        copies: dict[str, list[Op]] = defaultdict(list)
        for value, reads in self.final.items():
            copies[source_of(value)] += reads
        violations = []
        for op in by_kind(everything, "read"):
            if op.topic != self.source or op.value is None or op.partition is None \
                    or op.offset is None:
                continue
            found = copies.get(op.value, [])
            below = op.offset < committed.offsets.get(op.partition, 0)
            if (below and len(found) == 1) or (not below and not found):
                continue
            what = (f"copied {len(found)} times" if below else
                    f"in the sink though the committed offset "
                    f"{committed.offsets.get(op.partition, 0)} is at or below it")
            violations.append(Violation(
                "exactly-once", f"source record {op.value!r} at {op.topic}-{op.partition}@"
                f"{op.offset}: {what}", (committed, op, *found[:2])))
        return violations

    def cycles(self) -> list[Violation]:
        """The smallest cycle of the committed transactions' dependency graph."""
        committed = [t for t in self.txns.values() if not t.aborted and (
            (t.commit is not None and t.commit.outcome == "ok")
            or any(op.value in self.final for op in t.produces))]
        edges: dict[str, dict[str, set[str]]] = defaultdict(dict)

        def edge(a: Txn, b: Txn, why: str) -> None:
            if a.id != b.id:
                edges[a.id].setdefault(b.id, set()).add(why)
        # versions of each source partition's committed offset, in offset order
        writers: dict[int, list[tuple[int, Txn]]] = defaultdict(list)
        for t in committed:
            for p, offset in ((t.commit.offsets or {}) if t.commit else {}).items():
                writers[p].append((offset, t))
        for versions in writers.values():
            versions.sort(key=lambda v: v[0])
            for (_, a), (_, b) in pairwise(versions):
                edge(a, b, "ww")
        for t in committed:
            for p, op in t.reads().items():
                versions = writers.get(p, [])
                x = op.offset or 0
                for offset, w in versions:
                    if offset == x:
                        edge(w, t, "wr")
                following = min((o for o, _ in versions if o > x), default=None)
                for offset, w in versions:
                    if offset == following:
                        edge(t, w, "rw")
        # real time: a transaction whose commit completed before another began precedes
        # it; only the latest of those (the frontier) get an edge, the rest follow
        timed = sorted(((t.commit.complete_ns, t.begin.invoke_ns, t) for t in committed
                        if t.begin is not None and t.commit is not None
                        and t.commit.outcome == "ok"), key=lambda c: c[0])
        completions = [c for c, _, _ in timed]
        latest_begins = list(accumulate((b for _, b, _ in timed), max))
        for b in committed:
            if b.begin is None:
                continue
            before = bisect_left(completions, b.begin.invoke_ns)
            if before == 0:
                continue
            first = bisect_left(completions, latest_begins[before - 1], 0, before)
            for _, _, a in timed[first:before]:
                edge(a, b, "rt")
        cycle = _smallest_cycle(edges)
        if not cycle:
            return []
        path = "".join(f"{a} -{','.join(sorted(edges[a][b]))}-> "
                       for a, b in pairwise(cycle)) + cycle[-1]
        return [Violation("txn-cycle", f"dependency cycle: {path}",
                          tuple(self.txns[t].shown_by() for t in cycle[:-1]))]


def _smallest_cycle(edges: dict[str, dict[str, set[str]]]) -> list[str]:
    """The shortest cycle of the graph (its nodes, the first repeated at the end), found
    by a breadth-first search from each node; empty when it has none."""
    best: list[str] = []
    cyclic = _in_cycles(edges)
    for start in sorted(cyclic):
        parent: dict[str, str] = {}
        queue = deque([start])
        found = None
        while queue and found is None:
            node = queue.popleft()
            for nxt in edges.get(node, {}):
                if nxt not in cyclic:
                    continue
                if nxt == start:
                    found = node
                    break
                if nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
        if found is None:
            continue
        path = [found]
        while path[-1] != start:
            path.append(parent[path[-1]])
        cycle = [*reversed(path), start]
        if not best or len(cycle) < len(best):
            best = cycle
    return best


def _in_cycles(edges: dict[str, dict[str, set[str]]]) -> set[str]:
    """The nodes of the graph's strongly connected components of more than one node
    (Kosaraju's, iteratively): only those can be on a cycle."""
    order: list[str] = []
    seen: set[str] = set()
    for root in edges:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(edges.get(root, {})))]
        while stack:
            node, children = stack[-1]
            nxt = next((c for c in children if c not in seen), None)
            if nxt is None:
                order.append(node)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(edges.get(nxt, {}))))
    reverse: dict[str, list[str]] = defaultdict(list)
    for a, targets in edges.items():
        for b in targets:
            reverse[b].append(a)
    assigned: set[str] = set()
    cyclic: set[str] = set()
    for root in reversed(order):
        if root in assigned:
            continue
        component = [root]
        assigned.add(root)
        todo = [root]
        while todo:
            for prev in reverse.get(todo.pop(), []):
                if prev not in assigned:
                    assigned.add(prev)
                    component.append(prev)
                    todo.append(prev)
        if len(component) > 1:
            cyclic.update(component)
    return cyclic


Record = tuple[str | None, int | None, int | None]


class ShareHistory:
    """What a share group's members acquired and acknowledged, by record."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.acquires: dict[Record, list[Op]] = defaultdict(list)
        self.acks: dict[Record, list[Op]] = defaultdict(list)
        self.topics: set[str | None] = set()
        self.reads: list[Op] = []
        for op in ops:
            key = (op.topic, op.partition, op.offset)
            if op.kind == "acquire":
                self.acquires[key].append(op)
                self.topics.add(op.topic)
            elif op.kind == "ack":
                self.acks[key].append(op)
        self.reads = [op for op in by_kind(ops, "read") if op.topic in self.topics]

    def accepted_twice(self) -> list[Violation]:
        violations = []
        for key, acks in self.acks.items():
            accepted = [a for a in acks if a.ack == "accept" and a.outcome == "ok"]
            if len(accepted) > 1:
                violations.append(Violation(
                    "share-accepted-twice", f"{key[0]}-{key[1]}@{key[2]} accepted by "
                    f"{accepted[0].process} and by {accepted[1].process}",
                    (accepted[0], accepted[1])))
                continue
            final = [a for a in acks if a.ack in ("accept", "reject") and a.outcome == "ok"]
            again = [q for f in final[:1] for q in self.acquires.get(key, [])
                     if q.invoke_ns > f.complete_ns]
            if again:
                violations.append(Violation(
                    "share-accepted-twice", f"{key[0]}-{key[1]}@{key[2]} delivered to "
                    f"{again[0].process} after {final[0].process} {final[0].ack}ed it",
                    (final[0], again[0])))
        return violations

    def lost(self, limit: int) -> list[Violation]:
        """Every record of the log ends accepted or rejected (an ``info`` acknowledgement
        may have), or delivered as often as ``limit`` allows (then archived), when the
        members and the drain are done."""
        violations = []
        for read in self.reads:
            key = (read.topic, read.partition, read.offset)
            if any(a.ack in ("accept", "reject") for a in self.acks.get(key, [])):
                continue
            acquired = self.acquires.get(key, [])
            if acquired and max(q.delivery_count or 0 for q in acquired) >= limit:
                continue
            last = max([*acquired, *self.acks.get(key, [])], key=lambda o: o.complete_ns,
                       default=None)
            violations.append(Violation(
                "share-lost", f"{read.value!r} at {key[0]}-{key[1]}@{key[2]} was "
                + (f"last seen in an {last.kind} by {last.process} and never finished"
                   if last else
                   "never delivered to the share group"),
                (read,) if last is None else (read, last)))
        return violations

    def delivery_counts(self, limit: int) -> list[Violation]:
        return [Violation("share-delivery-count", f"{key[0]}-{key[1]}@{key[2]} delivered "
                          f"with delivery count {q.delivery_count}, above the limit {limit}",
                          (q,))
                for key, acquires in self.acquires.items() for q in acquires
                if q.delivery_count is not None and q.delivery_count > limit]
