"""Consumer-lag and throughput report over topics: a table and a PNG plot.

Spark reads the topics once (a batch query) and counts records and bytes per topic and
time window of the record timestamps; the end offsets and each group's committed offsets
come from the cluster, and lag is their difference per partition, as
``ottla consumer-groups --describe`` shows.

Throughput is measured in windows of one length per topic that start at the topic's first
record: by default (``--window auto``) the length that cuts the topic's time span into
at most 60 windows (20 ms for a topic of one second, 3 hours for a topic of one week).
The average and the peak records/s are both over those windows, from the first record's
to the last record's: the average is the records over the time those windows cover, the
peak the busiest window, so the peak is never below the average and the two are equal
when records arrive evenly.
"""

from __future__ import annotations

import argparse
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ottla.spark.options import parse_source
from ottla.spark.pipelines.common import add_source_arguments, source_options

HELP = "consumer lag and throughput of topics as a table and a PNG plot"

AUTO = "auto"
TARGET_WINDOWS = 60  # --window auto: the most windows a topic's time span is cut into
MAX_PLOTTED_WINDOWS = 100_000  # above this, empty windows are not drawn as zeros
SECOND, MINUTE, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000
# Window lengths --window auto picks from (ms), then whole days.
NICE = [10, 20, 50, 100, 200, 500, SECOND, 2 * SECOND, 5 * SECOND, 10 * SECOND,
        15 * SECOND, 30 * SECOND, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE,
        30 * MINUTE, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY]
_UNITS = {"ms": 1, "msec": 1, "millisecond": 1, "milliseconds": 1,
          "s": SECOND, "sec": SECOND, "second": SECOND, "seconds": SECOND,
          "m": MINUTE, "min": MINUTE, "minute": MINUTE, "minutes": MINUTE,
          "h": HOUR, "hour": HOUR, "hours": HOUR, "d": DAY, "day": DAY, "days": DAY,
          "w": 7 * DAY, "week": 7 * DAY, "weeks": 7 * DAY}
_PART = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([a-z]+)\s*")


def window_arg(text: str) -> int | None:
    """``--window``: ``auto`` (None) or a duration such as ``1 minute``,
    ``1 minute 30 seconds``, ``500 ms``, in whole milliseconds."""
    text = text.strip().lower()
    if text == AUTO:
        return None
    total, pos = 0.0, 0
    while pos < len(text):
        m = _PART.match(text, pos)
        if m is None or m.group(2) not in _UNITS:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not 'auto' or a duration such as '1 minute' or '500 ms'")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos == 0 or total != int(total) or total < 1:
        raise argparse.ArgumentTypeError(
            f"the window {text!r} must be a whole number of milliseconds, at least 1 ms")
    return int(total)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser, "a topic to report on (repeatable)")
    parser.add_argument("--group", action="append", default=[],
                        help="a consumer group (repeatable; default: every group)")
    parser.add_argument("--window", type=window_arg, default=AUTO,
                        help="the throughput window: 'auto' (the default: at most "
                             f"{TARGET_WINDOWS} windows over each topic's time span) or a "
                             "duration such as '1 minute' or '500 ms'")
    parser.add_argument("--plot", default="lag-report.png", help="where to write the PNG")


def auto_window(span_ms: int) -> int:
    """The shortest nice window that cuts ``span_ms`` (last minus first record timestamp)
    into at most ``TARGET_WINDOWS`` windows starting at the first record."""
    for w in NICE:
        if span_ms // w < TARGET_WINDOWS:
            return w
    return (span_ms // TARGET_WINDOWS // DAY + 1) * DAY


def duration(ms: float) -> str:
    """``ms`` for a reader: ``20 ms``, ``1.5 s``, ``3 h``, ``6 d 23 h``."""
    if ms < SECOND:
        return f"{ms:g} ms"
    if ms < MINUTE:
        return f"{ms / SECOND:.3g} s"
    parts, rest = [], int(ms)
    for unit, size in (("d", DAY), ("h", HOUR), ("min", MINUTE), ("s", SECOND)):
        if rest >= size:
            parts.append(f"{rest // size} {unit}")
            rest %= size
    return " ".join(parts[:2])


def rate(x: float) -> str:
    """A rate with three significant digits and no exponent: ``1000``, ``16.7``,
    ``0.05``, ``0.0000116``."""
    if x >= 999.5:
        return f"{x:.0f}"
    text = f"{x:.3g}"
    if "e" in text:
        text = f"{x:.{2 - math.floor(math.log10(x))}f}"
    return text


def timestamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


@dataclass
class TopicThroughput:
    topic: str
    partitions: int
    records: int
    bytes: int
    first_ms: int  # the earliest record timestamp
    last_ms: int  # the latest
    window_ms: int
    counts: dict[int, tuple[int, int]] = field(default_factory=dict)  # window: records, bytes

    @property
    def windows(self) -> int:
        """How many windows, from the first record's to the last record's."""
        return (self.last_ms - self.first_ms) // self.window_ms + 1

    @property
    def average(self) -> float:
        """Records/s over the windows from the first record's to the last record's."""
        return self.records * 1000 / (self.windows * self.window_ms)

    @property
    def peak(self) -> float:
        """Records/s in the busiest window."""
        return max(r for r, _ in self.counts.values()) * 1000 / self.window_ms

    def series(self) -> list[tuple[datetime, float]]:
        """Records/s per window by the window's start, empty windows included as zero
        (unless there are more than MAX_PLOTTED_WINDOWS)."""
        indexes = (range(self.windows) if self.windows <= MAX_PLOTTED_WINDOWS
                   else sorted(self.counts))
        start = datetime.fromtimestamp(self.first_ms / 1000, UTC)
        step = timedelta(milliseconds=self.window_ms)
        return [(start + i * step, self.counts.get(i, (0, 0))[0] * 1000 / self.window_ms)
                for i in indexes]

    @property
    def end(self) -> datetime:
        """Where the last window ends."""
        return datetime.fromtimestamp(
            (self.first_ms + self.windows * self.window_ms) / 1000, UTC)

    def row(self) -> list[Any]:
        return [self.topic, self.partitions, self.records, self.bytes,
                timestamp(self.first_ms), timestamp(self.last_ms),
                duration(self.last_ms - self.first_ms), duration(self.window_ms),
                rate(self.average), rate(self.peak)]


HEADER = ["TOPIC", "PARTITIONS", "RECORDS", "BYTES", "FIRST", "LAST", "SPAN", "WINDOW",
          "AVG-REC/S", "PEAK-REC/S"]


@dataclass
class Report:
    topics: list[TopicThroughput]
    lag: list[tuple[str, str, int, int, int, int]]  # group, topic, partition, committed, end, lag


def collect(spark: Any, args: argparse.Namespace) -> Report:
    from pyspark.sql import functions as F

    options = source_options(args)
    # One read of the topics for both passes, so the windows count exactly the records
    # the summary found even while producers keep writing.
    records = (spark.read.format("ottla").options(**options).load()
               .select("topic", "partition",
                       F.expr("unix_millis(timestamp)").alias("ms"),
                       (F.octet_length("value") + F.coalesce(F.octet_length("key"), F.lit(0)))
                       .alias("size"))
               .persist())
    try:
        summary = (records.groupBy("topic")
                   .agg(F.countDistinct("partition").alias("partitions"),
                        F.count("*").alias("records"), F.sum("size").alias("bytes"),
                        F.min("ms").alias("first"), F.max("ms").alias("last"))
                   .orderBy("topic").collect())
        topics = {s["topic"]: TopicThroughput(
            s["topic"], s["partitions"], s["records"], s["bytes"], s["first"], s["last"],
            args.window or auto_window(s["last"] - s["first"])) for s in summary}
        if topics:
            starts = spark.createDataFrame(
                [(t.topic, t.first_ms, t.window_ms) for t in topics.values()],
                "topic string, first_ms long, window_ms long")
            windows = (records.join(F.broadcast(starts), "topic")
                       .groupBy("topic", F.floor((F.col("ms") - F.col("first_ms"))
                                                 / F.col("window_ms")).alias("window"))
                       .agg(F.count("*").alias("records"), F.sum("size").alias("bytes"))
                       .collect())
            for w in windows:
                topics[w["topic"]].counts[int(w["window"])] = (w["records"], w["bytes"])
    finally:
        records.unpersist()
    return Report(list(topics.values()), consumer_lag(options, args.group))


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


def figure(report: Report) -> Any:
    """The plot as a matplotlib Figure: throughput by record time (one step line per
    topic, its time axis exactly the windows of the data) over consumer lag."""
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 8), layout="tight")
    top, bottom = fig.subplots(2, 1)
    for t in sorted(report.topics, key=lambda t: t.topic):
        points = t.series()
        # A step per window: each rate holds from its window's start to the next one's,
        # and the last one to where the last window ends.
        top.step([p[0] for p in points] + [t.end], [p[1] for p in points] + [points[-1][1]],
                 where="post", label=f"{t.topic} ({duration(t.window_ms)} windows)")
    if report.topics:
        start = min(datetime.fromtimestamp(t.first_ms / 1000, UTC) for t in report.topics)
        end = max(t.end for t in report.topics)
        margin = (end - start) * 0.02
        top.set_xlim(start - margin, end + margin)
        locator = mdates.AutoDateLocator(tz=UTC)
        top.xaxis.set_major_locator(locator)
        top.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
        top.set_ylim(bottom=0)
        top.legend()
    else:
        top.text(0.5, 0.5, "no records", ha="center", va="center", transform=top.transAxes)
        top.set_axis_off()
    top.set_title("Throughput by record time (UTC)")
    top.set_ylabel("records/s")
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
    return fig


def plot(report: Report, path: str) -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    figure(report).savefig(path)
    return True


def run(spark: Any, args: argparse.Namespace) -> int:
    report = collect(spark, args)
    if report.topics:
        print(table(HEADER, [t.row() for t in report.topics]))
        print("AVG-REC/S: records over the windows from the first record to the last; "
              "PEAK-REC/S: the busiest window.")
    else:
        print("No records in these topics.")
    print()
    print(table(["GROUP", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG"], report.lag)
          if report.lag else "No committed offsets for these topics.")
    if plot(report, args.plot):
        print(f"\nplot written to {args.plot}")
    else:
        print("\nmatplotlib is not installed: no plot (pip install 'ottla[spark]')")
    return 0
