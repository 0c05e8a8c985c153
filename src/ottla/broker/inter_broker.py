"""Requests from this broker to another over the inter-broker listener (Kafka's
InterBrokerSendThread users: the transaction marker sender, the AddPartitionsToTxn
verification, the share-state persister): one connection per peer, opened on first use
and kept, and a peer that cannot be reached reported as COORDINATOR_NOT_AVAILABLE so the
caller's client retries."""

from __future__ import annotations

from typing import Any

from ottla.broker.context import BrokerContext, Endpoint
from ottla.client.async_client import AsyncClient, NodeUnavailable
from ottla.protocol.errors import ErrorCode, KafkaError


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
