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
            b, uuid.UUID(int=b), [("PLAINTEXT", "h", 9000 + b, 0)], f"rack{b % 2}", b * 10,
            features=[("metadata.version", 7, 25), ("share.version", 0, 2)]))
    apply(c.replication.create_topics([NewTopic("a", 3, 2, configs={"retention.ms": "1000"}),
                           NewTopic("b", assignments={0: [2], 1: [3]})]))
    apply(c.configuration.incremental_alter_configs([(ConfigResourceType.BROKER, "", [
        ("log.retention.bytes", 0, "5")])]))
    apply(c.producer_ids.allocate_producer_ids(1, 10))
    apply(c.cluster.fence_stale_brokers(0, 1, frozenset()))  # records first contact
    c.replay(r.FenceBrokerRecord(id=3, epoch=30))
    apply(c.features.update_features([("metadata.version", 21, 1)]))
    for controller in (3001, 3000):
        apply(c.cluster.register_controller(
            controller, uuid.UUID(int=controller), [("CONTROLLER", "h", controller, 0),
                                                    ("CONTROLLER2", "h", controller + 1, 1)],
            [("metadata.version", 7, 25)]))
    return c


def test_an_image_replayed_from_its_snapshot_records_is_equal() -> None:
    image = busy_controller().image
    copy = MetadataImage()
    for record in decode_snapshot(encode_snapshot(image.to_records(), 1, batch_size=3)).records:
        copy.replay(record)
    assert copy.digest() == image.digest()
    assert copy.brokers == image.brokers and copy.configs == image.configs
    assert copy.brokers[1].features == {"metadata.version": (7, 25), "share.version": (0, 2)}
    assert copy.controllers == image.controllers and sorted(copy.controllers) == [3000, 3001]
    assert list(copy.controllers[3000].endpoints) == ["CONTROLLER", "CONTROLLER2"]
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


KAFKA_REGISTER_CONTROLLER = bytes.fromhex(
    "011b00" "00000bb8" "0102030405060708090a0b0c0d0e0f10" "00"
    "02" "0b434f4e54524f4c4c4552" "0a3132372e302e302e31" "9c40" "0003" "00"
    "02" "116d657461646174612e76657273696f6e" "0007" "0019" "00" "00")
"""A RegisterControllerRecord v0 as Kafka 4.4's MetadataRecordSerde writes it (controller
3000, CONTROLLER://127.0.0.1:40000 over SASL_SSL, metadata.version 7-25)."""


def test_a_controller_registration_has_kafkas_layout() -> None:
    record = r.RegisterControllerRecord(
        controller_id=3000, incarnation_id=uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10"),
        end_points=(r.BrokerEndpoint(name="CONTROLLER", host="127.0.0.1", port=40000,
                                     security_protocol=3),),
        features=(r.BrokerFeature(name="metadata.version", min_supported_version=7,
                                  max_supported_version=25),))
    # Past the frame version (Kafka's is 1, Ottla's metadata log writes 0 for every type).
    assert r.encode(record)[1:] == KAFKA_REGISTER_CONTROLLER[1:]
    assert r.decode(bytes([r.FRAME_VERSION]) + KAFKA_REGISTER_CONTROLLER[1:]) == record
