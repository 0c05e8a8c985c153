"""Fetch throughput of the server alone: a bare reader against the broker and the sink.

The consume figures in ``benchmarks.throughput`` are librdkafka's, with a Python thread
copying every value, on the cores the server runs on. This reader keeps one Fetch in
flight, as librdkafka does, but only receives into one reused buffer and walks the batch
headers for the next offset, so the figure is what the server can send. Both servers are
asked the same thing: 16 MiB per partition, from the data a producer just wrote.

Run: ``python -m benchmarks.fetch_server [--record-size 16384] [--seconds 4]
[--broker-config KEY=VALUE ...]``.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

from tests.helpers import OttlaProcess, WireClient, free_port, wait_until

from benchmarks.throughput import MB, proc_cpu_seconds, produce
from ottla.client.blocking import BlockingClient
from ottla.protocol.api import ApiKey

PARTITION_MAX_BYTES = 16 * MB
FETCH_VERSION = 11  # not flexible: the response header can be walked with struct


def _fetch_body(topic: str, offset: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": 10, "min_bytes": 1, "max_bytes": 50 * MB,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": PARTITION_MAX_BYTES}]}]}


def _records_span(buf: bytearray) -> tuple[int, int]:
    """Where the one partition's records are in a Fetch v11 response (after the size)."""
    position = 4 + 4 + 2 + 4 + 4  # correlation id, throttle, error, session, topics
    position += 2 + struct.unpack_from(">h", buf, position)[0] + 4  # name, partitions
    position += 4 + 2 + 8 + 8 + 8  # index, error, high watermark, stable, log start
    aborted = struct.unpack_from(">i", buf, position)[0]
    position += 4 + max(aborted, 0) * 16 + 4  # aborted transactions, preferred replica
    length = struct.unpack_from(">i", buf, position)[0]
    return position + 4, position + 4 + max(length, 0)


def _next_offset(buf: bytearray, start: int, end: int, offset: int) -> int:
    """The offset after the last whole batch in ``buf[start:end]``."""
    while start + 61 <= end:
        base, length = struct.unpack_from(">qi", buf, start)
        if start + 12 + length > end:
            break
        offset = base + struct.unpack_from(">i", buf, start + 23)[0] + 1
        start += 12 + length
    return offset


def read(address: str, server_pid: int, topic: str, total_bytes: int) -> dict[str, Any]:
    buf = bytearray(64 * MB)
    view = memoryview(buf)
    offset = received = fetches = 0
    with BlockingClient(address) as client:
        cpu0, start = proc_cpu_seconds(server_pid), time.perf_counter()
        while received < total_bytes:
            client.send(ApiKey.FETCH, FETCH_VERSION, _fetch_body(topic, offset))
            size = struct.unpack(">i", client._recv_exactly(4))[0]
            got = 0
            while got < size:
                n = client.sock.recv_into(view[got:size])
                if not n:
                    raise ConnectionError("the server closed the connection")
                got += n
            first, end = _records_span(buf)
            if end == first:
                raise RuntimeError(f"no records at offset {offset}")
            offset = _next_offset(buf, first, end, offset)
            received += end - first
            fetches += 1
        took = time.perf_counter() - start
        cpu = proc_cpu_seconds(server_pid) - cpu0
    return {"mb_per_s": received / took / MB, "fetches": fetches,
            "server_cpu_s_per_gb": cpu / (received / (1 << 30))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--record-size", type=int, default=16384)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for the node under test (repeatable)")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.broker_config)
    with tempfile.TemporaryDirectory() as workdir:
        node = OttlaProcess(os.path.join(workdir, "data"), overrides=overrides).start()
        port = free_port()
        sink = subprocess.Popen([sys.executable, "-m", "benchmarks.sink", "--port", str(port),
                                 "--record-size", str(args.record_size)],
                                stdout=subprocess.DEVNULL)
        try:
            with WireClient(node.bootstrap) as client:
                client.create_topic("bench", 1)
            wait_until(lambda: socket.create_connection(("127.0.0.1", port), 1).close()
                       or True, 20, 0.1, "the sink")
            produced = produce(node.bootstrap, "bench", args.record_size, args.seconds, "1")
            total = produced["records"] * args.record_size
            print(f"{args.record_size} B records, {total / MB:.0f} MiB produced; "
                  f"one fetch in flight, {PARTITION_MAX_BYTES // MB} MiB per fetch")
            for _ in range(args.rounds):
                broker = read(node.bootstrap, node.proc.pid, "bench", total)
                ceiling = read(f"127.0.0.1:{port}", sink.pid, "bench", total)
                print(f"broker {broker['mb_per_s']:.0f} MB/s "
                      f"({broker['server_cpu_s_per_gb']:.2f} CPU s/GB, "
                      f"{broker['fetches']} fetches), sink {ceiling['mb_per_s']:.0f} MB/s "
                      f"({ceiling['server_cpu_s_per_gb']:.2f} CPU s/GB): ratio "
                      f"{broker['mb_per_s'] / ceiling['mb_per_s']:.2f}", flush=True)
        finally:
            sink.kill()
            sink.wait(10)
            node.stop()


if __name__ == "__main__":
    main()
