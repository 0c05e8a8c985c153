"""The history checker over hand-made histories: a correct history passes every check,
and each broken one is refuted by its check with the operations that show it."""

from __future__ import annotations

from ottla.chaos.checker import check
from ottla.chaos.history import Op, dump, parse

S = 1_000_000_000


class History:
    """Builds a history: each op takes the next index and times of its own."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, process: str, kind: str, outcome: str = "ok", at: float | None = None,
            took: float = 0.01, **fields: object) -> Op:
        start = at if at is not None else len(self.ops) * 0.1
        op = Op(index=len(self.ops), process=process, kind=kind,  # type: ignore[arg-type]
                outcome=outcome, invoke_ns=int(start * S),  # type: ignore[arg-type]
                complete_ns=int((start + took) * S), **fields)  # type: ignore[arg-type]
        self.ops.append(op)
        return op

    def produce(self, value: str, offset: int | None, outcome: str = "ok",
                partition: int = 0, process: str = "p1", sequence: int = 0) -> Op:
        return self.add(process, "produce", outcome, topic="t", partition=partition,
                        offset=offset, key="k", value=value, sequence=sequence)

    def read(self, value: str, offset: int, partition: int = 0,
             producer: tuple[int, int] | None = None) -> Op:
        """``producer``: the id and epoch of the batch the record was read from."""
        pid, epoch = producer if producer is not None else (None, None)
        return self.add("final-read", "read", topic="t", partition=partition,
                        offset=offset, key="k", value=value, producer_id=pid,
                        producer_epoch=epoch)

    def end(self, offset: int, partition: int = 0) -> Op:
        return self.add("final-read", "read-end", topic="t", partition=partition,
                        offset=offset)


def correct_writes() -> History:
    h = History()
    h.produce("a", 0, sequence=0)
    h.produce("b", 1, sequence=1)
    h.produce("c", None, outcome="info", sequence=2)  # indeterminate, written
    h.produce("d", None, outcome="info", sequence=3)  # indeterminate, not written
    h.produce("e", 0, partition=1, sequence=0)
    h.read("a", 0)
    h.read("b", 1)
    h.read("c", 2)
    h.end(3)
    h.read("e", 0, partition=1)
    h.end(1, partition=1)
    return h


def violations(h: History, allowance: float = 0) -> dict[str, list[list[int]]]:
    result = check(h.ops, int(allowance * S))
    found: dict[str, list[list[int]]] = {}
    for v in result.violations:
        found.setdefault(v.check, []).append([op.index for op in v.ops])
    return found


def test_a_correct_history_passes_every_check() -> None:
    h = correct_writes()
    result = check(h.ops)
    assert result.valid, result.violations
    assert result.operations == len(h.ops)
    assert result.checks == {
        "lost-write": 0, "duplicate": 0, "offsets": 0, "committed-offsets": 0,
        "ownership": 0, "aborted-read": 0, "partial-txn": 0, "lost-commit": 0,
        "exactly-once": 0, "txn-cycle": 0, "share-accepted-twice": 0, "share-lost": 0,
        "share-delivery-count": 0}


def test_history_lines_round_trip() -> None:
    h = correct_writes()
    h.add("c1", "commit", group="g", topic="t", offsets={0: 3, 1: 1})
    h.add("c1", "assign", group="g", topic="t", partitions=(0, 1))
    assert parse(dump(h.ops).splitlines()) == h.ops


def test_an_acknowledged_write_missing_from_the_final_read_is_lost() -> None:
    h = History()
    lost = h.produce("a", 0)
    h.produce("b", 1, sequence=1)
    h.read("b", 1)
    end = h.end(2)
    assert violations(h) == {"lost-write": [[lost.index, end.index]]}


def test_a_partition_the_final_read_did_not_finish_proves_nothing() -> None:
    h = History()
    unread = h.produce("a", 0)
    assert violations(h) == {"lost-write": [[unread.index]]}


def test_an_acknowledged_write_read_at_another_offset_was_lost_in_place() -> None:
    h = History()
    acked = h.produce("a", 5)
    read = h.read("a", 0)
    h.end(1)
    assert violations(h) == {"lost-write": [[acked.index, read.index]]}


def test_a_failed_write_must_not_be_read() -> None:
    h = History()
    failed = h.produce("a", None, outcome="fail")
    read = h.read("a", 0)
    h.end(1)
    assert violations(h) == {"lost-write": [[failed.index, read.index]]}


def test_a_value_in_the_log_twice_is_a_duplicate() -> None:
    h = History()
    sent = h.produce("a", None, outcome="info")  # even a retried indeterminate one
    first = h.read("a", 0)
    again = h.read("a", 1)
    h.end(2)
    assert violations(h) == {"duplicate": [[sent.index, first.index, again.index]]}


def test_a_copy_from_the_same_producer_epoch_is_a_broker_duplicate() -> None:
    h = History()
    sent = h.produce("a", 1)
    first = h.read("a", 0, producer=(7, 0))
    again = h.read("a", 1, producer=(7, 0))
    h.end(2)
    assert violations(h) == {"duplicate": [[sent.index, first.index, again.index]]}
    assert check(h.ops).renumbered == []


def test_a_copy_its_producer_wrote_again_under_a_new_epoch_is_the_clients_resend() -> None:
    """Kafka dedupes retries within a producer epoch only: a client that bumps its epoch
    and sends a possibly written batch again (librdkafka#4953) writes a copy no broker
    may recognise, reported apart from the broker's violations."""
    h = History()
    sent = h.produce("a", 1)
    first = h.read("a", 0, producer=(7, 0))
    again = h.read("a", 1, producer=(7, 1))
    h.end(2)
    assert violations(h) == {}
    found = check(h.ops).renumbered
    assert [[op.index for op in v.ops] for v in found] == [
        [sent.index, first.index, again.index]]
    assert "epochs 0 and 1" in found[0].message


def test_copies_from_two_producers_are_a_duplicate_whatever_their_epochs() -> None:
    h = History()
    h.produce("a", 1)
    h.read("a", 0, producer=(7, 0))
    h.read("a", 1, producer=(8, 1))
    h.end(2)
    assert list(violations(h)) == ["duplicate"]


def test_acknowledged_records_out_of_send_order_are_reordered() -> None:
    h = History()
    first = h.produce("a", 1, sequence=0)
    second = h.produce("b", 0, sequence=1)
    h.read("b", 0)
    h.read("a", 1)
    h.end(2)
    assert violations(h) == {"offsets": [[first.index, second.index]]}


def test_offsets_going_back_in_the_log_or_shared_are_refuted() -> None:
    h = History()
    a = h.produce("a", 0, process="p1")
    b = h.produce("b", 0, process="p2")
    ra = h.read("a", 0)
    rb = h.read("b", 0)
    h.end(1)
    assert violations(h) == {"offsets": [[ra.index, rb.index], [a.index, b.index]]}


def group_history() -> History:
    h = History()
    h.add("c1", "assign", at=0, group="g", topic="t", partitions=(0, 1))
    h.add("c1", "commit", at=1, group="g", topic="t", offsets={0: 10, 1: 4})
    h.add("c1", "revoke", at=2, group="g", topic="t", partitions=(1,))
    h.add("c2", "assign", at=2.5, group="g", topic="t", partitions=(1,))
    h.add("c2", "commit", at=3, group="g", topic="t", offsets={1: 9})
    # two concurrent commits may complete in any order
    h.add("c1", "commit", at=4, took=1, group="g", topic="t", offsets={0: 20})
    h.add("c1", "commit", at=4.5, took=0.1, group="g", topic="t", offsets={0: 15})
    h.add("admin", "reset", at=6, group="g", topic="t", offsets={0: 0})
    h.add("c1", "commit", at=7, group="g", topic="t", offsets={0: 2})
    h.add("checker", "committed", at=8, group="g", topic="t", offsets={0: 2, 1: 9})
    return h


def test_a_group_that_commits_forward_and_hands_partitions_over_passes() -> None:
    assert violations(group_history()) == {}


def test_a_committed_offset_going_back_is_refuted() -> None:
    h = group_history()
    high = h.ops[9]  # the read of 9, the latest that saw a higher offset
    back = h.add("checker", "committed", at=9, group="g", topic="t", offsets={0: 2, 1: 3})
    assert violations(h) == {"committed-offsets": [[high.index, back.index]]}


def test_two_members_owning_a_partition_at_once_is_refuted_beyond_the_allowance() -> None:
    h = group_history()
    first = h.ops[0]
    double = h.add("c3", "assign", at=8, group="g", topic="t", partitions=(0,))
    h.add("c3", "revoke", at=8.2, group="g", topic="t", partitions=(0,))
    assert violations(h, allowance=0.5) == {}
    assert violations(h, allowance=0.1) == {"ownership": [[first.index, double.index]]}
