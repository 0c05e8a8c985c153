"""``python -m benchmarks``: the throughput, latency and cost run (benchmarks.throughput)."""

from benchmarks.throughput import main

main()
