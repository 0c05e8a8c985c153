"""A dynamic KRaft quorum (KIP-853) across real processes: a cluster formatted
``--standalone`` grows from one controller to three with ``ottla metadata-quorum
add-controller`` while a producer writes, and a controller whose disk died is replaced
by a new one (a new directory id) with ``remove-controller`` and ``add-controller``, as
Kafka's operations guide does it. The quorum keeps a leader and no topic is lost. A
static quorum (``controller.quorum.voters``) becomes dynamic by upgrading kraft.version,
and a voter restarted on another port tells the leader with UpdateRaftVoter."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.common.uuids import parse_kafka_uuid
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import OttlaProcess, WireClient, free_port, stop_all, wait_until

pytestmark = pytest.mark.slow


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ottla", *args], capture_output=True,
                          text=True, timeout=timeout)


class Node:
    def __init__(self, tmp: Path, node_id: int, roles: str, bootstrap_controller: str = ""
                 ) -> None:
        self.node_id = node_id
        self.data = tmp / f"node-{node_id}"
        self.controller_port = free_port()
        self.port = free_port()
        self.config = tmp / f"server-{node_id}.properties"
        listeners = [f"CONTROLLER://127.0.0.1:{self.controller_port}"]
        if "broker" in roles:
            listeners.insert(0, f"PLAINTEXT://127.0.0.1:{self.port}")
        lines = [f"process.roles={roles}", f"node.id={node_id}",
                 f"listeners={','.join(listeners)}",
                 "controller.listener.names=CONTROLLER",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                 f"log.dirs={self.data}",
                 f"controller.quorum.bootstrap.servers={bootstrap_controller or self.address}"]
        if "broker" in roles:
            lines.append(f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}")
        self.config.write_text("\n".join(lines) + "\n")
        self.process = OttlaProcess(str(self.data), port=self.port,
                                    controller_port=self.controller_port,
                                    config_file=str(self.config), roles=roles,
                                    node_id=node_id)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    def format(self, cluster_id: str, *flags: str) -> None:
        done = run_cli("storage", "format", "-t", cluster_id, "-c", str(self.config), *flags)
        assert done.returncode == 0, done.stderr

    def directory_id(self) -> str:
        text = (self.data / "meta.properties").read_text()
        match = re.search(r"^directory\.id=(\S+)$", text, re.M)
        assert match
        return match.group(1)


def quorum(controller: Node | str) -> tuple[int, dict[int, str], dict[int, str]]:
    """(leader, voters and observers as id -> directory id) as DescribeQuorum says on
    ``controller`` (a node, or its address)."""
    from ottla.common.uuids import kafka_uuid_text

    address = controller if isinstance(controller, str) else controller.address
    with WireClient(address, timeout=5) as client:
        response = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
            "topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
    p = response.topics[0].partitions[0]
    return (p.leader_id,
            {v.replica_id: kafka_uuid_text(v.replica_directory_id) for v in p.current_voters},
            {o.replica_id: kafka_uuid_text(o.replica_directory_id) for o in p.observers})


def metadata_quorum(bootstrap: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("metadata-quorum", "--bootstrap-controller", bootstrap.address, *args)


def test_a_standalone_quorum_grows_to_three_and_replaces_a_dead_controller(tmp_path) -> None:
    cluster_id = run_cli("storage", "random-uuid").stdout.strip()
    first = Node(tmp_path, 1, "controller")
    broker = Node(tmp_path, 10, "broker", first.address)
    second = Node(tmp_path, 2, "controller", first.address)
    third = Node(tmp_path, 3, "controller", first.address)
    first.format(cluster_id, "--standalone")
    broker.format(cluster_id)
    second.format(cluster_id, "--no-initial-controllers")
    third.format(cluster_id, "--no-initial-controllers")
    nodes = [first, broker, second, third]
    stop = threading.Event()
    acked: list[int] = []
    errors: list[str] = []

    def produce() -> None:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "acks": "all",
                             "message.timeout.ms": 60000})
        n = 0
        while not stop.is_set():
            producer.produce("orders", str(n).encode(), on_delivery=lambda err, msg: (
                errors.append(str(err)) if err else acked.append(int(msg.value()))))
            producer.poll(0.05)
            n += 1
        producer.flush(60)

    watched: list[tuple[float, int, int]] = []  # (time, leader, epoch) as controller 1 says

    def watch() -> None:
        while not stop.is_set():
            try:
                with WireClient(first.address, timeout=2) as client:
                    response = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
                        "topic_name": "__cluster_metadata",
                        "partitions": [{"partition_index": 0}]}]})
                p = response.topics[0].partitions[0]
                watched.append((time.monotonic(), p.leader_id, p.leader_epoch))
            except (OSError, ConnectionError, IndexError):
                watched.append((time.monotonic(), -1, -1))
            stop.wait(0.2)

    writer = threading.Thread(target=produce)
    watcher = threading.Thread(target=watch)
    try:
        first.process.start()
        broker.process.start(wait=False)
        broker.process.wait_ready(60)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
        writer.start()
        watcher.start()
        second.process.start()
        third.process.start()

        # Each joins as an observer, catches up, and is added (answered once committed).
        for node in (second, third):
            wait_until(lambda node=node: node.node_id in quorum(first)[2], 30, 0.2,
                       f"controller {node.node_id} to fetch as an observer")
            added = metadata_quorum(first, "--command-config", str(node.config),
                                    "add-controller")
            assert added.returncode == 0, added.stderr
            assert added.stdout.strip() == (
                f"Added controller {node.node_id} with directory id {node.directory_id()} "
                f"and endpoints: CONTROLLER://127.0.0.1:{node.controller_port}")
            admin.create_topics([NewTopic(f"grown-{node.node_id}", 1, 1)])[
                f"grown-{node.node_id}"].result(30)
        leader, voters, _ = quorum(first)
        assert voters == {n.node_id: n.directory_id() for n in (first, second, third)}

        # The disk of controller 3 dies: kill -9, a new disk, a new directory id.
        old_directory = third.directory_id()
        third.process.kill9()
        shutil.rmtree(third.data)
        third.format(cluster_id, "--no-initial-controllers")
        assert third.directory_id() != old_directory
        third.process.start()
        wait_until(lambda: quorum(first)[2].get(3) == third.directory_id(), 30, 0.2,
                   "the new controller 3 to fetch as an observer")
        # Its id still votes with the old directory: add first is a duplicate.
        duplicate = metadata_quorum(first, "--command-config", str(third.config),
                                    "add-controller")
        assert duplicate.returncode != 0 and "DUPLICATE_VOTER" in duplicate.stderr
        removed = metadata_quorum(first, "remove-controller", "--controller-id", "3",
                                  "--controller-directory-id", old_directory)
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.strip() == \
            f"Removed KRaft controller 3 with directory id {old_directory}"
        added = metadata_quorum(first, "--command-config", str(third.config),
                                "add-controller")
        assert added.returncode == 0, added.stderr
        leader, voters, _ = quorum(first)
        assert leader in (1, 2, 3)
        assert voters == {n.node_id: n.directory_id() for n in (first, second, third)}

        # A restarted controller finds its voters in its own log.
        assert second.process.stop() == 0
        second.process.start()
        # Every controller agrees, a leader holds, and the topics are all there.
        for node in (second, third):
            wait_until(lambda node=node: quorum(node)[1] == voters, 30, 0.2,
                       f"controller {node.node_id} to have the voters")
        listed = set(admin.list_topics(timeout=10).topics)
        assert {"orders", "grown-2", "grown-3"} <= listed
        stop.set()
        writer.join(90)
        watcher.join(10)
        assert acked and not errors, (len(acked), errors[:3])
        # A leader throughout: an election only where a leader went (controller 3 killed,
        # controller 2 restarted, if either led), and no leaderless stretch longer than
        # one election takes.
        epochs = {epoch for _, leader, epoch in watched if leader >= 0}
        assert 1 <= len(epochs) <= 3, epochs
        longest, since = 0.0, None
        for at, leader, _ in watched:
            if leader < 0:
                since = at if since is None else since
                longest = max(longest, at - since)
            else:
                since = None
        assert longest < 10, longest
    finally:
        stop.set()
        if writer.is_alive():
            writer.join(90)
        if watcher.is_alive():
            watcher.join(10)
        stop_all([n.process for n in nodes], check=False)
        for n in nodes:
            if n.process.proc is not None:
                n.process.stop(signal.SIGKILL, check=False)


def test_kafkas_metadata_quorum_tool_adds_and_removes_an_ottla_controller(tmp_path) -> None:
    """Kafka 4.4's own kafka-metadata-quorum (its Admin client's addRaftVoter and
    removeRaftVoter) against Ottla's controllers."""
    from tests.kafka_ref.cluster import run_tool

    cluster_id = run_cli("storage", "random-uuid").stdout.strip()
    first = Node(tmp_path, 1, "controller")
    second = Node(tmp_path, 2, "controller", first.address)
    first.format(cluster_id, "--standalone")
    second.format(cluster_id, "--no-initial-controllers")
    try:
        first.process.start()
        second.process.start()
        wait_until(lambda: 2 in quorum(first)[2], 30, 0.2, "controller 2 as an observer")
        added = run_tool("kafka-metadata-quorum", "--bootstrap-controller", first.address,
                         "--command-config", str(second.config), "add-controller")
        assert added.returncode == 0, added.stdout + added.stderr
        assert added.stdout.strip().endswith(
            f"Added controller 2 with directory id {second.directory_id()} and endpoints: "
            f"CONTROLLER://127.0.0.1:{second.controller_port}")
        assert quorum(first)[1] == {1: first.directory_id(), 2: second.directory_id()}
        status = run_tool("kafka-metadata-quorum", "--bootstrap-controller", first.address,
                          "describe", "--status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert f'"id": 2, "directoryId": "{second.directory_id()}"' in status.stdout
        removed = run_tool("kafka-metadata-quorum", "--bootstrap-controller", first.address,
                           "remove-controller", "--controller-id", "2",
                           "--controller-directory-id", second.directory_id())
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert removed.stdout.strip().endswith(
            f"Removed KRaft controller 2 with directory id {second.directory_id()}")
        assert quorum(first)[1] == {1: first.directory_id()}
    finally:
        stop_all([first.process, second.process], check=False)


def add_voter_answers(controller: str, reachable_port: int) -> list[tuple[int, str]]:
    """AddRaftVoter of two voters that are not observers: one whose endpoint nobody
    listens on (its ApiVersions fails), one at ``reachable_port`` (it answers, but has
    not caught up): (error code, message) of each."""
    directory = uuid.UUID(int=7)
    answers = []
    for voter_id, port in ((8, free_port()), (9, reachable_port)):
        with WireClient(controller, timeout=30) as client:
            response = client.request(ApiKey.ADD_RAFT_VOTER, 1, {
                "cluster_id": None, "timeout": 10000, "voter_id": voter_id,
                "voter_directory_id": directory, "ack_when_committed": True,
                "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": port}]})
        answers.append((response.error_code, response.error_message))
    return answers


def set_refusals(controller: str) -> list[tuple[int, str]]:
    """On a lone voter: AddRaftVoter of its own id under another directory id
    (DUPLICATE_VOTER), RemoveRaftVoter of the last voter and of its id under another
    directory id (VOTER_NOT_FOUND): (error code, message), the voter's own directory id
    shown as ``<own>``."""
    leader, voters, _ = quorum(controller)
    own = voters[leader]
    other = uuid.UUID(int=7)
    answers = []
    with WireClient(controller, timeout=30) as client:
        for api, version, body in (
                (ApiKey.ADD_RAFT_VOTER, 1, {
                    "cluster_id": None, "timeout": 10000, "voter_id": leader,
                    "voter_directory_id": other, "ack_when_committed": True,
                    "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1",
                                   "port": free_port()}]}),
                (ApiKey.REMOVE_RAFT_VOTER, 0, {
                    "cluster_id": None, "voter_id": leader,
                    "voter_directory_id": parse_kafka_uuid(own)}),
                (ApiKey.REMOVE_RAFT_VOTER, 0, {
                    "cluster_id": None, "voter_id": leader, "voter_directory_id": other})):
            response = client.request(api, version, body)
            answers.append((response.error_code,
                            (response.error_message or "").replace(own, "<own>")))
    return answers


def test_add_raft_voter_asks_the_new_voter_its_api_versions_first(tmp_path) -> None:
    """Kafka 4.4's AddVoterHandler sends the new voter ApiVersions before it checks that
    it caught up: an unreachable one is refused with the network error, a reachable one
    that is not an observer for lagging behind; a voter id already in the set, and
    removing the last voter or a directory id that is not the voter's, are refused
    before. Ottla answers all as Kafka does, messages included."""
    from tests.kafka_ref.cluster import KafkaCluster

    kafka = KafkaCluster(tmp_path / "kafka", controllers=1, brokers=0, combined=True)
    with kafka:
        controller = kafka.bootstrap_controller
        expected = add_voter_answers(controller, int(controller.rpartition(":")[2]))
        refused = set_refusals(controller)
    assert expected == [
        (7, "Aborted add voter operation for since API_VERSIONS returned an error "
            "BROKER_NOT_AVAILABLE"),
        (7, "Aborted add voter operation for ReplicaKey(id=9, "
            "directoryId=AAAAAAAAAAAAAAAAAAAABw) since it is lagging behind")]
    own = "ReplicaKey(id=1, directoryId=<own>)"
    other = "ReplicaKey(id=1, directoryId=AAAAAAAAAAAAAAAAAAAABw)"
    assert refused == [
        (ErrorCode.duplicate_voter,
         f"The voter id for {other} is already part of the set of voters [{own}]."),
        (ErrorCode.voter_not_found, f"Cannot remove voter {own} from the set of voters [{own}]"),
        (ErrorCode.voter_not_found,
         f"Cannot remove voter {other} from the set of voters [{own}]")]

    cluster_id = run_cli("storage", "random-uuid").stdout.strip()
    first = Node(tmp_path, 1, "controller")
    first.format(cluster_id, "--standalone")
    try:
        first.process.start()
        wait_until(lambda: quorum(first)[0] == 1, 30, 0.2, "controller 1 leading")
        assert add_voter_answers(first.address, first.controller_port) == expected
        assert set_refusals(first.address) == refused
        assert quorum(first)[1] == {1: first.directory_id()}
    finally:
        stop_all([first.process], check=False)


def test_a_static_quorum_refuses_voter_changes_with_kafkas_words(make_ottla) -> None:
    """controller.quorum.voters (kraft.version 0): AddRaftVoter and RemoveRaftVoter are
    refused with UNSUPPORTED_VERSION and Kafka's Add/RemoveVoterHandler message."""
    node = make_ottla()
    directory = uuid.uuid4()
    with WireClient(f"127.0.0.1:{node.controller_port}") as client:
        added = client.request(ApiKey.ADD_RAFT_VOTER, 0, {
            "cluster_id": None, "timeout": 5000, "voter_id": 2,
            "voter_directory_id": directory,
            "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": free_port()}]})
        removed = client.request(ApiKey.REMOVE_RAFT_VOTER, 0, {
            "cluster_id": None, "voter_id": 1, "voter_directory_id": directory})
    assert (added.error_code, added.error_message) == (
        35, "Cluster doesn't support adding voter because the kraft.version feature is 0")
    assert (removed.error_code, removed.error_message) == (
        35, "Cluster doesn't support removing voter because the kraft.version feature is 0")


def kraft_version_line(describe: subprocess.CompletedProcess[str]) -> str:
    """kafka-features describe's kraft.version line, its epoch blanked."""
    assert describe.returncode == 0, describe.stdout + describe.stderr
    line = next(line for line in describe.stdout.splitlines()
                if re.match(r"Feature: kraft\.version\s", line))
    return re.sub(r"Epoch: \d+", "Epoch: <n>", line)


def describe_quorum(address: str) -> tuple[Any, dict[int, set[tuple[str, str, int]]]]:
    """DescribeQuorum v2 on ``address``: the metadata partition and each voter's
    endpoints (its ``nodes``)."""
    with WireClient(address, timeout=5) as client:
        response = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
            "topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
    return (response.topics[0].partitions[0],
            {n.node_id: {(ln.name, ln.host, ln.port) for ln in n.listeners}
             for n in response.nodes})


def test_a_voter_restarted_on_another_port_tells_the_leader_and_is_reached_there(
        tmp_path) -> None:
    """KIP-853's UpdateRaftVoter as Kafka 4.4 sends it: a voter restarted with another
    controller listener port tells the leader, whose new VotersRecord DescribeQuorum
    shows (and Kafka's kafka-metadata-quorum prints); the other voters reach it there:
    with the leader stopped, the two left can only elect a leader and commit if the
    third one's Vote or Fetch reaches the moved voter at its new port."""
    from tests.kafka_ref.cluster import run_tool

    cluster_id = run_cli("storage", "random-uuid").stdout.strip()
    nodes = {i: Node(tmp_path, i, "controller") for i in (1, 2, 3)}
    directories = {i: run_cli("storage", "random-uuid").stdout.strip() for i in nodes}
    initial = ",".join(f"{i}@{n.address}:{directories[i]}" for i, n in nodes.items())
    for node in nodes.values():
        node.format(cluster_id, "--initial-controllers", initial)
    try:
        for node in nodes.values():
            node.process.start(wait=False)
        for node in nodes.values():
            node.process.wait_ready(60)
        wait_until(lambda: describe_quorum(nodes[1].address)[0].leader_id in nodes, 30, 0.2,
                   "a leader")
        leader = nodes[describe_quorum(nodes[1].address)[0].leader_id]
        moved, third = (n for i, n in nodes.items() if n is not leader)
        old_endpoint = ("CONTROLLER", "127.0.0.1", moved.controller_port)
        assert describe_quorum(leader.address)[1][moved.node_id] == {old_endpoint}

        moved.process.stop()
        new_port = free_port()
        moved.config.write_text(moved.config.read_text().replace(
            f"127.0.0.1:{moved.controller_port}", f"127.0.0.1:{new_port}"))
        moved.controller_port = moved.process.controller_port = new_port
        moved.process.start()
        new_endpoint = ("CONTROLLER", "127.0.0.1", new_port)
        seen: list[Any] = []

        def updated_everywhere() -> bool:
            seen[:] = [describe_quorum(n.address)[1].get(moved.node_id)
                       for n in (leader, third)]
            return seen == [{new_endpoint}] * 2
        # A fetch timeout (2 s) after it follows the leader, then one append.
        wait_until(updated_everywhere, 30, 0.2, lambda: f"the new endpoint: {seen}")
        status = run_tool("kafka-metadata-quorum", "--bootstrap-controller", leader.address,
                          "describe", "--status")
        assert status.returncode == 0, status.stdout + status.stderr
        voters_line = next(line for line in status.stdout.splitlines()
                           if line.startswith("CurrentVoters:"))
        assert (f'{{"id": {moved.node_id}, "directoryId": "{directories[moved.node_id]}", '
                f'"endpoints": ["CONTROLLER://127.0.0.1:{new_port}"]}}') in voters_line

        old_epoch = describe_quorum(leader.address)[0].leader_epoch
        leader.process.stop()

        def elected_and_committed() -> bool:
            p, _ = describe_quorum(moved.address)
            if p.leader_id not in (moved.node_id, third.node_id) or \
                    p.leader_epoch <= old_epoch:
                return False
            q, _ = describe_quorum(nodes[p.leader_id].address)
            ends = {v.replica_id: v.log_end_offset for v in q.current_voters}
            return q.high_watermark > 0 and \
                ends[moved.node_id] >= q.high_watermark and ends[third.node_id] >= \
                q.high_watermark
        wait_until(elected_and_committed, 30, 0.2, "a leader of the two left, committing")
    finally:
        stop_all([n.process for n in nodes.values()], check=False)


def upgrade_story(bootstrap: str, controller: str) -> list[str]:
    """What kafka-features prints through a static quorum's upgrade of kraft.version:
    describe, upgrade, describe on both listeners, and a downgrade."""
    from tests.kafka_ref.cluster import run_tool

    def features(*args: str, via: str = bootstrap, flag: str = "--bootstrap-server"
                 ) -> subprocess.CompletedProcess[str]:
        return run_tool("kafka-features", flag, via, *args)

    before = kraft_version_line(features("describe"))
    upgraded = features("upgrade", "--feature", "kraft.version=1")
    assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
    after: list[str] = []

    def finalized_everywhere() -> bool:
        after[:] = [kraft_version_line(features("describe")),
                    kraft_version_line(features("describe", via=controller,
                                                flag="--bootstrap-controller"))]
        return all(re.search(r"FinalizedVersionLevel: 1\s", line) for line in after)
    wait_until(finalized_everywhere, 30, 0.5, lambda: f"kraft.version 1 finalized: {after}")
    downgraded = features("downgrade", "--feature", "kraft.version=0")
    return [before, upgraded.stdout.strip(), *after, f"exit {downgraded.returncode}",
            downgraded.stdout.strip()]


def upgrade_records(directory: Path) -> list[str]:
    """The KRaftVersion and KRaftVoters control records of the metadata log under
    ``directory`` as kafka-dump-log prints them, the offsets and times blanked."""
    from tests.kafka_ref.cluster import run_tool

    files = sorted(str(p) for p in directory.glob("**/__cluster_metadata-0/*.log"))
    dumped = run_tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", *files)
    assert dumped.returncode == 0, dumped.stdout + dumped.stderr
    return [re.sub(r"(offset|CreateTime|baseOffset|lastOffset|position|crc|"
                   r"partitionLeaderEpoch): -?\d+", r"\1: <n>", line)
            for line in dumped.stdout.splitlines()
            if "KRaftVersion" in line or "KRaftVoters" in line]


def voters_of(record: str) -> list[dict[str, object]]:
    """The voters of a dumped KRaftVoters record."""
    import json

    return json.loads(record.split("KRaftVoters ", 1)[1])["voters"]


def test_a_static_quorum_upgrades_kraft_version_and_then_changes_its_voters(
        tmp_path) -> None:
    """KIP-853's upgrade of a ``controller.quorum.voters`` quorum with Kafka 4.4's own
    kafka-features, which prints on Ottla what it prints on a static Kafka 4.4 quorum,
    and leaves in the metadata log the records Kafka's leader writes (kafka-dump-log);
    then Kafka's kafka-metadata-quorum adds a controller and removes one, and every
    controller restarted finds kraft.version 1 and the voters in its log."""
    from tests.helpers import KRaftCluster
    from tests.kafka_ref.cluster import KafkaCluster, run_tool

    kafka = KafkaCluster(tmp_path / "kafka", controllers=1, brokers=0, combined=True,
                         static_quorum=True)
    with kafka:
        expected = upgrade_story(kafka.bootstrap, kafka.bootstrap_controller)
    kafka_records = upgrade_records(tmp_path / "kafka")
    assert re.search(r"FinalizedVersionLevel: 0\s", expected[0]), expected
    assert expected[1] == "kraft.version was upgraded to 1."
    assert expected[4:] == ["exit 1", (
        "Could not downgrade kraft.version to 0. The update failed for all features since "
        "the following feature had an error: Invalid update version 0 for feature "
        "kraft.version. Can't downgrade the version of this feature.")]

    (tmp_path / "ottla").mkdir()
    cluster = KRaftCluster(str(tmp_path / "ottla"), controllers=3, brokers=1)
    fourth = Node(tmp_path, 4, "controller", f"127.0.0.1:{cluster.nodes[1].controller_port}")
    controllers = [cluster.nodes[i] for i in cluster.controller_ids]
    try:
        cluster.start()
        cluster.leader()
        # The leader upgrades only once every voter told it about itself in its epoch
        # (UpdateRaftVoter, a fetch timeout after following it): as on Kafka, until then
        # a dry run is refused.
        def dry_run_accepted() -> bool:
            with WireClient(cluster.bootstrap, timeout=5) as client:
                response = client.request(ApiKey.UPDATE_FEATURES, 1, {
                    "timeout_ms": 5000, "validate_only": True, "feature_updates": [{
                        "feature": "kraft.version", "max_version_level": 1,
                        "upgrade_type": 1}]})
            return response.error_code == 0 and \
                all(r.error_code == 0 for r in response.results)
        wait_until(dry_run_accepted, 30, 0.2, "every voter heard from by the leader")
        assert upgrade_story(cluster.bootstrap, ",".join(
            f"127.0.0.1:{n.controller_port}" for n in controllers)) == expected
        first = f"127.0.0.1:{cluster.nodes[1].controller_port}"
        _, voters, _ = quorum(first)
        assert set(voters) == {1, 2, 3} and all(voters.values())  # directory ids known

        # A new controller joins as an observer and is added; controller 3 is removed.
        fourth.format(cluster.cluster_id, "--no-initial-controllers")
        fourth.process.start()
        wait_until(lambda: 4 in quorum(first)[2], 30, 0.2, "controller 4 as an observer")
        added = run_tool("kafka-metadata-quorum", "--bootstrap-controller", first,
                         "--command-config", str(fourth.config), "add-controller")
        assert added.returncode == 0, added.stdout + added.stderr
        assert added.stdout.strip().endswith(
            f"Added controller 4 with directory id {fourth.directory_id()} and endpoints: "
            f"CONTROLLER://127.0.0.1:{fourth.controller_port}")
        removed = run_tool("kafka-metadata-quorum", "--bootstrap-controller", first,
                           "remove-controller", "--controller-id", "3",
                           "--controller-directory-id", voters[3])
        assert removed.returncode == 0, removed.stdout + removed.stderr
        expected_voters = {1: voters[1], 2: voters[2], 4: fourth.directory_id()}
        assert quorum(first)[1] == expected_voters

        # Every remaining controller stops; restarted, each reads the voters and
        # kraft.version 1 from its own log (controller.quorum.voters still names 1-3).
        remaining = [cluster.nodes[1], cluster.nodes[2], fourth.process]
        stop_all([*remaining, cluster.nodes[3]], check=False)
        for node in remaining:
            node.start(wait=False)
        for node in remaining:
            node.wait_ready(60)
        for probe in (first, fourth.address):
            wait_until(lambda probe=probe: quorum(probe)[0] in (1, 2, 4) and
                       quorum(probe)[1] == expected_voters, 30, 0.2,
                       "the voters after the restart")
        # On disk as Kafka writes the upgrade: its KRaftVersion record, then the voters.
        ottla_records = upgrade_records(tmp_path / "ottla" / "controller-1")
        assert len(kafka_records) == 2 and ottla_records[0] == kafka_records[0]
        kafka_voter = voters_of(kafka_records[1])[0]
        assert voters_of(ottla_records[1]) == [
            {**kafka_voter, "voterId": v, "voterDirectoryId": voters[v], "endpoints": [{
                "name": "CONTROLLER", "host": "127.0.0.1",
                "port": cluster.nodes[v].controller_port}]} for v in (1, 2, 3)]
        described = run_tool("kafka-features", "--bootstrap-controller", first, "describe")
        assert re.search(r"FinalizedVersionLevel: 1\s", kraft_version_line(described))
    finally:
        stop_all([*cluster.nodes.values(), fourth.process], check=False)
