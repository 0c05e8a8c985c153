"""Kafka's ``kafka.server:type=KafkaServer,name=BrokerState`` as its
BrokerLifecycleManager moves it, against a controller answering scripted heartbeats:
STARTING until a heartbeat says the broker caught up with the metadata log, RECOVERY
until one unfences it, RUNNING after (even if fenced again), PENDING_CONTROLLED_SHUTDOWN
while it asks to be shut down, SHUTTING_DOWN once it stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.server.broker_lifecycle import BrokerLifecycle, BrokerState


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the loop run until ``condition`` holds, failing after ``timeout`` seconds."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), timeout)


class ScriptedController:
    """Registers the broker at epoch 5 and answers heartbeats (caught up, fenced) from
    ``script``, the last answer repeated; notes the broker's state as each is sent."""

    def __init__(self, script: list[tuple[bool, bool]]) -> None:
        self.script = script
        self.heartbeats = 0
        self.states_seen: list[BrokerState] = []
        self.lifecycle: BrokerLifecycle | None = None

    async def call(self, api_key: int, version: int, body: dict[str, Any],
                   timeout: float) -> SimpleNamespace:
        if api_key == ApiKey.BROKER_REGISTRATION:
            return SimpleNamespace(error_code=ErrorCode.none, broker_epoch=5)
        assert self.lifecycle is not None
        self.states_seen.append(self.lifecycle.state)
        caught_up, fenced = self.script[min(self.heartbeats, len(self.script) - 1)]
        self.heartbeats += 1
        return SimpleNamespace(error_code=ErrorCode.none, is_caught_up=caught_up,
                               is_fenced=fenced, should_shut_down=body["want_shut_down"])


def lifecycle_with(controller: ScriptedController) -> BrokerLifecycle:
    broker = SimpleNamespace(node_id=1, cluster_id="cluster", broker_epoch=-1)
    lifecycle = BrokerLifecycle(
        broker=broker, channel=controller, applied_offset=lambda: 0, endpoints=[],
        rack=None, heartbeat_interval_ms=10, session_timeout_ms=9000, directory_ids=[],
        log_dir_failure_timeout_ms=60_000, on_fatal=lambda reason: None)
    controller.lifecycle = lifecycle
    return lifecycle


async def test_the_broker_state_follows_kafkas_lifecycle() -> None:
    controller = ScriptedController([(False, True), (True, True), (True, False),
                                     (True, True)])
    lifecycle = lifecycle_with(controller)
    assert lifecycle.state == BrokerState.NOT_RUNNING
    lifecycle.start()
    await eventually(lambda: controller.heartbeats >= 5)
    assert controller.states_seen[:5] == [
        BrokerState.STARTING, BrokerState.STARTING, BrokerState.RECOVERY,
        BrokerState.RUNNING, BrokerState.RUNNING]  # fenced again: still RUNNING
    stopping = len(controller.states_seen)
    await lifecycle.stop()
    assert controller.states_seen[stopping:][-1] == BrokerState.PENDING_CONTROLLED_SHUTDOWN
    assert lifecycle.state == BrokerState.SHUTTING_DOWN
    assert int(BrokerState.RUNNING) == 3 and int(BrokerState.SHUTTING_DOWN) == 7


async def test_a_broker_unfenced_as_it_catches_up_is_running_at_once() -> None:
    controller = ScriptedController([(True, False)])
    lifecycle = lifecycle_with(controller)
    lifecycle.start()
    await eventually(lambda: controller.heartbeats >= 2)
    assert controller.states_seen[:2] == [BrokerState.STARTING, BrokerState.RUNNING]
    assert lifecycle.unfenced.is_set()
    await lifecycle.stop()
