"""Structured Streaming reads and writes through format("ottla")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.helpers import wait_until
from tests.spark.kafka import create_topics, produce


def stream(spark, broker, **options):
    r = spark.readStream.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def run_available_now(writer, timeout=120):
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(timeout), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def archived(spark, path):
    """(topic, partition, offset, value) of every row the Parquet sink committed."""
    rows = spark.read.parquet(path).select("topic", "partition", "offset", "value").collect()
    return [(r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in rows]


def to_parquet(df, tmp_path, name="out"):
    return (df.writeStream.format("parquet").option("path", str(tmp_path / name))
            .option("checkpointLocation", str(tmp_path / f"{name}-checkpoint")))


def values(topic, partitions, start, stop):
    return ({"topic": topic, "partition": i % partitions, "value": b"v%d" % i}
            for i in range(start, stop))


def test_available_now_resumes_from_the_checkpoint_exactly_once(spark, broker, topic, tmp_path):
    create_topics(broker.bootstrap, [topic], 3)
    first = produce(broker.bootstrap, values(topic, 3, 0, 300))
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest")
    run_available_now(to_parquet(df, tmp_path))
    assert sorted(archived(spark, str(tmp_path / "out"))) == sorted(
        (t, p, o, v) for t, p, o, _k, v, _h in first)

    second = produce(broker.bootstrap, values(topic, 3, 300, 500))
    query = run_available_now(to_parquet(df, tmp_path))
    assert sum(p["numInputRows"] for p in query.recentProgress) == 200  # only the new ones
    rows = archived(spark, str(tmp_path / "out"))
    assert len(rows) == len(set(rows)) == 500
    assert sorted(rows) == sorted((t, p, o, v) for t, p, o, _k, v, _h in first + second)


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark, broker, topic, tmp_path):
    create_topics(broker.bootstrap, [topic], 4)
    produce(broker.bootstrap, values(topic, 4, 0, 1000))
    sizes: list[int] = []
    seen: list[int] = []

    def collect(batch, _batch_id):
        rows = batch.select("value").collect()
        sizes.append(len(rows))
        seen.extend(int(bytes(r["value"])[1:]) for r in rows)

    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="150")
    run_available_now(df.writeStream.foreachBatch(collect)
                      .option("checkpointLocation", str(tmp_path / "cp")))
    assert sorted(seen) == list(range(1000))
    nonempty = [s for s in sizes if s]
    assert max(nonempty) <= 150
    assert len(nonempty) >= 7


def test_new_partitions_and_topics_are_picked_up(spark, broker, topic, tmp_path):
    first, later = f"{topic}-a", f"{topic}-b"
    create_topics(broker.bootstrap, [first], 2)
    produce(broker.bootstrap, values(first, 2, 0, 100))
    df = stream(spark, broker, subscribePattern=f"{topic}-.*", startingOffsets="earliest")
    run_available_now(to_parquet(df, tmp_path))

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_partitions([NewPartitions(first, 3)]).values():
        f.result(30)
    create_topics(broker.bootstrap, [later], 1)
    produce(broker.bootstrap, values(first, 3, 100, 160))
    produce(broker.bootstrap, values(later, 1, 0, 40))
    run_available_now(to_parquet(df, tmp_path))
    rows = archived(spark, str(tmp_path / "out"))
    assert len(rows) == len(set(rows)) == 200
    assert {(t, p) for t, p, _o, _v in rows} == {(first, 0), (first, 1), (first, 2), (later, 0)}


def test_stream_from_topic_to_topic(spark, broker, topic, tmp_path):
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topics(broker.bootstrap, [source, sink], 2)
    produce(broker.bootstrap, ({"topic": source, "partition": i % 2, "key": b"k%d" % i,
                                "value": b"v%d" % i} for i in range(250)))
    df = stream(spark, broker, subscribe=source, startingOffsets="earliest")
    run_available_now(df.selectExpr("key", "upper(cast(value as string)) as value")
                      .writeStream.format("ottla")
                      .option("kafka.bootstrap.servers", broker.bootstrap)
                      .option("topic", sink)
                      .option("checkpointLocation", str(tmp_path / "cp")))
    rows = spark.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("subscribe", sink).load().collect()
    assert sorted((bytes(r["key"]), bytes(r["value"])) for r in rows) == sorted(
        (b"k%d" % i, b"V%d" % i) for i in range(250))


def test_data_loss_under_a_checkpoint_fails_the_query(spark, broker, topic, tmp_path):
    create_topics(broker.bootstrap, [topic], 1)
    produce(broker.bootstrap, values(topic, 1, 0, 50))
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest")
    run_available_now(to_parquet(df, tmp_path))
    produce(broker.bootstrap, values(topic, 1, 50, 100))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, 80)]).values():
        f.result(30)
    query = to_parquet(df, tmp_path).trigger(availableNow=True).start()
    with pytest.raises(Exception, match="failOnDataLoss"):
        query.awaitTermination(120)

    lenient = stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                     failOnDataLoss="false")
    run_available_now(to_parquet(lenient, tmp_path))
    offsets = sorted(o for _t, _p, o, _v in archived(spark, str(tmp_path / "out")))
    assert offsets == list(range(50)) + list(range(80, 100))


def test_killed_stream_restarts_from_its_checkpoint(spark, broker, topic, tmp_path):
    """kill -9 a continuously triggered archive pipeline; the restart misses nothing."""
    create_topics(broker.bootstrap, [topic], 2)
    produced = produce(broker.bootstrap, values(topic, 2, 0, 200))
    out, checkpoint = str(tmp_path / "archive"), str(tmp_path / "archive-cp")
    args = [sys.executable, "-m", "ottla", "pipeline", "run", "archive", "--master",
            "local[2]", "--bootstrap-server", broker.bootstrap, "--topic", topic,
            "--output", out, "--checkpoint", checkpoint, "--max-offsets-per-trigger", "50"]
    log = open(tmp_path / "pipeline.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*args, "--trigger", "1 second"], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def batches(kind: str) -> int:
            """Micro-batches with a file in the checkpoint's ``kind`` log: ``offsets``
            is written when one starts, ``commits`` when it is done."""
            where = os.path.join(checkpoint, kind)
            return len([n for n in os.listdir(where) if n.isdigit()]) \
                if os.path.isdir(where) else 0

        def committed() -> int:
            return batches("commits")

        wait_until(lambda: committed() >= 2 or proc.poll() is not None, timeout=120,
                   message="two committed micro-batches")
        assert proc.poll() is None, (tmp_path / "pipeline.log").read_text()[-3000:]
        produced += produce(broker.bootstrap, values(topic, 2, 200, 400))
        # Killed inside a micro-batch: one started (its offsets written), not committed.
        wait_until(lambda: batches("offsets") > committed() or proc.poll() is not None,
                   timeout=120, interval=0.02, message="a micro-batch under way")
        assert proc.poll() is None, (tmp_path / "pipeline.log").read_text()[-3000:]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        log.close()

    produced += produce(broker.bootstrap, values(topic, 2, 400, 500))
    done = subprocess.run([*args, "--trigger", "availableNow"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = archived(spark, out)
    assert len(rows) == len(set(rows)), "a record was archived twice"
    assert sorted(rows) == sorted((t, p, o, v) for t, p, o, _k, v, _h in produced)


def triggered_since(query, since: datetime) -> bool:
    """Whether a trigger started after ``since`` (no-data triggers report progress when
    spark.sql.streaming.noDataProgressEventInterval is 0)."""
    return any(datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")) > since
               for p in query.recentProgress)


def test_min_offsets_per_trigger_holds_a_batch_until_enough_records(
        spark, broker, topic, tmp_path):
    create_topics(broker.bootstrap, [topic], 2)
    produce(broker.bootstrap, values(topic, 2, 0, 30))
    sizes: list[int] = []

    def collect(batch, _batch_id):
        if n := batch.count():
            sizes.append(n)

    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                minOffsetsPerTrigger="100", maxTriggerDelay="1h")
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    query = (df.writeStream.foreachBatch(collect).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        wait_until(lambda: sizes == [30], 120, message="the first trigger to run")
        produce(broker.bootstrap, values(topic, 2, 30, 70))
        after = datetime.now(UTC)
        wait_until(lambda: triggered_since(query, after), 60,
                   message="a trigger after the 40 records arrived")
        assert sizes == [30], "a batch ran with fewer records than minOffsetsPerTrigger"
        produce(broker.bootstrap, values(topic, 2, 70, 140))
        wait_until(lambda: sum(sizes) == 140, 60, message="the held records to be read")
        assert sizes == [30, 110]
    finally:
        query.stop()
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    assert query.exception() is None


def test_max_trigger_delay_runs_a_small_batch_in_the_end(spark, broker, topic, tmp_path):
    create_topics(broker.bootstrap, [topic], 1)
    produce(broker.bootstrap, values(topic, 1, 0, 10))
    sizes: list[int] = []

    def collect(batch, _batch_id):
        if n := batch.count():
            sizes.append(n)

    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                minOffsetsPerTrigger="1000", maxTriggerDelay="3s")
    query = (df.writeStream.foreachBatch(collect).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        wait_until(lambda: len(sizes) == 1, 120, message="the first trigger to run")
        produce(broker.bootstrap, values(topic, 1, 10, 15))

        def started() -> list[datetime]:
            """When the triggers that read records started (reported once they end)."""
            return [datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00"))
                    for p in query.recentProgress if p["numInputRows"]]
        wait_until(lambda: len(started()) == 2, 60, message="the delay to run the 5 records")
        first, second = started()
    finally:
        query.stop()
    assert query.exception() is None
    assert sizes == [10, 5]
    # When the two triggers that ran batches started: the delay counts from the first.
    gap = (second - first).total_seconds()
    assert gap >= 2.9, f"a batch of 5 ran {gap:.1f} s after the last"
