"""A SparkSession ready for ``format("ottla")``, locally or on a cluster.

Python workers must import ``ottla`` and ``confluent_kafka``: locally they run this very
interpreter (``PYSPARK_PYTHON`` defaults to it, not to whatever ``python3`` is first on
the PATH); on a cluster the ``ottla`` package is shipped as a zip with ``addPyFile`` and
the executors need ``confluent-kafka`` and ``pyarrow`` installed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import ottla
from ottla.spark import register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def create_session(app_name: str, master: str | None = None,
                   conf: Mapping[str, str] | None = None) -> SparkSession:
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    if is_local(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    if is_local(master):
        # Spark's 200 shuffle partitions cost a state store each in a stateful query;
        # on one machine a few per core is plenty (--conf overrides it).
        builder = (builder.config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("OTTLA_SPARK_LOG_LEVEL", "WARN"))
    if not is_local(master):
        spark.sparkContext.addPyFile(package_zip())
    register(spark)
    return spark


def package_zip(directory: str | None = None) -> str:
    """The ``ottla`` package as a zip for ``--py-files`` / ``addPyFile``."""
    root = Path(ottla.__file__).parent
    target = Path(directory or tempfile.mkdtemp(prefix="ottla-pyfiles-")) / "ottla.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in root.rglob("*.py"):
            zf.write(path, Path("ottla") / path.relative_to(root))
    return str(target)
