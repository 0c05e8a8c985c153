"""The benchmarks' ceiling server answers a real client: produce is acknowledged (and
stored with --store), fetch returns records. Speed is not measured here; this keeps the
tool the benchmark report depends on working."""

from __future__ import annotations

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
