"""The broker's side of KIP-631: registration, heartbeats, controlled shutdown.

A broker registers with the active controller under a new incarnation id each time its
process starts, and gets its broker epoch (the offset of its registration record). It
starts fenced: its heartbeats report how far it has applied the metadata log, and the
controller unfences it once that reaches its registration. Until then it heartbeats
every 100 ms, and every ``broker.heartbeat.interval.ms`` after. A heartbeat refused as
STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED (the controller no longer knows this
registration) makes it register again. On shutdown it asks to be shut down
(``want_shut_down``), which fences it and moves its leaderships away before it goes.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ottla.common.features import SUPPORTED_FEATURES, cordoned_log_dirs_supported
from ottla.common.tasks import cancel_and_wait, wait_event
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.server.controller_channel import ControllerUnavailable

log = logging.getLogger(__name__)

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
CORDONED_HEARTBEAT_VERSION = 2
"""BrokerHeartbeat v2 (KIP-1066) carries the cordoned log dirs, from metadata.version
4.3-IV0."""
FENCED_HEARTBEAT_S = 0.1


class BrokerState(enum.IntEnum):
    """Kafka's BrokerState, the value of ``kafka.server:type=KafkaServer,name=BrokerState``
    (numbered as Kafka numbers them)."""

    NOT_RUNNING = 0
    STARTING = 1
    """Registering, or registered and applying the metadata log."""
    RECOVERY = 2
    """Caught up with the metadata log, not yet unfenced."""
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


class BrokerLifecycle:
    def __init__(self, *, broker: Any, channel: Any, applied_offset: Callable[[], int],
                 endpoints: list[tuple[str, str, int, int]], rack: str | None,
                 heartbeat_interval_ms: int, session_timeout_ms: int,
                 directory_ids: list[uuid.UUID], previous_broker_epoch: int = -1,
                 log_dir_failure_timeout_ms: int = 30_000,
                 on_fatal: Callable[[str], None] | None = None,
                 metadata_level: Callable[[], int] = lambda: 0,
                 cordoned_dirs: Callable[[], list[uuid.UUID]] = list) -> None:
        self.broker = broker
        self.cordoned_dirs = cordoned_dirs
        """The ids of the log dirs ``cordoned.log.dirs`` names now (KIP-1066)."""
        self.metadata_level = metadata_level
        """The metadata.version the broker's image has (0 before it has one), which decides
        whether heartbeats carry the cordoned log dirs."""
        self.channel = channel
        self.applied_offset = applied_offset
        self.endpoints = endpoints
        self.rack = rack
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.session_timeout = session_timeout_ms / 1000
        self.directory_ids = directory_ids
        self.previous_broker_epoch = previous_broker_epoch
        """The epoch of the last clean shutdown (-1 after a crash): the controller keeps
        a broker that crashed out of every ELR (KIP-966)."""
        self.offline_dirs: dict[uuid.UUID, bool] = {}
        """Log dirs gone offline, and whether a heartbeat naming them was answered."""
        self.log_dir_failure_timeout = log_dir_failure_timeout_ms / 1000
        self.on_fatal = on_fatal
        """Stops the node (an offline dir the controller could not be told of)."""
        self.incarnation_id = uuid.uuid4()
        self.epoch = -1
        self.fenced = True
        self.unfenced = asyncio.Event()
        self.state = BrokerState.NOT_RUNNING
        """As Kafka's BrokerLifecycleManager moves it: STARTING, RECOVERY once a heartbeat
        says it caught up, RUNNING once one unfences it (and RUNNING it stays, fenced
        later or not), PENDING_CONTROLLED_SHUTDOWN while it asks to be shut down,
        SHUTTING_DOWN after."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.state = BrokerState.STARTING
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            try:
                if self.epoch < 0:
                    await self._register()
                await self._heartbeat()
            except ControllerUnavailable as e:
                log.warning("Broker %d cannot reach the active controller: %s",
                            self.broker.node_id, e)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Broker %d: heartbeat failed", self.broker.node_id)
            await wait_event(self._wake, self.heartbeat_interval if not self.fenced
                             else FENCED_HEARTBEAT_S)
            self._wake.clear()

    def propagate_directory_failure(self, directory: uuid.UUID) -> None:
        """A log dir failed: name it in every heartbeat from now on, the first one now
        (Kafka's ``BrokerLifecycleManager.propagateDirectoryFailure``)."""
        if directory in self.offline_dirs:
            return
        self.offline_dirs[directory] = False
        self._wake.set()
        asyncio.get_running_loop().call_later(self.log_dir_failure_timeout,
                                              self._check_failure_propagated, directory)

    def propagate_directory_cordoned(self) -> None:
        """``cordoned.log.dirs`` changed: tell the controller now, not at the next
        heartbeat (Kafka's ``propagateDirectoryCordoned``)."""
        if self.state != BrokerState.STARTING:
            self._wake.set()

    def _check_failure_propagated(self, directory: uuid.UUID) -> None:
        if not self.offline_dirs.get(directory, True) and self.on_fatal is not None:
            self.on_fatal(f"could not tell the controller that log directory {directory} "
                          f"is offline within {self.log_dir_failure_timeout:.0f} s")

    async def _register(self) -> None:
        response = await self.channel.call(ApiKey.BROKER_REGISTRATION, REGISTRATION_VERSION, {
            "broker_id": self.broker.node_id, "cluster_id": self.broker.cluster_id,
            "incarnation_id": self.incarnation_id,
            "listeners": [{"name": n, "host": h, "port": p, "security_protocol": s}
                          for n, h, p, s in self.endpoints],
            "features": [{"name": name, "min_supported_version": low,
                          "max_supported_version": high}
                         for name, (low, high) in SUPPORTED_FEATURES.items()],
            "rack": self.rack, "is_migrating_zk_broker": False,
            "log_dirs": self.directory_ids, "previous_broker_epoch": self.previous_broker_epoch},
            timeout=self.session_timeout)
        if response.error_code != ErrorCode.none:
            raise RuntimeError(f"registration refused: {ErrorCode(response.error_code)!r}")
        self.epoch = self.broker.broker_epoch = response.broker_epoch
        self.fenced = True
        log.info("Broker %d registered with broker epoch %d", self.broker.node_id, self.epoch)

    async def _heartbeat(self, want_shut_down: bool = False, timeout: float | None = None
                         ) -> Any:
        offline = list(self.offline_dirs)
        request: dict[str, Any] = {
            "broker_id": self.broker.node_id, "broker_epoch": self.epoch,
            "current_metadata_offset": self.applied_offset(), "want_fence": False,
            "want_shut_down": want_shut_down, "offline_log_dirs": offline}
        version = HEARTBEAT_VERSION
        if cordoned_log_dirs_supported(self.metadata_level()):
            # As Kafka's BrokerLifecycleManager: the cordoned dirs once the broker has
            # caught up with the metadata (RECOVERY), null before.
            version = CORDONED_HEARTBEAT_VERSION
            if self.state != BrokerState.STARTING:
                request["cordoned_log_dirs"] = self.cordoned_dirs()
        response = await self.channel.call(ApiKey.BROKER_HEARTBEAT, version, request,
                                           timeout=timeout or self.session_timeout)
        if response.error_code in (ErrorCode.stale_broker_epoch,
                                   ErrorCode.broker_id_not_registered):
            log.info("Broker %d: registration %d is gone (%r); registering again",
                     self.broker.node_id, self.epoch, ErrorCode(response.error_code))
            self.epoch = -1
            return response
        if response.error_code != ErrorCode.none:
            raise RuntimeError(f"heartbeat refused: {ErrorCode(response.error_code)!r}")
        for directory in offline:
            self.offline_dirs[directory] = True  # the controller knows
        if self.fenced != response.is_fenced:
            log.info("Broker %d is %s", self.broker.node_id,
                     "fenced" if response.is_fenced else "unfenced")
        self.fenced = response.is_fenced
        # Kafka moves one step per response; here both at once when the controller
        # unfences the broker as it catches up, so RUNNING comes with serving clients.
        if self.state == BrokerState.STARTING and (response.is_caught_up or not self.fenced):
            self.state = BrokerState.RECOVERY
            if cordoned_log_dirs_supported(self.metadata_level()):
                # As Kafka, the next heartbeat at once: the first with the cordoned dirs.
                self._wake.set()
        if self.state == BrokerState.RECOVERY and not self.fenced:
            self.state = BrokerState.RUNNING
        if not self.fenced:
            self.unfenced.set()
        return response

    async def stop(self) -> None:
        """Stop heartbeating after a controlled shutdown (bounded: the controller may be
        gone too)."""
        await cancel_and_wait(self._task)
        if self.epoch >= 0 and self.state == BrokerState.RUNNING:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        if self.epoch >= 0:
            try:
                await self._heartbeat(want_shut_down=True, timeout=2.0)
            except Exception as e:
                log.info("Broker %d: no controlled shutdown (%s)", self.broker.node_id, e)
        self.state = BrokerState.SHUTTING_DOWN
