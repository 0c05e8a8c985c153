"""A QuorumController with registered brokers, for the control managers' tests."""

from __future__ import annotations

import random
import uuid

from ottla.common.features import SUPPORTED_FEATURES
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r


def controller(brokers: int = 1) -> QuorumController:
    c = QuorumController(1, default_num_partitions=2, rng=random.Random(7))
    for b in range(1, brokers + 1):
        apply(c, c.cluster.register_broker(
            b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None, b,
            features=[(n, low, high) for n, (low, high) in SUPPORTED_FEATURES.items()]).records)
    return c


def apply(c: QuorumController, records: list) -> None:
    for rec in records:
        c.replay(r.decode(r.encode(rec)))  # also proves every record round-trips
