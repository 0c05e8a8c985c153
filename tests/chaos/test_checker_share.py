"""The share-group checks over hand-made histories: records acquired, acknowledged and
read back; a correct history passes, and a record accepted twice, delivered again once
finished, never finished, or delivered beyond the delivery count limit is refuted."""

from __future__ import annotations

from ottla.chaos.checker import check
from ottla.chaos.history import Op
from tests.chaos.test_checker import History

LIMIT = 3


class Shares(History):
    def acquire(self, member: str, offset: int, count: int = 1, at: float | None = None,
                partition: int = 0) -> Op:
        return self.add(member, "acquire", at=at, group="sg", topic="t", partition=partition,
                        offset=offset, value=f"v{offset}", delivery_count=count)

    def ack(self, member: str, offset: int, ack: str, outcome: str = "ok",
            at: float | None = None, partition: int = 0) -> Op:
        return self.add(member, "ack", outcome, at=at, group="sg", topic="t",
                        partition=partition, offset=offset, value=f"v{offset}", ack=ack)

    def log(self, end: int) -> list[Op]:
        """The final read of partition 0: offsets 0 to ``end``."""
        reads = [self.read(f"v{o}", o) for o in range(end)]
        self.end(end)
        return reads


def shares(read: bool = True) -> Shares:
    """Five records: v0 accepted; v1 released, then rejected by another member; v2
    released at every delivery up to the limit (archived); v3 whose acceptance's outcome
    is unknown; v4 whose holder left without acknowledging, accepted by the next."""
    h = Shares()
    h.acquire("m1", 0)
    h.ack("m1", 0, "accept")
    h.acquire("m1", 1)
    h.ack("m1", 1, "release")
    h.acquire("m2", 1, count=2)
    h.ack("m2", 1, "reject")
    for count in range(1, LIMIT + 1):
        h.acquire("m1", 2, count=count)
        h.ack("m1", 2, "release")
    h.acquire("m2", 3)
    h.ack("m2", 3, "accept", outcome="info")
    h.acquire("m3", 4)
    h.acquire("drain", 4, count=2)
    h.ack("drain", 4, "accept")
    if read:
        h.log(5)
    return h


def found(h: History) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {}
    for v in check(h.ops, share_delivery_limit=LIMIT).violations:
        out.setdefault(v.check, []).append([op.index for op in v.ops])
    return out


def test_records_accepted_rejected_and_archived_once_each_pass() -> None:
    assert found(shares()) == {}


def test_a_record_accepted_twice_is_refuted() -> None:
    h = shares()
    first = h.ops[1]
    again = h.ack("m3", 0, "accept")
    assert found(h) == {"share-accepted-twice": [[first.index, again.index]]}


def test_a_failed_second_acceptance_is_no_violation() -> None:
    """The broker refused it (the record was no longer the member's): ``info``."""
    h = shares()
    h.ack("m3", 0, "accept", outcome="info")
    assert found(h) == {}


def test_a_record_delivered_again_once_accepted_or_rejected_is_refuted() -> None:
    h = shares()
    accepted, rejected = h.ops[1], h.ops[5]
    again = h.acquire("m3", 0, count=2)
    rejected_again = h.acquire("m3", 1, count=3)
    assert found(h) == {"share-accepted-twice": [[accepted.index, again.index],
                                                 [rejected.index, rejected_again.index]]}


def test_a_record_never_finished_is_lost() -> None:
    """v5 was released once and never came back; v6 never reached the group at all."""
    h = shares(read=False)
    h.acquire("m1", 5)
    released = h.ack("m1", 5, "release")
    reads = h.log(7)
    assert found(h) == {"share-lost": [[reads[5].index, released.index],
                                       [reads[6].index]]}


def test_a_delivery_beyond_the_limit_is_refuted() -> None:
    h = shares()
    beyond = h.acquire("m2", 2, count=LIMIT + 1)
    assert found(h) == {"share-delivery-count": [[beyond.index]]}
