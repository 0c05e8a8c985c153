"""When a controller sends ControllerRegistration (``server.controller_registration``), as
Kafka's ControllerRegistrationManager decides: once the metadata.version has controller
registrations, until the log holds this incarnation's record, one request at a time,
backing off after failures; and the manager that sends it on the controller channel."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from types import SimpleNamespace
from typing import Any

from ottla.common.features import METADATA_VERSION
from ottla.metadata import records as r
from ottla.metadata.image import ControllerRegistration, MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.server.controller_channel import ControllerUnavailable
from ottla.server.controller_registration import (
    BACKOFF_INITIAL_MS,
    BACKOFF_MAX_MS,
    ControllerRegistrationState,
)
from ottla.server.controller_registration_manager import ControllerRegistrationManager

OURS = uuid.UUID(int=1)
IV0, OLDER = 15, 14  # 3.7-IV0, 3.6-IV2


def registration(incarnation: uuid.UUID) -> ControllerRegistration:
    return ControllerRegistration(1, incarnation, False, {}, {})


def state() -> ControllerRegistrationState:
    return ControllerRegistrationState(1, OURS, rng=random.Random(3))


def test_nothing_is_sent_before_the_metadata_version_allows_it() -> None:
    s = state()
    assert not s.should_send(0)  # nothing applied yet
    s.on_metadata(OLDER, None)
    assert not s.should_send(0) and s.wait_ms(0) is None
    s.on_metadata(IV0, None)
    assert s.should_send(0)


def test_one_request_at_a_time_and_none_once_the_log_has_ours() -> None:
    s = state()
    s.on_metadata(IV0, None)
    s.sent()
    assert not s.should_send(0)
    s.on_response(ok=True, now_ms=5)
    assert not s.should_send(5)  # acknowledged: wait for the log to show it
    s.on_metadata(IV0, registration(OURS))
    assert s.registered_in_log and not s.should_send(10) and s.wait_ms(10) is None


def test_an_acknowledged_request_is_sent_again_if_the_log_then_lacks_it() -> None:
    s = state()
    s.on_metadata(IV0, None)
    s.sent()
    s.on_response(ok=True, now_ms=0)
    s.on_metadata(IV0, None)  # the same metadata again: still waiting for our record
    assert not s.should_send(1)
    s.on_metadata(IV0, registration(uuid.UUID(int=99)))  # another incarnation's record
    assert s.should_send(1)


def test_a_registration_of_another_incarnation_is_replaced() -> None:
    """A restarted controller finds its previous process's record: it registers again."""
    s = state()
    s.on_metadata(IV0, registration(uuid.UUID(int=2)))
    assert not s.registered_in_log and s.should_send(0)
    s.on_metadata(IV0, registration(OURS))
    s.on_metadata(IV0, None)  # gone from the log (a new image without it)
    assert s.should_send(0)


def test_failures_back_off_exponentially_and_a_success_resets() -> None:
    s = state()
    s.on_metadata(IV0, None)
    waits = []
    now = 0
    for _ in range(14):
        assert s.should_send(now)
        s.sent()
        s.on_response(ok=False, now_ms=now)
        wait = s.wait_ms(now)
        assert wait is not None and not s.should_send(now + wait - 1)
        waits.append(wait)
        now += wait
    # Kafka's ExponentialBackoff(100, 2, 120000, 0.02): 100 ms doubling, 2% jitter.
    assert abs(waits[0] - BACKOFF_INITIAL_MS) <= 2 and abs(waits[3] - 800) <= 16
    assert all(b > a for a, b in itertools.pairwise(waits[:10]))
    assert max(waits) <= BACKOFF_MAX_MS and waits[-1] >= BACKOFF_MAX_MS * 0.98
    s.sent()
    s.on_response(ok=True, now_ms=now)
    s.on_metadata(IV0, registration(uuid.UUID(int=5)))  # not ours: again, at once
    assert s.should_send(now)
    s.sent()
    s.on_response(ok=False, now_ms=now)
    assert abs(s.wait_ms(now) - BACKOFF_INITIAL_MS) <= 2


class FlakyChannel:
    """The controller channel of a quorum whose active controller cannot be reached at
    first, then commits the registration (replayed into the node's image)."""

    def __init__(self, image: MetadataImage, on_commit: list[Any]) -> None:
        self.image = image
        self.on_commit = on_commit
        self.calls: list[tuple[int, int, dict[str, Any]]] = []

    async def call(self, api_key: int, version: int, body: dict[str, Any],
                   timeout: float = 30.0) -> Any:
        self.calls.append((api_key, version, body))
        if len(self.calls) == 1:
            raise ControllerUnavailable("no active controller within 1 s")
        self.image.replay(r.RegisterControllerRecord(
            controller_id=body["controller_id"], incarnation_id=body["incarnation_id"],
            end_points=tuple(r.BrokerEndpoint(**ln) for ln in body["listeners"])))
        for notify in self.on_commit:
            notify()
        return SimpleNamespace(error_code=ErrorCode.none, error_message=None)


async def test_the_manager_retries_until_its_registration_is_in_the_image() -> None:
    image = MetadataImage()
    image.replay(r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=IV0))
    notify: list[Any] = []
    channel = FlakyChannel(image, notify)
    manager = ControllerRegistrationManager(
        node_id=2, image=image, channel=channel,  # type: ignore[arg-type]
        endpoints=[("CONTROLLER", "127.0.0.1", 9093, 0)],
        now_ms=lambda: int(time.monotonic() * 1000))
    notify.append(manager.on_metadata)
    manager.start()
    try:
        async with asyncio.timeout(5):
            while 2 not in image.controllers:
                await asyncio.sleep(0.01)
    finally:
        await manager.stop()
    assert [(key, version) for key, version, _ in channel.calls] == [
        (ApiKey.CONTROLLER_REGISTRATION, 0)] * 2
    body = channel.calls[-1][2]
    assert body["listeners"] == [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9093,
                                  "security_protocol": 0}]
    assert image.controllers[2].incarnation_id == manager.state.incarnation_id
    assert manager.state.registered_in_log
