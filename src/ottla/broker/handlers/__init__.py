"""Request handlers, one module per group of Kafka APIs, registered with their versions.

A handler takes the broker, the request context and the decoded request, and returns the
response as a version-agnostic dict (or an awaitable of one, or ``None`` for no response).
The registry is what ApiVersions advertises, so it lists exactly what is implemented.
"""

from __future__ import annotations

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


REGISTRY: dict[int, ApiSpec] = {}


def handles(api_key: ApiKey, min_version: int, max_version: int,
            listeners: tuple[str, ...] = ("broker",)) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        REGISTRY[int(api_key)] = ApiSpec(int(api_key), min_version, max_version, fn,
                                         frozenset(listeners))
        return fn
    return register


def load_all() -> dict[int, ApiSpec]:
    """Import every handler module so that each registers itself."""
    from ottla.broker.handlers import (  # noqa: F401
        api_versions,
        broker_registration,
        configs,
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
