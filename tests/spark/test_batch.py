"""Batch reads and writes through format("ottla") against a real broker."""

from __future__ import annotations

import json
import random

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.spark.kafka import create_topics, produce, rows_as_records


def reader(spark, broker, **options):
    r = spark.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def random_messages(topics, partitions, per_partition, seed=7):
    rng = random.Random(seed)
    for t in topics:
        for p in range(partitions):
            for i in range(per_partition):
                key = None if i % 10 == 0 else rng.randbytes(rng.randint(0, 16))
                yield {"topic": t, "partition": p, "key": key,
                       "value": rng.randbytes(rng.randint(0, 300)),
                       "headers": [("i", str(i).encode()), ("bin", rng.randbytes(4))]}


def test_batch_read_is_exactly_the_produced_records(spark, broker, topic):
    topics = [f"{topic}-{n}" for n in range(3)]
    create_topics(broker.bootstrap, topics, 4)
    produced = produce(broker.bootstrap, random_messages(topics, 4, 150))
    assert len(produced) == 3 * 4 * 150

    df = reader(spark, broker, subscribe=",".join(topics), includeHeaders="true")
    assert df.rdd.getNumPartitions() == 12  # one split per topic-partition
    rows = rows_as_records(df.collect())
    assert sorted(rows, key=str) == sorted(produced, key=str)

    by_pattern = reader(spark, broker, subscribePattern=f"{topic}-[0-2]")
    assert by_pattern.count() == len(produced)
    stamped = by_pattern.select("timestamp", "timestampType").distinct().collect()
    assert {r["timestampType"] for r in stamped} == {0}  # CreateTime


def test_assign_and_offset_ranges(spark, broker, topic):
    create_topics(broker.bootstrap, [topic], 3)
    produce(broker.bootstrap, ({"topic": topic, "partition": i % 3, "value": b"%d" % i}
                               for i in range(300)))
    df = reader(spark, broker, assign=json.dumps({topic: [0, 2]}),
                startingOffsets=json.dumps({topic: {"0": 10, "2": -2}}),
                endingOffsets=json.dumps({topic: {"0": 20, "2": -1}}))
    got = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset")
                 .collect())
    assert got == [(0, o) for o in range(10, 20)] + [(2, o) for o in range(100)]


def test_min_partitions_splits_large_partitions(spark, broker, topic):
    create_topics(broker.bootstrap, [topic], 2)
    produce(broker.bootstrap, ({"topic": topic, "partition": i % 2, "value": b"%d" % i}
                               for i in range(1000)))
    df = reader(spark, broker, subscribe=topic, minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    offsets = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert offsets == sorted((p, o) for p in range(2) for o in range(500))

    capped = reader(spark, broker, subscribe=topic, maxRecordsPerPartition="100")
    assert capped.rdd.getNumPartitions() == 10
    assert capped.count() == 1000


def test_starting_timestamp(spark, broker, topic):
    create_topics(broker.bootstrap, [topic], 1)
    base = 1_700_000_000_000
    produce(broker.bootstrap, ({"topic": topic, "value": b"%d" % i, "timestamp": base + i * 1000}
                               for i in range(50)))
    df = reader(spark, broker, subscribe=topic, startingTimestamp=str(base + 30_000))
    rows = df.select("offset", "timestamp").orderBy("offset").collect()
    assert [r["offset"] for r in rows] == list(range(30, 50))
    assert int(rows[0]["timestamp"].timestamp() * 1000) == base + 30_000

    by_partition = reader(spark, broker, subscribe=topic, startingOffsetsByTimestamp=json.dumps(
        {topic: {"0": base + 45_000}}))
    assert by_partition.count() == 5
    with pytest.raises(Exception, match="no offset matched the timestamp"):
        reader(spark, broker, subscribe=topic, startingTimestamp=str(base + 10**9)).count()
    assert reader(spark, broker, subscribe=topic, startingTimestamp=str(base + 10**9),
                  startingOffsetsByTimestampStrategy="latest").count() == 0


def test_fail_on_data_loss(spark, broker, topic):
    create_topics(broker.bootstrap, [topic], 1)
    produce(broker.bootstrap, ({"topic": topic, "value": b"%d" % i} for i in range(100)))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, 40)]).values():
        f.result(30)
    pinned = {"startingOffsets": json.dumps({topic: {"0": 0}})}
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader(spark, broker, subscribe=topic, **pinned).count()
    rows = reader(spark, broker, subscribe=topic, failOnDataLoss="false", **pinned).collect()
    assert sorted(r["offset"] for r in rows) == list(range(40, 100))


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "x", "assign": '{"x":[0]}'}, "exactly one of"),
    ({}, "exactly one of"),
    ({"subscribe": "x", "startingOffsets": "latest"}, "cannot be 'latest' for batch"),
    ({"subscribe": "x", "kafka.auto.offset.reset": "earliest"}, "use startingOffsets"),
    ({"assign": "[not json"}, "must be JSON"),
    ({"subscribe": "x", "minPartitions": "0"}, "must be positive"),
])
def test_bad_options_fail_with_a_clear_message(spark, broker, options, message):
    with pytest.raises(Exception, match=message):
        reader(spark, broker, **options).count()


def test_bootstrap_servers_is_required(spark):
    with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers"):
        spark.read.format("ottla").option("subscribe", "x").load().count()


def test_write_then_read_back_byte_identical(spark, broker, topic):
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    a, b = f"{topic}-a", f"{topic}-b"
    create_topics(broker.bootstrap, [a, b], 3)
    rng = random.Random(3)
    data = [(rng.randbytes(8) if i % 7 else None, rng.randbytes(rng.randint(0, 2000)),
             a if i % 2 else b, i % 3,
             [("h1", rng.randbytes(3)), ("\u00e9t\u00e9", b"")] if i % 5 else [])
            for i in range(400)]
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())])))])
    df = spark.createDataFrame(data, schema).repartition(3)
    df.write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
        .mode("append").save()

    back = reader(spark, broker, subscribe=f"{a},{b}", includeHeaders="true").collect()
    got = [(r["topic"], r["partition"], None if r["key"] is None else bytes(r["key"]),
            bytes(r["value"]), [(h["key"], bytes(h["value"])) for h in r["headers"]])
           for r in back]
    assert sorted(got, key=repr) == sorted(((t, p, k, v, h) for k, v, t, p, h in data),
                                           key=repr)


def test_write_needs_a_value_and_a_topic(spark, broker):
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="'value' column"):
        df.write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("topic", "t").mode("append").save()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="no topic"):
        df.write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
            .mode("append").save()


def test_write_with_string_columns_and_topic_option(spark, broker, topic):
    create_topics(broker.bootstrap, [topic], 1)
    df = spark.createDataFrame([(f"k{i}", f"v{i}", "ignored") for i in range(20)],
                               "key string, value string, other string")
    df.write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", topic).mode("append").save()
    rows = reader(spark, broker, subscribe=topic).selectExpr(
        "cast(key as string) k", "cast(value as string) v").collect()
    assert sorted((r["k"], r["v"]) for r in rows) == sorted(
        (f"k{i}", f"v{i}") for i in range(20))
    with pytest.raises(Exception, match="Overwrite"):
        df.write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("topic", topic).mode("overwrite").save()


def test_default_save_mode_writes_as_spark_kafka_sink_does(spark, broker, topic, tmp_path):
    """Spark's Kafka sink takes ErrorIfExists (the default) as Append; PySpark refuses it
    for Python data sources, and ottla.spark.register makes it write."""
    create_topics(broker.bootstrap, [topic], 2)
    df = spark.createDataFrame([(f"v{i}",) for i in range(10)], "value string")

    def writer():
        return df.write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("topic", topic)

    writer().save()  # no mode at all: code written for format("kafka")
    writer().mode("error").save()
    writer().mode("errorifexists").save()
    df.write.save(format="ottla", mode="error", topic=topic,
                  **{"kafka.bootstrap.servers": broker.bootstrap})
    writer().mode("append").save()
    rows = reader(spark, broker, subscribe=topic).selectExpr("cast(value as string) v")
    assert sorted(r["v"] for r in rows.collect()) == sorted([f"v{i}" for i in range(10)] * 5)

    for mode in ("overwrite", "ignore"):
        with pytest.raises(Exception, match=r'not allowed for a topic: use mode\("append"\) '
                                            r"or the default mode \(ErrorIfExists\)"):
            writer().mode(mode).save()
    assert reader(spark, broker, subscribe=topic).count() == 50

    # Other formats keep Spark's own meaning of the default mode.
    path = str(tmp_path / "parquet")
    df.write.parquet(path)
    with pytest.raises(Exception, match="PATH_ALREADY_EXISTS"):
        df.write.format("parquet").save(path)


def test_workers_run_this_interpreter_and_its_compiled_pyspark(spark):
    """Local Python workers run the driver's interpreter (it has ottla and its
    dependencies) and import the PySpark installed beside it, not the zip of sources
    Spark puts first on their path, which every new worker would compile again."""
    import sys

    import pyspark

    def where(_: object) -> tuple[str, str]:
        import sys

        import pyspark
        return sys.executable, pyspark.__file__

    seen = spark.sparkContext.parallelize([0, 1], 2).map(where).collect()
    assert seen == [(sys.executable, pyspark.__file__)] * 2
    assert ".zip" not in pyspark.__file__


def test_a_record_the_broker_refuses_fails_the_write(spark, broker, topic):
    """Only failures are reported back (delivery.report.only.error): one refused record
    among many acknowledged ones still fails the task, with the broker's error."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "2000"})])[
        topic].result(30)
    rows = [(b"%d" % i, b"v" * (5000 if i == 150 else 10)) for i in range(300)]
    df = spark.createDataFrame(rows, "key binary, value binary").coalesce(1)
    with pytest.raises(Exception, match=r"MSG_SIZE_TOO_LARGE|too large"):
        df.write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("topic", topic).option("kafka.linger.ms", "0").save()


def test_a_row_without_a_topic_fails_the_write(spark, broker, topic):
    create_topics(broker.bootstrap, [topic], 1)
    df = spark.createDataFrame([("v1", topic), ("v2", None)], "value string, topic string")
    with pytest.raises(Exception, match="row 1 has a null or empty topic"):
        df.coalesce(1).write.format("ottla") \
            .option("kafka.bootstrap.servers", broker.bootstrap).save()


def test_rows_go_to_the_partition_column_or_the_partitioner(spark, broker, topic):
    """A null partition leaves the choice to the partitioner (by key), as Spark does."""
    create_topics(broker.bootstrap, [topic], 4)
    rows = [(b"k%d" % (i % 5), b"v%d" % i, 3 if i % 2 else None) for i in range(200)]
    spark.createDataFrame(rows, "key binary, value binary, partition int").write \
        .format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", topic).save()
    back = reader(spark, broker, subscribe=topic).collect()
    placed = {bytes(r["value"]): r["partition"] for r in back}
    assert len(placed) == 200
    assert all(placed[b"v%d" % i] == 3 for i in range(1, 200, 2))
    by_key: dict[bytes, set[int]] = {}
    for i in range(0, 200, 2):
        by_key.setdefault(b"k%d" % (i % 5), set()).add(placed[b"v%d" % i])
    assert all(len(parts) == 1 for parts in by_key.values())  # a key keeps its partition
