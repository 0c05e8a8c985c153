"""The seam between the network and request handlers, the same for every role.

A handler is a function of the role's services (the broker, or the controller side of a
node), the ``RequestContext`` and the decoded request; it returns the response as a
version-agnostic dict (or an already encoded body), an awaitable of one, or
``NO_RESPONSE``. A handler that raises ``KafkaError`` gets Kafka's error response for
everything the request named; anything else it raises, UNKNOWN_SERVER_ERROR. Each role
lists what it serves as ``ApiSpec``s; a node builds one ``ApiTable`` per kind of
listener from those lists, in one place (``server.apis``), and ApiVersions advertises
exactly that table.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ottla.common.principal import ANONYMOUS, Principal
from ottla.protocol.codec import RequestHeader

S = TypeVar("S")
"""The services of the role a handler serves (``broker.Broker``, the controller's)."""

Response = Any
"""A version-agnostic dict built into the response schema, an ``EncodedBody``, or
``NO_RESPONSE``."""


class Authorizer(Protocol):
    """What handlers ask of the node's authorizer (``security.authorizer``'s
    StandardAuthorizer), through ``security.auth_helper``."""

    def authorize(self, principal: Principal, host: str, operation: Any,
                  resource_type: Any, name: str) -> bool: ...

    def decide(self, principal: Principal, host: str, operation: Any, resource_type: Any,
               name: str) -> tuple[bool, object]:
        """``authorize`` with the rule that decided (its ``str`` is for the audit log)."""
        ...

    def authorize_by_resource_type(self, principal: Principal, host: str, operation: Any,
                                   resource_type: Any) -> bool: ...

    @property
    def loaded(self) -> bool:
        """Whether the initial ACL load is done (before it Kafka decides nothing but
        for super users)."""
        ...


class AuthorizationRecorder(Protocol):
    """Where a role's authorization decisions are counted (``security.authorizer_metrics``)."""

    def record(self, allowed: bool, now_ms: int) -> None: ...


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about a request beyond its body."""

    header: RequestHeader
    listener_name: str
    listener_kind: str
    """"broker" or "controller"."""
    client_host: str
    client_port: int
    principal: Principal = ANONYMOUS
    clock: Callable[[], float] = field(default=time.time, repr=False)
    authorizer: Authorizer | None = field(default=None, repr=False)
    """The node's authorizer; None without ``authorizer.class.name``: every check
    passes (``security.auth_helper``)."""
    authorizer_metrics: AuthorizationRecorder | None = field(default=None, repr=False)
    """The authorizer metrics of the role serving the request (Kafka's per-role
    StandardAuthorizer), which every decision is counted in."""
    request_size: int = 0
    """The request's size in bytes (its frame, without the size prefix): what a producer's
    client quota counts."""
    throttle_ms: int = 0
    """Set by a handler whose client is over a quota: the connection answers, then reads
    nothing more from the client for this long (KIP-219)."""
    throttle_quota: str = "Request"
    """The quota type (Kafka's ``QuotaType`` name: Produce, Fetch, Request,
    ControllerMutation) whose throttle ``throttle_ms`` is, the longest one's (the request
    quota's on a tie, as Kafka's handlers choose): the delay queue it is counted in."""
    client_software: tuple[str, str] = ("unknown", "unknown")
    """The client's software name and version, as its connection's ApiVersions (v3+)
    gave them (Kafka's ClientInformation, "unknown" until then)."""
    security_protocol: str = "PLAINTEXT"
    """The security protocol of the connection the request came on (for a forwarded
    request, the forwarding broker's connection: Kafka's context is per hop)."""
    forwarded: bool = False
    """The request came in an Envelope from a broker, for the principal it names."""
    charge_request: Callable[[], int] | None = field(default=None, repr=False)
    """With a ``request_percentage`` quota set: charges the handler's time so far to its
    client and returns the throttle time (0 within the quota), once; for handlers that
    encode their answer themselves (Produce, Fetch), which must put the throttle time in
    it. Otherwise the network layer charges the request when it is answered."""

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    def now_ms(self) -> int:
        return int(self.clock() * 1000)


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the client's connection instead of
    answering (e.g. a failed acks=0 produce, so the client refreshes its metadata).
    ``error_counts``: what the unsent response would have counted in ErrorsPerSec, as
    Kafka's ``RequestChannel.closeConnection`` counts it (by error code)."""

    def __init__(self, reason: str, error_counts: Mapping[int, int] | None = None) -> None:
        super().__init__(reason)
        self.error_counts = error_counts


NO_RESPONSE = object()
"""Returned by a handler for requests that get no response (acks=0 produce)."""

Handler = Callable[[S, RequestContext, Any], "Response | Awaitable[Response]"]


@dataclass(frozen=True, slots=True)
class ApiSpec(Generic[S]):
    """One API a role serves: the versions, and the handler."""

    api_key: int
    min_version: int
    max_version: int
    handler: Handler[S]


class ApiTable(Generic[S]):
    """The APIs one kind of listener serves, with the services its handlers get."""

    def __init__(self, kind: str, services: S, specs: Iterable[ApiSpec[S]]) -> None:
        self.kind = kind
        self.services = services
        self.specs: dict[int, ApiSpec[S]] = {}
        for spec in specs:
            self.add(spec)
        self.unadvertised: Callable[[], Collection[int]] = tuple
        """APIs served but left out of ApiVersions for now (Kafka lists the telemetry
        APIs only with a telemetry receiver configured)."""

    def add(self, spec: ApiSpec[S]) -> None:
        if spec.api_key in self.specs:
            raise ValueError(f"api key {spec.api_key} is served twice on {self.kind}")
        self.specs[int(spec.api_key)] = spec

    def get(self, api_key: int) -> ApiSpec[S] | None:
        return self.specs.get(api_key)

    def versions(self) -> list[tuple[int, int, int]]:
        """(api key, min version, max version) of each API, as ApiVersions lists them."""
        hidden = self.unadvertised()
        return [(s.api_key, s.min_version, s.max_version)
                for s in sorted(self.specs.values(), key=lambda s: s.api_key)
                if s.api_key not in hidden]
