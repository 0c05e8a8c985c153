"""The metadata image: snapshots as records, and reverting uncommitted records."""

from __future__ import annotations

import random
import uuid

from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.timeline import SnapshotRegistry


def busy_controller(seed: int = 7) -> QuorumController:
    """A controller whose image has brokers (one fenced), topics, configs, producer ids."""
    c = QuorumController(1, rng=random.Random(seed))

    def apply(result):
        for record in result.records:
            c.replay(record)
        return result.response

    for b in (1, 2, 3):
        apply(c.cluster.register_broker(
            b, uuid.UUID(int=b), [("PLAINTEXT", "h", 9000 + b, 0)], f"rack{b % 2}", b * 10))
    apply(c.replication.create_topics([NewTopic("a", 3, 2, configs={"retention.ms": "1000"}),
                           NewTopic("b", assignments={0: [2], 1: [3]})]))
    apply(c.configuration.incremental_alter_configs([(ConfigResourceType.BROKER, "", [
        ("log.retention.bytes", 0, "5")])]))
    apply(c.producer_ids.allocate_producer_ids(1, 10))
    apply(c.cluster.fence_stale_brokers(0, 1, frozenset()))  # records first contact
    c.replay(r.FenceBrokerRecord(id=3, epoch=30))
    apply(c.features.update_features([("metadata.version", 21, 1)]))
    return c


def test_an_image_replayed_from_its_snapshot_records_is_equal() -> None:
    image = busy_controller().image
    copy = MetadataImage()
    for record in decode_snapshot(encode_snapshot(image.to_records(), 1, batch_size=3)).records:
        copy.replay(record)
    assert copy.digest() == image.digest()
    assert copy.brokers == image.brokers and copy.configs == image.configs
    assert {t.name: dict(t.partitions) for t in copy.topics_by_id.values()} == \
        {t.name: dict(t.partitions) for t in image.topics_by_id.values()}
    assert (copy.next_producer_id, dict(copy.features)) == (1000, {"metadata.version": 21})


def test_a_timeline_image_reverts_to_a_snapshot_epoch() -> None:
    plain = busy_controller().image
    registry = SnapshotRegistry()
    image = MetadataImage(registry)
    for offset, record in enumerate(plain.to_records()):
        image.replay(record, offset)
    before, at = image.digest(), image.offset
    registry.get_or_create_snapshot(at + 1)
    topic = image.topics_by_name["a"]
    image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=-1,
                                         isr=(3,)), at + 1)
    image.replay(r.RemoveTopicRecord(topic_id=image.topics_by_name["b"].topic_id), at + 2)
    image.replay(r.ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name="a",
                                name="retention.ms", value=None), at + 3)
    image.replay(r.UnfenceBrokerRecord(id=3, epoch=30), at + 4)
    image.replay(r.ProducerIdsRecord(broker_id=1, next_producer_id=5000), at + 5)
    assert image.digest() != before
    registry.revert_to_snapshot(at + 1)
    assert image.digest() == before and image.offset == at
    assert image.topics_by_name["a"].partitions[0] == plain.topics_by_name["a"].partitions[0]
