"""How the broker role reaches the active controller (Kafka's NodeToControllerChannelManager
as the broker sees it): its own requests, clients' requests forwarded whole, and the
topic creation the broker asks for itself (auto-creation, internal topics)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from ottla.common.principal import Principal
from ottla.common.topics import NewTopic
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import RequestContext

CREATE_TOPICS_VERSION = 7
CREATE_TOPICS_TIMEOUT_MS = 30_000


class ControllerClient(Protocol):
    """What a broker needs of the active controller, wherever it runs (the node's
    ``server.controller_channel.ControllerChannel`` provides it): ``call`` sends the
    broker's own request, ``forward`` a client's, whole. Bodies and responses are the
    request schema's kio objects."""

    def call(self, api_key: int, version: int, body: Any, timeout: float = ...,
             client_id: str | None = ..., principal: Principal | None = ...,
             client_host: str | None = ...) -> Awaitable[Any]: ...

    def forward(self, ctx: RequestContext, request: Any, timeout: float = ...
                ) -> Awaitable[Any]: ...


async def create_topics(controller: ControllerClient, topics: list[NewTopic],
                        on_behalf_of: RequestContext | None = None) -> dict[str, ErrorCode]:
    """Ask the active controller to create topics the broker needs itself (or a client
    wants created, ``on_behalf_of`` its request: the controller authorizes the creation
    as that client); the error per topic name. A partition count or replication factor
    of -1 takes the controller's defaults, as a client's CreateTopics does."""
    client = {} if on_behalf_of is None else {
        "principal": on_behalf_of.principal, "client_host": on_behalf_of.client_host}
    response = await controller.call(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, {
        "topics": [{"name": t.name, "num_partitions": t.num_partitions,
                    "replication_factor": t.replication_factor, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()]}
                   for t in topics],
        "timeout": CREATE_TOPICS_TIMEOUT_MS, "validate_only": False}, **client)
    return {t.name: ErrorCode(t.error_code) for t in response.topics}
