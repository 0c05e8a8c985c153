"""Requests from this broker to another over the inter-broker listener (Kafka's
InterBrokerSendThread users: the transaction marker sender, the AddPartitionsToTxn
verification, the share-state persister): one connection per peer, opened on first use
and kept, and a peer that cannot be reached reported as COORDINATOR_NOT_AVAILABLE so the
caller's client retries."""

from __future__ import annotations

from typing import Any

from ottla.broker.context import BrokerContext, Endpoint
from ottla.client.async_client import AsyncClient, NodeUnavailable
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError

LATEST_TIMESTAMP = -1
READ_UNCOMMITTED = 0
LIST_OFFSETS_VERSION = 7
UNKNOWN_TOPIC_OR_PARTITION = "This server does not host this topic-partition."


class InterBrokerClients:
    def __init__(self, broker: BrokerContext, purpose: str) -> None:
        self.broker = broker
        self.purpose = purpose
        self._clients: dict[Endpoint, AsyncClient] = {}

    async def request(self, node_id: int, api_key: int, version: int,
                      body: dict[str, Any], timeout: float = 30.0) -> Any:
        """The response of ``node_id``; KafkaError(COORDINATOR_NOT_AVAILABLE) if the node
        has no endpoint, cannot be reached or does not answer in time."""
        endpoint = self.broker.endpoint_of(node_id)
        if endpoint is None:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             f"Broker {node_id} has no endpoint")
        client = self._clients.get(endpoint)
        if client is None:
            client = self._clients[endpoint] = AsyncClient(
                *endpoint, client_id=f"broker-{self.broker.node_id}-{self.purpose}",
                security=self.broker.inter_broker_security)
        try:
            return await client.request(api_key, version, body, timeout=timeout)
        except (NodeUnavailable, TimeoutError, OSError) as e:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             f"Broker {node_id}: {e}") from e

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


async def latest_offsets(peers: InterBrokerClients, node_id: int,
                         partitions: list[tuple[str, int]], timeout: float = 30.0
                         ) -> dict[tuple[str, int], int | KafkaError]:
    """ListOffsets (latest, read_uncommitted) of partitions ``node_id`` leads: each one's
    high watermark, as Kafka's admin client asks for a lag; the error of a partition that
    broker did not answer for (all of them if it could not be reached)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    try:
        response = await peers.request(node_id, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": -1, "isolation_level": READ_UNCOMMITTED, "topics": [
                {"name": topic, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1,
                     "timestamp": LATEST_TIMESTAMP} for p in indexes]}
                for topic, indexes in by_topic.items()]}, timeout=timeout)
    except KafkaError as e:
        return dict.fromkeys(partitions, e)
    ends: dict[tuple[str, int], int | KafkaError] = {
        tp: KafkaError(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION)
        for tp in partitions}
    for topic in response.topics:
        for p in topic.partitions:
            ends[(topic.name, p.partition_index)] = p.offset if p.error_code == 0 else \
                KafkaError(ErrorCode(p.error_code))
    return ends
