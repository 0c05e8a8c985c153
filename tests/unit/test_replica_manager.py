"""The replica manager opens new logs a slice of time at a time once asked to, and each
later call follows the image as it is then; each commit reaches it as a delta of what
changed, and it acts on that alone."""

from __future__ import annotations

import os
import uuid

import pytest

from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.metadata import records as r
from ottla.metadata.delta import MetadataDelta, local_changes
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
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


def replay(loader: MetadataLoader, *records: object) -> MetadataDelta:
    """Commit records through the broker's loader; the delta they make."""
    for i, record in enumerate(records):
        loader.apply(record, loader.image.offset + 1 + i)
    return loader.take_delta()


def test_a_delta_names_what_changed_and_the_local_changes_say_lead_follow_or_go() -> None:
    loader = MetadataLoader(MetadataImage())
    kept, moved, gone = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    delta = replay(loader, *[rec for topic_id, name in ((kept, "kept"), (moved, "moved"),
                                                        (gone, "gone"))
                             for rec in (r.TopicRecord(name=name, topic_id=topic_id),
                                         r.PartitionRecord(
                                             partition_id=0, topic_id=topic_id,
                                             replicas=(BROKER, 2), isr=(BROKER, 2),
                                             leader=BROKER, leader_epoch=0,
                                             partition_epoch=0))])
    assert delta.partitions == {(kept, 0), (moved, 0), (gone, 0)}
    changes = local_changes(delta, loader.image, BROKER)
    assert set(changes.leaders) == {("kept", 0), ("moved", 0), ("gone", 0)}
    delta = replay(
        loader,
        r.PartitionChangeRecord(partition_id=0, topic_id=kept, leader=2),  # leadership moves
        r.PartitionChangeRecord(partition_id=0, topic_id=moved, replicas=(2, 3), isr=(2, 3),
                                leader=2),  # reassigned away from this broker
        r.RemoveTopicRecord(topic_id=gone),
        r.ConfigRecord(resource_type=2, resource_name="kept", name="retention.ms",
                       value="1000"))
    assert delta.partitions == {(kept, 0), (moved, 0)}
    assert delta.removed_topics == {gone: "gone"} and delta.topic_configs == {"kept"}
    changes = local_changes(delta, loader.image, BROKER)
    assert (set(changes.leaders), set(changes.followers)) == (set(), {("kept", 0)})
    assert changes.followers[("kept", 0)].registration.leader_epoch == 1
    assert changes.deletes == {("moved", 0)} and changes.deleted_topics == {gone: "gone"}
    assert not loader.take_delta().changed


def test_the_replica_manager_follows_deltas_without_diffing_the_image(tmp_path) -> None:
    loader = MetadataLoader(MetadataImage())
    replicas = manager(tmp_path)
    first, second = uuid.uuid4(), uuid.uuid4()
    delta = replay(loader, r.TopicRecord(name="a", topic_id=first),
                   *[r.PartitionRecord(partition_id=i, topic_id=first, replicas=(BROKER,),
                                       isr=(BROKER,), leader=BROKER, leader_epoch=0,
                                       partition_epoch=0) for i in range(2)])
    assert replicas.apply_delta(loader.image, delta, 0) is False
    assert sorted(replicas.partitions) == [("a", 0), ("a", 1)]
    # A partition the delta does not name is left as it is, even if the image disagrees
    # (nothing but a delta or a full pass changes what is hosted).
    loader.image.topics_by_id[first].partitions.pop(1)
    delta = replay(loader, r.PartitionChangeRecord(partition_id=0, topic_id=first,
                                                   leader=-1))
    replicas.apply_delta(loader.image, delta, 0)
    assert sorted(replicas.partitions) == [("a", 0), ("a", 1)]
    assert not replicas.partitions[("a", 0)].is_leader
    # Deleted and created again under the same name within one commit: a new log.
    old_log = replicas.partitions[("a", 0)].log
    delta = replay(loader, r.RemoveTopicRecord(topic_id=first),
                   r.TopicRecord(name="a", topic_id=second),
                   r.PartitionRecord(partition_id=0, topic_id=second, replicas=(BROKER,),
                                     isr=(BROKER,), leader=BROKER, leader_epoch=0,
                                     partition_epoch=0))
    replicas.apply_delta(loader.image, delta, 0)
    assert sorted(replicas.partitions) == [("a", 0)]
    assert replicas.partitions[("a", 0)].topic_id == second
    assert replicas.partitions[("a", 0)].log is not old_log
    delta = replay(loader, r.ConfigRecord(resource_type=2, resource_name="a",
                                          name="retention.ms", value="1234"))
    replicas.apply_delta(loader.image, delta, 0)
    assert replicas.partitions[("a", 0)].log.config["retention.ms"] == 1234
