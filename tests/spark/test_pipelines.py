"""The pipelines of ``ottla pipeline run`` against a real broker."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import Counter
from datetime import datetime

from confluent_kafka import Consumer, TopicPartition

from ottla.spark.pipelines import PIPELINES, load
from tests.spark.kafka import create_topics, produce


def pipeline_args(name: str, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    load(name).add_arguments(parser)
    args = parser.parse_args(list(argv))
    args.pipeline = name
    return args


def test_windowed_counts_equal_a_plain_python_count(spark, broker, topic, tmp_path):
    events, results = f"{topic}-events", f"{topic}-results"
    create_topics(broker.bootstrap, [events, results], 3)
    rng = random.Random(11)
    base = 1_700_000_040_000  # a minute boundary
    stamps = [base + rng.randrange(0, 5 * 60_000) for _ in range(2000)]
    keys = [f"user-{rng.randrange(7)}" for _ in stamps]
    produce(broker.bootstrap, ({"topic": events, "partition": i % 3, "key": k.encode(),
                                "value": b"{}", "timestamp": ts}
                               for i, (k, ts) in enumerate(zip(keys, stamps))))
    args = pipeline_args(
        "windowed-counts", "--bootstrap-server", broker.bootstrap, "--topic", events,
        "--output-topic", results, "--window", "1 minute", "--watermark", "10 minutes",
        "--checkpoint", str(tmp_path / "cp"), "--max-offsets-per-trigger", "700")
    assert load("windowed-counts").run(spark, args) == 0

    expected = Counter((k, (ts - ts % 60_000)) for k, ts in zip(keys, stamps))
    latest: dict[str, dict] = {}
    for r in spark.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("subscribe", results).load().orderBy("partition", "offset").collect():
        latest[bytes(r["key"]).decode()] = json.loads(bytes(r["value"]))  # last update wins
    got = {}
    for value in latest.values():
        start = value["window_start"]
        start_ms = int(datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp() * 1000)
        got[(value["key"], start_ms)] = value["count"]
    assert got == dict(expected)
    assert len({k for k, _ in got}) == 7


def test_lag_report_table_and_plot(spark, broker, topic, tmp_path, capsys):
    create_topics(broker.bootstrap, [topic], 2)
    produce(broker.bootstrap, ({"topic": topic, "partition": i % 2, "value": b"x" * 100}
                               for i in range(400)))
    group = f"{topic}-group"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 150), TopicPartition(topic, 1, 50)],
                    asynchronous=False)
    consumer.close()
    plot = tmp_path / "report.png"
    args = pipeline_args("lag-report", "--bootstrap-server", broker.bootstrap,
                         "--topic", topic, "--group", group, "--plot", str(plot))
    assert load("lag-report").run(spark, args) == 0
    out = capsys.readouterr().out
    summary = next(line.split() for line in out.splitlines() if line.startswith(topic))
    assert summary[1:4] == ["2", "400", str(400 * 100)]
    lag_rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert sorted(lag_rows) == [[group, topic, "0", "150", "200", "50"],
                                [group, topic, "1", "50", "200", "150"]]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pipeline_cli_lists_every_pipeline():
    done = subprocess.run([sys.executable, "-m", "ottla", "pipeline", "list"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == list(PIPELINES)
