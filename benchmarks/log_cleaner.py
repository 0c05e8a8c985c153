"""Log cleaner throughput (MB/s of input) beside raw sequential disk read+write speed.

Builds a compacted log of keyed records with many overwrites, cleans it once, and reports
the input bytes per second of the cleaning pass. The ceiling is what the same disk does
when the same bytes are only read and written back (with one fsync), measured in the same
run on the same directory.

Run: ``python -m benchmarks.log_cleaner [--mb 64] [--keys 10000]``.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

from ottla.protocol.records import build_batch, read_header
from ottla.storage.cleaner import LogCleaner
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig

TP = ("bench", 0)


def build_log(path: str, megabytes: int, keys: int) -> Log:
    lg = Log(path, "bench", 0, LogConfig.resolve({"cleanup.policy": "compact",
                                                  "segment.bytes": str(16 << 20)}),
             now_ms=1000, clean_shutdown=False)
    rng = random.Random(1)
    value = b"v" * 100
    written = 0
    while written < megabytes << 20:
        records = [(b"key-%d" % rng.randrange(keys), value) for _ in range(100)]
        batch = bytearray(build_batch(records, timestamp=1000))
        lg.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
        written += len(batch)
    lg.roll(1000)
    lg.high_watermark = lg.log_end_offset
    lg.flush()
    return lg


def raw_copy(path: str) -> float:
    """Seconds to read every segment file and write it back out once, with an fsync."""
    start = time.perf_counter()
    out = os.path.join(path, "copy.tmp")
    with open(out, "wb") as sink:
        for name in sorted(os.listdir(path)):
            if name.endswith(".log"):
                with open(os.path.join(path, name), "rb") as source:
                    while chunk := source.read(1 << 20):
                        sink.write(chunk)
        sink.flush()
        os.fsync(sink.fileno())
    elapsed = time.perf_counter() - start
    os.unlink(out)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--keys", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        lg = build_log(os.path.join(tmp, "bench-0"), args.mb, args.keys)
        size = lg.size
        ceiling = raw_copy(lg.dir)
        cleaner = LogCleaner(lambda: {TP: lg})
        start = time.perf_counter()
        stats = cleaner.clean(TP, lg, now_ms=1000)
        took = time.perf_counter() - start
        mb = size / (1 << 20)
        print(f"log: {mb:.1f} MB, {lg.log_end_offset} records, {args.keys} keys")
        print(f"cleaner: {took:.2f} s, {mb / took:.1f} MB/s of input "
              f"({stats.records_dropped} records dropped, {lg.size / (1 << 20):.2f} MB left)")
        print(f"ceiling (raw read+write of the same bytes): {mb / ceiling:.1f} MB/s")
        print(f"ratio: {(mb / took) / (mb / ceiling):.4f}")


if __name__ == "__main__":
    main()
