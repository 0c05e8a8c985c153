"""A controller's side of KIP-919 (Kafka's ControllerRegistrationManager): it tells the
active controller where it listens, over the node's controller channel (the transport
brokers register with), whenever ``ControllerRegistrationState`` says so: once the
applied metadata allows it, again when the log loses its registration, after a backoff
when a request fails."""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable

from ottla.common.features import METADATA_VERSION, SUPPORTED_FEATURES
from ottla.common.tasks import cancel_and_wait, wait_event
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.server.controller_channel import ControllerChannel
from ottla.server.controller_registration import ControllerRegistrationState

log = logging.getLogger(__name__)

REGISTRATION_VERSION = 0
REQUEST_TIMEOUT_S = 30.0


class ControllerRegistrationManager:
    def __init__(self, *, node_id: int, image: MetadataImage, channel: ControllerChannel,
                 endpoints: list[tuple[str, str, int, int]],
                 now_ms: Callable[[], int]) -> None:
        self.image = image
        self.channel = channel
        self.endpoints = endpoints
        """(listener name, host, port, security protocol id), the inter-controller
        listener first."""
        self.now_ms = now_ms
        self.state = ControllerRegistrationState(node_id, uuid.uuid4(), random.Random())
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def on_metadata(self) -> None:
        """The applied metadata changed: look again."""
        self._wake.set()

    def _observe(self) -> None:
        self.state.on_metadata(self.image.features.get(METADATA_VERSION, 0),
                               self.image.controllers.get(self.state.node_id))

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            self._observe()
            now = self.now_ms()
            if self.state.should_send(now):
                self.state.sent()
                ok = await self._send()
                self.state.on_response(ok, self.now_ms())
                continue
            wait = self.state.wait_ms(now)
            # New metadata wakes us; the metadata.version comes in records the node does
            # not wake for, so look again each second until it allows registering.
            await wait_event(self._wake, 1.0 if wait is None else min(wait / 1000, 1.0))

    async def _send(self) -> bool:
        try:
            response = await self.channel.call(
                ApiKey.CONTROLLER_REGISTRATION, REGISTRATION_VERSION, {
                    "controller_id": self.state.node_id,
                    "incarnation_id": self.state.incarnation_id,
                    "zk_migration_ready": False,
                    "listeners": [{"name": n, "host": h, "port": p, "security_protocol": s}
                                  for n, h, p, s in self.endpoints],
                    "features": [{"name": name, "min_supported_version": low,
                                  "max_supported_version": high}
                                 for name, (low, high) in SUPPORTED_FEATURES.items()]},
                timeout=REQUEST_TIMEOUT_S)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("Controller %d could not register: %s", self.state.node_id, e)
            return False
        if response.error_code != ErrorCode.none:
            log.info("Controller %d: registration refused: %r (%s)", self.state.node_id,
                     ErrorCode(response.error_code), response.error_message)
            return False
        log.info("Controller %d registered (incarnation %s)", self.state.node_id,
                 self.state.incarnation_id)
        return True

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
