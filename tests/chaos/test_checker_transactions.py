"""The transactional checks over hand-made histories of a copy loop: a correct history
passes; aborted data read, a transaction seen in part, a committed one lost, a source
record copied twice or never, and a dependency cycle are each refuted by their check
with the operations that show it."""

from __future__ import annotations

from ottla.chaos.checker import FINAL_COMMITTED, check
from ottla.chaos.history import Op
from tests.chaos.test_checker import History

SOURCE, SINK, GROUP = "src", "sink", "copy"


class Copies(History):
    """A copy loop's history: transactions reading ``src`` and writing ``sink``."""

    def __init__(self) -> None:
        super().__init__()
        self.sink_offsets = [0, 0, 0]
        self.written: dict[str, list[Op]] = {}
        self.commits: dict[str, Op] = {}

    def txn(self, txn: str, reads: list[tuple[int, int, str]], end: str = "commit",
            outcome: str = "ok", at: float | None = None) -> Op:
        """A transaction copying ``reads`` (partition, offset, value), then ``end``ed
        (commit or abort) with ``outcome``: its last operation."""
        process = txn.split(".")[0]
        start = at if at is not None else len(self.ops) * 0.1
        self.add(process, "txn-begin", at=start, txn=txn)
        for p, o, v in reads:
            self.add(process, "poll", at=start, group=GROUP, topic=SOURCE, partition=p,
                     offset=o, value=v, txn=txn)
        self.written[txn] = []
        for p, _, v in reads:
            self.written[txn].append(self.add(
                process, "txn-produce", at=start, topic=SINK, partition=p,
                offset=self.sink_offsets[p], value=f"{txn}/{v}", txn=txn))
            self.sink_offsets[p] += 1
        after: dict[int, int] = {}
        for p, o, _ in reads:
            after[p] = max(after.get(p, 0), o + 1)
        if end == "abort":
            for p in after:
                self.sink_offsets[p] += 1  # the abort marker
            return self.add(process, "txn-abort", outcome, at=start + 0.05, txn=txn)
        op = self.add(process, "txn-commit", outcome, at=start + 0.05, txn=txn, group=GROUP,
                      topic=SOURCE, offsets=after)
        self.commits[txn] = op
        for p in after:
            self.sink_offsets[p] += 1  # the commit marker
        return op

    def sink_read(self, txn: str, process: str = FINAL_COMMITTED,
                  skip: int | None = None) -> list[Op]:
        """The sink records of ``txn`` read by ``process`` (but the ``skip``-th)."""
        return [self.add(process, "txn-read", topic=SINK, partition=w.partition,
                         offset=w.offset, value=w.value)
                for i, w in enumerate(self.written[txn]) if i != skip]

    def ends(self) -> list[Op]:
        return [self.add(FINAL_COMMITTED, "read-end", topic=SINK, partition=p,
                         offset=self.sink_offsets[p]) for p in range(3)]

    def source_read(self, values: list[tuple[int, int, str]]) -> None:
        for p, o, v in values:
            self.add("final-read", "read", topic=SOURCE, partition=p, offset=o, value=v)

    def committed(self, offsets: dict[int, int]) -> Op:
        return self.add("final-committed", "committed", group=GROUP, topic=SOURCE,
                        offsets=offsets)


SOURCE_RECORDS = [(0, 0, "s0"), (0, 1, "s1"), (0, 2, "s2"), (1, 0, "s3"), (1, 1, "s4")]


def copies(*, leave_out: str | None = None, skip: int | None = None,
           read_aborted: bool = False, committed: dict[int, int] | None = None) -> Copies:
    """A copy loop's run: a.0 commits, a.1 is aborted on purpose and its records copied
    again by a.2, b.0 (after a rebalance) ends with a commit of unknown outcome that
    took effect; a concurrent reader, the final reads and the committed offsets.
    ``leave_out``/``skip``: a transaction the final read misses (one record of it)."""
    h = Copies()
    h.txn("a.0", [(0, 0, "s0"), (0, 1, "s1")], at=0)
    h.txn("a.1", [(0, 2, "s2"), (1, 0, "s3")], end="abort", at=1)
    h.txn("a.2", [(0, 2, "s2"), (1, 0, "s3")], at=2)
    h.txn("b.0", [(1, 1, "s4")], outcome="info", at=3)
    h.sink_read("a.0", process="reader")
    if read_aborted:
        h.sink_read("a.1", process="reader")
    for txn in ("a.0", "a.2", "b.0"):
        if txn != leave_out:
            h.sink_read(txn)
        elif skip is not None:
            h.sink_read(txn, skip=skip)
    h.ends()
    h.source_read(SOURCE_RECORDS)
    h.committed(committed or {0: 3, 1: 2})
    return h


def found(h: History) -> dict[str, list[list[int]]]:
    result = check(h.ops)
    out: dict[str, list[list[int]]] = {}
    for v in result.violations:
        out.setdefault(v.check, []).append([op.index for op in v.ops])
    return out


def test_a_copy_loop_that_commits_aborts_and_copies_again_passes() -> None:
    assert found(copies()) == {}


def test_a_read_committed_consumer_must_not_see_an_aborted_transaction() -> None:
    h = copies(read_aborted=True)
    begin = next(op for op in h.ops if op.kind == "txn-begin" and op.txn == "a.1")
    abort = next(op for op in h.ops if op.kind == "txn-abort")
    reads = [op for op in h.ops if op.kind == "txn-read" and op.value.startswith("a.1/")]
    assert found(h) == {"aborted-read": [[begin.index, abort.index, r.index] for r in reads]}


def test_a_transaction_seen_in_part_is_refuted() -> None:
    """a.2 wrote to two partitions; the final read saw its record of one only."""
    h = copies(leave_out="a.2", skip=1)
    commit = h.commits["a.2"]
    seen = next(op for op in h.ops if op.kind == "txn-read" and op.process == FINAL_COMMITTED
                and op.value == "a.2/s2")
    missing = h.written["a.2"][1]
    result = found(h)
    assert result["partial-txn"] == [[commit.index, seen.index, missing.index]]
    # and its source record s3 is then not in the sink although its offset was committed
    assert set(result) == {"partial-txn", "exactly-once"}


def test_a_committed_transaction_missing_from_the_sink_is_lost() -> None:
    h = copies(leave_out="a.0")
    end = next(op for op in h.ops if op.kind == "read-end" and op.partition == 0)
    result = found(h)
    assert result["lost-commit"] == [[h.commits["a.0"].index, h.written["a.0"][0].index,
                                      end.index]]
    assert set(result) == {"lost-commit", "exactly-once"}


def test_source_records_below_the_committed_offset_are_copied_once_and_none_above() -> None:
    """s4 is copied (b.0) although the committed offset of src-1 says it was not; the
    committed offset of src-0 covers s3... a record never copied."""
    h = copies(committed={0: 3, 1: 1})
    committed = next(op for op in h.ops if op.kind == "committed")
    s4 = next(op for op in h.ops if op.kind == "read" and op.value == "s4")
    copy = next(op for op in h.ops if op.kind == "txn-read" and op.value == "b.0/s4")
    assert found(h) == {"exactly-once": [[committed.index, s4.index, copy.index]]}
    h = copies(committed={0: 3, 1: 3})
    h.source_read([(1, 2, "s5")])  # never copied, yet below the committed offset
    s5 = h.ops[-1]
    committed = next(op for op in h.ops if op.kind == "committed")
    assert found(h) == {"exactly-once": [[committed.index, s5.index]]}


def test_two_transactions_that_copied_the_same_records_form_a_cycle() -> None:
    """A zombie: b.1 read src-0 from offset 0 as a.0 did, and both committed offset 2.
    Each read the version the other overwrote (rw both ways)."""
    h = Copies()
    first = h.txn("a.0", [(0, 0, "s0"), (0, 1, "s1")], at=0)
    zombie = h.txn("b.1", [(0, 0, "s0"), (0, 1, "s1")], at=0.01)
    h.sink_read("a.0")
    h.sink_read("b.1")
    h.ends()
    h.source_read(SOURCE_RECORDS[:2])
    h.committed({0: 2})
    result = check(h.ops)
    (cycle,) = [v for v in result.violations if v.check == "txn-cycle"]
    assert [op.index for op in cycle.ops] == [first.index, zombie.index]
    assert cycle.message == "dependency cycle: a.0 -rw,ww-> b.1 -rw-> a.0"
    assert {v.check for v in result.violations} == {"txn-cycle", "exactly-once"}


def test_a_transaction_that_read_offsets_older_than_a_committed_one_forms_a_cycle() -> None:
    """b.0 began after a.0's commit of offset 2 completed, yet read from offset 0 (a stale
    committed offset): real time orders a.0 first, the offsets b.0 first."""
    h = Copies()
    before = h.txn("a.0", [(0, 0, "s0"), (0, 1, "s1")], at=0)
    stale = h.txn("b.0", [(0, 0, "s0")], at=1)
    h.sink_read("a.0")
    h.sink_read("b.0")
    h.ends()
    cycles = [v for v in check(h.ops).violations if v.check == "txn-cycle"]
    assert [[op.index for op in v.ops] for v in cycles] == [[before.index, stale.index]]
    assert cycles[0].message == "dependency cycle: a.0 -rt,rw-> b.0 -ww-> a.0"


def test_transactions_handing_a_partition_over_in_order_form_no_cycle() -> None:
    h = Copies()
    h.txn("a.0", [(0, 0, "s0")], at=0)
    h.txn("b.0", [(0, 1, "s1")], at=1)
    h.txn("a.1", [(0, 2, "s2")], at=2)
    for t in ("a.0", "b.0", "a.1"):
        h.sink_read(t)
    h.ends()
    h.source_read(SOURCE_RECORDS[:3])
    h.committed({0: 3})
    assert found(h) == {}
