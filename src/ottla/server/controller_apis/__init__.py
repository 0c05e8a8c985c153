"""The controller side of a node (Kafka's ControllerApis): what its controller listener
serves. Brokers forward the client requests that change metadata here (in Envelopes);
brokers register and heartbeat here; the metadata quorum's replicas talk to each other
here."""

from __future__ import annotations

from ottla.protocol.requests import ApiSpec
from ottla.server.controller_apis import (
    acls,
    client_quotas,
    cluster,
    configs,
    delegation_tokens,
    envelope,
    quorum,
    registration,
    scram,
    topics,
)
from ottla.server.controller_apis.services import ControllerServices


def controller_apis() -> list[ApiSpec[ControllerServices]]:
    """Every API the controller listener serves, but ApiVersions (``server.apis``)."""
    return [*registration.APIS, *quorum.APIS, *envelope.APIS, *topics.APIS, *configs.APIS,
            *cluster.APIS, *scram.APIS, *acls.APIS, *client_quotas.APIS,
            *delegation_tokens.APIS]
