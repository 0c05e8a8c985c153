"""The QuorumController as a whole: what its managers write replays to the same image."""

from __future__ import annotations

import random
import uuid

from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from tests.controllers import apply


def test_replay_from_records_rebuilds_the_same_image() -> None:
    c = QuorumController(1, rng=random.Random(3))
    written: list = []
    ops = [lambda: c.cluster.register_broker(1, uuid.uuid4(), [("PLAINTEXT", "h", 1, 0)],
                                             None, 0),
           lambda: c.cluster.register_broker(2, uuid.uuid4(), [("PLAINTEXT", "h", 2, 0)],
                                             None, 2),
           lambda: c.replication.create_topics([NewTopic("x", 3, 2), NewTopic("y", 1, 1)]),
           lambda: c.replication.create_partitions([("x", 4, None)]),
           lambda: c.replication.delete_topics(["y"], [None])]
    for op in ops:
        result = op()
        apply(c, result.records)
        written += result.records
    image = MetadataImage()
    for rec in written:
        image.replay(r.decode(r.encode(rec)))
    assert sorted(image.topics_by_name) == ["x"]
    assert image.topics_by_name["x"].partitions == c.image.topics_by_name["x"].partitions
    assert sorted(image.brokers) == [1, 2]
