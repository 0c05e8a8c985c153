"""The share workload's member records an acknowledgement ``ok`` only when commit_sync
confirmed its partition; one it failed or left out of its result is ``info`` (the
checkers then take it as maybe done)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ottla.chaos import workloads
from ottla.chaos.recorder import Recorder


class FakeMessage:
    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return b"v%d" % self._offset


class FakeShareConsumer:
    """commit_sync answers ``results`` (or raises it)."""

    results: dict[TopicPartition, KafkaException | None] | KafkaException = {}

    def __init__(self, config: dict[str, Any]) -> None: ...

    def subscribe(self, topics: list[str]) -> None: ...

    def commit_sync(self, timeout: float) -> dict[TopicPartition, KafkaException | None]:
        if isinstance(self.results, KafkaException):
            raise self.results
        return self.results


def outcomes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             results: dict[TopicPartition, KafkaException | None] | KafkaException
             ) -> dict[int, tuple[str, str | None]]:
    monkeypatch.setattr(workloads, "ShareConsumer", FakeShareConsumer)
    monkeypatch.setattr(FakeShareConsumer, "results", results)
    recorder = Recorder(str(tmp_path / "history.jsonl"))
    member = workloads.ShareMember(recorder, "unused:9092", "sg", "t", "m1",
                                   logging.getLogger("test"), seed=1)
    member._commit([(FakeMessage(p, p), "accept", recorder.now())  # type: ignore[misc]
                    for p in (0, 1, 2)])
    recorder.close()
    return {op.partition: (op.outcome, op.error) for op in recorder.ops
            if op.partition is not None}


def test_only_partitions_commit_sync_confirmed_are_ok(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    failure = KafkaException(KafkaError(KafkaError._TRANSPORT))
    assert outcomes(tmp_path, monkeypatch, {TopicPartition("t", 0): None,
                                            TopicPartition("t", 1): failure}) == {
        0: ("ok", None), 1: ("info", str(failure)),
        2: ("info", "not in commit_sync's result")}


def test_a_commit_sync_that_raises_leaves_every_outcome_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failure = KafkaException(KafkaError(KafkaError._TIMED_OUT))
    assert {outcome for outcome, _ in outcomes(tmp_path, monkeypatch, failure).values()} \
        == {"info"}
