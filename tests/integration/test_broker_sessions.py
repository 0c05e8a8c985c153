"""Brokers register with the controller and stay unfenced by heartbeats (KIP-631)."""

from __future__ import annotations

import uuid

from ottla.protocol.api import ApiKey
from tests.helpers import WireClient, format_node, free_port, wait_until


def metadata(node, topic: str):
    with WireClient(node.bootstrap) as client:
        return client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})


def leaders(node, topic: str) -> dict[int, int]:
    return {p.partition_index: p.leader_id for p in metadata(node, topic).topics[0].partitions}


def brokers(node, topic: str) -> set[int]:
    return {b.node_id for b in metadata(node, topic).brokers}


def test_a_silent_broker_is_fenced_and_loses_its_leaderships(make_ottla) -> None:
    # Long enough that the RPCs after the one heartbeat below finish before the fake
    # broker 2 is fenced, even on a slow machine.
    node = make_ottla(**{"broker.session.timeout.ms": "5000"})
    with WireClient(node.bootstrap) as client:
        cluster_id = client.request(ApiKey.DESCRIBE_CLUSTER, 0, {
            "include_cluster_authorized_operations": False}).cluster_id
    controller = WireClient(f"127.0.0.1:{node.controller_port}")

    def register(cluster: str) -> tuple[int, int]:
        r = controller.request(ApiKey.BROKER_REGISTRATION, 4, {
            "broker_id": 2, "cluster_id": cluster, "incarnation_id": uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": free_port(),
                           "security_protocol": 0}],
            "features": [], "rack": None, "is_migrating_zk_broker": False,
            "log_dirs": [uuid.uuid4()], "previous_broker_epoch": -1})
        return r.error_code, r.broker_epoch

    def heartbeat(epoch: int, want_fence: bool = False):
        return controller.request(ApiKey.BROKER_HEARTBEAT, 1, {
            "broker_id": 2, "broker_epoch": epoch, "current_metadata_offset": 1 << 40,
            "want_fence": want_fence, "want_shut_down": False, "offline_log_dirs": []})

    with controller:
        assert register("not-this-cluster")[0] == 104  # INCONSISTENT_CLUSTER_ID
        error, epoch = register(cluster_id)
        assert error == 0 and epoch > 0
        assert 2 not in brokers(node, "")  # registered fenced
        assert heartbeat(epoch - 1).error_code == 77  # STALE_BROKER_EPOCH
        reply = heartbeat(epoch)
        assert reply.error_code == 0 and reply.is_caught_up and not reply.is_fenced
        assert 2 in brokers(node, "")

        with WireClient(node.bootstrap) as client:
            created = client.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
                "name": "placed", "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [2]},
                                {"partition_index": 1, "broker_ids": [1]}],
                "configs": []}], "timeout": 10000, "validate_only": False})
        assert created.topics[0].error_code == 0
        assert leaders(node, "placed") == {0: 2, 1: 1}

        # Broker 2 goes quiet: fenced within about the session timeout.
        wait_until(lambda: leaders(node, "placed") == {0: -1, 1: 1}, timeout=30,
                   message="partition 0 to lose its fenced leader")
        assert 2 not in brokers(node, "placed")

        # It comes back: unfenced by a heartbeat, and leads its partition again.
        reply = heartbeat(epoch)
        assert reply.error_code == 0 and not reply.is_fenced
        assert leaders(node, "placed") == {0: 2, 1: 1}
        assert heartbeat(epoch, want_fence=True).is_fenced
        assert leaders(node, "placed")[0] == -1


def test_elect_leaders_from_a_real_admin_client(make_ottla) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    node = make_ottla()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("elect", 2, 1)])["elect"].result(30)

    def elect(kind, partitions):
        result = admin.elect_leaders(kind, partitions).result(30)
        return {(tp.topic, tp.partition): (None if err is None else err.code())
                for tp, err in result.items()}

    wanted = [TopicPartition("elect", 0), TopicPartition("elect", 1)]
    assert elect(ElectionType.PREFERRED, wanted) == {("elect", 0): 84, ("elect", 1): 84}
    assert elect(ElectionType.UNCLEAN, wanted[:1]) == {("elect", 0): 84}  # it has a leader
    assert elect(ElectionType.PREFERRED, [TopicPartition("missing", 0)]) == \
        {("missing", 0): 3}
    assert elect(ElectionType.PREFERRED, None) == {}  # nothing needed anywhere


def test_leader_election_tool(ottla) -> None:
    from tests.integration.test_admin import run_cli

    assert run_cli("topics", "--bootstrap-server", ottla.bootstrap, "--create", "--topic",
                   "tool", "--partitions", "2").returncode == 0
    out = run_cli("leader-election", "--bootstrap-server", ottla.bootstrap,
                  "--election-type", "preferred", "--topic", "tool")
    assert out.returncode == 0, out.stderr
    assert "Valid replica already elected for partitions tool-0, tool-1" in out.stdout
    everything = run_cli("leader-election", "--bootstrap-server", ottla.bootstrap,
                         "--election-type", "UNCLEAN", "--all-topic-partitions")
    assert everything.returncode == 0 and "No partitions needed" in everything.stdout
    missing = run_cli("leader-election", "--bootstrap-server", ottla.bootstrap,
                      "--election-type", "PREFERRED", "--topic", "gone", "--partition", "0")
    assert missing.returncode == 1 and "Error completing leader election" in missing.stdout


def test_a_leader_changes_its_isr_with_alter_partition(make_ottla) -> None:
    node = make_ottla()
    with WireClient(node.bootstrap) as client:
        cluster_id = client.request(ApiKey.DESCRIBE_CLUSTER, 0, {
            "include_cluster_authorized_operations": False}).cluster_id
    with WireClient(f"127.0.0.1:{node.controller_port}") as controller:
        epoch = controller.request(ApiKey.BROKER_REGISTRATION, 4, {
            "broker_id": 2, "cluster_id": cluster_id, "incarnation_id": uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": free_port(),
                           "security_protocol": 0}],
            "features": [], "rack": None, "is_migrating_zk_broker": False,
            "log_dirs": [uuid.uuid4()], "previous_broker_epoch": -1}).broker_epoch
        assert not controller.request(ApiKey.BROKER_HEARTBEAT, 1, {
            "broker_id": 2, "broker_epoch": epoch, "current_metadata_offset": 1 << 40,
            "want_fence": False, "want_shut_down": False, "offline_log_dirs": []}).is_fenced
        with WireClient(node.bootstrap) as client:
            created = client.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
                "name": "isr", "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [2, 1]}],
                "configs": []}], "timeout": 10000, "validate_only": False})
        topic_id = created.topics[0].topic_id
        part = metadata(node, "isr").topics[0].partitions[0]
        assert (part.leader_id, list(part.isr_nodes)) == (2, [2, 1])

        def alter(isr, partition_epoch):
            return controller.request(ApiKey.ALTER_PARTITION, 3, {
                "broker_id": 2, "broker_epoch": epoch, "topics": [{
                    "topic_id": topic_id, "partitions": [{
                        "partition_index": 0, "leader_epoch": part.leader_epoch,
                        "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1}
                                                for b in isr],
                        "leader_recovery_state": 0, "partition_epoch": partition_epoch}]}]})

        shrunk = alter([2], 0).topics[0].partitions[0]
        assert shrunk.error_code == 0 and list(shrunk.isr) == [2]
        assert shrunk.partition_epoch == 1
        assert list(metadata(node, "isr").topics[0].partitions[0].isr_nodes) == [2]
        assert alter([2, 1], 0).topics[0].partitions[0].error_code == 95  # stale version
        grown = alter([2, 1], 1).topics[0].partitions[0]
        assert grown.error_code == 0 and list(grown.isr) == [2, 1]


def test_update_features_raises_metadata_version_and_downgrades_it_only_safely(
        tmp_path) -> None:
    import sys

    from tests.helpers import OttlaProcess
    from tests.integration.test_admin import run_cli
    from tests.integration.test_cli import _server_properties

    # Start at 3.9 (level 21) from a formatted directory, then upgrade to 4.0-IV3 (25).
    data = tmp_path / "features"
    config, port = _server_properties(tmp_path, data, 1, voters=True)
    cluster = run_cli("storage", "random-uuid").stdout.strip()
    assert run_cli("storage", "format", "-t", cluster, "-c", config, "-r", "3.9"
                   ).returncode == 0
    node = OttlaProcess(str(data), port=port)
    node.args = lambda: [sys.executable, "-m", "ottla", "server", config]  # type: ignore
    node.start()
    try:
        def finalized() -> int:
            with WireClient(node.bootstrap) as c:
                v = c.api_versions()
            return {f.name: f.max_version_level
                    for f in v.finalized_features}["metadata.version"]

        def update(level: int, kind: int, validate_only: bool = False):
            with WireClient(node.bootstrap) as c:
                return c.request(ApiKey.UPDATE_FEATURES, 1, {
                    "timeout": 10000, "validate_only": validate_only, "feature_updates": [
                        {"feature": "metadata.version", "max_version_level": level,
                         "upgrade_type": kind}]})

        def refusal(level: int, kind: int) -> str:
            """What a refused update says: Kafka's top-level error, no results."""
            response = update(level, kind)
            assert response.error_code == 95 and not response.results  # INVALID_UPDATE_VERSION
            prefix = "The update failed for all features since the following feature had " \
                     "an error: "
            assert response.error_message.startswith(prefix)
            return response.error_message[len(prefix):]

        assert finalized() == 21
        assert update(25, 1, validate_only=True).error_code == 0 and finalized() == 21
        assert refusal(99, 1) == ("Invalid update version 99 for feature metadata.version. "
                                  "Local controller 1 only supports versions 7-33")
        # The node's broker registered what it supports: the upgrade passes its check.
        assert update(25, 1).error_code == 0 and finalized() == 25
        assert refusal(21, 1) == (
            "Invalid update version 21 for feature metadata.version. Can't downgrade the "
            "version of this feature without setting the upgrade type to either safe or "
            "unsafe downgrade.")
        assert refusal(21, 2) == (  # across 4.0-IV1, which changed the metadata
            "Unsupported metadata.version downgrade from 25 to 21. Refusing to perform the "
            "requested downgrade because it might delete metadata information.")
        assert finalized() == 25
        # Down to 4.0-IV1 changes no metadata: Kafka's own kafka-features, no --unsafe.
        from tests.kafka_ref.cluster import run_tool
        downgraded = run_tool("kafka-features", "--bootstrap-server", node.bootstrap,
                              "downgrade", "--metadata", "4.0-IV1")
        assert downgraded.returncode == 0, downgraded.stdout + downgraded.stderr
        assert downgraded.stdout.splitlines() == [
            " `metadata` flag is deprecated and may be removed in a future release.",
            "metadata.version was downgraded to 23."]
        wait_until(lambda: finalized() == 23, 10, 0.1, "metadata.version 23 finalized")
    finally:
        assert node.stop() == 0


def test_a_broker_that_cannot_run_a_feature_level_holds_its_upgrade_back(make_ottla) -> None:
    """UpdateFeatures asks every registered broker, fenced or not, as Kafka does: a broker
    of an older release (share.version up to 1) refuses share.version 2 until it
    registers again supporting it. (The cluster starts at 4.0-IV3 with share.version 1,
    which that broker can join.)"""
    node = make_ottla(start=False)
    format_node(node, "4.0-IV3", "--feature", "share.version=1")
    node.start()
    with WireClient(node.bootstrap) as client:
        cluster_id = client.request(ApiKey.DESCRIBE_CLUSTER, 0, {
            "include_cluster_authorized_operations": False}).cluster_id

    def register(share_versions: tuple[int, int]) -> None:
        with WireClient(f"127.0.0.1:{node.controller_port}") as controller:
            reply = controller.request(ApiKey.BROKER_REGISTRATION, 4, {
                "broker_id": 2, "cluster_id": cluster_id, "incarnation_id": uuid.uuid4(),
                "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1",
                               "port": free_port(), "security_protocol": 0}],
                "features": [{"name": "metadata.version", "min_supported_version": 7,
                              "max_supported_version": 25},
                             {"name": "share.version", "min_supported_version":
                              share_versions[0], "max_supported_version": share_versions[1]}],
                "rack": None, "is_migrating_zk_broker": False,
                "log_dirs": [uuid.uuid4()], "previous_broker_epoch": -1})
        assert reply.error_code == 0  # registered fenced: it never heartbeats

    def upgrade() -> tuple[int, str | None]:
        with WireClient(node.bootstrap) as client:
            response = client.request(ApiKey.UPDATE_FEATURES, 1, {
                "timeout": 10000, "validate_only": False, "feature_updates": [
                    {"feature": "share.version", "max_version_level": 2,
                     "upgrade_type": 1}]})
        return response.error_code, response.error_message

    register((0, 1))
    assert upgrade() == (95, "The update failed for all features since the following "
                             "feature had an error: Invalid update version 2 for feature "
                             "share.version. Broker 2 only supports versions 0-1")
    register((0, 2))
    assert upgrade() == (0, None)
