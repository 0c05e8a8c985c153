"""Consumer-lag and throughput report over topics: a table and a PNG plot.

Spark reads the topics once (a batch query) and computes records and bytes per topic and
time window; the end offsets and each group's committed offsets come from the cluster,
and lag is their difference per partition, as ``ottla consumer-groups --describe`` shows.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ottla.spark.options import parse_source
from ottla.spark.pipelines.common import add_source_arguments, source_options

HELP = "consumer lag and throughput of topics as a table and a PNG plot"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser, "a topic to report on (repeatable)")
    parser.add_argument("--group", action="append", default=[],
                        help="a consumer group (repeatable; default: every group)")
    parser.add_argument("--window", default="1 minute", help="the throughput window")
    parser.add_argument("--plot", default="lag-report.png", help="where to write the PNG")


@dataclass
class Report:
    throughput: list[tuple[str, Any, float, float]]  # topic, window start, rec/s, bytes/s
    topics: list[list[Any]]  # one summary row per topic
    lag: list[tuple[str, str, int, int, int, int]]  # group, topic, partition, committed, end, lag


def collect(spark: Any, args: argparse.Namespace) -> Report:
    from pyspark.sql import functions as F

    options = source_options(args)
    df = spark.read.format("ottla").options(**options).load()
    size = F.octet_length("value") + F.coalesce(F.octet_length("key"), F.lit(0))
    seconds = (F.col("window.end").cast("long") - F.col("window.start").cast("long"))
    windows = (df.groupBy("topic", F.window("timestamp", args.window).alias("window"))
               .agg(F.count("*").alias("records"), F.sum(size).alias("bytes"))
               .select("topic", F.col("window.start").alias("start"),
                       (F.col("records") / seconds).alias("rps"),
                       (F.col("bytes") / seconds).alias("bps"))
               .orderBy("topic", "start").collect())
    summary = (df.groupBy("topic")
               .agg(F.countDistinct("partition").alias("partitions"),
                    F.count("*").alias("records"), F.sum(size).alias("bytes"),
                    F.min("timestamp").alias("first"), F.max("timestamp").alias("last"))
               .orderBy("topic").collect())
    peak: dict[str, float] = defaultdict(float)
    for w in windows:
        peak[w["topic"]] = max(peak[w["topic"]], w["rps"])
    topics = []
    for s in summary:
        span = max((s["last"] - s["first"]).total_seconds(), 1.0)
        topics.append([s["topic"], s["partitions"], s["records"], s["bytes"],
                       s["first"].isoformat(sep=" ", timespec="seconds"),
                       s["last"].isoformat(sep=" ", timespec="seconds"),
                       round(s["records"] / span, 1), round(peak[s["topic"]], 1)])
    return Report([(w["topic"], w["start"], w["rps"], w["bps"]) for w in windows], topics,
                  consumer_lag(options, args.group))


def consumer_lag(options: dict[str, str], groups: list[str]) -> list[tuple]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    from ottla.spark.offset_reader import OffsetReader

    source = parse_source(options, streaming=False)
    with OffsetReader(source) as offsets:
        tps = offsets.partitions()
        end = offsets.latest(tps)
    admin = AdminClient(dict(source.client))
    if not groups:
        listed = admin.list_consumer_groups(request_timeout=30).result()
        groups = sorted(g.group_id for g in listed.valid)
    rows = []
    for group in groups:
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=30)
        committed = futures[group].result().topic_partitions or []
        for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
            key = (tp.topic, tp.partition)
            if key in end and tp.offset >= 0:
                rows.append((group, tp.topic, tp.partition, tp.offset, end[key],
                             max(end[key] - tp.offset, 0)))
    return rows


def table(header: list[str], rows: list[Any]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def plot(report: Report, path: str) -> bool:
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8))
    by_topic: dict[str, list[tuple[Any, float]]] = defaultdict(list)
    for topic, start, rps, _bps in report.throughput:
        by_topic[topic].append((start, rps))
    for topic, points in sorted(by_topic.items()):
        top.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=topic)
    top.set_title("Throughput by record time")
    top.set_ylabel("records/s")
    if by_topic:
        top.legend()
    lag: dict[str, int] = defaultdict(int)
    for group, topic, *_rest, behind in report.lag:
        lag[f"{group}\n{topic}"] += behind
    if lag:
        bottom.bar(list(lag), list(lag.values()))
    else:
        bottom.text(0.5, 0.5, "no committed offsets", ha="center", va="center",
                    transform=bottom.transAxes)
        bottom.set_axis_off()
    bottom.set_title("Consumer lag (records)")
    top.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def run(spark: Any, args: argparse.Namespace) -> int:
    report = collect(spark, args)
    print(table(["TOPIC", "PARTITIONS", "RECORDS", "BYTES", "FIRST", "LAST", "AVG-REC/S",
                 "PEAK-REC/S"], report.topics))
    print()
    print(table(["GROUP", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG"], report.lag)
          if report.lag else "No committed offsets for these topics.")
    if plot(report, args.plot):
        print(f"\nplot written to {args.plot}")
    else:
        print("\nmatplotlib is not installed: no plot (pip install 'ottla[spark]')")
    return 0
