"""One ottla broker and one local[2] SparkSession for every Spark test in the run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.helpers import OttlaProcess

if TYPE_CHECKING:
    from tests.spark.cluster import ConnectServer, StandaloneCluster


def _java_major() -> int | None:
    """The major version of the ``java`` on PATH (``1.8`` is 8), None if none runs."""
    if shutil.which("java") is None:
        return None
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    found = re.search(r'version "(?:1\.)?(\d+)', done.stderr + done.stdout)
    return int(found.group(1)) if done.returncode == 0 and found else None


@pytest.fixture(scope="session", autouse=True)
def spark_runtime() -> None:
    """What every Spark test needs: pyspark (the test and spark extras install it) and
    Java 17+ (``.ci/run`` installs it). Missing, they fail the tests rather than skip
    them, so that a broken install cannot pass for a green run."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        pytest.fail(f"the Spark tests need pyspark (pip install -e '.[test]'): {e}",
                    pytrace=False)
    major = _java_major()
    if major is None or major < 17:
        pytest.fail(f"the Spark tests need Java 17+ on PATH, found {major or 'none'} "
                    "(apt-get install openjdk-17-jre-headless; .ci/run installs it)",
                    pytrace=False)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if os.sep + "spark" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> Iterator[OttlaProcess]:
    """One broker for the session; the last test fails if it does not exit cleanly. Its
    retention keeps records of any age: tests write timestamps of 2023 on purpose, which
    the default 7 days (log.retention.hours=168) would delete, active segment and all,
    at the next retention check, as Kafka's would."""
    node = OttlaProcess(str(tmp_path_factory.mktemp("spark-broker") / "data"),
                        overrides={"log.retention.ms": "-1"}).start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory) -> Iterator:
    from ottla.spark.session import create_session

    session = create_session("ottla-tests", "local[2]", {
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.local.dir": str(tmp_path_factory.mktemp("spark-local")),
    })
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def topic(request) -> str:
    """A topic name of this test's own (the broker is shared by the session)."""
    name = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40]
    return f"{name}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    """A Spark standalone cluster of one master and two workers (one core and 512 MiB
    each), started from the PySpark install; every JVM under it is killed at the end."""
    from tests.spark.cluster import StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def executor_python(tmp_path_factory) -> str:
    """A Python with the connector's dependencies but without ottla, for the executors
    (PYSPARK_PYTHON) of jobs that must ship ottla themselves."""
    from tests.spark.cluster import executor_python

    return executor_python(tmp_path_factory.mktemp("executor-python") / "venv")


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory) -> Iterator[ConnectServer]:
    """A Spark Connect server on local[2] started with the PySpark install's
    start-connect-server.sh, its Python workers running this interpreter (with ottla)."""
    from pyspark.sql.connect.utils import check_dependencies

    from tests.spark.cluster import ConnectServer

    try:  # a failure, not a skip: the test and spark extras install them
        check_dependencies()
    except ImportError as e:
        pytest.fail(f"the Spark Connect client needs pyspark[connect]'s packages: {e}")
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect")).start()
    try:
        yield server
    finally:
        server.stop()
