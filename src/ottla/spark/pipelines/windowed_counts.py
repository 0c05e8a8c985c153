"""Streaming aggregation: events -> counts per key and event-time window -> results.

Reads the events topic, counts records per key in tumbling windows of the record
timestamp, drops events later than the watermark, and writes every updated count to the
results topic (update mode). Each result is keyed ``<key>|<window start>`` with a JSON
value, so the latest record per key is the window's count, and a compacted results
topic keeps exactly one record per window and key.
"""

from __future__ import annotations

import argparse
from typing import Any

from ottla.spark.pipelines.common import (
    add_source_arguments,
    add_stream_arguments,
    source_options,
    start,
)

HELP = "events topic -> windowed counts per key with a watermark -> results topic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser, "the events topic (repeatable)")
    add_stream_arguments(parser)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--window", default="1 minute", help="the window length")
    parser.add_argument("--watermark", default="1 minute",
                        help="how late an event may arrive and still be counted")


def build(spark: Any, args: argparse.Namespace) -> Any:
    from pyspark.sql import functions as F

    events = spark.readStream.format("ottla").options(**source_options(args)).load()
    counts = (events.withWatermark("timestamp", args.watermark)
              .groupBy(F.window("timestamp", args.window).alias("window"),
                       F.col("key").cast("string").alias("key"))
              .count())
    start_text = F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
    return counts.select(
        F.concat_ws("|", F.coalesce("key", F.lit("")), start_text).alias("key"),
        F.to_json(F.struct(
            F.col("key"),
            start_text.alias("window_start"),
            F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("window_end"),
            F.col("count"),
        )).alias("value"))


def run(spark: Any, args: argparse.Namespace) -> int:
    def publish(updates: Any, _batch_id: int) -> None:
        # A Python data source sink takes appends only; each micro-batch's updated
        # counts are written as a batch instead. A retried batch rewrites the same
        # counts, which the latest-per-key reading makes harmless.
        (updates.write.format("ottla")
         .option("kafka.bootstrap.servers", args.bootstrap_server)
         .option("topic", args.output_topic).mode("append").save())

    writer = build(spark, args).writeStream.foreachBatch(publish).outputMode("update")
    if args.checkpoint:
        writer = writer.option("checkpointLocation", args.checkpoint)
    return start(writer, args)
