"""Which producer session wrote each record the final read saw, from the stopped nodes'
segment files.

A duplicate's two copies tell the checker whose fault it is. Kafka's idempotence is per
producer id *and epoch*: a broker answers a retried batch of the same epoch with its
first offsets, but a producer that bumps its epoch and sends a possibly written batch
again with new sequence numbers (librdkafka does, confluentinc/librdkafka#4953) writes a
second copy no broker may recognise. The record batches' headers say which case it was.
"""

from __future__ import annotations

import bisect
import glob
import os
from collections.abc import Sequence
from dataclasses import replace

from ottla.chaos.history import Op
from ottla.protocol.records import scan_batches

Batch = tuple[int, int, int, int]
"""base offset, last offset, producer id, producer epoch"""


def partition_batches(log_dir: str, topic: str, partition: int) -> list[Batch]:
    """The batches of one partition's log in ``log_dir``, in offset order (none if the
    node has no replica of it)."""
    batches: list[Batch] = []
    for path in sorted(glob.glob(os.path.join(log_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        batches += [(h.base_offset, h.last_offset, h.producer_id, h.producer_epoch)
                    for _, h in scan_batches(data)]
    batches.sort()
    return batches


def annotate_reads(ops: Sequence[Op], log_dirs: Sequence[str]) -> list[Op]:
    """``ops`` with each final ``read`` carrying the producer id and epoch of the batch
    that holds its offset, from the first of ``log_dirs`` that has it (replicas agree
    below the high watermark, which the final read does not pass)."""
    found: dict[tuple[str, int], list[list[Batch]]] = {}
    annotated = []
    for op in ops:
        if op.kind == "read" and op.topic is not None and op.partition is not None \
                and op.offset is not None:
            logs = found.get((op.topic, op.partition))
            if logs is None:
                logs = found[(op.topic, op.partition)] = [
                    partition_batches(d, op.topic, op.partition) for d in log_dirs]
            offset = op.offset
            batch = next((b for log in logs if (b := _holding(log, offset)) is not None),
                         None)
            if batch is not None:
                op = replace(op, producer_id=batch[2], producer_epoch=batch[3])
        annotated.append(op)
    return annotated


def _holding(batches: list[Batch], offset: int) -> Batch | None:
    i = bisect.bisect_right(batches, (offset, 2**63, 0, 0)) - 1
    if i >= 0 and batches[i][0] <= offset <= batches[i][1]:
        return batches[i]
    return None
