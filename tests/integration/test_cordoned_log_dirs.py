"""Cordoned log dirs (KIP-1066) on a real node with two log dirs, seen through Kafka 4.4's
own tools and Java Admin: ``cordoned.log.dirs`` set in server.properties keeps new
replicas out of that dir, changed with ``kafka-configs`` it moves where the next topic's
replicas go, ``*`` leaves the broker no dir so that the controller places nothing on it,
and a value naming a dir that is not a log dir is refused with Kafka's message. In a
cluster of three brokers, the controller places neither new partitions nor a manual
assignment on the broker whose every dir is cordoned, until it is uncordoned."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ottla.protocol.api import ApiKey
from tests.helpers import KRaftCluster, OttlaProcess, WireClient, free_port, wait_until
from tests.integration.test_metrics import scrape, series
from tests.java_clients import run as run_java
from tests.kafka_ref.cluster import run_tool

APPLY_BOUND_S = 30
"""How long a committed config change may take to reach the broker and, through its
heartbeat, the controller on a loaded 2-core machine."""


@pytest.fixture
def dirs(tmp_path) -> tuple[str, str]:
    return str(tmp_path / "a"), str(tmp_path / "b")


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture
def node(dirs: tuple[str, str], metrics_port: int) -> Iterator[OttlaProcess]:
    first, second = dirs
    n = OttlaProcess(first, overrides={"log.dirs": f"{first},{second}",
                                       "metadata.log.dir": first,
                                       "cordoned.log.dirs": first,
                                       "prometheus.listener": f"127.0.0.1:{metrics_port}"}
                     ).start()
    yield n
    n.stop()


def cordoned_gauges(port: int) -> tuple[float, dict[str, float]]:
    """Kafka's LogManager gauges: CordonedLogDirectoryCount, and LogDirectoryCordoned by
    log dir."""
    samples = scrape(port)
    count = series(samples, "kafka_log_logmanager_cordonedlogdirectorycount")
    assert count is not None
    return count, {dict(labels)["logDirectory"]: value for (name, labels), value
                   in samples.items() if name == "kafka_log_logmanager_logdirectorycordoned"}


def log_dirs_tool(node: OttlaProcess) -> dict[str, list[str]]:
    """``kafka-log-dirs --describe``: log dir -> the partitions in it."""
    done = run_tool("kafka-log-dirs", "--bootstrap-server", node.bootstrap, "--describe",
                    check=True)
    described = json.loads(done.stdout.strip().splitlines()[-1])
    (broker,) = described["brokers"]
    return {d["logDir"]: sorted(p["partition"] for p in d["partitions"])
            for d in broker["logDirs"]}


def cordoned(node: OttlaProcess) -> dict[str, bool]:
    """Java Admin ``describeLogDirs``: log dir -> ``LogDirDescription.isCordoned()``."""
    (event,) = [e for e in run_java({"op": "admin", "bootstrap": node.bootstrap, "calls": [
        {"call": "describe_log_dirs", "brokers": [1]}]}) if e["event"] == "result"]
    return {d: info["cordoned"] for d, info in event["value"]["1"].items()}


def cordoned_on_the_wire(node: OttlaProcess) -> dict[str, bool]:
    with WireClient(node.bootstrap, timeout=10) as client:
        answer = client.request(ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": None})
    return {r.log_dir: r.is_cordoned for r in answer.results}


def create_topic(node: OttlaProcess, name: str, partitions: int) -> None:
    run_tool("kafka-topics", "--bootstrap-server", node.bootstrap, "--create", "--topic",
             name, "--partitions", str(partitions), check=True)


def alter_cordoned(node: OttlaProcess, value: str) -> tuple[int, str]:
    done = run_tool("kafka-configs", "--bootstrap-server", node.bootstrap, "--alter",
                    "--entity-type", "brokers", "--entity-name", "1",
                    "--add-config", f"cordoned.log.dirs=[{value}]")
    return done.returncode, done.stdout + done.stderr


def test_new_replicas_go_to_the_dirs_that_are_not_cordoned(node: OttlaProcess,
                                                           dirs: tuple[str, str],
                                                           metrics_port: int) -> None:
    first, second = dirs
    assert cordoned(node) == {first: True, second: False}
    assert cordoned_gauges(metrics_port) == (1, {first: 1, second: 0})
    create_topic(node, "static", 6)
    placed = log_dirs_tool(node)
    assert placed[first] == [] and placed[second] == [f"static-{p}" for p in range(6)]

    # Cordon the other dir instead: the next topic goes to the first one.
    code, output = alter_cordoned(node, second)
    assert code == 0, output
    wait_until(lambda: cordoned_on_the_wire(node) == {first: False, second: True},
               APPLY_BOUND_S, 0.2, "the broker never took cordoned.log.dirs up")
    assert cordoned(node) == {first: False, second: True}
    assert cordoned_gauges(metrics_port) == (1, {first: 0, second: 1})
    create_topic(node, "dynamic", 4)
    placed = log_dirs_tool(node)
    assert placed[first] == [f"dynamic-{p}" for p in range(4)]
    assert placed[second] == [f"static-{p}" for p in range(6)]  # cordoned dirs keep theirs


def test_a_broker_with_every_dir_cordoned_gets_no_new_replica(node: OttlaProcess,
                                                              dirs: tuple[str, str]) -> None:
    code, output = alter_cordoned(node, "*")
    assert code == 0, output
    wait_until(lambda: cordoned_on_the_wire(node) == dict.fromkeys(dirs, True),
               APPLY_BOUND_S, 0.2, "the broker never took cordoned.log.dirs=* up")

    def refused() -> bool:
        with WireClient(node.bootstrap, timeout=10) as client:
            answer = client.request(ApiKey.CREATE_TOPICS, 7, {
                "topics": [{"name": "nowhere", "num_partitions": 1, "replication_factor": -1,
                            "assignments": [], "configs": []}],
                "timeout": 10_000, "validate_only": True})
        return answer.topics[0].error_code != 0
    wait_until(refused, APPLY_BOUND_S, 0.2, "the controller kept placing on the broker")
    done = run_tool("kafka-topics", "--bootstrap-server", node.bootstrap, "--create",
                    "--topic", "nowhere", "--partitions", "1")
    assert done.returncode != 0
    assert ("Error while executing topic command : Unable to replicate the partition 1 "
            "time(s): All brokers are currently fenced, or have all their log directories "
            "cordoned.") in done.stdout


def test_a_dir_that_is_not_a_log_dir_cannot_be_cordoned(node: OttlaProcess,
                                                        tmp_path) -> None:
    elsewhere = str(tmp_path / "elsewhere")
    code, output = alter_cordoned(node, elsewhere)
    assert code != 0
    assert ("requirement failed: All entries in cordoned.log.dirs must be present in "
            f"log.dirs or log.dir. Missing entries : {elsewhere}") in output
    code, output = alter_cordoned(node, "*," + elsewhere)
    assert code != 0
    assert ("requirement failed: When cordoned.log.dirs is set to *, it must not contain "
            "other values") in output


CORDONED_BROKER = 103


@pytest.fixture
def cluster(tmp_path) -> Iterator[KRaftCluster]:
    """One controller and three brokers; broker 103 starts with ``cordoned.log.dirs=*``."""
    c = KRaftCluster(str(tmp_path), controllers=1, brokers=3)
    with open(c.nodes[CORDONED_BROKER].config_file, "a", encoding="utf-8") as f:
        f.write("cordoned.log.dirs=*\n")
    c.start()
    yield c
    c.stop()


def assignment_refusal(cluster: KRaftCluster, replicas: list[int]) -> str | None:
    """CreateTopics validate_only of one partition on ``replicas``: its error message."""
    with WireClient(cluster.nodes[101].bootstrap, timeout=10) as client:
        answer = client.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": "probe", "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                        "configs": []}],
            "timeout": 10_000, "validate_only": True})
    return answer.topics[0].error_message if answer.topics[0].error_code else None


def test_the_controller_places_nothing_on_a_broker_with_every_dir_cordoned(
        cluster: KRaftCluster) -> None:
    bootstrap = cluster.nodes[101].bootstrap
    refusal = (f"The manual partition assignment includes broker {CORDONED_BROKER}, but "
               "all its log directories are cordoned.")
    # The broker reports its cordoned dirs in the heartbeat after it has caught up.
    wait_until(lambda: assignment_refusal(cluster, [101, CORDONED_BROKER]) == refusal,
               APPLY_BOUND_S, 0.2, "the controller never learnt of the cordoned dirs")
    run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic",
             "spread", "--partitions", "12", "--replication-factor", "2", check=True)
    (event,) = [e for e in run_java({"op": "admin", "bootstrap": bootstrap, "calls": [
        {"call": "describe_topics", "topics": ["spread"]}]}) if e["event"] == "result"]
    partitions = event["value"]["spread"]["partitions"]
    assert len(partitions) == 12
    assert {b for p in partitions for b in p["replicas"]} == {101, 102}

    done = run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic",
                    "manual", "--replica-assignment", f"101:{CORDONED_BROKER}")
    assert done.returncode != 0 and refusal in done.stdout

    # Uncordoned dynamically (an empty list: deleting the key would leave the static *),
    # the broker takes replicas again.
    done = run_tool("kafka-configs", "--bootstrap-server", bootstrap, "--alter",
                    "--entity-type", "brokers", "--entity-name", str(CORDONED_BROKER),
                    "--add-config", "cordoned.log.dirs=[]")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_until(lambda: assignment_refusal(cluster, [101, CORDONED_BROKER]) is None,
               APPLY_BOUND_S, 0.2, "the controller kept the broker cordoned")
    run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic",
             "manual", "--replica-assignment", f"101:{CORDONED_BROKER}", check=True)
