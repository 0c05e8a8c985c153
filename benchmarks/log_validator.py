"""Produce-side validation throughput (GB/s of batches) beside what reading the same bytes
costs at the least.

Validation walks every record of a produced batch (``ottla._records``) after the header
and CRC-32C checks. This measures it per record size, uncompressed, lz4 and zstd (as GB/s of
the records uncompressed), and prints it beside two ceilings measured in the same run on
the same records: copying them (the one copy the produce path makes anyway) and their
CRC-32C (what the broker checked before it walked records). The gap between the CRC
figure and validation is the cost of walking records (and decompressing them).

Run: ``python -m benchmarks.log_validator [--mb 1] [--rounds 200]``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from crc32c import crc32c

from ottla.broker.log_validator import PendingBatch, validate_batch
from ottla.protocol.compression import CompressionType
from ottla.protocol.records import build_batch
from ottla.storage.log_config import LogConfig


def rate(job: Callable[[bytes], object], batch: bytes, rounds: int, size: int) -> float:
    """GB/s (of ``size`` bytes a call) of ``job(batch)``, best of three passes."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(rounds):
            job(batch)
        best = min(best, time.perf_counter() - start)
    return size * rounds / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=1.0, help="batch size in MB")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    config = LogConfig.resolve({}, {})
    now = int(time.time() * 1000)

    def validate(batch: bytes) -> None:
        result = validate_batch(batch, config, now)
        if isinstance(result, PendingBatch):
            result.finish()

    print("| record | codec | batch | validate GB/s | copy GB/s | ratio | CRC-32C GB/s | "
          "ratio | ns per record |")
    print("|---|---|---|---|---|---|---|---|---|")
    rng = random.Random(1)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(2, 9)))
             for _ in range(500)]
    for size in (100, 1024, 16384):
        count = max(1, int(args.mb * 1e6) // (size + 10))
        values = []
        for _ in range(min(count, 64)):
            text = b" ".join(rng.choice(words) for _ in range(size // 4))
            values.append(text[:size].ljust(size, b"."))
        records = [(None, values[i % len(values)]) for i in range(count)]
        plain = build_batch(records, timestamp=now)
        for codec in (CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD):
            batch = build_batch(records, timestamp=now, compression=codec)
            validated = rate(validate, batch, args.rounds, len(plain))
            copied = rate(bytearray, plain, args.rounds, len(plain))
            checked = rate(crc32c, plain, args.rounds, len(plain))
            per_record = len(plain) / (validated * 1e9) / count * 1e9
            print(f"| {size} B | {codec.name.lower()} | {len(plain) / 1e6:.2f} MB "
                  f"({len(batch) / 1e6:.2f} sent) | {validated:.2f} | {copied:.2f} | "
                  f"{validated / copied:.2f} | {checked:.2f} | {validated / checked:.2f} | "
                  f"{per_record:.1f} |")

if __name__ == "__main__":
    main()
