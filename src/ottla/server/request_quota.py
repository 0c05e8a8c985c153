"""The network layer's part of Kafka's request quota (``ClientRequestQuotaManager``,
``request_percentage``): which requests are exempt, how a handler's own time is told
from its waits, and how an answer carries the throttle time. The quota itself is the
sans-I/O ``ClientQuotaManager`` of type REQUEST; ``network.ConnectionQuotas`` charges it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable
from time import perf_counter
from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.requests import RequestContext

CLUSTER_ACTIONS = frozenset({
    ApiKey.WRITE_TXN_MARKERS, ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.DESCRIBE_QUORUM,
    ApiKey.ALTER_PARTITION, ApiKey.UPDATE_FEATURES, ApiKey.ENVELOPE,
    ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALLOCATE_PRODUCER_IDS,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE,
    ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY})
"""Kafka 4.4's ``ApiKeys`` with ``clusterAction`` (but the ZooKeeper-era ones, which no
Kafka 4 node serves): what nodes send each other."""


def exempt_from_request_quota(ctx: RequestContext, request: Any) -> bool:
    key = ctx.header.api_key
    if key in CLUSTER_ACTIONS:
        return True
    if key == ApiKey.FETCH:
        state = getattr(request, "replica_state", None)
        replica = state.replica_id if state is not None else getattr(request, "replica_id", -1)
        return replica is not None and replica >= 0
    return False


def with_throttle_time(response: Any, throttle_ms: int) -> Any:
    """``response`` carrying at least ``throttle_ms`` as its throttle time (Kafka's
    ``maybeSetThrottleTimeMs``: a response without the field is left as it is)."""
    if isinstance(response, dict):
        if "throttle_time" in response:
            response["throttle_time"] = max(int(response["throttle_time"] or 0), throttle_ms)
        return response
    current = getattr(response, "throttle_time", None)
    if dataclasses.is_dataclass(response) and not isinstance(response, type) and \
            isinstance(current, datetime.timedelta) and \
            current < datetime.timedelta(milliseconds=throttle_ms):
        return dataclasses.replace(response, throttle_time=type(current)(
            milliseconds=throttle_ms))
    return response


class TimedAwait:
    """Awaits a handler's coroutine, adding up the time its steps run but not the time
    it waits (a commit, a long poll): what a request quota charges, as Kafka charges its
    threads' time and not a delayed operation's wait."""

    __slots__ = ("_awaited", "running_since", "seconds")

    def __init__(self, awaited: Awaitable[Any], seconds: float) -> None:
        self._awaited = awaited
        self.seconds = seconds
        """The time its steps ran so far (and what ran before it was awaited)."""
        self.running_since: float | None = None
        """When the step running now began; None between steps."""

    def elapsed(self) -> float:
        """The time charged so far, the step running now included."""
        since = self.running_since
        return self.seconds + (perf_counter() - since if since is not None else 0.0)

    def __await__(self) -> Any:
        steps = self._awaited.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            began = self.running_since = perf_counter()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                self.seconds += perf_counter() - began
                self.running_since = None
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                close = getattr(steps, "close", None)
                if close is not None:
                    close()
                raise
            except BaseException as e:  # handed on to the handler, as await would
                value, error = None, e
