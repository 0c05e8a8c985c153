"""Turning per-partition offsets into Spark input splits, and rate limiting micro-batches.

All follow Spark's Kafka source: ``minPartitions`` divides large partitions into
contiguous offset ranges in proportion to their size, ``maxRecordsPerPartition`` caps a
split, ``maxOffsetsPerTrigger`` is shared among partitions in proportion to their lag, and
``minOffsetsPerTrigger`` holds a micro-batch back until enough records arrived or
``maxTriggerDelay`` passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ottla.spark.offset_reader import TP, OffsetRange


def split(ranges: list[OffsetRange], min_partitions: int | None = None,
          max_records: int | None = None) -> list[OffsetRange]:
    """Input splits for ``ranges``; one per partition unless an option asks for more."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records:
        ranges = [piece for r in ranges
                  for piece in _divide(r, math.ceil(r.size / max_records))]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    return [piece for r in ranges
            for piece in _divide(r, max(math.floor(r.size / total * min_partitions + 0.5), 1))]


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    pieces = []
    remaining, start = r.size, r.from_offset
    for i in range(parts):
        this = remaining // (parts - i)  # the last piece takes the rounding
        remaining -= this
        pieces.append(OffsetRange(r.topic, r.partition, start, start + this))
        start += this
    return [p for p in pieces if p.size > 0]


def rate_limit(start: dict[TP, int], latest: dict[TP, int], limit: int) -> dict[TP, int]:
    """End offsets that advance at most ``limit`` records in total, shared by lag."""
    lag = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(lag.values())
    if total <= limit:
        return dict(latest)
    end = {}
    for tp, until in latest.items():
        begin = start.get(tp, until)
        share = math.floor(lag[tp] / total * limit)
        end[tp] = min(begin + share, until)
    # Floors can leave the budget unused (and stall a query whose limit is below the
    # number of partitions); hand out what is left one record at a time, oldest lag first.
    left = limit - sum(end[tp] - start.get(tp, end[tp]) for tp in end)
    for tp in sorted(lag, key=lambda t: -lag[t]):
        if left <= 0:
            break
        if end[tp] < latest[tp]:
            end[tp] += 1
            left -= 1
    return end


@dataclass
class TriggerGate:
    """``minOffsetsPerTrigger`` and ``maxTriggerDelay`` (Spark's delayBatch): a trigger
    with fewer new records than the minimum is skipped, unless the delay has passed
    since the last batch ran. The first trigger always runs (the last is at 0)."""

    min_records: int
    max_delay_ms: int
    last_trigger_ms: int = 0

    def holds_back(self, start: dict[TP, int], latest: dict[TP, int], now_ms: int) -> bool:
        if now_ms - self.last_trigger_ms >= self.max_delay_ms:
            self.last_trigger_ms = now_ms
            return False
        new = sum(until - start.get(tp, 0) for tp, until in latest.items())
        if new < self.min_records:
            return True
        self.last_trigger_ms = now_ms
        return False
