"""Apache Kafka 4.4 as 1 controller and 3 brokers, described by Kafka's own tools and by
confluent-kafka: the shape of cluster that Ottla's replication tests compare against."""

from __future__ import annotations

import re

from confluent_kafka.admin import AdminClient

from tests.kafka_ref.cluster import KafkaCluster, run_tool


def test_one_controller_three_brokers_replicate_a_topic_three_ways(
        kafka_cluster: KafkaCluster) -> None:
    assert kafka_cluster.broker_ids == [101, 102, 103]
    assert kafka_cluster.controller_ids == [1]
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    described = admin.describe_cluster(request_timeout=30).result(30)
    assert sorted(node.id for node in described.nodes) == [101, 102, 103]
    assert described.cluster_id == kafka_cluster.cluster_id

    quorum = run_tool("kafka-metadata-quorum", "--bootstrap-controller",
                      kafka_cluster.bootstrap_controller, "describe", "--status",
                      check=True).stdout
    assert re.search(r"LeaderId:\s*1\b", quorum), quorum
    assert re.search(r'CurrentVoters:\s*\[\{"id":\s*1\b', quorum), quorum
    assert all(f'"id": {b}' in quorum for b in kafka_cluster.broker_ids), quorum  # observers

    bootstrap = kafka_cluster.bootstrap
    run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic",
             "replicated", "--partitions", "3", "--replication-factor", "3", check=True)
    topic = run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe",
                     "--topic", "replicated", check=True).stdout
    assert re.search(r"ReplicationFactor:\s*3\b", topic), topic
    partitions = re.findall(r"Partition:\s*(\d+)\s+Leader:\s*(\d+)\s+Replicas:\s*([\d,]+)"
                            r"\s+Isr:\s*([\d,]+)", topic)
    assert len(partitions) == 3, topic
    for _, leader, replicas, isr in partitions:
        assert sorted(map(int, replicas.split(","))) == [101, 102, 103], topic
        assert sorted(map(int, isr.split(","))) == [101, 102, 103], topic
        assert int(leader) in (101, 102, 103)

    metadata = admin.list_topics("replicated", timeout=30)
    assert {p: sorted(m.replicas) for p, m in metadata.topics["replicated"].partitions.items()
            } == {p: [101, 102, 103] for p in range(3)}
