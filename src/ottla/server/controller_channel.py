"""How a node reaches the active controller, wherever it runs.

Brokers never change metadata themselves. A client's admin request (CreateTopics,
IncrementalAlterConfigs, ...) that reaches a broker listener is forwarded whole to the
active controller inside an Envelope (KIP-590), and the broker's own requests
(BrokerRegistration, BrokerHeartbeat, CreateTopics for auto-creation, AllocateProducerIds)
go the same way. The active controller is the Raft leader this node's replica knows of;
an Envelope answered NOT_CONTROLLER (a leader that has not claimed yet, or lost its
claim) or a controller that cannot be reached is retried, against the leader as the
replica learns it and with a growing backoff, until the request's deadline; any other
error of the envelope (the controller refused the envelope itself: this node lacks
CLUSTER_ACTION, or the inner request could not be read) reaches the client as
UNKNOWN_SERVER_ERROR for all its request names, as Kafka's ForwardingManager answers it:
the fault is the brokers', not the client's. On a node that also runs the controller, the
request still travels over the controller listener: one path, whichever node is active.

A client's request carries the client's principal (``request_principal``, Kafka's
serialized DefaultPrincipalData) and address (``client_host_address``), which the
controller authorizes the inner request with; the node's own requests carry no principal
and are authorized as the node's connection to the controller.

``submit`` is the in-process path the controller listener's handlers use on the active
controller itself.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

from ottla.client.async_client import AsyncClient, NodeUnavailable
from ottla.client.security import ClientSecurity
from ottla.common.backoff import ExponentialBackoff
from ottla.common.principal import Principal, serialize_principal
from ottla.controller.results import ControllerResult, NotControllerError
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.error_response import error_response
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from ottla.protocol.requests import CloseConnection
from ottla.raft.description import QuorumDescription
from ottla.server.controller_driver import ControllerDriver
from ottla.server.raft_driver import RaftDriver

log = logging.getLogger(__name__)

ENVELOPE_VERSION = 0
RETRY_BACKOFF_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0
LOOPBACK = bytes([127, 0, 0, 1])


def address_bytes(host: str | None) -> bytes:
    """An Envelope's ``client_host_address``: the client's IP address as its 4 or 16
    bytes (Java's ``InetAddress.getAddress``); the loopback address for the node's own
    requests."""
    if host is None:
        return LOOPBACK
    try:
        return ipaddress.ip_address(host.partition("%")[0]).packed
    except ValueError:
        return LOOPBACK


class ControllerUnavailable(CloseConnection):
    """No active controller answered before the deadline; the client's connection is
    closed so that it retries."""


class ControllerChannel:
    def __init__(self, node_id: int, raft: RaftDriver, local: ControllerDriver | None,
                 voters: dict[int, tuple[str, int]], describe: Callable[[], QuorumDescription]
                 | None = None, security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.security = security
        """TLS and SASL towards the controllers' listener."""
        self.raft = raft
        self.local = local
        self.voters = voters
        self._describe = describe
        self._clients: dict[int, AsyncClient] = {}
        self._next = itertools.count()
        self._stale: list[AsyncClient] = []  # clients of controllers that moved

    # --- on the controller --------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.local is not None and self.local.is_active

    async def submit(self, op: Callable[[Any], ControllerResult]) -> Any:
        """Run an operation on this node's controller (NotControllerError if it is not
        the active one)."""
        if self.local is None:
            raise NotControllerError("This node does not run a controller")
        return await self.local.submit(op)

    def next_offset(self) -> int:
        if self.local is None:
            raise NotControllerError("This node does not run a controller")
        return self.local.next_offset()

    def describe_quorum(self) -> QuorumDescription:
        if self._describe is None:
            raise NotControllerError("This node does not run a controller")
        return self._describe()

    # --- from anywhere --------------------------------------------------------------------

    async def call(self, api_key: int, version: int, body: dict[str, Any] | Any,
                   timeout: float = 30.0, client_id: str | None = None,
                   principal: Principal | None = None, client_host: str | None = None
                   ) -> Any:
        """Send a request to the active controller in an Envelope; its response. With
        ``principal`` (and ``client_host``), on a client's behalf: the controller
        authorizes the request as that client; without, as this node.

        Only what may pass is retried, with a backoff that doubles up to a second: a
        controller that cannot be reached and one that is not the active one. Any other
        error in the envelope (a request the controller refused as malformed) is raised
        as a ``KafkaError`` at once."""
        entity = build(request_schema(api_key, version), body) if isinstance(body, dict) \
            else body
        inner = encode_request(api_key, version, 0, client_id or f"broker-{self.node_id}",
                               entity)[4:]
        envelope = {"request_data": inner,
                    "request_principal": None if principal is None
                    else serialize_principal(principal),
                    "client_host_address": address_bytes(client_host)}
        deadline = time.monotonic() + timeout
        last_error = "no controller answered"
        backoff = ExponentialBackoff(RETRY_BACKOFF_S * 1000, RETRY_BACKOFF_MAX_S * 1000)
        attempts = 0
        while True:
            target = self._target()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                response = await self._client(target).request(
                    ApiKey.ENVELOPE, ENVELOPE_VERSION, envelope, remaining)
            except (NodeUnavailable, TimeoutError, OSError) as e:
                last_error = f"controller {target}: {e}"
            else:
                if response.error_code == ErrorCode.none and response.response_data:
                    return decode_response(api_key, version, response.response_data)[1]
                if response.error_code != ErrorCode.not_controller:
                    code = ErrorCode(response.error_code)
                    raise KafkaError(code, f"The controller refused the request: "
                                           f"{code.name}")
                last_error = f"controller {target} is not active"
            await asyncio.sleep(min(backoff.backoff(attempts) / 1000,
                                    max(0.0, deadline - time.monotonic())))
            attempts += 1
        raise ControllerUnavailable(f"no active controller within {timeout:.0f} s "
                                    f"({last_error})")

    async def forward(self, ctx: Any, request: Any, timeout: float = 30.0) -> Any:
        """A client's request, forwarded whole; the controller's response as it is, or
        the error the controller gave the envelope, for all the request names."""
        try:
            return await self.call(ctx.header.api_key, ctx.header.api_version, request,
                                   timeout, ctx.client_id, principal=ctx.principal,
                                   client_host=ctx.client_host)
        except KafkaError as e:
            if e.code == ErrorCode.unsupported_version:
                # The controller does not serve this version (a rolling upgrade): as
                # Kafka, close the connection so that the client asks ApiVersions again.
                raise CloseConnection(f"the controller does not serve "
                                      f"v{ctx.header.api_version} of this API") from e
            # The envelope itself was refused: the brokers' fault (Kafka's
            # ForwardingManager answers UNKNOWN_SERVER_ERROR), not the client's.
            log.warning("The controller refused a forwarded %s: %s",
                        ApiKey(ctx.header.api_key).name, e.code.name)
            return error_response(request, ErrorCode.unknown_server_error, None)

    def _target(self) -> int:
        leader = self.raft.leader_id
        if leader is not None and self._address(leader) is not None:
            return leader
        # No leader known: the voters in turn (a dynamic quorum's change with its log).
        candidates = sorted(self.voters) or sorted(self.raft.voters) or \
            sorted(self.raft.bootstrap, reverse=True)
        return candidates[next(self._next) % len(candidates)]

    def _address(self, node: int) -> tuple[str, int] | None:
        """controller.quorum.voters, else where the metadata log says a voter listens (a
        controller added after ``kraft.version`` was upgraded is only there)."""
        address = self.voters.get(node)
        return address if address is not None else self.raft.address(node)

    def _client(self, node: int) -> AsyncClient:
        client = self._clients.get(node)
        if client is not None and not self.voters and \
                self.raft.address(node) not in (None, (client.host, client.port)):
            self._stale.append(self._clients.pop(node))  # the controller moved
            client = None
        if client is None:
            address = self._address(node)
            if address is None:
                raise NodeUnavailable(f"no address for controller {node}")
            host, port = address
            client = self._clients[node] = AsyncClient(host, port,
                                                       client_id=f"broker-{self.node_id}",
                                                       security=self.security)
        return client

    async def close(self) -> None:
        for client in [*self._clients.values(), *self._stale]:
            await client.close()
        self._clients.clear()
        self._stale.clear()
