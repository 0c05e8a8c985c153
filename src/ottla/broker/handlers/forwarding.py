"""Requests a broker forwards whole to the active controller (KIP-590): every client
request that changes metadata, and DescribeQuorum, which only the quorum's leader can
answer. The controller's answer goes back to the client as it came; an error the
controller gave the envelope itself becomes the error of everything the request named."""

from __future__ import annotations

from typing import Any

from ottla.broker.broker import Broker
from ottla.protocol.api import ApiKey
from ottla.protocol.requests import ApiSpec, RequestContext


async def forward(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return await broker.controller.forward(ctx, req)


FORWARDED = [(ApiKey.CREATE_TOPICS, 2, 7), (ApiKey.DELETE_TOPICS, 1, 6),
             (ApiKey.CREATE_PARTITIONS, 0, 3), (ApiKey.ELECT_LEADERS, 0, 2),
             (ApiKey.ALTER_CONFIGS, 0, 2), (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
             (ApiKey.UPDATE_FEATURES, 0, 1), (ApiKey.DESCRIBE_QUORUM, 0, 2),
             (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1),
             (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0),
             (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0),
             (ApiKey.CREATE_ACLS, 1, 3), (ApiKey.DELETE_ACLS, 1, 3)]
"""(api key, min version, max version): the controller serves the same versions."""

APIS: list[ApiSpec[Broker]] = [ApiSpec(key, low, high, forward) for key, low, high in FORWARDED]
