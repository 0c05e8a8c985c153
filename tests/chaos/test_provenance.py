"""The final read's records get the producer id and epoch of the batch holding them, from
the nodes' segment files: what tells a broker's duplicate from a client's resend."""

from __future__ import annotations

from pathlib import Path

from ottla.chaos.history import Op
from ottla.chaos.provenance import annotate_reads
from ottla.protocol.records import build_batch


def write_log(log_dir: Path, batches: list[tuple[int, int, int, int]]) -> None:
    """(base offset, records, producer id, producer epoch) as one segment of t-0."""
    directory = log_dir / "t-0"
    directory.mkdir(parents=True)
    data = b"".join(build_batch([(None, b"v")] * n, base_offset=base, producer_id=pid,
                                producer_epoch=epoch, base_sequence=0)
                    for base, n, pid, epoch in batches)
    (directory / "00000000000000000000.log").write_bytes(data)


def read(offset: int) -> Op:
    return Op(offset, "final-read", "read", "ok", 0, 0, topic="t", partition=0,
              offset=offset, value=f"v{offset}")


def test_each_read_gets_its_batchs_producer_from_the_first_node_holding_it(
        tmp_path: Path) -> None:
    write_log(tmp_path / "a", [(0, 4, 0, 0)])  # a node that stopped short
    write_log(tmp_path / "b", [(0, 4, 0, 0), (4, 4, 0, 1), (8, 1, 1000, 0)])
    produce = Op(99, "producer-0", "produce", "ok", 0, 0, topic="t", partition=0, offset=3)
    ops = [read(o) for o in (0, 3, 4, 7, 8, 9)] + [produce]
    annotated = annotate_reads(ops, [str(tmp_path / "a"), str(tmp_path / "b"),
                                     str(tmp_path / "missing")])
    assert [(op.offset, op.producer_id, op.producer_epoch) for op in annotated[:6]] == [
        (0, 0, 0), (3, 0, 0), (4, 0, 1), (7, 0, 1), (8, 1000, 0), (9, None, None)]
    assert annotated[6] == produce  # only reads are annotated
