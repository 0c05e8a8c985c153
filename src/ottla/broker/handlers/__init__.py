"""The broker side of a node (Kafka's KafkaApis): what its broker listeners serve, one
module per group of Kafka APIs. Each module lists its APIs (``APIS``); ``broker_apis``
puts them together. Requests that change metadata are forwarded to the controller
(``forwarding``)."""

from __future__ import annotations

from ottla.broker.broker import Broker
from ottla.broker.handlers import (
    acls,
    client_quotas,
    configs,
    delegation_tokens,
    fetch,
    forwarding,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    produce,
    producer,
    scram,
    share,
    share_offsets,
    share_state,
    telemetry,
    transaction_admin,
    transactions,
)
from ottla.protocol.requests import ApiSpec


def broker_apis() -> list[ApiSpec[Broker]]:
    """Every API a broker listener serves, but ApiVersions (``server.apis``)."""
    return [*produce.APIS, *fetch.APIS, *list_offsets.APIS, *log_dirs.APIS, *metadata.APIS,
            *groups.APIS, *producer.APIS, *transactions.APIS, *transaction_admin.APIS, *share.APIS,
            *share_offsets.APIS, *share_state.APIS, *configs.APIS, *scram.APIS, *acls.APIS,
            *client_quotas.APIS, *telemetry.APIS, *delegation_tokens.APIS,
            *forwarding.APIS]
