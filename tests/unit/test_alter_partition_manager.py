"""The AlterPartition sender: the ISR changes a leader's partitions decide go to the
controller in batches, one request in flight at a time, and each answer goes back to its
partition, unless it leaves unknown whether the change was made (then the change stays
pending, and a failed request goes again). The controller is a fake ``send`` that
records each request body and answers with a real AlterPartition v3 response."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest

from ottla.broker.replication import alter_partition_manager
from ottla.broker.replication.alter_partition_manager import AlterPartitionManager
from ottla.broker.replication.partition import Partition
from ottla.metadata.isr_change import IsrChange
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build

LEADER, F1, F2 = 1, 2, 3
BROKER_EPOCH = 42
ORDERS, EVENTS = uuid.UUID(int=1), uuid.UUID(int=2)


@dataclass(frozen=True)
class StubPartition:
    """What the manager reads of a partition: its name and topic id."""

    topic: str
    index: int
    topic_id: uuid.UUID


def partition(topic_id: uuid.UUID, index: int) -> Partition:
    name = "orders" if topic_id == ORDERS else "events"
    return cast(Partition, StubPartition(name, index, topic_id))


def change(p: Partition, isr: list[int], partition_epoch: int = 4, leader_epoch: int = 7,
           epochs: dict[int, int] | None = None) -> IsrChange:
    return IsrChange.proposed(p.topic_id, p.index, leader_epoch, isr,
                              epochs if epochs is not None else
                              {LEADER: BROKER_EPOCH, F1: 11, F2: 12}, partition_epoch)


class Controller:
    """Records each AlterPartition and answers it: every change committed with the next
    partition epoch, except the partitions in ``refuse`` (with their error); ``fail``
    makes the call raise; ``gate`` holds the answer until set."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, int, dict[str, Any]]] = []
        self.refuse: dict[tuple[uuid.UUID, int], ErrorCode] = {}
        self.top_error = ErrorCode.none
        self.fail: Exception | None = None
        self.gate: asyncio.Event | None = None

    async def send(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.requests.append((api_key, version, body))
        build(request_schema(api_key, version), body)  # a well-formed request
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return build(response_schema(ApiKey.ALTER_PARTITION, 3), {
            "throttle_time": 0, "error_code": self.top_error, "topics": [
                {"topic_id": t["topic_id"], "partitions": [
                    self._answer(t["topic_id"], p) for p in t["partitions"]]}
                for t in body["topics"]]})

    def _answer(self, topic_id: uuid.UUID, p: dict[str, Any]) -> dict[str, Any]:
        error = self.refuse.get((topic_id, p["partition_index"]), ErrorCode.none)
        committed = error == ErrorCode.none
        return {"partition_index": p["partition_index"], "error_code": error,
                "leader_id": LEADER, "leader_epoch": p["leader_epoch"],
                "isr": [m["broker_id"] for m in p["new_isr_with_epochs"]] if committed else [],
                "partition_epoch": p["partition_epoch"] + 1 if committed else -1}


Answer = tuple[Partition, list[int] | None, int]


def manager_with(controller: Controller) -> tuple[AlterPartitionManager, list[Answer]]:
    answers: list[Answer] = []
    manager = AlterPartitionManager(
        LEADER, lambda: BROKER_EPOCH, controller.send,  # type: ignore[arg-type]
        lambda p, isr, epoch: answers.append((p, isr, epoch)))
    return manager, answers


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the loop run until ``condition`` holds, failing after ``timeout`` seconds."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), timeout)


async def test_changes_of_one_loop_turn_go_in_one_request() -> None:
    controller = Controller()
    manager, answers = manager_with(controller)
    a, b, c = partition(ORDERS, 0), partition(ORDERS, 1), partition(EVENTS, 0)
    manager.submit(a, change(a, [LEADER, F1, F2], partition_epoch=4))
    manager.submit(b, change(b, [LEADER, F1], partition_epoch=9, leader_epoch=8))
    manager.submit(c, change(c, [LEADER, F2], epochs={LEADER: BROKER_EPOCH}))
    await eventually(lambda: len(answers) == 3)
    assert len(controller.requests) == 1
    api_key, version, body = controller.requests[0]
    assert (api_key, version) == (ApiKey.ALTER_PARTITION, 3)
    assert (body["broker_id"], body["broker_epoch"]) == (LEADER, BROKER_EPOCH)
    sent = {(t["topic_id"], p["partition_index"]): p
            for t in body["topics"] for p in t["partitions"]}
    assert [t["topic_id"] for t in body["topics"]] == [ORDERS, EVENTS]  # grouped by topic
    assert sent[(ORDERS, 0)] == {
        "partition_index": 0, "leader_epoch": 7, "partition_epoch": 4,
        "leader_recovery_state": 0,
        "new_isr_with_epochs": [{"broker_id": LEADER, "broker_epoch": BROKER_EPOCH},
                                {"broker_id": F1, "broker_epoch": 11},
                                {"broker_id": F2, "broker_epoch": 12}]}
    assert (sent[(ORDERS, 1)]["leader_epoch"], sent[(ORDERS, 1)]["partition_epoch"]) == (8, 9)
    # A member whose broker epoch the leader does not know is sent with -1.
    assert sent[(EVENTS, 0)]["new_isr_with_epochs"] == [
        {"broker_id": LEADER, "broker_epoch": BROKER_EPOCH},
        {"broker_id": F2, "broker_epoch": -1}]


async def test_a_committed_change_is_answered_with_its_isr_and_partition_epoch() -> None:
    controller = Controller()
    manager, answers = manager_with(controller)
    a, b = partition(ORDERS, 0), partition(EVENTS, 3)
    manager.submit(a, change(a, [LEADER, F1, F2], partition_epoch=4))
    manager.submit(b, change(b, [LEADER], partition_epoch=0))
    await eventually(lambda: len(answers) == 2)
    assert sorted(answers, key=lambda x: x[0].topic) == [
        (b, [LEADER], 1), (a, [LEADER, F1, F2], 5)]


async def test_a_refused_change_is_answered_with_no_isr_only_if_it_was_not_made() -> None:
    """INELIGIBLE_REPLICA says the change was not made: the partition decides again. A
    refusal because the partition moved on (INVALID_UPDATE_VERSION) may come from this
    very change, made by an attempt whose answer was lost: it is not answered, and stays
    pending until the metadata settles it (Kafka's handleAlterPartitionError)."""
    controller = Controller()
    controller.refuse[(ORDERS, 1)] = ErrorCode.ineligible_replica
    controller.refuse[(ORDERS, 2)] = ErrorCode.invalid_update_version
    manager, answers = manager_with(controller)
    a, b, c = partition(ORDERS, 0), partition(ORDERS, 1), partition(ORDERS, 2)
    for p in (a, b, c):
        manager.submit(p, change(p, [LEADER, F1]))
    await eventually(lambda: len(answers) == 2)
    for _ in range(10):
        await asyncio.sleep(0)
    assert sorted(answers, key=lambda x: x[0].index) == [(a, [LEADER, F1], 5), (b, None, -1)]
    assert len(controller.requests) == 1  # and not sent again


async def test_a_request_that_fails_is_sent_again_and_answered_once_it_gets_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the controller made the changes of a request that failed is not known: they
    stay pending, unanswered, and go again after a backoff; a newer change of the same
    partition decided meanwhile goes in place of its old one."""
    monkeypatch.setattr(alter_partition_manager, "RETRY_BACKOFF_S", 0.001)
    controller = Controller()
    controller.fail = ConnectionError("the controller is unreachable")
    manager, answers = manager_with(controller)
    a, b = partition(ORDERS, 0), partition(EVENTS, 0)
    manager.submit(a, change(a, [LEADER, F1]))
    manager.submit(b, change(b, [LEADER, F2]))
    await eventually(lambda: len(controller.requests) >= 3)
    assert answers == []
    manager.submit(a, change(a, [LEADER, F1, F2]))
    controller.fail = None
    await eventually(lambda: len(answers) == 2)
    assert sorted(answers, key=lambda x: x[0].topic) == [
        (b, [LEADER, F2], 5), (a, [LEADER, F1, F2], 5)]


async def test_a_top_level_error_answers_every_change_with_no_isr() -> None:
    controller = Controller()
    controller.top_error = ErrorCode.not_controller
    manager, answers = manager_with(controller)
    a = partition(ORDERS, 0)
    manager.submit(a, change(a, [LEADER, F1]))
    await eventually(lambda: len(answers) == 1)
    assert answers == [(a, None, -1)]


async def test_changes_submitted_while_a_request_is_out_go_in_the_next_one() -> None:
    controller = Controller()
    controller.gate = asyncio.Event()
    manager, answers = manager_with(controller)
    a, b, c = partition(ORDERS, 0), partition(ORDERS, 1), partition(EVENTS, 0)
    manager.submit(a, change(a, [LEADER, F1]))
    await eventually(lambda: len(controller.requests) == 1)
    manager.submit(b, change(b, [LEADER, F1, F2]))
    manager.submit(c, change(c, [LEADER, F2]))
    for _ in range(10):  # the loop runs, but nothing more goes while one is out
        await asyncio.sleep(0)
    assert len(controller.requests) == 1 and answers == []
    controller.gate.set()
    await eventually(lambda: len(answers) == 3)
    assert answers[0] == (a, [LEADER, F1], 5)
    assert len(controller.requests) == 2
    second = controller.requests[1][2]
    assert {(t["topic_id"], p["partition_index"]) for t in second["topics"]
            for p in t["partitions"]} == {(ORDERS, 1), (EVENTS, 0)}
    assert sorted(answers[1:], key=lambda x: x[0].topic) == [
        (c, [LEADER, F2], 5), (b, [LEADER, F1, F2], 5)]


async def test_a_later_change_of_the_same_partition_in_one_turn_replaces_the_first(
        ) -> None:
    controller = Controller()
    manager, answers = manager_with(controller)
    a = partition(ORDERS, 0)
    manager.submit(a, change(a, [LEADER, F1]))
    manager.submit(a, change(a, [LEADER, F1, F2], partition_epoch=5))
    await eventually(lambda: len(answers) == 1)
    (body,) = [body for _, _, body in controller.requests]
    (p,) = body["topics"][0]["partitions"]
    assert [m["broker_id"] for m in p["new_isr_with_epochs"]] == [LEADER, F1, F2]
    assert answers == [(a, [LEADER, F1, F2], 6)]


async def test_a_closed_manager_sends_nothing_more() -> None:
    sent: list[dict] = []

    async def send(api_key: int, version: int, body: dict) -> object:
        sent.append(body)
        raise ConnectionError("the controller is gone")

    manager = AlterPartitionManager(1, lambda: 5, send, lambda p, isr, epoch: None)
    await manager.close()
    a = partition(ORDERS, 0)
    manager.submit(a, change(a, [LEADER, F1]))
    await asyncio.sleep(0)
    assert sent == []


async def test_a_change_refused_or_made_with_another_leader_is_a_failed_update(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's FailedIsrUpdatesPerSec is marked by each partition error the controller
    answers (INELIGIBLE_REPLICA, INVALID_UPDATE_VERSION...) and by a change answered with
    another leader; not by a committed change, nor by a request that failed or was
    refused whole (Kafka sends those again)."""
    monkeypatch.setattr(alter_partition_manager, "RETRY_BACKOFF_S", 0.001)
    controller = Controller()
    controller.refuse[(ORDERS, 1)] = ErrorCode.ineligible_replica
    controller.refuse[(ORDERS, 2)] = ErrorCode.invalid_update_version
    answers: list[Answer] = []
    failed: list[Partition] = []
    manager = AlterPartitionManager(
        LEADER, lambda: BROKER_EPOCH, controller.send,  # type: ignore[arg-type]
        lambda p, isr, epoch: answers.append((p, isr, epoch)), failed.append)
    a, b, c = partition(ORDERS, 0), partition(ORDERS, 1), partition(ORDERS, 2)
    for p in (a, b, c):
        manager.submit(p, change(p, [LEADER, F1]))
    await eventually(lambda: len(answers) == 2)
    for _ in range(10):
        await asyncio.sleep(0)
    assert sorted(failed, key=lambda p: p.index) == [b, c]

    failed.clear()
    controller.top_error = ErrorCode.not_controller
    manager.submit(a, change(a, [LEADER]))
    await eventually(lambda: len(answers) == 3)
    controller.top_error = ErrorCode.none
    controller.fail = ConnectionError("the controller is unreachable")
    manager.submit(a, change(a, [LEADER]))
    await eventually(lambda: len(controller.requests) >= 4)
    controller.fail = None
    await eventually(lambda: len(answers) == 4)
    assert failed == []

    elsewhere = Controller()
    moved = AlterPartitionManager(
        F1, lambda: BROKER_EPOCH, elsewhere.send,  # type: ignore[arg-type]
        lambda p, isr, epoch: answers.append((p, isr, epoch)), failed.append)
    moved.submit(a, change(a, [LEADER, F1]))  # committed, but LEADER leads it
    await eventually(lambda: len(answers) == 5)
    assert answers[-1] == (a, None, -1) and failed == [a]
