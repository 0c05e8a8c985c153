"""What serving metrics costs: produce and consume throughput of one node with
``prometheus.listener`` unset (nothing counted) and of one with it set and scraped every
second, in the same run.

Each round starts a fresh combined ``ottla server`` with metrics off and one with them on
(the order alternating between rounds, as whoever writes first in a round gets the memory
the last freed, docs/performance.md), and measures on each, with confluent-kafka: produce
for ``--seconds`` with acks=1 and acks=all (``benchmarks.throughput``'s producer), then
consume what the acks=1 phase wrote. On the metered node a thread GETs ``/metrics`` every
second throughout; its scrape times are reported too, and each node's CPU seconds per GB
moved (less sensitive than throughput to other work on a shared machine). The table shows
each figure's median and the on/off ratio of every round.

Run: ``python -m benchmarks.metrics_cost [--size 1024] [--seconds 5] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers import OttlaProcess, WireClient, free_port

from benchmarks.throughput import consume, proc_cpu_seconds, produce

SCRAPE_INTERVAL_S = 1.0
PHASES = ("produce_acks1", "produce_acks_all", "consume")


class Scraper(threading.Thread):
    """GET /metrics every second until stopped, noting how long each took."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.stopped = threading.Event()
        self.took_ms: list[float] = []
        self.sizes: list[int] = []

    def run(self) -> None:
        while not self.stopped.wait(SCRAPE_INTERVAL_S):
            start = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=30) as response:
                self.sizes.append(len(response.read()))
            self.took_ms.append((time.perf_counter() - start) * 1000)


def measure(base: Path, metered: bool, size: int, seconds: float) -> dict[str, Any]:
    """One node's produce (acks=1, acks=all) and consume figures."""
    port = free_port()
    base.mkdir(parents=True)
    node = OttlaProcess(str(base / "data"), overrides=(
        {"prometheus.listener": f"127.0.0.1:{port}"} if metered else {}))
    node.start()
    scraper = Scraper(port) if metered else None
    try:
        with WireClient(node.bootstrap) as client:
            client.create_topic("bench", 1)
            client.create_topic("bench-all", 1)
        if scraper is not None:
            scraper.start()
        assert node.proc is not None
        cpu0 = proc_cpu_seconds(node.proc.pid)
        result: dict[str, Any] = {
            "produce_acks1": produce(node.bootstrap, "bench", size, seconds, "1"),
            "produce_acks_all": produce(node.bootstrap, "bench-all", size, seconds, "all")}
        result["consume"] = consume(node.bootstrap, "bench", size,
                                    result["produce_acks1"]["records"])
        moved_gb = sum(result[phase]["records"] for phase in PHASES) * size / (1 << 30)
        result["broker_cpu_s_per_gb"] = (proc_cpu_seconds(node.proc.pid) - cpu0) / moved_gb
    finally:
        if scraper is not None:
            scraper.stopped.set()
            scraper.join(30)
        node.stop()
    if scraper is not None:
        result["scrapes"] = len(scraper.took_ms)
        result["scrape_ms_median"] = statistics.median(scraper.took_ms or [0.0])
        result["scrape_ms_max"] = max(scraper.took_ms or [0.0])
        result["scrape_bytes"] = max(scraper.sizes or [0])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="record size in bytes")
    parser.add_argument("--seconds", type=float, default=5.0, help="per produce phase")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (pairs of nodes)")
    args = parser.parse_args()
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="metrics-cost-") as workdir:
        for index in range(args.repeat):
            order = (False, True) if index % 2 == 0 else (True, False)
            run: dict[str, dict[str, Any]] = {}
            for metered in order:
                key = "on" if metered else "off"
                run[key] = measure(Path(workdir) / f"{index}-{key}", metered, args.size,
                                   args.seconds)
            rounds.append(run)
    print(f"{args.size} B records, {args.seconds:g} s per produce phase, "
          f"{args.repeat} rounds; MB/s medians, and on/off per round")
    print("| phase | off | on (scraped every 1 s) | on/off by round |")
    print("| --- | --- | --- | --- |")
    for phase in PHASES:
        off = [r["off"][phase]["mb_per_s"] for r in rounds]
        on = [r["on"][phase]["mb_per_s"] for r in rounds]
        ratios = " ".join(f"{b / a:.2f}" for a, b in zip(off, on, strict=True))
        print(f"| {phase} | {statistics.median(off):.1f} | {statistics.median(on):.1f} | "
              f"{ratios} |")
    off = [r["off"]["broker_cpu_s_per_gb"] for r in rounds]
    on = [r["on"]["broker_cpu_s_per_gb"] for r in rounds]
    ratios = " ".join(f"{b / a:.2f}" for a, b in zip(off, on, strict=True))
    print(f"| broker CPU s/GB | {statistics.median(off):.2f} | {statistics.median(on):.2f} | "
          f"{ratios} |")
    scrapes = [r["on"] for r in rounds]
    print(f"scrapes per node: {[s['scrapes'] for s in scrapes]}, median time "
          f"{statistics.median(s['scrape_ms_median'] for s in scrapes):.1f} ms, max "
          f"{max(s['scrape_ms_max'] for s in scrapes):.1f} ms, "
          f"{max(s['scrape_bytes'] for s in scrapes)} bytes")


if __name__ == "__main__":
    main()
