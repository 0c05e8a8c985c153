"""The copy loop of the transactional workload against stand-in clients: a producer
wedged in a transactional call (librdkafka's send_offsets_to_transaction waits for a
group coordinator that is down past its own timeout, librdkafka #5456) is given up on
and replaced, so the loop goes on copying instead of stalling the run."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ottla.chaos import workloads
from ottla.chaos.history import load
from ottla.chaos.processes import wait_until
from ottla.chaos.recorder import Recorder
from ottla.chaos.workloads import CopyLoop, Wedged, bounded

SOURCE, SINK = "src", "sink"


class FakeMessage:
    def __init__(self, partition: int, offset: int, value: bytes) -> None:
        self._partition, self._offset, self._value = partition, offset, value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def error(self) -> None:
        return None


class FakeConsumer:
    """Hands out the source's two records, again after each seek (a rewind)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.pending = True
        self.seeks: list[tuple[int, int]] = []

    def subscribe(self, topics: list[str]) -> None:
        pass

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        if not self.pending:
            time.sleep(min(timeout, 0.01))
            return []
        self.pending = False
        return [FakeMessage(0, 0, b"a"), FakeMessage(0, 1, b"b")]

    def consumer_group_metadata(self) -> object:
        return object()

    def assignment(self) -> list[Any]:
        return [workloads.KafkaTopicPartition(SOURCE, 0)]

    def committed(self, tps: list[Any], timeout: float) -> list[Any]:
        return [workloads.KafkaTopicPartition(SOURCE, tp.partition, 0) for tp in tps]

    def seek(self, tp: Any) -> None:
        self.seeks.append((tp.partition, tp.offset))
        self.pending = True

    def close(self) -> None:
        pass


class FakeProducer:
    """The first one wedges in send_offsets_to_transaction until ``release`` is set."""

    created: list[FakeProducer] = []
    release = threading.Event()

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.wedges = not FakeProducer.created
        self.sent: list[tuple[bytes, Callable[..., None]]] = []
        FakeProducer.created.append(self)

    def init_transactions(self, timeout: float) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, value: bytes, partition: int,
                on_delivery: Callable[..., None]) -> None:
        self.sent.append((value, on_delivery))

    def send_offsets_to_transaction(self, offsets: list[Any], group: object,
                                    timeout: float) -> None:
        if self.wedges:
            FakeProducer.release.wait()

    def commit_transaction(self, timeout: float) -> None:
        for offset, (value, on_delivery) in enumerate(self.sent):
            on_delivery(None, FakeMessage(0, offset, value))
        self.sent.clear()

    def abort_transaction(self, timeout: float) -> None:
        self.sent.clear()

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeProducer]]:
    monkeypatch.setattr(workloads, "Consumer", FakeConsumer)
    monkeypatch.setattr(workloads, "Producer", FakeProducer)
    monkeypatch.setattr(workloads, "TXN_CALL_TIMEOUT_S", 0.2)
    monkeypatch.setattr(workloads, "WEDGE_GRACE_S", 0.1)
    FakeProducer.created = []
    FakeProducer.release = threading.Event()
    yield FakeProducer
    FakeProducer.release.set()


def test_a_copy_loop_replaces_a_producer_wedged_in_send_offsets_and_copies_on(
        tmp_path: Path, fakes: type[FakeProducer]) -> None:
    recorder = Recorder(str(tmp_path / "history.jsonl"))
    loop = CopyLoop(recorder, "localhost:9092", "copy", SOURCE, SINK, "copier-0",
                    "classic", logging.getLogger("test"), seed=1, abort_ratio=0.0)
    loop.start()
    try:
        wait_until(lambda: any(op.kind == "txn-commit" for op in recorder.ops), 10,
                   message="a transaction committed after the wedged one")
    finally:
        loop.stop()
    recorder.close()
    history = [(op.kind, op.outcome, op.txn) for op in load(str(tmp_path / "history.jsonl"))
               if op.kind in ("txn-begin", "txn-abort", "txn-commit")]
    assert history[:4] == [("txn-begin", "ok", "copier-0.0"),
                           ("txn-abort", "info", "copier-0.0"),
                           ("txn-begin", "ok", "copier-0.1"),
                           ("txn-commit", "ok", "copier-0.1")]
    wedged = next(op for op in recorder.ops if op.kind == "txn-abort")
    assert "send_offsets_to_transaction did not return" in (wedged.error or "")
    # the first producer is still in its call; the second, with the same transactional
    # id, fenced it (InitProducerId) and copied the records again from the committed
    # offsets
    assert len(fakes.created) >= 2 and not fakes.release.is_set()
    assert {p.config["transactional.id"] for p in fakes.created} == {"chaos-copier-0"}
    assert isinstance(loop.consumer, FakeConsumer) and loop.consumer.seeks[0] == (0, 0)


def test_bounded_returns_raises_or_gives_up_on_a_call() -> None:
    assert bounded(lambda: 7, 1.0, "quick") == 7
    with pytest.raises(KeyError):
        bounded(lambda: {}["missing"], 1.0, "failing")
    release = threading.Event()
    began = time.monotonic()
    with pytest.raises(Wedged, match=r"stuck did not return within 0\.2 s"):
        bounded(release.wait, 0.2, "stuck")
    assert time.monotonic() - began < 5
    release.set()


class UncommittedConsumer(FakeConsumer):
    """A group with no offset committed for the partition yet."""

    def committed(self, tps: list[Any], timeout: float) -> list[Any]:
        return [workloads.KafkaTopicPartition(SOURCE, tp.partition, -1001) for tp in tps]


class FailingAbortProducer(FakeProducer):
    """Every abort fails as librdkafka's did in a chaos run under clock skew: a fatal
    INVALID_TXN_STATE."""

    def send_offsets_to_transaction(self, offsets: list[Any], group: object,
                                    timeout: float) -> None:
        pass

    def abort_transaction(self, timeout: float) -> None:
        raise workloads.KafkaException(workloads.KafkaError(
            workloads.KafkaError.INVALID_TXN_STATE, "Failed to end transaction", fatal=True))


def test_a_transaction_whose_abort_fails_is_read_again_from_where_it_began(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fakes: type[FakeProducer]) -> None:
    """An abort that fails leaves nothing committed (the next producer's InitProducerId
    aborts it), so its records are read again from where the transaction began; the
    group's offsets cannot say where that is for a partition never committed before (a
    chaos run skipped 35 records so, and committed past them)."""
    monkeypatch.setattr(workloads, "Consumer", UncommittedConsumer)
    monkeypatch.setattr(workloads, "Producer", FailingAbortProducer)
    recorder = Recorder(str(tmp_path / "history.jsonl"))
    loop = CopyLoop(recorder, "localhost:9092", "copy", SOURCE, SINK, "copier-0",
                    "classic", logging.getLogger("test"), seed=1, abort_ratio=1.0)
    loop.start()
    try:
        wait_until(lambda: isinstance(loop.consumer, FakeConsumer) and loop.consumer.seeks,
                   10, message="a rewind after the failed abort")
    finally:
        loop.stop()
    recorder.close()
    assert [(op.kind, op.outcome) for op in recorder.ops
            if op.kind == "txn-abort"][:1] == [("txn-abort", "info")]
    assert isinstance(loop.consumer, FakeConsumer) and loop.consumer.seeks[0] == (0, 0)
