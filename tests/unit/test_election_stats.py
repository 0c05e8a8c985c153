"""Kafka's ``kafka.controller:type=ControllerStats`` election meters, counted as its
controllers count them from the committed records they apply (TopicDelta's election
stats): a change that makes the leader recover its log (KIP-704's RECOVERING) is an
unclean election, one whose leader was in the partition's ELR (KIP-966) an election
from the ELR; an ordinary leader change is neither."""

from __future__ import annotations

import uuid

from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.server.metrics.controller_collector import KafkaControllerCollector
from tests.unit.test_metrics import Driver, scrape, value

TOPIC_ID = uuid.UUID(int=7)


def loaded() -> MetadataLoader:
    loader = MetadataLoader(MetadataImage())
    loader.apply(r.TopicRecord(name="t", topic_id=TOPIC_ID), 0)
    loader.apply(r.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2, 3),
                                   isr=(1, 2, 3), leader=1), 1)
    return loader


def test_unclean_and_elr_elections_are_counted_from_the_committed_changes() -> None:
    loader = loaded()
    loader.apply(r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2,
                                         isr=(2, 3)), 2)
    assert (loader.unclean_elections, loader.elr_elections) == (0, 0)  # a clean one
    loader.apply(r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=-1,
                                         isr=(), eligible_leader_replicas=(3,)), 3)
    loader.apply(r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=3,
                                         isr=(3,), eligible_leader_replicas=()), 4)
    assert (loader.unclean_elections, loader.elr_elections) == (0, 1)
    loader.apply(r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=-1,
                                         isr=()), 5)
    loader.apply(r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1,
                                         isr=(1,), leader_recovery_state=1), 6)
    assert (loader.unclean_elections, loader.elr_elections) == (1, 1)
    # A change held in a metadata transaction counts when the transaction ends.
    loader.apply(r.BeginTransactionRecord(name="x"), 7)
    loader.apply(r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2,
                                         isr=(2,), leader_recovery_state=1), 8)
    assert loader.unclean_elections == 1
    loader.apply(r.EndTransactionRecord(), 9)
    assert loader.unclean_elections == 2

    samples = scrape(KafkaControllerCollector(Driver(True), loader.image, loader))  # type: ignore[arg-type]
    stats = "kafka_controller_controllerstats_{}_total".format
    assert value(samples, stats("uncleanleaderelections")) == 2
    assert value(samples, stats("electionfromeligibleleaderreplicas")) == 1
