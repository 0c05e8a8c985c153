"""One Apache Kafka 4.4 node and one Ottla node, configured alike, for a run of the oracle."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import OttlaProcess
from tests.kafka_ref.cluster import SHARE_FAST, KafkaCluster, single_node
from tests.oracle.target import Target


def ottla_overrides(node: OttlaProcess) -> dict[str, str]:
    """Ottla's node configured as tests/kafka_ref configures Kafka's, so that their
    static configs (DescribeConfigs' STATIC_BROKER_CONFIG) differ only where they must:
    Ottla's dev defaults are Kafka's sample config, as that node's are; both listeners
    advertised, Kafka's protocol map, and the share tests' fast heartbeats. (The quorum
    differs: Kafka's is dynamic, controller.quorum.bootstrap.servers; Ottla's static,
    controller.quorum.voters.)"""
    return {
        "advertised.listeners": f"PLAINTEXT://{node.bootstrap},CONTROLLER://{node.controller}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        **SHARE_FAST,
    }


class KafkaUnavailable(RuntimeError):
    """Java 17+ or Kafka's jars are missing: the oracle fails (it never skips)."""


def check_java() -> None:
    if shutil.which("java") is None:
        raise KafkaUnavailable("Apache Kafka 4.4 needs Java 17+ on PATH, found none "
                               "(apt-get install openjdk-17-jre-headless)")
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    found = re.search(r'version "(?:1\.)?(\d+)', done.stderr + done.stdout)
    if not found or int(found.group(1)) < 17:
        raise KafkaUnavailable(f"Apache Kafka 4.4 needs Java 17+, found "
                               f"{found.group(1) if found else 'none that runs'}")


@dataclass
class Pair:
    kafka: Target
    ottla: Target
    kafka_cluster: KafkaCluster
    ottla_node: OttlaProcess


@contextlib.contextmanager
def running_pair(base: Path) -> Iterator[Pair]:
    """Start a Kafka single node (tests/kafka_ref, node.id 1) and an ``ottla server``
    (node.id 1) at once, under ``base``; both are stopped, and checked, at the end."""
    check_java()
    base.mkdir(parents=True, exist_ok=True)
    kafka = single_node(base / "kafka")
    ottla = OttlaProcess(str(base / "ottla" / "data"))
    ottla.overrides = ottla_overrides(ottla)
    (base / "ottla").mkdir(exist_ok=True)
    kafka_failure: list[BaseException] = []

    def start_kafka() -> None:
        try:
            kafka.start()
        except BaseException as e:  # re-raised below, once Ottla is up or has failed
            kafka_failure.append(e)
    starter = threading.Thread(target=start_kafka, name="kafka-start")
    starter.start()
    try:
        ottla.start()
    finally:
        starter.join()
        if kafka_failure:
            ottla.stop(check=False)
    if kafka_failure:
        raise kafka_failure[0]
    node = kafka.nodes[1]
    pair = Pair(Target("kafka", node.bootstrap, node.controller),
                Target("ottla", ottla.bootstrap, ottla.controller), kafka, ottla)
    try:
        yield pair
    finally:
        try:
            ottla.stop()
        finally:
            kafka.stop()
