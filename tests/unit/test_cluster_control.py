"""Broker registration, heartbeats and fencing (ClusterControlManager)."""

from __future__ import annotations

import random
import uuid

import pytest

from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import ControllerError
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply


def test_heartbeats_unfence_a_caught_up_broker_and_silence_fences_it() -> None:
    c = QuorumController(1, rng=random.Random(1))
    apply(c, c.cluster.register_broker(
        1, uuid.uuid4(), [("PLAINTEXT", "h", 9001, 0)], None, 1, now_ms=0).records)
    result = c.cluster.register_broker(
        2, uuid.uuid4(), [("PLAINTEXT", "h", 9002, 0)], None, 10, now_ms=0, unfence=False)
    apply(c, result.records)
    assert c.image.brokers[2].fenced
    behind = c.cluster.broker_heartbeat(2, 10, metadata_offset=5, want_fence=False,
                                want_shutdown=False, now_ms=100)
    assert behind.records == [] and behind.response.is_fenced
    caught_up = c.cluster.broker_heartbeat(2, 10, 10, False, False, now_ms=200)
    assert not caught_up.response.is_fenced
    apply(c, caught_up.records)
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [2], 1: [1]}),
                              NewTopic("u", assignments={0: [2, 1]})]).records)
    topic = c.image.topics_by_name["t"]

    def shared():  # a partition's registration is replaced, not changed, by a record
        return c.image.topics_by_name["u"].partitions[0]
    assert [topic.partitions[p].leader for p in (0, 1)] == [2, 1]
    assert shared().leader == 2 and shared().isr == [2, 1]

    with pytest.raises(ControllerError) as stale:
        c.cluster.broker_heartbeat(2, 9, 10, False, False, now_ms=300)
    assert stale.value.code == ErrorCode.stale_broker_epoch
    assert c.cluster.fence_stale_brokers(now_ms=5000, session_timeout_ms=9000).records == []
    silent = c.cluster.fence_stale_brokers(now_ms=9201, session_timeout_ms=9000,
                                   exempt=frozenset({1}))
    assert silent.response == [2]
    apply(c, silent.records)
    assert c.image.brokers[2].fenced
    assert topic.partitions[0].leader == -1  # its only replica is fenced
    assert topic.partitions[1].leader == 1
    assert shared().leader == 1 and shared().isr == [1]  # moved to the other ISR member

    back = c.cluster.broker_heartbeat(2, 10, 10, False, False, now_ms=9300)
    apply(c, back.records)
    assert not c.image.brokers[2].fenced and topic.partitions[0].leader == 2
    shutdown = c.cluster.broker_heartbeat(2, 10, 10, False, True, now_ms=9400)
    assert shutdown.response.should_shut_down and shutdown.response.is_fenced
    apply(c, shutdown.records)
    assert topic.partitions[0].leader == -1


def test_brokers_fenced_together_all_leave_every_isr_they_were_in() -> None:
    """Two followers silent at once: one decision for both (one at a time, each against
    the same image, the second change would put the first broker back)."""
    c = QuorumController(1, rng=random.Random(1))
    for broker in (1, 2, 3):
        apply(c, c.cluster.register_broker(
            broker, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + broker, 0)], None, 1,
            now_ms=0).records)
        apply(c, c.cluster.broker_heartbeat(broker, c.image.brokers[broker].epoch, 10**6,
                                            False, False, now_ms=0).records)
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1, 2, 3],
                                                                     1: [2, 3, 1]})]).records)
    fenced = c.cluster.fence_stale_brokers(now_ms=10_000, session_timeout_ms=9000,
                                           exempt=frozenset({1}))
    assert sorted(fenced.response) == [2, 3]
    apply(c, fenced.records)
    partitions = c.image.topics_by_name["t"].partitions
    assert (partitions[0].leader, partitions[0].isr) == (1, [1])
    assert (partitions[1].leader, partitions[1].isr) == (1, [1])


def test_the_next_fencing_is_due_when_the_first_session_runs_out() -> None:
    """As Kafka's BrokerHeartbeatManager: the controller looks again when the oldest
    unfenced broker's session ends, not a polling period later."""
    c = QuorumController(1, rng=random.Random(1))
    assert c.cluster.next_session_expiry_ms(9000) is None  # no broker
    for broker, at in ((1, 0), (2, 500)):
        apply(c, c.cluster.register_broker(
            broker, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + broker, 0)], None, 1,
            now_ms=at).records)
    assert c.cluster.next_session_expiry_ms(9000) == 9000
    c.cluster.broker_heartbeat(1, c.image.brokers[1].epoch, 0, False, False, now_ms=2000)
    assert c.cluster.next_session_expiry_ms(9000) == 9500  # broker 2's session is older
    assert c.cluster.fence_stale_brokers(now_ms=9500, session_timeout_ms=9000).records == []
    fenced = c.cluster.fence_stale_brokers(now_ms=9501, session_timeout_ms=9000)
    assert fenced.response == [2]
    apply(c, fenced.records)
    assert c.cluster.next_session_expiry_ms(9000) == 11000  # a fenced broker has none
