"""DescribeTopicPartitions (API 75): topics in name order, partitions paged by a cursor."""

from __future__ import annotations

from typing import Any

import pytest

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from tests.unit.test_broker_handlers import (  # noqa: F401 - the fixture
    OTHER,
    ask,
    broker,
    create_topic,
    handle,
)


def body(*names: str, limit: int = 2000, cursor: tuple[str, int] | None = None
         ) -> dict[str, Any]:
    return {"topics": [{"name": n} for n in names], "response_partition_limit": limit,
            "cursor": None if cursor is None else {"topic_name": cursor[0],
                                                   "partition_index": cursor[1]}}


def pages(response: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


async def test_every_topic_in_name_order_with_replicas_and_isr(broker) -> None:  # noqa: F811
    create_topic(broker, "b-topic", partitions=2)
    create_topic(broker, "a-topic", partitions=1)
    response = await ask(broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body())
    assert pages(response) == [("a-topic", [0]), ("b-topic", [0, 1])]
    assert response.next_cursor is None
    (p,) = response.topics[0].partitions
    assert (p.error_code, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == \
        (ErrorCode.none, 1, [1], [1])
    assert list(p.eligible_leader_replicas) == [] and list(p.last_known_elr) == []


async def test_a_partition_limit_pages_through_topics_with_a_cursor(broker) -> None:  # noqa: F811
    create_topic(broker, "a", partitions=2)
    create_topic(broker, "b", partitions=3)
    first = await ask(broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body("a", "b", limit=3))
    assert pages(first) == [("a", [0, 1]), ("b", [0])]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("b", 1)
    second = await ask(broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0,
                       body("a", "b", limit=3, cursor=("b", 1)))
    assert pages(second) == [("b", [1, 2])] and second.next_cursor is None


async def test_an_unknown_topic_is_reported_with_its_error(broker) -> None:  # noqa: F811
    create_topic(broker, "known")
    response = await ask(broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body("known", "nope"))
    assert [(t.name, t.error_code) for t in response.topics] == \
        [("known", ErrorCode.none), ("nope", ErrorCode.unknown_topic_or_partition)]


def test_a_cursor_outside_the_topics_asked_for_is_an_invalid_request(broker) -> None:  # noqa: F811
    create_topic(broker, "a")
    with pytest.raises(KafkaError) as refused:
        handle(broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body("a", cursor=("z", 0)))
    assert refused.value.code == ErrorCode.invalid_request


async def test_a_leader_without_an_endpoint_is_reported_unavailable(broker) -> None:  # noqa: F811
    create_topic(broker, "elsewhere", leader=OTHER)  # OTHER is not registered
    response = await ask(broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body("elsewhere"))
    (p,) = response.topics[0].partitions
    assert (p.error_code, p.leader_id) == (ErrorCode.leader_not_available, -1)


async def test_eligible_leader_replicas_are_reported(broker) -> None:  # noqa: F811
    from ottla.metadata import records as r

    topic_id = create_topic(broker, "shrunk", replicas=(1, OTHER))
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=(1,),
                                                eligible_leader_replicas=(OTHER,)))
    response = await ask(broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body("shrunk"))
    (p,) = response.topics[0].partitions
    assert (list(p.isr_nodes), list(p.eligible_leader_replicas)) == ([1], [OTHER])
