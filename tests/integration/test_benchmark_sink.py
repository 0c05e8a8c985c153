"""The benchmarks' ceiling server answers a real client: produce is acknowledged (and
stored with --store), fetch returns records. Speed is not measured here; this keeps the
tool the benchmark report depends on working."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.helpers import WireClient, free_port, wait_until


def test_the_sink_acknowledges_stores_and_serves_records(tmp_path) -> None:
    port = free_port()
    store = tmp_path / "store"
    store.mkdir()
    sink = subprocess.Popen([sys.executable, "-m", "benchmarks.sink", "--port", str(port),
                             "--record-size", "100", "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def up() -> bool:
            with WireClient(f"127.0.0.1:{port}", timeout=2) as client:
                client.api_versions()
            return True
        wait_until(up, 30, 0.1, "the sink to listen")
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 5})
        for i in range(200):
            producer.produce("bench", value=b"x" * 100, key=b"%d" % i, partition=0)
        assert producer.flush(30) == 0
        assert os.path.getsize(store / "bench-0.log") > 200 * 100

        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("bench", 0, 0)])
        got = []
        while len(got) < 100:
            message = consumer.poll(10)
            assert message is not None, "the sink served no records"
            assert message.error() is None, message.error()
            got.append(message.value())
        consumer.close()
        assert all(len(value) == 100 for value in got)
    finally:
        sink.kill()
        sink.wait(10)


def test_the_sink_fills_a_fetch_up_to_its_byte_limits_like_a_broker() -> None:
    """The consume ceiling is only fair if the sink answers as much as a broker with
    data waiting would: whole batches up to the partition's and the request's limits."""
    port = free_port()
    sink = subprocess.Popen([sys.executable, "-m", "benchmarks.sink", "--port", str(port),
                             "--record-size", "16384"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def up() -> bool:
            with WireClient(f"127.0.0.1:{port}", timeout=2) as client:
                client.api_versions()
            return True
        wait_until(up, 30, 0.1, "the sink to listen")
        with WireClient(f"127.0.0.1:{port}") as client:
            sizes = {}
            for limit in (1, 3 << 20, 8 << 20):
                response = client.fetch("bench", 0, 1000, max_bytes=limit)
                partition = response.responses[0].partitions[0]
                sizes[limit] = len(partition.records)
                assert _first_and_last_offsets(partition.records)[0] == 1000
            assert 0 < sizes[1] <= 1.1 * (1 << 20)  # one batch even over the limit
            assert 2 << 20 < sizes[3 << 20] <= 3 << 20
            assert 7 << 20 < sizes[8 << 20] <= 8 << 20
    finally:
        sink.kill()
        sink.wait(10)


def _first_and_last_offsets(records: bytes) -> tuple[int, int]:
    """Walks the batch headers; each batch must start where the one before ended."""
    position, first, last = 0, -1, -1
    while position + 61 <= len(records):
        base = int.from_bytes(records[position:position + 8], "big", signed=True)
        assert last < 0 or base == last + 1, f"batch at {base} after offset {last}"
        first = base if first < 0 else first
        length = int.from_bytes(records[position + 8:position + 12], "big")
        last = base + int.from_bytes(records[position + 23:position + 27], "big")
        position += 12 + length
    return first, last


def test_the_benchmark_runs_rounds_and_reports_medians_with_their_range(tmp_path) -> None:
    """A short run of ``python -m benchmarks --repeat 2`` with a broker setting: every
    round reads back all it wrote, and the report keeps the rounds beside the medians
    and names the setting (the figures themselves are not judged here)."""
    out = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "benchmarks", "--sizes", "1024", "--seconds",
                          "0.5", "--repeat", "2", "--out", str(out), "--broker-config",
                          "log.page.cache.window.bytes=1048576"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    [report_file] = out.glob("*.json")
    report = json.loads(report_file.read_text())
    assert report["broker_config"] == {"log.page.cache.window.bytes": "1048576"}
    [size] = report["sizes"]
    assert len(size["rounds"]) == 2
    for r in size["rounds"]:
        assert r["produce_acks1"]["records"] > 0
        assert r["consume"]["records"] == r["produce_acks1"]["records"]
        assert r["sink_consume"]["records"] >= r["consume"]["records"]  # a pool without end
    ratios = sorted(r["produce_ratio"] for r in size["rounds"])
    assert size["produce_ratio"] == sum(ratios) / 2  # the median of two
    assert size["latency"]["records"] > 0
    assert 0 <= size["latency"]["worst_steal_100ms_ms"] <= size["latency"]["steal_ms"] + 1e-9
    table = (out / report_file.with_suffix(".md").name).read_text()
    assert "Broker settings: log.page.cache.window.bytes=1048576." in table
    device = report["device_write_mb_per_s"]  # the disk without the page cache
    assert (device is None and "not measured" in table) or f"(O_DIRECT) {device:.0f}" in table
    row = next(line for line in table.splitlines() if line.startswith("| 1024 B"))
    assert f"{size['produce_ratio']:.2f} ({ratios[0]:.2f}-{ratios[1]:.2f})" in row
