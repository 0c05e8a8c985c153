"""The transaction coordinator's metrics as Kafka 4.4 registers them: the
``transaction-coordinator-metrics`` group's partition-load-time-avg/max (each load of a
``__transaction_state`` partition timed from taking it on to its shard serving, over
Kafka's 2 windows of 30 s) and TransactionMarkerChannelManager's
UnknownDestinationQueueSize and LogAppendRetryQueueSize (transactions whose markers wait
for a leader, and whose completion waits to be appended again)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ottla.broker.coordinators import transaction_markers
from ottla.broker.coordinators.transaction_markers import TransactionMarkerChannelManager
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.coordinator.runtime import CoordinatorRuntime, CoordinatorState, ShardContext
from ottla.coordinator.transaction.shard import MarkerJob
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.server.metrics.transaction_coordinator_collector import (
    TransactionCoordinatorCollector,
)
from tests.unit.test_metrics import hosted

TP = ("__transaction_state", 7)
LOAD_MAX = "kafka_server_transaction_coordinator_metrics_partition_load_time_max"
LOAD_AVG = "kafka_server_transaction_coordinator_metrics_partition_load_time_avg"
MARKERS = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
UNKNOWN = MARKERS + "unknowndestinationqueuesize"
RETRY = MARKERS + "logappendretryqueuesize"


class Log:
    def __init__(self, records: int) -> None:
        self.records = [1] * records

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        self.records += records
        return len(self.records)

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return len(self.records)

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        yield from enumerate(self.records)


class Shard:
    def __init__(self, ctx: ShardContext) -> None: ...
    def replay(self, offset: int, record: Any) -> None: ...
    def on_written(self, end_offset: int) -> None: ...
    def on_committed(self, high_watermark: int) -> None: ...
    def on_loaded(self, now_ms: int) -> None: ...
    def on_unloaded(self) -> None: ...


def samples(coordinator: Any, now_ms: int) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(TransactionCoordinatorCollector(coordinator, lambda: now_ms))
    text = generate_latest(registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def coordinator(runtime: Any, unknown: int = 0, retry: int = 0) -> Any:
    return SimpleNamespace(runtime=runtime, markers=SimpleNamespace(
        unknown_destination={("t", i, 0) for i in range(unknown)},
        log_append_retry={("t", i, 0) for i in range(retry)}))


def test_no_load_in_the_windows_is_nan_as_kafkas_avg_and_max_of_nothing() -> None:
    values = samples(coordinator(CoordinatorRuntime(Log(0), Shard)), 1_000)
    assert math.isnan(values[LOAD_MAX]) and math.isnan(values[LOAD_AVG])
    assert values[UNKNOWN] == 0 and values[RETRY] == 0


def test_a_load_is_timed_from_taking_the_partition_on_to_its_last_slice() -> None:
    runtime: CoordinatorRuntime[Shard] = CoordinatorRuntime(Log(10), Shard)
    job = runtime.begin_load(TP, 1_000)
    assert not job.step(4, 1_100)
    assert not job.step(4, 1_200)
    assert job.step(4, 1_300)  # the last slice: loaded 300 ms after it was taken on
    runtime.load(("__transaction_state", 8), 1_400)  # all at once: 0 ms
    values = samples(coordinator(runtime), 1_500)
    assert values[LOAD_MAX] == 300
    assert values[LOAD_AVG] == 150


def test_a_load_leaves_the_windows_after_kafkas_two_samples_of_30_s() -> None:
    runtime: CoordinatorRuntime[Shard] = CoordinatorRuntime(Log(3), Shard)
    job = runtime.begin_load(TP, 0)
    assert job.step(10, 250)
    assert samples(coordinator(runtime), 59_000)[LOAD_MAX] == 250
    assert math.isnan(samples(coordinator(runtime), 70_000)[LOAD_MAX])


def test_a_failed_load_is_not_timed() -> None:
    class Broken(Shard):
        def replay(self, offset: int, record: Any) -> None:
            raise ValueError("corrupt")

    runtime: CoordinatorRuntime[Shard] = CoordinatorRuntime(Log(3), Broken)
    assert runtime.begin_load(TP, 0).step(10, 40)
    assert runtime.contexts[TP].state is CoordinatorState.FAILED
    assert math.isnan(samples(coordinator(runtime), 50)[LOAD_MAX])


def test_the_marker_queues_are_served_under_kafkas_yammer_names() -> None:
    values = samples(coordinator(CoordinatorRuntime(Log(0), Shard), unknown=2, retry=1), 0)
    assert values[UNKNOWN] == 2 and values[RETRY] == 1


# --- the marker channel manager keeping them -------------------------------------------------

JOB = MarkerJob("txn-1", 4000, 0, True, frozenset({("orders", 0), ("orders", 1)}))
KEY = ("txn-1", 4000, 0)


class Markers:
    """A broker and a transaction coordinator around one pending job: ``orders-1`` has
    no leader until ``elect`` is set; completions fail with ``append_errors`` first."""

    def __init__(self, append_errors: list[ErrorCode]) -> None:
        self.leaders = {0: 1, 1: -1}
        self.append_errors = list(append_errors)
        self.completed = asyncio.Event()
        self.pending = True
        topic = SimpleNamespace(partitions={
            i: SimpleNamespace(leader=leader) for i, leader in self.leaders.items()})
        self.topic = topic
        broker = SimpleNamespace(
            image=SimpleNamespace(topics_by_name={"orders": topic}, brokers={1: object()}),
            replica_manager=SimpleNamespace(partitions={TP: SimpleNamespace(leader_epoch=3)}),
            node_id=1)
        shard = SimpleNamespace(is_pending=lambda job: self.pending and job == JOB)
        context = SimpleNamespace(state=CoordinatorState.ACTIVE, shard=shard)
        service = SimpleNamespace(runtime=SimpleNamespace(contexts={TP: context}),
                                  write_to=self.write_to)
        self.manager = TransactionMarkerChannelManager.__new__(TransactionMarkerChannelManager)
        self.manager.broker = broker  # type: ignore[assignment]
        self.manager.coordinator = service  # type: ignore[assignment]
        self.manager._sending = {}
        self.manager._peers = self  # type: ignore[assignment]
        self.manager.unknown_destination = set()
        self.manager.log_append_retry = set()

    def elect(self) -> None:
        self.topic.partitions[1].leader = 1

    async def request(self, node_id: int, api_key: int, version: int, body: dict[str, Any]
                      ) -> Any:
        marker = body["markers"][0]
        return SimpleNamespace(markers=[SimpleNamespace(topics=[
            SimpleNamespace(name=t["name"], partitions=[
                SimpleNamespace(partition_index=p, error_code=0)
                for p in t["partition_indexes"]])
            for t in marker["topics"]])])

    def write_to(self, tp: tuple[str, int], operation: Any) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.append_errors:
            future.set_exception(KafkaError(self.append_errors.pop(0), "failed"))
        else:
            self.pending = False
            self.completed.set()
            future.set_result(None)
        return future


async def until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not met")


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transaction_markers, "MARKER_RETRY_S", 0.01)


async def test_markers_for_a_partition_without_leader_wait_in_the_unknown_destination(
        fast_retries: None) -> None:
    markers = Markers([])
    task = asyncio.ensure_future(markers.manager._send(TP, JOB, KEY))
    await until(lambda: KEY in markers.manager.unknown_destination)
    assert not markers.completed.is_set()
    markers.elect()
    await asyncio.wait_for(markers.completed.wait(), 5)
    await task
    assert markers.manager.unknown_destination == set()


async def test_a_completion_append_failing_for_a_retriable_reason_waits_to_be_retried(
        fast_retries: None) -> None:
    markers = Markers([ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas])
    markers.elect()
    task = asyncio.ensure_future(markers.manager._send(TP, JOB, KEY))
    await until(lambda: KEY in markers.manager.log_append_retry)
    await asyncio.wait_for(markers.completed.wait(), 5)
    await task
    assert markers.manager.log_append_retry == set()


async def test_a_moved_coordinator_does_not_retry_the_completion(fast_retries: None) -> None:
    markers = Markers([ErrorCode.not_coordinator])
    markers.elect()
    await markers.manager._send(TP, JOB, KEY)
    assert not markers.completed.is_set()
    assert markers.manager.log_append_retry == set()


# --- WriteTxnMarkers' appends in BrokerTopicMetrics -----------------------------------------

def test_a_marker_appended_is_one_message_in_and_its_batch_bytes_in(tmp_path) -> None:
    """Kafka's appendToLocalLog marks MessagesIn and BytesIn for the markers
    WriteTxnMarkers appends (one control record, its batch's bytes), as for any local
    append."""
    manager, image = hosted(tmp_path, ("orders", 1, [1], [1], 1))
    stats = BrokerTopicStats()
    partition = manager.require("orders", 0, image)
    info = manager.append_marker(partition, 4000, 0, True, 0, 1_000, stats)
    assert info.last_offset == info.first_offset == 0
    counted = stats.topic("orders")
    assert counted.messages_in == 1
    assert counted.bytes_in == partition.log.size > 0  # the marker batch, all the log
    manager.append_marker(partition, 4000, 0, False, 0, 1_001)  # not counting: no stats
    assert counted.messages_in == 1
