"""The clients of a chaos run, each recording every operation it invokes and how it
completed: idempotent producers with ``acks=all``, consumers of one group committing what
they read, the read of the group's committed offsets and the final full read.

Real clients (confluent-kafka, librdkafka), configured as an application that wants
Kafka's guarantees would configure them; their own logs go to the ``logger`` given.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    AcknowledgeType,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    ShareConsumer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ottla.chaos.history import Op
from ottla.chaos.recorder import Recorder


class ProduceWorkload:
    """One idempotent producer sending ``process-n`` values round-robin over the
    partitions of ``topic`` at about ``rate`` records a second, on a thread."""

    def __init__(self, recorder: Recorder, bootstrap: str, topic: str, partitions: int,
                 process: str, rate: float, logger: logging.Logger,
                 debug: str | None = None) -> None:
        self.recorder = recorder
        self.topic = topic
        self.partitions = partitions
        self.process = process
        self.rate = rate
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 30000, "request.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 1000, "client.id": process,
            # eos: librdkafka logs why it bumps its epoch (the report lists those lines).
            "logger": logger, "debug": ",".join(dict.fromkeys(["eos", *(
                debug.split(",") if debug else [])]))})
        # value -> (invoke_ns, partition, sequence): sent, no delivery report yet
        self.pending: dict[str, tuple[int, int, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=process, daemon=True)

    def start(self) -> ProduceWorkload:
        self._thread.start()
        return self

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        value = (message.value() or b"").decode()
        with self._lock:
            invoke, partition, sequence = self.pending.pop(value)
        if error is None:
            self.recorder.record(self.process, "produce", "ok", invoke, topic=self.topic,
                                 partition=message.partition(), offset=message.offset(),
                                 key=str(partition), value=value, sequence=sequence)
        else:  # a delivery error may still have been written: indeterminate
            self.recorder.record(self.process, "produce", "info", invoke, topic=self.topic,
                                 partition=partition, key=str(partition), value=value,
                                 sequence=sequence, error=str(error))

    def _run(self) -> None:
        sequences = [0] * self.partitions
        n = 0
        started = time.monotonic()
        while not self._stop.is_set():
            partition = n % self.partitions
            value = f"{self.process}-{n}"
            invoke = self.recorder.now()
            with self._lock:
                self.pending[value] = (invoke, partition, sequences[partition])
            try:
                self.producer.produce(self.topic, key=str(partition).encode(),
                                      value=value.encode(), partition=partition,
                                      on_delivery=self._delivered)
            except (BufferError, KafkaException) as e:  # never sent: certainly not written
                with self._lock:
                    del self.pending[value]
                self.recorder.record(self.process, "produce", "fail", invoke,
                                     topic=self.topic, partition=partition,
                                     key=str(partition), value=value, error=str(e))
                self.producer.poll(0.1)
                n += 1
                continue
            sequences[partition] += 1
            n += 1
            self.producer.poll(0)
            ahead = n / self.rate - (time.monotonic() - started)
            if ahead > 0:
                self._stop.wait(ahead)

    def stop(self, timeout: float = 40) -> None:
        """Stop sending, wait for the delivery reports; what has none is indeterminate."""
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(timeout)
        with self._lock:
            left = dict(self.pending)
            self.pending.clear()
        for value, (invoke, partition, sequence) in left.items():
            self.recorder.record(self.process, "produce", "info", invoke, topic=self.topic,
                                 partition=partition, key=str(partition), value=value,
                                 sequence=sequence, error="no delivery report")


class GroupMember:
    """A consumer of ``group`` subscribed to ``topic``, committing after each batch the
    offsets after what it read; its assignments, polls and commits are recorded."""

    def __init__(self, recorder: Recorder, bootstrap: str, group: str, topic: str,
                 process: str, protocol: str, logger: logging.Logger,
                 debug: str | None = None) -> None:
        self.recorder = recorder
        self.group = group
        self.topic = topic
        self.process = process
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "client.id": process, "logger": logger, **({"debug": debug} if debug else {})}
        if protocol == "classic":
            config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        self.consumer = Consumer(config)
        self.owned: set[int] = set()
        self.polled = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=process, daemon=True)

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def _ownership(self, kind: str) -> Callable[[Consumer, list[KafkaTopicPartition]], None]:
        def callback(_: Consumer, tps: list[KafkaTopicPartition]) -> None:
            partitions = sorted(tp.partition for tp in tps)
            if kind == "assign":
                self.owned.update(partitions)
            else:
                self.owned.difference_update(partitions)
            now = self.recorder.now()
            self.recorder.record(self.process, "assign" if kind == "assign" else "revoke",
                                 "ok", now, now, group=self.group, topic=self.topic,
                                 partitions=tuple(partitions),
                                 error="lost" if kind == "lost" else None)
        return callback

    def _run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._ownership("assign"),
                                on_revoke=self._ownership("revoke"),
                                on_lost=self._ownership("lost"))
        while not self._stop.is_set():
            invoke = self.recorder.now()
            try:
                messages = self.consumer.consume(200, 0.5)
            except KafkaException:
                continue
            done = self.recorder.now()
            after: dict[int, int] = {}
            for m in messages:
                if m.error() is not None:
                    continue
                self.recorder.record(self.process, "poll", "ok", invoke, done,
                                     group=self.group, topic=self.topic,
                                     partition=m.partition(), offset=m.offset(),
                                     value=(m.value() or b"").decode())
                after[m.partition()] = m.offset() + 1
                self.polled += 1
            if after:
                self._commit(after)

    def _commit(self, offsets: dict[int, int]) -> None:
        invoke = self.recorder.now()
        try:
            answered = self.consumer.commit(offsets=[
                KafkaTopicPartition(self.topic, p, o) for p, o in offsets.items()],
                asynchronous=False)
            errors = [str(tp.error) for tp in answered or [] if tp.error is not None]
        except KafkaException as e:
            errors = [str(e)]
        self.recorder.record(self.process, "commit", "info" if errors else "ok", invoke,
                             group=self.group, topic=self.topic, offsets=offsets,
                             error="; ".join(errors) or None)

    def stop(self) -> None:
        """Stop consuming and leave the group; what it still owned ends here."""
        self._stop.set()
        self._thread.join(30)
        invoke = self.recorder.now()
        owned = tuple(sorted(self.owned))
        try:
            self.consumer.close()
        except KafkaException:
            pass
        if self.owned:  # close() did not revoke them: the member owns them no more
            self.recorder.record(self.process, "revoke", "ok", invoke, group=self.group,
                                 topic=self.topic, partitions=owned, error="closed")


def read_committed_offsets(recorder: Recorder, bootstrap: str, group: str, topic: str,
                           partitions: int, logger: logging.Logger) -> Op:
    """The group's committed offsets as a fresh client of the group reads them back."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "logger": logger})
    invoke = recorder.now()
    try:
        got = consumer.committed([KafkaTopicPartition(topic, p) for p in range(partitions)],
                                 timeout=30)
        offsets = {tp.partition: tp.offset for tp in got if tp.offset >= 0}
        return recorder.record("final-committed", "committed", "ok", invoke, group=group,
                               topic=topic, offsets=offsets)
    except KafkaException as e:
        return recorder.record("final-committed", "committed", "fail", invoke, group=group,
                               topic=topic, error=str(e))
    finally:
        consumer.close()


def final_read(recorder: Recorder, bootstrap: str, topic: str, partitions: int,
               logger: logging.Logger, timeout: float = 90, mutate: str | None = None) -> None:
    """Every record of every partition, from offset 0 to the high watermark, recorded as
    ``read`` operations and a ``read-end`` per partition that reached its end.

    The high watermark is waited for until it covers every offset acknowledged to this
    run's producers (a new leader's may lag its predecessor's for a moment); after the
    ``timeout`` the read ends where it got and the checker judges.

    ``mutate`` breaks the read on purpose, to show the checker notices: ``lose-write``
    leaves out the first record, ``duplicate`` reads the first record twice."""
    acked: dict[int, int] = {}
    for op in recorder.ops:
        if op.kind == "produce" and op.outcome == "ok" and op.topic == topic \
                and op.partition is not None and op.offset is not None:
            acked[op.partition] = max(acked.get(op.partition, 0), op.offset + 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"final-read-{topic}",
                         "enable.auto.commit": False, "logger": logger})
    deadline = time.monotonic() + timeout
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            while time.monotonic() < deadline:
                try:
                    _, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, p),
                                                             timeout=5)
                except KafkaException:
                    continue
                if high >= acked.get(p, 0):
                    break
                time.sleep(0.2)
            ends[p] = high
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        reached = {p: ends[p] == 0 for p in range(partitions)}
        first: dict[int, Op] = {}
        while not all(reached.values()) and time.monotonic() < deadline:
            for m in consumer.consume(500, 1.0):
                if m.error() is not None or m.offset() >= ends[m.partition()]:
                    continue
                if m.offset() + 1 >= ends[m.partition()]:
                    reached[m.partition()] = True
                if mutate == "lose-write" and not first:
                    first[m.partition()] = Op(0, "", "read", "ok", 0, 0)  # left out
                    continue
                now = recorder.now()
                op = recorder.record("final-read", "read", "ok", now, now, topic=topic,
                                     partition=m.partition(), offset=m.offset(),
                                     key=(m.key() or b"").decode(),
                                     value=(m.value() or b"").decode())
                first.setdefault(m.partition(), op)
        if mutate == "duplicate" and first:
            p, op = next(iter(first.items()))
            now = recorder.now()
            recorder.record("final-read", "read", "ok", now, now, topic=topic, partition=p,
                            offset=ends[p], key=op.key, value=op.value)
            ends[p] += 1
        for p in range(partitions):
            now = recorder.now()
            recorder.record("final-read", "read-end", "ok" if reached[p] else "info", now,
                            now, topic=topic, partition=p, offset=ends[p])
    finally:
        consumer.close()


T = TypeVar("T")

TXN_CALL_TIMEOUT_S = 10.0
"""The timeout the copy loop gives each transactional call (init, send offsets, commit,
abort): a fault stalls a call for a few seconds; one that takes longer is retried or
its transaction aborted, which is what the run exercises."""
WEDGE_GRACE_S = 5.0
"""How long past its own timeout a call may take before the copy loop gives up on it."""

COPY_STOP_S = 4 * (TXN_CALL_TIMEOUT_S + WEDGE_GRACE_S)
"""How long a stopping copy loop may take: the transaction in hand ends in at most three
bounded calls (send offsets, commit, abort; none retried once stopping), then the
producer's flush of at most 5 s."""


class Wedged(Exception):
    """A client call that did not return within its own timeout and a grace.

    librdkafka does not bound every path of its transactional calls: a
    send_offsets_to_transaction whose cached group coordinator is down waits for a broker
    state change and never checks its deadline (librdkafka issues #5456 and #5511), so
    one call can outlast the whole run. An application can only give up on such a
    producer and start another with the same transactional id, whose InitProducerId
    fences it and aborts what it left open."""


def bounded(call: Callable[[], T], timeout_s: float, name: str) -> T:
    """``call``'s result or exception, or Wedged when it takes longer than ``timeout_s``
    (the call goes on in a daemon thread, its result dropped)."""
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:  # handed to the caller as is
            outcome.append((False, e))

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        raise Wedged(f"{name} did not return within {timeout_s:g} s")
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


def sink_value(txn: str, source_value: str) -> str:
    """What the copy loop writes for a source record: the transaction, then the value (a
    record copied again in another transaction is told apart from the first copy)."""
    return f"{txn}/{source_value}"


class CopyLoop:
    """A transactional copier (consume-transform-produce, KIP-447): consumes ``source``
    read_committed in ``group``, writes each record to the same partition of ``sink`` in
    a transaction that also carries the source offsets, commits; a share of the
    transactions (``abort_ratio``, seeded) is aborted on purpose. After an abort the
    consumer goes back to where the transaction started; after a commit of unknown
    outcome to the offsets the group has committed (a read_committed client fetches them
    stable, so they say what happened). Every transactional call is bounded
    (``TXN_CALL_TIMEOUT_S`` and ``WEDGE_GRACE_S``): a producer wedged in one is replaced,
    so a single stall costs seconds, not the run."""

    def __init__(self, recorder: Recorder, bootstrap: str, group: str, source: str,
                 sink: str, process: str, protocol: str, logger: logging.Logger, seed: int,
                 abort_ratio: float = 0.2, debug: str | None = None) -> None:
        self.recorder = recorder
        self.bootstrap = bootstrap
        self.group = group
        self.source = source
        self.sink = sink
        self.process = process
        self.logger = logger
        self.debug = debug
        self.abort_ratio = abort_ratio
        self.rng = random.Random(seed)
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "client.id": process, "logger": logger,
            **({"debug": debug} if debug else {})}
        if protocol == "classic":
            config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        self.consumer = Consumer(config)
        self.producer = self._producer()
        # value -> (invoke_ns, txn, partition): sent in a transaction, no report yet
        self.pending: dict[str, tuple[int, str, int]] = {}
        self._lock = threading.Lock()
        self.transactions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=process, daemon=True)

    def _producer(self) -> Producer:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": f"chaos-{self.process}",
            "transaction.timeout.ms": 20000, "message.timeout.ms": 20000,
            "request.timeout.ms": 10000, "linger.ms": 5, "client.id": self.process,
            "logger": self.logger, **({"debug": self.debug} if self.debug else {})})
        self._bounded(lambda: producer.init_transactions(TXN_CALL_TIMEOUT_S),
                      "init_transactions")
        return producer

    def _bounded(self, call: Callable[[], T], name: str) -> T:
        return bounded(call, TXN_CALL_TIMEOUT_S + WEDGE_GRACE_S, f"{self.process}-{name}")

    def start(self) -> CopyLoop:
        self._thread.start()
        return self

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        value = (message.value() or b"").decode()
        with self._lock:
            invoke, txn, partition = self.pending.pop(value)
        self.recorder.record(
            self.process, "txn-produce", "ok" if error is None else "fail", invoke,
            topic=self.sink, partition=message.partition() if error is None else partition,
            offset=message.offset() if error is None else None, value=value, txn=txn,
            error=None if error is None else str(error))

    def _run(self) -> None:
        self.consumer.subscribe([self.source])
        while not self._stop.is_set():
            try:
                messages = [m for m in self.consumer.consume(50, 0.3) if m.error() is None]
            except KafkaException:
                continue
            if messages:
                self._copy(messages)
        self.producer.flush(5)

    def _copy(self, messages: list[Message]) -> None:
        txn = f"{self.process}.{self.transactions}"
        self.transactions += 1
        start: dict[int, int] = {}
        after: dict[int, int] = {}
        for m in messages:
            start.setdefault(m.partition(), m.offset())
            after[m.partition()] = m.offset() + 1
        invoke = self.recorder.now()
        try:
            self.producer.begin_transaction()
        except KafkaException as e:
            self.recorder.record(self.process, "txn-begin", "fail", invoke, txn=txn,
                                 error=str(e))
            self._recover(e, start)
            return
        self.recorder.record(self.process, "txn-begin", "ok", invoke, txn=txn)
        done = self.recorder.now()
        for m in messages:
            self.recorder.record(self.process, "poll", "ok", invoke, done, group=self.group,
                                 topic=self.source, partition=m.partition(),
                                 offset=m.offset(), value=(m.value() or b"").decode(),
                                 txn=txn)
        try:
            for m in messages:
                value = sink_value(txn, (m.value() or b"").decode())
                with self._lock:
                    self.pending[value] = (self.recorder.now(), txn, m.partition())
                self.producer.produce(self.sink, value=value.encode(), partition=m.partition(),
                                      on_delivery=self._delivered)
            offsets = [KafkaTopicPartition(self.source, p, o) for p, o in after.items()]
            group = self.consumer.consumer_group_metadata()
            producer = self.producer
            self._bounded(lambda: producer.send_offsets_to_transaction(
                offsets, group, TXN_CALL_TIMEOUT_S), "send_offsets_to_transaction")
        except (BufferError, KafkaException) as e:
            self._abort(txn, e, start)
            return
        except Wedged as e:
            # nothing was committed: the next producer's InitProducerId aborts it
            self.recorder.record(self.process, "txn-abort", "info", invoke, txn=txn,
                                 error=str(e))
            self._recover(e, None)
            return
        if self.rng.random() < self.abort_ratio:
            self._abort(txn, None, start)
            return
        self._commit(txn, after, start)

    def _commit(self, txn: str, after: dict[int, int], start: dict[int, int]) -> None:
        invoke = self.recorder.now()
        producer = self.producer
        for attempt in range(3):
            try:
                self._bounded(lambda: producer.commit_transaction(TXN_CALL_TIMEOUT_S),
                              "commit_transaction")
                self.recorder.record(self.process, "txn-commit", "ok", invoke, txn=txn,
                                     group=self.group, topic=self.source, offsets=after)
                return
            except Wedged as e:
                self.recorder.record(self.process, "txn-commit", "info", invoke, txn=txn,
                                     group=self.group, topic=self.source, offsets=after,
                                     error=str(e))
                self._recover(e, None)
                return
            except KafkaException as e:
                error: KafkaError = e.args[0]
                if error.retriable() and attempt < 2 and not self._stop.is_set():
                    continue
                if error.txn_requires_abort():
                    # the commit was refused before it could take effect: abort it
                    self.recorder.record(self.process, "txn-commit", "fail", invoke,
                                         txn=txn, group=self.group, topic=self.source,
                                         offsets=after, error=str(e))
                    self._abort(txn, None, start)
                    return
                self.recorder.record(self.process, "txn-commit", "info", invoke, txn=txn,
                                     group=self.group, topic=self.source, offsets=after,
                                     error=str(e))
                self._recover(e, None)
                return

    def _abort(self, txn: str, cause: Exception | None, start: dict[int, int]) -> None:
        invoke = self.recorder.now()
        producer = self.producer
        try:
            self._bounded(lambda: producer.abort_transaction(TXN_CALL_TIMEOUT_S),
                          "abort_transaction")
        except (KafkaException, Wedged) as e:
            self.recorder.record(self.process, "txn-abort", "info", invoke, txn=txn,
                                 error=str(e))
            # Never committed (the next producer's InitProducerId aborts it): read again
            # from where it began, not from the group's offsets, which a partition read
            # for the first time does not have.
            self._renew(e, start)
            return
        self.producer.poll(0)  # the purged records' reports
        self.recorder.record(self.process, "txn-abort", "ok", invoke, txn=txn,
                             error=None if cause is None else str(cause))
        self._rewind(start)

    def _rewind(self, start: dict[int, int] | None) -> None:
        """Back to where the aborted transaction began reading (``start``), or, when
        what happened is unknown, to the offsets the group has committed (the log's
        start where it has none, as auto.offset.reset=earliest)."""
        try:
            if start is None:
                assigned = self.consumer.assignment()
                positions = [tp if tp.offset >= 0 else
                             KafkaTopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)
                             for tp in self.consumer.committed(assigned, timeout=30)]
            else:
                positions = [KafkaTopicPartition(self.source, p, o) for p, o in start.items()]
            for tp in positions:
                self.consumer.seek(tp)
        except KafkaException:
            pass  # no longer assigned: the next owner starts at the committed offsets

    def _recover(self, error: KafkaException | Wedged, start: dict[int, int] | None
                 ) -> None:
        """A fatal error, a wedged producer or an unknown end needs a new producer:
        its init_transactions fences this one and completes or aborts what it left open.
        A wedged producer is left to its call (flushing it could wedge too)."""
        if isinstance(error, KafkaException) and not error.args[0].fatal() and \
                start is not None:
            self._rewind(start)
            return
        self._renew(error, start)

    def _renew(self, error: KafkaException | Wedged, start: dict[int, int] | None) -> None:
        """A new producer in place of this one, then back to ``start`` (see _rewind)."""
        if isinstance(error, KafkaException):
            try:
                self.producer.flush(1)
            except KafkaException:
                pass
        while not self._stop.is_set():
            try:
                self.producer = self._producer()
                break
            except (KafkaException, Wedged):
                time.sleep(1)
        if not self._stop.is_set():
            self._rewind(start)

    def stop(self) -> None:
        """Stop copying (an open transaction is completed first) and leave the group."""
        self._stop.set()
        self._thread.join(COPY_STOP_S)
        with self._lock:
            left = dict(self.pending)
            self.pending.clear()
        for value, (invoke, txn, partition) in left.items():
            self.recorder.record(self.process, "txn-produce", "info", invoke, txn=txn,
                                 topic=self.sink, partition=partition, value=value,
                                 error="no delivery report")
        try:
            self.consumer.close()
        except KafkaException:
            pass


class CommittedReader:
    """A read_committed consumer of every partition of ``topic`` from the start, on a
    thread, recording each record it reads (``txn-read``) while the copiers run."""

    def __init__(self, recorder: Recorder, bootstrap: str, topic: str, partitions: int,
                 process: str, logger: logging.Logger) -> None:
        self.recorder = recorder
        self.topic = topic
        self.process = process
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": process,
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False, "logger": logger})
        self.consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=process, daemon=True)

    def start(self) -> CommittedReader:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self.consumer.consume(500, 0.5)
            except KafkaException:
                continue
            for m in messages:
                if m.error() is None:
                    now = self.recorder.now()
                    self.recorder.record(self.process, "txn-read", "ok", now, now,
                                         topic=self.topic, partition=m.partition(),
                                         offset=m.offset(), value=(m.value() or b"").decode())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


FINAL_COMMITTED = "final-read-committed"


def final_read_committed(recorder: Recorder, bootstrap: str, topic: str, partitions: int,
                         logger: logging.Logger, timeout: float = 90,
                         mutate: str | None = None) -> None:
    """Every committed record of ``topic`` as a read_committed consumer reads it from
    offset 0 to the end (``txn-read``), and a ``read-end`` per partition whose position
    reached the high watermark (every transaction of it decided by then).
    ``mutate="read-uncommitted"`` reads uncommitted on purpose: the checker must see the
    aborted records."""
    isolation = "read_uncommitted" if mutate == "read-uncommitted" else "read_committed"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": FINAL_COMMITTED,
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "logger": logger})
    deadline = time.monotonic() + timeout
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            while time.monotonic() < deadline:
                try:
                    ends[p] = consumer.get_watermark_offsets(KafkaTopicPartition(topic, p),
                                                             timeout=5)[1]
                    break
                except KafkaException:
                    time.sleep(0.2)
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        reached: dict[int, bool] = {p: ends.get(p) == 0 for p in range(partitions)}
        while not all(reached.values()) and time.monotonic() < deadline:
            for m in consumer.consume(500, 1.0):
                if m.error() is not None or m.offset() >= ends[m.partition()]:
                    continue
                now = recorder.now()
                recorder.record(FINAL_COMMITTED, "txn-read", "ok", now, now, topic=topic,
                                partition=m.partition(), offset=m.offset(),
                                value=(m.value() or b"").decode())
            for tp in consumer.position([KafkaTopicPartition(topic, p)
                                         for p in range(partitions)]):
                if tp.partition in ends and tp.offset >= ends[tp.partition]:
                    reached[tp.partition] = True
        for p in range(partitions):
            now = recorder.now()
            recorder.record(FINAL_COMMITTED, "read-end", "ok" if reached[p] else "info", now,
                            now, topic=topic, partition=p, offset=ends.get(p))
    finally:
        consumer.close()


ACK_TYPES = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
             "reject": AcknowledgeType.REJECT}


class ShareMember:
    """A consumer of the share group ``group`` (KIP-932, explicit acknowledgement) on
    ``topic``: it acknowledges each record it gets with ``weights`` of accept, release
    and reject (seeded), and commits them after each poll. Each record it got is an
    ``acquire``, each acknowledgement an ``ack`` whose outcome is its partition's result
    of the commit."""

    def __init__(self, recorder: Recorder, bootstrap: str, group: str, topic: str,
                 process: str, logger: logging.Logger, seed: int,
                 weights: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> None:
        self.recorder = recorder
        self.group = group
        self.topic = topic
        self.process = process
        self.weights = weights
        self.rng = random.Random(seed)
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": "explicit",
                                       "client.id": process, "logger": logger})
        self.consumer.subscribe([topic])
        self.acquired = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=process, daemon=True)

    def start(self) -> ShareMember:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.round()

    def round(self) -> int:
        """One poll, its records acknowledged and committed: how many it got."""
        invoke = self.recorder.now()
        try:
            messages = [m for m in self.consumer.poll(0.5) or [] if m.error() is None]
        except KafkaException:
            return 0
        done = self.recorder.now()
        acks: list[tuple[Message, str, int]] = []
        for m in messages:
            self.recorder.record(self.process, "acquire", "ok", invoke, done, group=self.group,
                                 topic=self.topic, partition=m.partition(), offset=m.offset(),
                                 value=(m.value() or b"").decode(),
                                 delivery_count=m.delivery_count())
            ack = self.rng.choices(list(ACK_TYPES), self.weights)[0]
            try:
                self.consumer.acknowledge(m, ACK_TYPES[ack])
            except KafkaException:
                continue  # not sent: the record's lock runs out, it comes back
            acks.append((m, ack, self.recorder.now()))
        self.acquired += len(messages)
        if acks:
            self._commit(acks)
        return len(messages)

    def _commit(self, acks: list[tuple[Message, str, int]]) -> None:
        """Record each acknowledgement ``ok`` only if commit_sync confirmed its partition:
        one it failed, or left out of its result (nothing says the broker has it), is
        ``info``."""
        try:
            results = self.consumer.commit_sync(30)
            failed = {(tp.topic, tp.partition): str(e) for tp, e in results.items()
                      if e is not None}
            for m, _, _ in acks:
                if not any((tp.topic, tp.partition) == (m.topic(), m.partition())
                           for tp in results):
                    failed[(m.topic(), m.partition())] = "not in commit_sync's result"
        except KafkaException as e:
            failed = {(m.topic(), m.partition()): str(e) for m, _, _ in acks}
        for m, ack, invoke in acks:
            error = failed.get((m.topic(), m.partition()))
            self.recorder.record(self.process, "ack", "ok" if error is None else "info",
                                 invoke, group=self.group, topic=self.topic,
                                 partition=m.partition(), offset=m.offset(),
                                 value=(m.value() or b"").decode(), ack=ack, error=error)

    def stop(self) -> None:
        """Stop and leave: what it holds unacknowledged goes back to the group (its
        acknowledgements are committed first: close() sends an empty one)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)
        try:
            self.consumer.close()
        except KafkaException:
            pass
