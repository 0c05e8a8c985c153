"""KIP-951: a Produce or Fetch sent to a broker that does not lead the partition names
the current leader, its epoch and its endpoint, so the client retries there at once."""

from __future__ import annotations

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.unit.test_broker_handlers import (  # noqa: F401 - the fixture
    OTHER,
    ask,
    batch,
    broker,
    create_topic,
    fetch_body,
    partition_answer,
    produce_body,
    register_broker,
)

OTHER_PORT = 9093


async def test_produce_to_a_follower_names_the_leader_and_its_endpoint(broker) -> None:  # noqa: F811
    register_broker(broker.image, OTHER, OTHER_PORT)
    create_topic(broker, "orders", leader=OTHER)
    response = await ask(broker, ApiKey.PRODUCE, 11, produce_body("orders", (0, batch(b"a"))))
    answer = partition_answer(response)
    assert answer.error_code == ErrorCode.not_leader_or_follower
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (OTHER, 0)
    assert [(n.node_id, n.host, n.port) for n in response.node_endpoints] == \
        [(OTHER, "127.0.0.1", OTHER_PORT)]


async def test_a_fetch_from_a_follower_names_the_leader_and_its_endpoint(broker) -> None:  # noqa: F811
    register_broker(broker.image, OTHER, OTHER_PORT)
    topic_id = create_topic(broker, "orders", leader=OTHER)
    body = fetch_body("orders", (0, 0, 1024))
    body["topics"][0]["topic_id"] = topic_id
    response = await ask(broker, ApiKey.FETCH, 16, body)
    (p,) = response.responses[0].partitions
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (OTHER, 0)
    assert [(n.node_id, n.port) for n in response.node_endpoints] == [(OTHER, OTHER_PORT)]


async def test_a_successful_produce_carries_no_endpoints(broker) -> None:  # noqa: F811
    create_topic(broker, "orders")
    response = await ask(broker, ApiKey.PRODUCE, 11, produce_body("orders", (0, batch(b"a"))))
    assert partition_answer(response).error_code == ErrorCode.none
    assert list(response.node_endpoints) == []
