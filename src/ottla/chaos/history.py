"""The history of a chaos run: every operation a client invoked and how it completed, one
JSON object a line (``history.jsonl``), as Jepsen records them.

An operation has a process (the client that ran it), a kind, its invoke and completion
times (``time.monotonic_ns`` of the recording process) and an outcome: ``ok`` (it
happened), ``fail`` (it certainly did not) or ``info`` (indeterminate: it may have
happened, e.g. a produce whose delivery report was an error or never came). The checker
(``checker.py``) proves or refutes Kafka's guarantees from these lines alone.

Kinds and the fields they carry:

- ``produce``: topic, partition, key, value; ``offset`` once acknowledged; the producer's
  send number of this partition in ``sequence`` (send order), producer id/epoch if known.
- ``read``: one record of the final full read (topic, partition, offset, key, value).
- ``read-end``: the final read of one partition reached ``offset`` (its end) when ``ok``.
- ``poll``: one record a group consumer got (group, topic, partition, offset, value).
- ``commit``: a group's offset commit, ``offsets`` by partition (one topic).
- ``committed``: the offsets a group had committed, as read back (``offsets``).
- ``reset``: an explicit reset of a group's committed offsets (``offsets``), the one
  allowed way for them to go back.
- ``assign`` / ``revoke``: partitions a group member gained or lost (``partitions``).

The transactional copy loop (``txn`` names its transaction, ``process.n``):

- ``txn-begin``: a transaction began (``fail``: begin_transaction raised).
- ``poll`` with ``txn``: a source record the transaction copies.
- ``txn-produce``: a record written in the transaction (topic, partition, value, its
  ``offset`` once delivered); the value is ``txn/source value``.
- ``txn-commit``: commit_transaction with the source offsets sent to it (``offsets``);
  ``info`` when its outcome is unknown (it may have committed).
- ``txn-abort``: abort_transaction, on purpose or after a failed commit.
- ``txn-read``: a record a read_committed consumer of the sink read (the concurrent
  reader, or the final read, process ``final-read-committed``).

The share group (KIP-932):

- ``acquire``: a record a share consumer got (topic, partition, offset, value,
  ``delivery_count``).
- ``ack``: its acknowledgement (``ack``: accept, release or reject), ``ok`` when the
  commit that sent it succeeded for its partition, ``info`` otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Literal

Outcome = Literal["ok", "fail", "info"]
Kind = Literal["produce", "read", "read-end", "poll", "commit", "committed", "reset",
               "assign", "revoke", "txn-begin", "txn-produce", "txn-commit", "txn-abort",
               "txn-read", "acquire", "ack"]

KINDS: frozenset[str] = frozenset(Kind.__args__)  # type: ignore[attr-defined]
OUTCOMES: frozenset[str] = frozenset(Outcome.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Op:
    """One operation of the history; fields a kind does not use stay None."""

    index: int
    process: str
    kind: Kind
    outcome: Outcome
    invoke_ns: int
    complete_ns: int
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: str | None = None
    value: str | None = None
    group: str | None = None
    partitions: tuple[int, ...] | None = None
    offsets: dict[int, int] | None = field(default=None, hash=False)
    producer_id: int | None = None
    producer_epoch: int | None = None
    sequence: int | None = None
    error: str | None = None
    txn: str | None = None
    ack: str | None = None
    delivery_count: int | None = None

    def to_json(self) -> str:
        """The op as one line, without the fields its kind leaves empty."""
        record = {k: v for k, v in asdict(self).items() if v is not None}
        if self.partitions is not None:
            record["partitions"] = list(self.partitions)
        if self.offsets is not None:
            record["offsets"] = {str(p): o for p, o in sorted(self.offsets.items())}
        return json.dumps(record, separators=(",", ":"))

    @staticmethod
    def from_json(line: str) -> Op:
        record = json.loads(line)
        if record.get("kind") not in KINDS or record.get("outcome") not in OUTCOMES:
            raise ValueError(f"not a history operation: {line.strip()[:200]}")
        if "partitions" in record:
            record["partitions"] = tuple(record["partitions"])
        if "offsets" in record:
            record["offsets"] = {int(p): int(o) for p, o in record["offsets"].items()}
        return Op(**record)


def dump(ops: Iterable[Op]) -> str:
    return "".join(op.to_json() + "\n" for op in ops)


def parse(lines: Iterable[str]) -> list[Op]:
    """The operations of a history, blank lines skipped, ordered by index."""
    return sorted((Op.from_json(line) for line in lines if line.strip()),
                  key=lambda op: op.index)


def load(path: str) -> list[Op]:
    with open(path, encoding="utf-8") as f:
        return parse(f)


def by_kind(ops: Iterable[Op], *kinds: Kind) -> Iterator[Op]:
    wanted = set(kinds)
    return (op for op in ops if op.kind in wanted)
