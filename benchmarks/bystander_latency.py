"""Another client's ApiVersions round trip while the node refuses compression bombs, beside
the same round trip on the idle node, measured in the same run.

A zstd batch of about 40 KiB that expands to 1.25 GiB is refused (INVALID_RECORD) after a
decompression into at most ``max.decompressed.batch.bytes``, which runs on a worker
thread, off the event loop. tests/integration/test_hostile_input.py checks that the other
client is answered and that the bomb is neither stored nor held in memory; how long its
answers take while bombs arrive back to back is this figure. The idle round trip is its
ceiling: the ratio says what the bombs cost everyone else.

Run: ``python -m benchmarks.bystander_latency [--seconds 5] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

from tests.batches import raw_batch, zstd_bomb
from tests.helpers import OttlaProcess, WireClient

from ottla.protocol.api import ApiKey


def round_trips(address: str, seconds: float) -> list[float]:
    """Seconds of each ApiVersions round trip, one after the other, for ``seconds``."""
    times = []
    with WireClient(address, timeout=30) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            start = time.perf_counter()
            client.api_versions()
            times.append(time.perf_counter() - start)
    return times


def bombard(address: str, bomb: bytes, stop: threading.Event, sent: list[int]) -> None:
    """Produce the bomb again as soon as the last one is refused, until ``stop``."""
    with WireClient(address, timeout=60) as attacker:
        while not stop.is_set():
            correlation_id = attacker.send(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": 1, "timeout": 10000,
                "topic_data": [{"name": "bombed", "partition_data": [
                    {"index": 0, "records": bomb}]}]})
            attacker.receive(ApiKey.PRODUCE, 9, correlation_id)
            sent[0] += 1


def summary(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (f"{len(ms)} round trips, median {statistics.median(ms):.2f} ms, "
            f"p99 {p99:.2f} ms, max {ms[-1]:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    bomb = raw_batch(zstd_bomb(1250, 1024 * 1024), 1250, codec=4, compressed=True)
    with tempfile.TemporaryDirectory() as workdir:
        node = OttlaProcess(os.path.join(workdir, "data")).start()
        try:
            with WireClient(node.bootstrap) as client:
                client.create_topic("bombed")
            print(f"bomb: {len(bomb) / 1024:.0f} KiB of zstd expanding to 1.25 GiB")
            for _ in range(args.rounds):
                idle = round_trips(node.bootstrap, args.seconds)
                stop, sent = threading.Event(), [0]
                attacker = threading.Thread(target=bombard,
                                            args=(node.bootstrap, bomb, stop, sent))
                attacker.start()
                try:
                    bombed = round_trips(node.bootstrap, args.seconds)
                finally:
                    stop.set()
                    attacker.join(60)
                ratio = statistics.median(bombed) / statistics.median(idle)
                print(f"idle: {summary(idle)}", flush=True)
                print(f"under {sent[0]} bombs: {summary(bombed)}; median ratio "
                      f"{ratio:.2f}", flush=True)
        finally:
            node.stop()


if __name__ == "__main__":
    main()
