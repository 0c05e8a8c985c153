"""The replica manager opens new logs a slice of time at a time once asked to, and each
later call follows the image as it is then."""

from __future__ import annotations

import os
import uuid

import pytest

from ottla.broker.replica_manager import ReplicaManager
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import LogManager

BROKER = 1


def create_topic(image: MetadataImage, name: str, partitions: int) -> uuid.UUID:
    topic_id = uuid.uuid4()
    image.replay(r.TopicRecord(name=name, topic_id=topic_id))
    for index in range(partitions):
        image.replay(r.PartitionRecord(partition_id=index, topic_id=topic_id,
                                       replicas=(BROKER,), isr=(BROKER,), leader=BROKER,
                                       leader_epoch=0, partition_epoch=0))
    return topic_id


def manager(tmp_path) -> ReplicaManager:
    logs = LogManager([str(tmp_path / "logs")], now_ms=0)
    logs.discover()
    logs.started()
    return ReplicaManager(BROKER, logs, lambda image: {})


def test_without_a_budget_every_log_opens_at_once(tmp_path) -> None:
    image = MetadataImage()
    create_topic(image, "t", 20)
    replicas = manager(tmp_path)
    assert replicas.apply_metadata(image, 0) is False
    assert len(replicas.partitions) == 20


def test_a_budget_opens_at_least_one_log_per_call_until_all_are_open(tmp_path) -> None:
    image = MetadataImage()
    create_topic(image, "t", 5)
    replicas = manager(tmp_path)
    opened = []
    while replicas.apply_metadata(image, 0, budget_s=0):
        opened.append(len(replicas.partitions))
    assert opened == [1, 2, 3, 4] and len(replicas.partitions) == 5
    assert {f"t-{i}" for i in range(5)} <= set(os.listdir(tmp_path / "logs"))


def test_a_partition_not_yet_open_answers_not_leader_and_later_calls_follow_the_image(
        tmp_path) -> None:
    image = MetadataImage()
    doomed = create_topic(image, "doomed", 3)
    replicas = manager(tmp_path)
    assert replicas.apply_metadata(image, 0, budget_s=0) is True
    assert ("doomed", 0) in replicas.partitions
    with pytest.raises(KafkaError) as raised:
        replicas.require("doomed", 2, image)
    assert raised.value.code == ErrorCode.not_leader_or_follower  # retriable, as in Kafka
    # Deleted before its other logs were opened, then created again with one partition.
    image.replay(r.RemoveTopicRecord(topic_id=doomed))
    again = create_topic(image, "doomed", 1)
    create_topic(image, "other", 2)
    while replicas.apply_metadata(image, 0, budget_s=0):
        pass
    assert set(replicas.partitions) == {("doomed", 0), ("other", 0), ("other", 1)}
    assert replicas.partitions[("doomed", 0)].topic_id == again
    assert not os.path.exists(tmp_path / "logs" / "doomed-1")
