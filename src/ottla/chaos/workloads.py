"""The clients of a chaos run, each recording every operation it invokes and how it
completed: idempotent producers with ``acks=all``, consumers of one group committing what
they read, the read of the group's committed offsets and the final full read.

Real clients (confluent-kafka, librdkafka), configured as an application that wants
Kafka's guarantees would configure them; their own logs go to the ``logger`` given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
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
