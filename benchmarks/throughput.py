"""Produce and consume throughput, end-to-end latency and broker cost, against the
machine's ceilings measured in the same run.

For each record size (100 B, 1 KiB, 16 KiB) it starts a real ``ottla server`` and a
sink (``benchmarks.sink``: the same network layer, storing nothing) and measures with
confluent-kafka: produce with acks=1 and acks=-1, consume from the beginning, latency
percentiles at half the measured produce rate, broker CPU seconds per GB and peak RSS.
Ceilings: the sink, raw loopback TCP throughput, raw sequential disk writes (one fsync at
the end, like the broker's default flush policy) and the device alone (``O_DIRECT``).

Run: ``python -m benchmarks`` (``--sizes 1024 --seconds 5 --repeat 3``); writes
``benchmarks/results/<time>.json`` and ``.md`` (and a ``.png`` if matplotlib is there).
With ``--repeat N`` each size runs N rounds on fresh topics (deleted after the round, and
fresh sinks), every ratio taken within its round, odd rounds producing to the sinks before
the broker; the table shows medians, and each ratio's lowest and highest, and the JSON
keeps the rounds. Latency is measured once per size.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from tests.helpers import OttlaProcess, WireClient, free_port, wait_until

MB = 1 << 20
LATENCY_MAX_RECORDS = 20_000
LATENCY_MAX_BYTES = 128 * MB
PRODUCER = {"linger.ms": 5, "batch.size": 1 << 20, "compression.type": "none",
            "queue.buffering.max.kbytes": 1 << 20, "queue.buffering.max.messages": 1_000_000}
# As a Kafka user tunes a consumer for throughput. librdkafka stops fetching for
# fetch.queue.backoff.ms (default 1 s) whenever its prefetch queue holds more than
# queued.min.messages (default 100k): with small records that is every few hundred ms,
# and the measurement becomes those pauses (a 1 KiB consume from the sink went from
# 1000 to 150-500 MB/s depending on how long it ran).
CONSUMER = {"fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 16 << 20,
            "fetch.wait.max.ms": 10, "enable.auto.commit": False,
            "queued.max.messages.kbytes": 1 << 18, "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 1}
# The latency consumer keeps librdkafka's prefetch defaults: fetching without pause at
# 1 ms waits takes the CPU the producer and the broker need on two cores (p99 at 16 KiB
# went from 3-6 ms to 70-240 ms).
LATENCY_CONSUMER = {"fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 16 << 20,
                    "fetch.wait.max.ms": 1, "enable.auto.commit": False}


def proc_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def produce(bootstrap: str, topic: str, size: int, seconds: float, acks: str,
            partitions: int = 1, client: dict[str, Any] | None = None) -> dict[str, Any]:
    """As many records as the producer can send in ``seconds`` (round-robin over the
    first ``partitions`` partitions); records/s and MB/s. ``client``: more client
    settings (a secured listener's)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER,
                         **(client or {})})
    value = b"x" * size
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            try:
                producer.produce(topic, value, partition=count % partitions,
                                 on_delivery=report)
                count += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    producer.flush(120)
    took = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    return {"records": count, "seconds": took, "records_per_s": count / took,
            "mb_per_s": count * size / took / MB}


def consume(bootstrap: str, topic: str, size: int, count: int, timeout: float = 120,
            client: dict[str, Any] | None = None) -> dict[str, Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}",
                         **CONSUMER, **(client or {})})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    start = None
    deadline = time.monotonic() + timeout
    while got < count and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 0.5):
            if msg.error():
                continue
            if start is None:
                start = time.perf_counter()
            got += 1
    took = time.perf_counter() - (start or time.perf_counter())
    consumer.close()
    took = max(took, 1e-9)
    return {"records": got, "seconds": took, "records_per_s": got / took,
            "mb_per_s": got * size / took / MB}


def steal_ticks() -> list[int]:
    """Per CPU, the clock ticks the hypervisor ran something else (``steal`` in /proc/stat)."""
    with open("/proc/stat") as f:
        return [int(line.split()[8]) for line in f
                if line.startswith("cpu") and line[3].isdigit()]


class StealMeter:
    """Time the host took the guest's CPUs away during a phase: in total, and the most in
    any 100 ms on one CPU. On this VM the latency tails line up with such bursts."""

    def __init__(self) -> None:
        self._samples: list[list[int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self._samples.append(steal_ticks())

    def __enter__(self) -> StealMeter:
        self._samples.append(steal_ticks())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._samples.append(steal_ticks())

    def report(self) -> dict[str, float]:
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        first, last = self._samples[0], self._samples[-1]
        worst = 0
        for i in range(len(self._samples)):
            later = self._samples[min(i + 10, len(self._samples) - 1)]
            worst = max([worst, *(b - a for a, b in zip(self._samples[i], later))])
        return {"steal_ms": sum(b - a for a, b in zip(first, last)) * tick_ms,
                "worst_steal_100ms_ms": worst * tick_ms}


def latency(bootstrap: str, topic: str, size: int, rate: float, seconds: float
            ) -> dict[str, Any]:
    """Produce at ``rate`` records/s with the send time in each value; a consumer
    measures the delay until it sees each record."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time()}",
                         **LATENCY_CONSUMER})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    end_offset = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"}) \
        .get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    consumer.assign([TopicPartition(topic, 0, end_offset)])
    delays: list[float] = []
    stop = threading.Event()

    def read() -> None:
        # poll() returns each record as soon as it is there; consume(n, t) would wait for
        # n records and add its own delay to every measurement.
        while not stop.is_set():
            msg = consumer.poll(0.05)
            if msg is not None and not msg.error() and msg.value()[:1] == b"t":
                delays.append(time.perf_counter() - float(msg.value()[1:21]))

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(1.0)  # the consumer's first fetch is in flight before we start the clock
    # linger.ms=1: at tens of thousands of records a second a latency-minded Kafka user
    # still lets the client batch (one request per record would measure request overhead).
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 1})
    pad = b"p" * max(0, size - 21)
    sent = 0
    with StealMeter() as steal:
        for _ in paced(rate, seconds):
            producer.produce(topic, b"t" + f"{time.perf_counter():20.6f}".encode() + pad,
                             partition=0)
            sent += 1
            producer.poll(0)
        producer.flush(30)
        wait_until(lambda: len(delays) >= sent, 30, 0.05, "the consumer to catch up")
    stop.set()
    reader.join(10)
    consumer.close()
    return {"rate": rate, "records": sent, "p50_ms": percentile_ms(delays, 0.50),
            "p99_ms": percentile_ms(delays, 0.99), "p999_ms": percentile_ms(delays, 0.999),
            **steal.report()}


def paced(rate: float, seconds: float) -> Iterator[int]:
    """Yield the send number at ``rate`` a second for ``seconds`` (sleeping between)."""
    interval = 1.0 / rate
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        due = start + sent * interval
        now = time.perf_counter()
        if now < due:
            time.sleep(min(due - now, 0.001))
            continue
        yield sent
        sent += 1


def percentile_ms(delays: list[float], p: float) -> float:
    """The ``p`` quantile of delays in seconds, in ms (sorts ``delays``)."""
    delays.sort()
    return delays[min(len(delays) - 1, int(p * len(delays)))] * 1000


def loopback_mb_per_s(seconds: float = 2.0) -> float:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    received = [0]

    def sink() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(1 << 20):
                received[0] += len(chunk)

    reader = threading.Thread(target=sink)
    reader.start()
    payload = b"x" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as client:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            client.sendall(payload)
    reader.join(10)
    took = time.perf_counter() - start
    server.close()
    return received[0] / took / MB


def disk_write_mb_per_s(directory: str, megabytes: int = 512) -> float:
    path = os.path.join(directory, "disk-ceiling.tmp")
    chunk = b"x" * MB
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(megabytes):
            os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    took = time.perf_counter() - start
    os.unlink(path)
    return megabytes / took


def device_write_mb_per_s(directory: str, megabytes: int = 512) -> float | None:
    """The disk itself: sequential ``O_DIRECT`` writes of 1 MiB from one reused buffer,
    which bypass the page cache (and so the cost of memory the machine has not used
    lately). None where the file system refuses ``O_DIRECT``."""
    path = os.path.join(directory, "device-ceiling.tmp")
    buf = mmap.mmap(-1, MB)  # page-aligned, as O_DIRECT wants
    buf.write(b"x" * MB)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    except OSError:
        return None
    start = time.perf_counter()
    try:
        for i in range(megabytes):
            os.pwrite(fd, buf, i * MB)
        os.fsync(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
        os.unlink(path)
    return megabytes / (time.perf_counter() - start)


def start_sinks(size: int, store_dir: str) -> tuple[list[subprocess.Popen[bytes]], str, str]:
    """The sink and the storing sink, fresh for every round (nothing kept from earlier)."""
    ports = free_port(), free_port()
    base = [sys.executable, "-m", "benchmarks.sink", "--record-size", str(size)]
    os.makedirs(store_dir, exist_ok=True)
    servers = [subprocess.Popen([*base, "--port", str(ports[0])], stdout=subprocess.DEVNULL),
               subprocess.Popen([*base, "--port", str(ports[1]), "--store", store_dir],
                                stdout=subprocess.DEVNULL)]
    for port in ports:
        wait_until(lambda port=port: socket.create_connection(("127.0.0.1", port), 1)
                   .close() or True, 20, 0.1, "the sink")
    return servers, f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"


def delete_topics(node: OttlaProcess, topics: list[str]) -> None:
    """Give the round's disk space back (a 16 KiB round writes ~5 GB), and wait until the
    broker's worker thread has removed the files, so the next phase does not share the
    machine with the unlinking."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result(60)
    dirs = {f"{topic}-0" for topic in topics}  # and "<dir>.<uuid>-delete" while going
    wait_until(lambda: not any(name.split(".")[0] in dirs for name in
                               os.listdir(node.data_dir)), 120, 0.1, "the files to go")


def one_round(node: OttlaProcess, size: int, seconds: float, workdir: str, index: int
              ) -> dict[str, Any]:
    """Broker and sinks measured back to back on fresh topics; ratios within the round."""
    topics = [f"bench-{index}", f"bench-all-{index}"]
    with WireClient(node.bootstrap) as client:
        for topic in topics:
            client.create_topic(topic, 1)
    store_dir = os.path.join(workdir, f"sink-store-{size}-{index}")
    servers, sink, storing_sink = start_sinks(size, store_dir)
    r: dict[str, Any] = {}

    def sinks_produce() -> None:
        r["storing_sink_produce"] = produce(storing_sink, "bench", size, seconds, "1")
        r["sink_produce"] = produce(sink, "bench", size, seconds, "1")
    try:
        # Whoever writes first in a round gets the memory the last round freed, which is
        # much faster to write on this VM (docs/performance.md): odd rounds let the
        # storing sink go first.
        if index % 2:
            sinks_produce()
        pid = node.proc.pid
        cpu0 = proc_cpu_seconds(pid)
        r["produce_acks1"] = produce(node.bootstrap, topics[0], size, seconds, "1")
        r["produce_acks_all"] = produce(node.bootstrap, topics[1], size, seconds, "all")
        r["consume"] = consume(node.bootstrap, topics[0], size, r["produce_acks1"]["records"])
        moved_gb = (r["produce_acks1"]["records"] + r["produce_acks_all"]["records"]
                    + r["consume"]["records"]) * size / (1 << 30)
        r["broker_cpu_s_per_gb"] = (proc_cpu_seconds(pid) - cpu0) / max(moved_gb, 1e-9)
        if not index % 2:
            sinks_produce()
        r["sink_consume"] = consume(sink, "bench", size, r["consume"]["records"])
    finally:
        for server in servers:
            server.kill()
            server.wait(10)
        shutil.rmtree(store_dir, ignore_errors=True)
        delete_topics(node, topics)
    r["produce_ratio"] = r["produce_acks1"]["mb_per_s"] / r["sink_produce"]["mb_per_s"]
    r["produce_ratio_storing"] = r["produce_acks1"]["mb_per_s"] / \
        r["storing_sink_produce"]["mb_per_s"]
    r["consume_ratio"] = r["consume"]["mb_per_s"] / r["sink_consume"]["mb_per_s"]
    return r


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (the rounds themselves stay in the report)."""
    out: dict[str, Any] = {}
    for key, value in rounds[0].items():
        if isinstance(value, dict):
            out[key] = median_of([r[key] for r in rounds])
        else:
            out[key] = statistics.median(r[key] for r in rounds)
    return out


def run_size(size: int, seconds: float, workdir: str, repeat: int = 1,
             broker_config: dict[str, str] | None = None) -> dict[str, Any]:
    node = OttlaProcess(os.path.join(workdir, f"data-{size}"),
                        overrides=dict(broker_config or {})).start()
    try:
        rounds = [one_round(node, size, seconds, workdir, i) for i in range(repeat)]
        result: dict[str, Any] = {"record_size": size, **median_of(rounds)}
        if repeat > 1:
            result["rounds"] = rounds
        with WireClient(node.bootstrap) as client:
            client.create_topic("latency", 1)
        # Half the measured produce rate, but no more than one Python process can both
        # produce and consume steadily on a core it shares (20k records/s, 128 MB/s):
        # above that the figure measures the benchmark's own queueing.
        half = result["produce_acks1"]["records_per_s"] / 2
        rate = min(half, LATENCY_MAX_RECORDS, LATENCY_MAX_BYTES / size)
        result["latency"] = latency(node.bootstrap, "latency", size, rate, seconds)
        result["broker_peak_rss_mb"] = proc_peak_rss_mb(node.proc.pid)
    finally:
        node.stop()
    return result


def ratio_cell(r: dict[str, Any], key: str) -> str:
    """The median ratio, and with several rounds the lowest and highest."""
    cell = f"{r[key]:.2f}"
    if "rounds" in r:
        values = [x[key] for x in r["rounds"]]
        cell += f" ({min(values):.2f}-{max(values):.2f})"
    return cell


def markdown(report: dict[str, Any]) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in report.get("broker_config", {}).items())
    device = report.get("device_write_mb_per_s")
    lines = [f"Loopback TCP {report['loopback_mb_per_s']:.0f} MB/s, sequential disk write "
             f"{report['disk_write_mb_per_s']:.0f} MB/s (one fsync), the device alone "
             f"(O_DIRECT) {f'{device:.0f} MB/s' if device else 'not measured'}. "
             f"Broker settings: {settings or 'defaults'}.", "",
             "| record | produce acks=1 | acks=all | sink produce | ratio | storing sink | "
             "ratio | consume | sink consume | ratio | p50 / p99 / p99.9 ms (rate/s) | "
             "host steal, worst 100 ms | CPU s/GB | RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["sizes"]:
        lat = r["latency"]
        lines.append(
            f"| {r['record_size']} B | {r['produce_acks1']['records_per_s']:,.0f}/s "
            f"{r['produce_acks1']['mb_per_s']:.1f} MB/s | "
            f"{r['produce_acks_all']['mb_per_s']:.1f} MB/s | "
            f"{r['sink_produce']['mb_per_s']:.1f} MB/s | {ratio_cell(r, 'produce_ratio')} | "
            f"{r['storing_sink_produce']['mb_per_s']:.1f} MB/s | "
            f"{ratio_cell(r, 'produce_ratio_storing')} | "
            f"{r['consume']['records_per_s']:,.0f}/s {r['consume']['mb_per_s']:.1f} MB/s | "
            f"{r['sink_consume']['mb_per_s']:.1f} MB/s | {ratio_cell(r, 'consume_ratio')} | "
            f"{lat['p50_ms']:.1f} / {lat['p99_ms']:.1f} / {lat['p999_ms']:.1f} "
            f"({lat['rate']:,.0f}) | {lat['worst_steal_100ms_ms']:.0f} ms | "
            f"{r['broker_cpu_s_per_gb']:.1f} | "
            f"{r['broker_peak_rss_mb']:.0f} |")
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = [str(r["record_size"]) for r in report["sizes"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.35
    xs = range(len(sizes))
    left.bar([x - width / 2 for x in xs], [r["produce_acks1"]["mb_per_s"]
                                           for r in report["sizes"]], width, label="ottla")
    left.bar([x + width / 2 for x in xs], [r["sink_produce"]["mb_per_s"]
                                           for r in report["sizes"]], width, label="sink")
    left.set_xticks(list(xs), sizes)
    left.set(title="produce acks=1 (MB/s)", xlabel="record bytes")
    left.legend()
    for key in ("p50_ms", "p99_ms", "p999_ms"):
        right.plot(sizes, [r["latency"][key] for r in report["sizes"]], marker="o", label=key)
    right.set(title="end-to-end latency at half load (ms)", xlabel="record bytes")
    right.legend()
    fig.tight_layout()
    fig.savefig(path)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1024, 16384])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds per size on fresh topics; figures are medians and "
                             "ratios show their range")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for the node under test (repeatable), e.g. "
                             "log.page.cache.window.bytes=33554432")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"),
                        help="directory for the JSON, Markdown and PNG results")
    args = parser.parse_args()
    broker_config = dict(item.split("=", 1) for item in args.broker_config)
    results_dir = args.out
    os.makedirs(results_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=results_dir) as workdir:
        report = {"loopback_mb_per_s": loopback_mb_per_s(),
                  "disk_write_mb_per_s": disk_write_mb_per_s(workdir),
                  "device_write_mb_per_s": device_write_mb_per_s(workdir),
                  "cpus": os.cpu_count(), "broker_config": broker_config, "sizes": []}
        for size in args.sizes:
            report["sizes"].append(run_size(size, args.seconds, workdir, args.repeat,
                                            broker_config))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(results_dir, stamp)
    with open(base + ".json", "w") as f:
        json.dump(report, f, indent=2)
    table = markdown(report)
    with open(base + ".md", "w") as f:
        f.write(table)
    print(table)
    print(f"results: {base}.json, {base}.md" + (f", {base}.png" if plot(report, base + ".png")
                                                   else ""))


if __name__ == "__main__":
    main()
