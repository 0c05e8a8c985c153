"""The ``ottla`` command: console tools, dump-log, storage, and how the server starts and
stops (bad config, port in use, SIGTERM/SIGINT)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from ottla.common.uuids import kafka_uuid_text
from tests.helpers import OttlaProcess, WireClient, free_port
from tests.integration.test_admin import run_cli


@pytest.fixture
def topic(ottla):
    with WireClient(ottla.bootstrap) as c:
        assert c.create_topic("lines", partitions=1).topics[0].error_code == 0
    return "lines"


def test_console_producer_and_consumer_round_trip_keys(ottla, topic) -> None:
    lines = [f"key{i}:value {i}" for i in range(5)]
    produced = run_cli("console-producer", "--bootstrap-server", ottla.bootstrap, "--topic",
                       topic, "--property", "parse.key=true", "--property", "key.separator=:",
                       stdin="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr
    consumed = run_cli("console-consumer", "--bootstrap-server", ottla.bootstrap, "--topic",
                       topic, "--from-beginning", "--max-messages", "5", "--property",
                       "print.key=true", "--property", "key.separator=:", "--timeout-ms",
                       "20000")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines
    from_offset = run_cli("console-consumer", "--bootstrap-server", ottla.bootstrap, "--topic",
                          topic, "--partition", "0", "--offset", "2", "--max-messages", "3",
                          "--timeout-ms", "20000")
    assert from_offset.stdout.splitlines() == ["value 2", "value 3", "value 4"]


def test_dump_log_prints_batches_and_records(ottla, topic) -> None:
    run_cli("console-producer", "--bootstrap-server", ottla.bootstrap, "--topic", topic,
            stdin="alpha\nbeta\n")
    segment = os.path.join(ottla.data_dir, f"{topic}-0", "00000000000000000000.log")
    dumped = run_cli("dump-log", "--files", segment, "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr
    assert "baseOffset: 0" in dumped.stdout
    assert "payload: alpha" in dumped.stdout and "payload: beta" in dumped.stdout
    index = run_cli("dump-log", "--files", segment.replace(".log", ".index"))
    assert index.returncode == 0, index.stderr


def start_and_wait(node: OttlaProcess, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(node.args(), capture_output=True, text=True, timeout=timeout)


def test_a_bad_config_value_stops_with_a_clear_error(tmp_path) -> None:
    node = OttlaProcess(str(tmp_path / "data"), overrides={"num.partitions": "many"})
    result = start_and_wait(node)
    assert result.returncode != 0
    assert "num.partitions" in result.stderr


def test_a_port_in_use_stops_with_a_clear_error(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        node = OttlaProcess(str(tmp_path / "data"), port=taken.getsockname()[1])
        result = start_and_wait(node)
    assert result.returncode != 0
    assert "in use" in (result.stderr + result.stdout).lower()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_shut_down_cleanly_and_data_survives(tmp_path, sig) -> None:
    node = OttlaProcess(str(tmp_path / "data")).start()
    with WireClient(node.bootstrap) as c:
        c.create_topic("kept")
    run_cli("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "kept",
            stdin="one\ntwo\n")
    assert node.stop(sig) == 0
    assert os.path.exists(os.path.join(node.data_dir, ".kafka_cleanshutdown"))
    node.start()
    restart = node.log().split("Shut down cleanly")[-1]
    assert "No clean shutdown marker" not in restart
    consumed = run_cli("console-consumer", "--bootstrap-server", node.bootstrap, "--topic",
                       "kept", "--from-beginning", "--max-messages", "2", "--timeout-ms",
                       "20000")
    assert consumed.stdout.splitlines() == ["one", "two"]
    node.stop()


def test_storage_tools_and_a_node_id_mismatch(tmp_path) -> None:
    uuid_out = run_cli("storage", "random-uuid")
    cluster_id = uuid_out.stdout.strip()
    assert uuid_out.returncode == 0 and len(cluster_id) == 22
    data = tmp_path / "data"
    port, controller = free_port(), free_port()
    config = tmp_path / "server.properties"
    config.write_text("\n".join([
        "process.roles=broker,controller", "node.id=2",
        f"controller.quorum.voters=2@127.0.0.1:{controller}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={data}"]) + "\n")
    formatted = run_cli("storage", "format", "--cluster-id", cluster_id, "--config",
                        str(config))
    assert formatted.returncode == 0, formatted.stderr
    meta = (data / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in meta and "node.id=2" in meta
    again = run_cli("storage", "format", "--cluster-id", cluster_id, "--config", str(config))
    assert again.returncode != 0 and "already formatted" in again.stderr
    # The same directory under another node id is refused.
    wrong = OttlaProcess(str(data), overrides={"node.id": "1"})
    result = start_and_wait(wrong)
    assert result.returncode != 0
    assert "node" in result.stderr.lower() and "2" in result.stderr


def test_help_lists_the_tools() -> None:
    result = subprocess.run([sys.executable, "-m", "ottla", "--help"], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0
    for tool in ("server", "storage", "topics", "console-producer", "console-consumer",
                 "dump-log"):
        assert tool in result.stdout


def test_log_dirs_describe_reports_partition_sizes(ottla, topic) -> None:
    run_cli("console-producer", "--bootstrap-server", ottla.bootstrap, "--topic", topic,
            stdin="a\nb\nc\n")
    result = run_cli("log-dirs", "--describe", "--bootstrap-server", ottla.bootstrap,
                     "--topic-list", topic)
    assert result.returncode == 0, result.stderr
    described = json.loads(result.stdout.splitlines()[-1])
    (broker,) = described["brokers"]
    (log_dir,) = broker["logDirs"]
    assert log_dir["logDir"] == os.path.abspath(ottla.data_dir)
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    segment = os.path.join(ottla.data_dir, f"{topic}-0", "00000000000000000000.log")
    assert sizes == {f"{topic}-0": os.path.getsize(segment)} and sizes[f"{topic}-0"] > 0


def _server_properties(tmp_path, data, node_id: int, voters: bool) -> tuple[str, int]:
    port, controller = free_port(), free_port()
    config = tmp_path / f"server-{node_id}.properties"
    lines = ["process.roles=broker,controller", f"node.id={node_id}",
             f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
             "controller.listener.names=CONTROLLER",
             "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
             f"log.dirs={data}"]
    if voters:
        lines.append(f"controller.quorum.voters={node_id}@127.0.0.1:{controller}")
    else:
        lines.append(f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}")
    config.write_text("\n".join(lines) + "\n")
    return str(config), port


def test_format_writes_the_bootstrap_snapshot_a_node_starts_from(tmp_path) -> None:
    """--release-version becomes the metadata.version the started node finalizes."""
    from ottla.metadata.bootstrap import read_bootstrap

    data = tmp_path / "data"
    config, port = _server_properties(tmp_path, data, 3, voters=True)
    cluster_id = run_cli("storage", "random-uuid").stdout.strip()
    bad = run_cli("storage", "format", "-t", cluster_id, "-c", config, "-r", "2.8")
    assert bad.returncode != 0 and "unknown release version" in bad.stderr
    assert not (data / "meta.properties").exists()
    refused = run_cli("storage", "format", "-t", cluster_id, "-c", config, "--standalone")
    assert refused.returncode != 0 and "controller.quorum.voters" in refused.stderr
    too_high = run_cli("storage", "format", "-t", cluster_id, "-c", config, "-f",
                       "transaction.version=3")
    assert too_high.returncode != 0 and "outside the supported range" in too_high.stderr

    done = run_cli("storage", "format", "-t", cluster_id, "-c", config, "-r", "3.9")
    assert done.returncode == 0, done.stderr
    assert "metadata.version 3.9-IV0" in done.stdout
    checkpoint = data / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    assert checkpoint.exists()
    assert read_bootstrap(str(data)).metadata_version_level == 21

    node = OttlaProcess(str(data), port=port)
    node.args = lambda: [sys.executable, "-m", "ottla", "server", config]  # type: ignore
    node.start()
    try:
        with WireClient(node.bootstrap) as client:
            versions = client.api_versions()
        finalized = {f.name: f.max_version_level for f in versions.finalized_features}
        assert finalized["metadata.version"] == 21
        assert "transaction.version" not in finalized  # 3.9 had no transactions v2
    finally:
        assert node.stop() == 0


def test_format_for_a_dynamic_quorum_names_the_initial_voters(tmp_path) -> None:
    from ottla.metadata.bootstrap import read_bootstrap
    from ottla.storage.meta_properties import MetaProperties

    cluster_id = run_cli("storage", "random-uuid").stdout.strip()
    data = tmp_path / "dyn"
    config, _ = _server_properties(tmp_path, data, 1, voters=False)
    missing = run_cli("storage", "format", "-t", cluster_id, "-c", config)
    assert missing.returncode != 0 and "--standalone" in missing.stderr
    standalone = run_cli("storage", "format", "-t", cluster_id, "-c", config, "--standalone")
    assert standalone.returncode == 0, standalone.stderr
    voters = read_bootstrap(str(data)).voters
    directory = MetaProperties.read(str(data)).directory_id
    assert [(v.node_id, v.host, v.directory_id) for v in voters] == \
        [(1, "127.0.0.1", directory)]

    other = tmp_path / "dyn2"
    config2, _ = _server_properties(tmp_path, other, 2, voters=False)
    ids = [run_cli("storage", "random-uuid").stdout.strip() for _ in range(3)]
    initial = ",".join(f"{i + 1}@127.0.0.1:{9100 + i}:{d}" for i, d in enumerate(ids))
    done = run_cli("storage", "format", "-t", cluster_id, "-c", config2,
                   "--initial-controllers", initial)
    assert done.returncode == 0, done.stderr
    assert [(v.node_id, v.port, v.directory_id) for v in read_bootstrap(str(other)).voters] \
        == [(i + 1, 9100 + i, d) for i, d in enumerate(ids)]
    bad = run_cli("storage", "format", "-t", cluster_id, "-c", config2, "-g",
                  "--initial-controllers", "1@host:1")
    assert bad.returncode != 0 and "id@host:port:directory-id" in bad.stderr


def test_metadata_quorum_describes_the_voter_through_either_listener(ottla) -> None:
    from ottla.protocol.api import ApiKey
    from ottla.storage.meta_properties import MetaProperties

    def status() -> dict[str, str]:
        out = run_cli("metadata-quorum", "--bootstrap-server", ottla.bootstrap, "describe",
                      "--status")
        assert out.returncode == 0, out.stderr
        return {k: v.strip() for k, v in (line.split(":", 1) for line in
                                          out.stdout.splitlines())}

    before = status()
    directory = MetaProperties.read(ottla.data_dir).directory_id
    assert before["LeaderId"] == "1" and before["MaxFollowerLag"] == "0"
    voters = json.loads(before["CurrentVoters"])
    assert voters == [{"id": 1, "directoryId": directory,
                       "endpoints": [f"CONTROLLER://127.0.0.1:{ottla.controller_port}"]}]
    assert run_cli("topics", "--bootstrap-server", ottla.bootstrap, "--create", "--topic",
                   "quorum-grows", "--partitions", "3").returncode == 0
    assert int(status()["HighWatermark"]) > int(before["HighWatermark"])

    controller = f"127.0.0.1:{ottla.controller_port}"
    rows = run_cli("metadata-quorum", "--bootstrap-controller", controller, "describe",
                   "--replication")
    assert rows.returncode == 0, rows.stderr
    header, leader = (line.split() for line in rows.stdout.splitlines())
    assert header[0] == "NodeId" and header[-1] == "Status"
    assert leader[0] == "1" and leader[1] == directory and leader[-1] == "Leader"
    assert leader[3] == "0"  # lag

    with WireClient(ottla.bootstrap) as client:
        wrong = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
            "topic_name": "orders", "partitions": [{"partition_index": 0}]}]})
    assert wrong.topics[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_features_tool_describes_and_upgrades(tmp_path) -> None:
    cluster_id = run_cli("storage", "random-uuid").stdout.strip()
    data = tmp_path / "feat"
    config, port = _server_properties(tmp_path, data, 1, voters=True)
    assert run_cli("storage", "format", "-t", cluster_id, "-c", config, "-r", "3.8"
                   ).returncode == 0
    node = OttlaProcess(str(data), port=port)
    node.args = lambda: [sys.executable, "-m", "ottla", "server", config]  # type: ignore
    node.start()
    try:
        bs = ["--bootstrap-server", node.bootstrap]
        described = run_cli("features", *bs, "describe")
        assert described.returncode == 0, described.stderr
        assert "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\t" \
               "SupportedMaxVersion: 4.4-IV2\tFinalizedVersionLevel: 3.8-IV0" in described.stdout
        dry = run_cli("features", *bs, "upgrade", "--metadata", "3.9", "--dry-run")
        assert dry.returncode == 0 and "validated to 3.9-IV0" in dry.stdout
        assert "FinalizedVersionLevel: 3.8-IV0" in run_cli("features", *bs, "describe").stdout
        done = run_cli("features", *bs, "upgrade", "--metadata", "3.9")
        assert done.returncode == 0 and "was upgraded to 3.9-IV0" in done.stdout
        assert "FinalizedVersionLevel: 3.9-IV0" in run_cli("features", *bs, "describe").stdout
        # As Kafka 4.4: 3.9-IV0 changed no metadata, so going back to 3.8 is safe; 3.7-IV0
        # and 3.7-IV2 did, so going below them is refused.
        down = run_cli("features", *bs, "downgrade", "--metadata", "3.8")
        assert down.returncode == 0 and "was downgraded to 3.8-IV0" in down.stdout, down
        refused = run_cli("features", *bs, "downgrade", "--metadata", "3.6")
        assert refused.returncode == 1 and "Could not downgrade" in refused.stdout
        assert "Refusing to perform the requested downgrade because it might delete " \
               "metadata information." in refused.stdout, refused.stdout
        assert "FinalizedVersionLevel: 3.8-IV0" in run_cli("features", *bs, "describe").stdout
    finally:
        assert node.stop() == 0


def test_topic_ids_print_as_kafka_prints_them(ottla) -> None:
    """kafka-topics.sh and kafka-dump-log.sh print ids as ``Uuid.toString()``: URL-safe
    base64 without padding. About half of all random ids contain a character the two
    base64 alphabets differ in; create topics until one does."""
    ids: dict[str, str] = {}
    with WireClient(ottla.bootstrap) as c:
        for i in range(20):
            created = c.create_topic(f"ids-{i}").topics[0]
            assert created.error_code == 0
            ids[f"ids-{i}"] = kafka_uuid_text(created.topic_id)
            if set(ids[f"ids-{i}"]) & {"-", "_"}:
                break
    name, text = list(ids.items())[-1]
    assert set(text) & {"-", "_"}, ids
    described = run_cli("topics", "--bootstrap-server", ottla.bootstrap, "--describe",
                        "--topic", name)
    assert described.returncode == 0, described.stderr
    assert f"Topic: {name}\tTopicId: {text}\tPartitionCount: 1" in described.stdout

    metadata = os.path.join(ottla.data_dir, "__cluster_metadata-0", "00000000000000000000.log")
    dumped = run_cli("dump-log", "--cluster-metadata-decoder", "--files", metadata)
    assert dumped.returncode == 0, dumped.stderr
    payloads = [json.loads(line.split(" payload: ", 1)[1])
                for line in dumped.stdout.splitlines() if " payload: {" in line]
    assert {"type": "TOPIC_RECORD", "version": 0,
            "data": {"name": name, "topicId": text}} in payloads
    partition = next(p for p in payloads if p["type"] == "PARTITION_RECORD"
                     and p["data"]["topicId"] == text)
    assert partition["data"]["partitionId"] == 0 and partition["data"]["replicas"] == [1]
