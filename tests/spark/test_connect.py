"""The ``ottla`` data source through Spark Connect: a server started with the PySpark
install's ``start-connect-server.sh``, clients with ``SparkSession.builder.remote``
(``create_session(remote=...)``, ``ottla pipeline run --remote``) in processes of their
own. The server's Python workers run this environment's Python, which has ottla
installed, as docs/spark.md asks of a Connect server."""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.spark.cluster import (
    ConnectServer,
    SparkProcess,
    read_file_sink,
    result_line,
    spark_env,
)
from tests.spark.kafka import create_topics, produce
from tests.spark.test_exactly_once import read_topic

CLIENT = Path(__file__).with_name("connect_client.py")
CLIENT_TIMEOUT = 150


def run(name: str, args: list[str], tmp_path: Path) -> str:
    """Run a client process to its end (killed if it outlives ``CLIENT_TIMEOUT``)."""
    client = SparkProcess(name, args, spark_env(tmp_path / "conf"), tmp_path / f"{name}.log")
    client.start()
    try:
        code = client.wait(CLIENT_TIMEOUT)
    finally:
        client.stop()
    output = client.log(100_000)
    assert code == 0, f"{name} exited with {code}:\n{output[-6000:]}"
    return output


def test_batch_read_and_default_mode_write(connect_server: ConnectServer, broker, topic,
                                          tmp_path):
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topics(broker.bootstrap, [source, sink], 2)
    acked = produce(broker.bootstrap, ({"topic": source, "partition": i % 2,
                                        "key": b"k%d" % (i % 5), "value": b"value-%d" % i}
                                       for i in range(500)))
    output = run("batch", [sys.executable, str(CLIENT), connect_server.url, "batch",
                           "--bootstrap", broker.bootstrap, "--source", source,
                           "--sink", sink], tmp_path)

    result = result_line(output, "rows")
    assert result["type"] == "pyspark.sql.connect.session"
    assert sorted((r["partition"], r["offset"], r["key"], r["value"])
                  for r in result["rows"]) == sorted(
        (p, o, k.decode(), v.decode()) for _t, p, o, k, v, _h in acked)
    assert sorted(read_topic(broker.bootstrap, sink, "read_uncommitted", 2)) == sorted(
        b"VALUE-%d" % i for i in range(500))


def test_streaming_available_now_to_parquet(connect_server: ConnectServer, broker, topic,
                                            tmp_path):
    create_topics(broker.bootstrap, [topic], 2)
    acked = produce(broker.bootstrap, ({"topic": topic, "partition": i % 2,
                                        "value": b"v%d" % i} for i in range(1000)))
    output_dir, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    output = run("stream", [sys.executable, str(CLIENT), connect_server.url, "stream",
                            "--bootstrap", broker.bootstrap, "--source", topic,
                            "--output", str(output_dir), "--checkpoint", str(checkpoint)],
                 tmp_path)

    assert result_line(output, "finished") == {"finished": True, "exception": None}
    assert sorted((r["partition"], r["offset"], r["value"])
                  for r in read_file_sink(output_dir)) == sorted(
        (p, o, v) for _t, p, o, _k, v, _h in acked)
    # maxOffsetsPerTrigger=300 cut the 1000 records into four micro-batches.
    assert sorted(int(n.name) for n in (checkpoint / "commits").iterdir() if n.name.isdigit()) \
        == [0, 1, 2, 3]


def latest_per_key(bootstrap: str, topic: str, partitions: int) -> dict[str, dict[str, Any]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        consumer.assign(tps)
        latest: dict[str, dict[str, Any]] = {}
        seen = Counter[int]()
        while any(seen[p] < ends[p] for p in ends):
            for m in consumer.consume(1000, 5):
                assert m.error() is None, m.error()
                latest[m.key().decode()] = json.loads(m.value())  # the last update wins
                seen[m.partition()] += 1
        return latest
    finally:
        consumer.close()


def test_pipeline_run_with_remote(connect_server: ConnectServer, broker, topic, tmp_path):
    """``ottla pipeline run windowed-counts --remote sc://...``: the stateful query and
    its foreachBatch writes run on the server."""
    events, results = f"{topic}-events", f"{topic}-results"
    create_topics(broker.bootstrap, [events, results], 2)
    rng = random.Random(5)
    base = 1_700_000_040_000  # a minute boundary
    stamps = [base + rng.randrange(0, 3 * 60_000) for _ in range(600)]
    keys = [f"user-{rng.randrange(4)}" for _ in stamps]
    produce(broker.bootstrap, ({"topic": events, "partition": i % 2, "key": k.encode(),
                                "value": b"{}", "timestamp": ts}
                               for i, (k, ts) in enumerate(zip(keys, stamps))))
    output = run("pipeline", [
        sys.executable, "-m", "ottla", "pipeline", "run", "windowed-counts",
        "--remote", connect_server.url, "--bootstrap-server", broker.bootstrap,
        "--topic", events, "--output-topic", results, "--window", "1 minute",
        "--watermark", "10 minutes", "--checkpoint", str(tmp_path / "checkpoint"),
        "--max-offsets-per-trigger", "250"], tmp_path)

    assert re.search(r"^windowed-counts: \d+ micro-batches, 600 input records$", output, re.M)
    expected = Counter(f"{k}|{ts - ts % 60_000}" for k, ts in zip(keys, stamps))
    got = {}
    for value in latest_per_key(broker.bootstrap, results, 2).values():
        start = datetime.fromisoformat(value["window_start"].replace("Z", "+00:00"))
        got[f"{value['key']}|{int(start.timestamp() * 1000)}"] = value["count"]
    assert got == dict(expected)
