"""The web console's message browser on a large topic: how long the page of the first
100 records takes (from the start, from a timestamp in the middle, the latest), the
browser's cost beside what a bare confluent-kafka consumer needs to read the same 100
records on the same machine.

Run: ``python -m benchmarks.console_browse [--mb 1024] [--partitions 1] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.helpers import OttlaProcess, free_port, terminate, wait_until

TOPIC = "browse"
VALUE = 1000


def fill(bootstrap: str, megabytes: int, partitions: int) -> tuple[int, int]:
    """``megabytes`` of 1 KB JSON values; the timestamps of the first and last records."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1 << 20, "compression.type": "none"})
    count = (megabytes << 20) // VALUE
    padding = "x" * (VALUE - 60)
    first = int(time.time() * 1000)
    for i in range(count):
        value = f'{{"id": {i:12d}, "pad": "{padding}"}}'.encode()
        while True:
            try:
                producer.produce(TOPIC, value, key=b"%d" % i)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(300) == 0, "records left unsent"
    return first, int(time.time() * 1000)


def page_seconds(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
        assert response.status == 200, body[:500]
    elapsed = time.perf_counter() - start
    assert body.count(b'<td class="value">') == 100, "not 100 records on the page"
    return elapsed


def consumer_seconds(bootstrap: str, offset: int) -> float:
    """A bare consumer: created, assigned to partition 0 at ``offset``, 100 records read."""
    start = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, offset)])
    got = 0
    while got < 100:
        got += sum(1 for m in consumer.consume(100 - got, 5) if m.error() is None)
    consumer.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="ottla-console-bench-")
    node = OttlaProcess(os.path.join(workdir, "data")).start()
    port = free_port()
    console = subprocess.Popen([sys.executable, "-m", "ottla", "console",
                                "--bootstrap-server", node.bootstrap, "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = time.perf_counter()
        first, last = fill(node.bootstrap, args.mb, args.partitions)
        print(f"filled {args.mb} MB ({(args.mb << 20) // VALUE} records of {VALUE} B, "
              f"{args.partitions} partition(s)) in {time.perf_counter() - started:.1f} s")
        base = f"http://127.0.0.1:{port}/topics/{TOPIC}/messages"
        wait_until(lambda: urllib.request.urlopen(base + "?limit=1", timeout=5), 60, 0.2,
                   "the console")
        middle = (first + last) // 2
        cases = {
            "first 100 from offset 0 (partition 0)": "?partition=0&start=offset&position=0"
                                                     "&limit=100",
            "100 from a timestamp in the middle (partition 0)":
                f"?partition=0&start=timestamp&position={middle}&limit=100",
            "the latest 100 (partition 0)": "?partition=0&start=latest&limit=100",
        }
        for name, query in cases.items():
            times = [page_seconds(base + query) for _ in range(args.rounds)]
            print(f"{name:<52} median {statistics.median(times) * 1000:7.1f} ms  "
                  f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})")
        bare = [consumer_seconds(node.bootstrap, 0) for _ in range(args.rounds)]
        print(f"{'a bare consumer: 100 from offset 0':<52} median "
              f"{statistics.median(bare) * 1000:7.1f} ms  (min {min(bare) * 1000:.1f}, "
              f"max {max(bare) * 1000:.1f})")
    finally:
        terminate(console, 15, 10)
        node.stop()


if __name__ == "__main__":
    main()
