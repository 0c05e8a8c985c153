"""Request handlers, one module per group of Kafka APIs, registered with their versions.

A handler takes the broker, the request context and the decoded request, and returns the
response as a version-agnostic dict (or an awaitable of one, or ``NO_RESPONSE`` for none).
A handler that raises ``KafkaError`` gets Kafka's error response with that code for all
the request names; anything else it raises, UNKNOWN_SERVER_ERROR.
The registry is what ApiVersions advertises, so it lists exactly what is implemented.
It is kept per kind of listener: a controller listener serves the KRaft RPCs (its Fetch
is the metadata log's) and a broker listener the client APIs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ottla.protocol.api import ApiKey

Handler = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    listeners: frozenset[str] = frozenset({"broker"})
    """Which kind of listener serves it: "broker", "controller" or both."""


Registry = dict[str, dict[int, ApiSpec]]
REGISTRY: Registry = {"broker": {}, "controller": {}}
"""Per listener kind ("broker", "controller"): api key -> spec."""


def handles(api_key: ApiKey, min_version: int, max_version: int,
            listeners: tuple[str, ...] = ("broker",), forward: bool = False
            ) -> Callable[[Handler], Handler]:
    """Register a handler. ``forward``: an API that changes metadata; served on both
    kinds of listener, it runs on the active controller, to which a broker listener
    forwards the request whole (in an Envelope)."""
    if forward:
        listeners = ("broker", "controller")

    def register(fn: Handler) -> Handler:
        handler = _forwarding(fn) if forward else fn
        for kind in listeners:
            REGISTRY[kind][int(api_key)] = ApiSpec(int(api_key), min_version, max_version,
                                                   handler, frozenset(listeners))
        return fn
    return register


def _forwarding(fn: Handler) -> Handler:
    async def handler(broker: Any, ctx: Any, req: Any) -> Any:
        if ctx.listener_kind == "broker":
            return await broker.controller.forward(ctx, req)
        result = fn(broker, ctx, req)
        return await result if inspect.isawaitable(result) else result
    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


def load_all() -> Registry:
    """Import every handler module so that each registers itself."""
    from ottla.broker.handlers import (  # noqa: F401
        api_versions,
        broker_registration,
        configs,
        envelope,
        fetch,
        groups,
        list_offsets,
        metadata,
        produce,
        producer,
        quorum,
        topics,
    )
    return REGISTRY
