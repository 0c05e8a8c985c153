"""The pipelines of ``ottla pipeline run`` against a real broker."""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime

import pytest
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


def table_rows(out: str, first_column: str) -> list[dict[str, str]]:
    """The rows of the table printed under the header that starts with ``first_column``,
    as column name -> cell (cells may hold spaces: columns are cut at the header's)."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(first_column + " "))
    names = [(m.start(), m.group()) for m in re.finditer(r"\S+", lines[at])]
    rows = []
    for line in lines[at + 1:]:
        if not line or line.endswith("."):  # the table ends at a blank line or a note
            break
        ends = [start for start, _ in names[1:]] + [len(line)]
        rows.append({name: line[start:end].strip() for (start, name), end in zip(names, ends)})
    return rows


def test_lag_report_rates_and_time_axis_fit_one_second_and_one_week(spark, broker, topic,
                                                                    tmp_path, capsys):
    import matplotlib.dates as mdates

    from ottla.spark.pipelines.lag_report import collect, figure

    second, week = f"{topic}-second", f"{topic}-week"
    create_topics(broker.bootstrap, [second, week], 2)
    base = 1_700_000_000_000
    # 1000 records in one second, one a millisecond.
    produce(broker.bootstrap, ({"topic": second, "partition": i % 2, "value": b"x" * 100,
                                "timestamp": base + i} for i in range(1000)))
    # A week of one record every 5 minutes, three on the fourth day.
    produce(broker.bootstrap, ({"topic": week, "partition": i % 2, "value": b"y",
                                "timestamp": base + i * 300_000}
                               for i in range(7 * 288) for _ in range(3 if i // 288 == 3 else 1)))

    def report(*argv: str) -> dict[str, dict[str, str]]:
        args = pipeline_args("lag-report", "--bootstrap-server", broker.bootstrap,
                             "--plot", str(tmp_path / "report.png"), *argv)
        assert load("lag-report").run(spark, args) == 0
        return {r["TOPIC"]: r for r in table_rows(capsys.readouterr().out, "TOPIC")}

    rows = report("--topic", second, "--topic", week)
    assert rows[second] == {
        "TOPIC": second, "PARTITIONS": "2", "RECORDS": "1000", "BYTES": "100000",
        "FIRST": "2023-11-14T22:13:20.000Z", "LAST": "2023-11-14T22:13:20.999Z",
        "SPAN": "999 ms", "WINDOW": "20 ms", "AVG-REC/S": "1000", "PEAK-REC/S": "1000"}
    # 9 * 288 records over 56 windows of 3 hours (the span is 6 d 23 h 55 min): 0.00429/s;
    # the fourth day's windows hold 3 * 36 records each: 0.01/s.
    assert rows[week] == {
        "TOPIC": week, "PARTITIONS": "2", "RECORDS": "2592", "BYTES": "2592",
        "FIRST": "2023-11-14T22:13:20.000Z", "LAST": "2023-11-21T22:08:20.000Z",
        "SPAN": "6 d 23 h", "WINDOW": "3 h", "AVG-REC/S": "0.00429", "PEAK-REC/S": "0.01"}
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A window given by hand: the average and the peak are over the same minute.
    rows = report("--topic", second, "--window", "1 minute")
    assert (rows[second]["WINDOW"], rows[second]["AVG-REC/S"], rows[second]["PEAK-REC/S"]) \
        == ("1 min", "16.7", "16.7")

    # The time axis of the plot is the data's, give or take its 2% margins.
    for name, span in ((second, 1.0), (week, 7 * 86400.0)):
        args = pipeline_args("lag-report", "--bootstrap-server", broker.bootstrap,
                             "--topic", name)
        fig = figure(collect(spark, args))
        lo, hi = (d.timestamp() for d in mdates.num2date(fig.axes[0].get_xlim()))
        assert lo == pytest.approx(base / 1000 - 0.02 * span, abs=span * 0.001)
        assert hi == pytest.approx(base / 1000 + 1.02 * span, abs=span * 0.001)


def test_pipeline_cli_lists_every_pipeline():
    done = subprocess.run([sys.executable, "-m", "ottla", "pipeline", "list"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == list(PIPELINES)
