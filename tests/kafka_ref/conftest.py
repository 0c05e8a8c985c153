"""Fixtures that run Apache Kafka 4.4 itself: its jars (installed with Maven on first use),
a combined single node, and a cluster of 1 controller and 3 brokers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka_ref.cluster import KafkaCluster, single_node
from tests.kafka_ref.install import InstallError, install


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_ref: starts real Apache Kafka 4.4 JVMs (tests/kafka_ref)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if os.sep + "kafka_ref" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.kafka_ref)


def java_major() -> int | None:
    """The major version of the ``java`` on PATH (``1.8`` is 8), None if none runs."""
    if shutil.which("java") is None:
        return None
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    found = re.search(r'version "(?:1\.)?(\d+)', done.stderr + done.stdout)
    return int(found.group(1)) if done.returncode == 0 and found else None


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """Kafka's jars, installed if the cache lacks them. Without Java 17+, or without Maven
    when there is something to install, the tests fail with the reason: they never skip,
    so a machine that cannot run Kafka cannot pass for a green run."""
    major = java_major()
    if major is None or major < 17:
        pytest.fail(f"Apache Kafka 4.4 needs Java 17+ on PATH, found {major or 'none'} "
                    "(apt-get install openjdk-17-jre-headless)", pytrace=False)
    try:
        return install()
    except InstallError as e:
        failure = e  # failed outside the handler: the reason alone, no chained traceback
    pytest.fail(f"Apache Kafka 4.4 could not be installed (make kafka-ref): {failure}",
                pytrace=False)


@pytest.fixture
def kafka_node(kafka_libs: Path, tmp_path: Path) -> Iterator[KafkaCluster]:
    """One combined Kafka node; the test fails if it does not exit cleanly at the end."""
    cluster = single_node(tmp_path / "kafka").start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_cluster(kafka_libs: Path, tmp_path: Path) -> Iterator[KafkaCluster]:
    """1 controller (id 1) and 3 brokers (101-103), stopped and checked at the end."""
    cluster = KafkaCluster(tmp_path / "kafka", controllers=1, brokers=3).start()
    try:
        yield cluster
    finally:
        cluster.stop()
