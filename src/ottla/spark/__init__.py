"""A pure-Python Spark connector for Ottla and any Kafka cluster: ``format("ottla")``.

``register(spark)`` once per session, then use the options of Spark's Kafka source and
sink. Nothing is fetched from a Maven repository: the connector is PySpark's Python Data
Source API over confluent-kafka, so ``pip install ottla[spark]`` is all a pipeline needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "ottla"


def register(spark: SparkSession) -> None:
    """Make ``spark.read/readStream/write/writeStream.format("ottla")`` available, with
    the batch save modes of Spark's Kafka sink (the default ErrorIfExists writes; see
    :mod:`ottla.spark.save_mode`)."""
    from ottla.spark.save_mode import install
    from ottla.spark.source import OttlaDataSource

    spark.dataSource.register(OttlaDataSource)
    install(_writer_class(spark))


def _writer_class(spark: SparkSession) -> type:
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter

        return ConnectWriter
    from pyspark.sql.readwriter import DataFrameWriter

    return DataFrameWriter
