"""A pure-Python Spark connector for Ottla and any Kafka cluster: ``format("ottla")``.

``register(spark)`` once per session, then use the options of Spark's Kafka source and
sink. Nothing is fetched from a Maven repository: the connector is PySpark's Python Data
Source API over Ottla's protocol client and confluent-kafka, so ``pip install
ottla[spark]`` is all a pipeline needs.

This module only re-exports: the modules of the package never import it.
"""

from ottla.spark.options import FORMAT
from ottla.spark.session import register

__all__ = ["FORMAT", "register"]
