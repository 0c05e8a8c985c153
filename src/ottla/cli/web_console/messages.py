"""The message browser and the producer form. Records are read with an assigned
consumer (no group, nothing committed) from an offset, a timestamp or the end of each
partition, and each key, value and header shown as text, pretty JSON or hex."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ottla.cli.web_console.connection import (
    TIMEOUT,
    Connection,
    ConsoleError,
    failing,
    kafka_message,
)

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message
    from jsonpath import JSONPath

OFFSET_OUT_OF_RANGE = ("The requested offset is not within the range of offsets "
                       "maintained by the server.")
"""Kafka's text of OFFSET_OUT_OF_RANGE (Errors.java)."""

MAX_RECORDS = 1000


@dataclass
class Shown:
    """Bytes as the page shows them: ``kind`` is json (pretty-printed), text or hex."""

    kind: str
    text: str


def show(data: bytes | None) -> Shown | None:
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Shown("hex", data.hex(" "))
    if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return Shown("hex", data.hex(" "))
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return Shown("json", json.dumps(json.loads(stripped), indent=2,
                                            ensure_ascii=False))
        except ValueError:
            pass
    return Shown("text", text)


@dataclass
class Record:
    partition: int
    offset: int
    timestamp: int
    key: Shown | None
    value: Shown | None
    headers: list[tuple[str, Shown | None]]

    def selected_by(self, path: JSONPath) -> bool:
        """Whether ``path`` selects a node of the value (a JSON value only)."""
        if self.value is None or self.value.kind != "json":
            return False
        return bool(path.findall(json.loads(self.value.text)))

    def matches(self, needle: str) -> bool:
        texts = [s.text for s in (self.key, self.value) if s is not None]
        texts += [name for name, _ in self.headers]
        texts += [s.text for _, s in self.headers if s is not None]
        return any(needle in t for t in texts)

    def json_line(self, topic: str) -> str:
        """One line of the download: key, value and headers as the page shows them."""
        def plain(s: Shown | None) -> str | None:
            return None if s is None else (json.dumps(json.loads(s.text), separators=(
                ",", ":"), ensure_ascii=False) if s.kind == "json" else s.text)
        return json.dumps({"topic": topic, "partition": self.partition,
                           "offset": self.offset, "timestamp": self.timestamp,
                           "key": plain(self.key), "value": plain(self.value),
                           "headers": [[k, plain(v)] for k, v in self.headers]},
                          ensure_ascii=False)


@dataclass
class Browse:
    """What the browser was asked: ``start`` is offset, timestamp or latest; ``position``
    the offset or the epoch milliseconds; ``partition`` None for all of them."""

    partition: int | None = None
    start: str = "latest"
    position: int | None = None
    limit: int = 50
    contains: str = ""
    jsonpath: str = ""
    """RFC 9535: only records whose JSON value it selects something in."""

    def query(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items() if v not in (None, "")}


def _record(message: Message) -> Record:
    return Record(message.partition(), message.offset(), message.timestamp()[1],
                  show(message.key()), show(message.value()),
                  [(k, show(v)) for k, v in (message.headers() or [])])


def browse(connection: Connection, topic: str, request: Browse) -> list[Record]:
    """Up to ``limit`` records from each chosen partition's starting point to its end
    as it is now (never waiting for new ones), sorted by timestamp then partition."""
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer(connection.conf | {
        "group.id": "ottla-console", "enable.auto.commit": False,
        "enable.partition.eof": True, "auto.offset.reset": "error"})
    try:
        with failing(f"Reading '{topic}' failed"):
            metadata = consumer.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            raise ConsoleError(f"Topic '{topic}' does not exist." if metadata is None or
                               not metadata.partitions else kafka_message(
                                   KafkaException(metadata.error)))
        partitions = sorted(metadata.partitions) if request.partition is None \
            else [request.partition]
        if request.partition is not None and request.partition not in metadata.partitions:
            raise ConsoleError(f"Topic '{topic}' has no partition {request.partition}.")
        with failing(f"Reading '{topic}' failed"):
            assignment = _starts(consumer, topic, partitions, request)
            return _read(consumer, topic, assignment, request, _compiled(request.jsonpath))
    finally:
        consumer.close()


def _starts(consumer: Consumer, topic: str, partitions: list[int], request: Browse
            ) -> list[tuple[int, int, int]]:
    """(partition, first offset, end offset) of each partition with records to read."""
    from confluent_kafka import TopicPartition

    marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)
             for p in partitions}
    times: dict[int, int] = {}
    if request.start == "timestamp":
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, request.position or 0) for p in partitions],
            timeout=TIMEOUT)
        times = {tp.partition: tp.offset for tp in found}
    starts = []
    for p in partitions:
        low, high = marks[p]
        if request.start == "offset":
            offset = request.position or 0
            if not low <= offset <= high:
                raise ConsoleError(f"Offset {offset} of partition {p}: "
                                   f"{OFFSET_OUT_OF_RANGE} Its offsets are {low} to "
                                   f"{high} (the log end).")
        elif request.start == "timestamp":
            offset = times.get(p, -1)
            offset = high if offset < 0 else offset
        else:
            offset = max(high - request.limit, low)
        if offset < high:
            starts.append((p, offset, high))
    return starts


def _compiled(expression: str) -> JSONPath | None:
    import jsonpath

    if not expression.strip():
        return None
    try:
        return jsonpath.compile(expression.strip())
    except jsonpath.JSONPathError as e:
        raise ConsoleError(f"Invalid JSONPath {expression!r}: {e.args[0]}") from e


def _read(consumer: Consumer, topic: str, assignment: list[tuple[int, int, int]],
          request: Browse, path: JSONPath | None) -> list[Record]:
    from confluent_kafka import KafkaError, TopicPartition

    if not assignment:
        return []
    ends = {p: end for p, _, end in assignment}
    consumer.assign([TopicPartition(topic, p, start)
                     for p, start, _ in assignment])
    limit = min(max(request.limit, 1), MAX_RECORDS)
    found: dict[int, list[Record]] = {p: [] for p in ends}
    position = {p: start for p, start, _ in assignment}
    open_partitions = set(ends)
    deadline = time.monotonic() + TIMEOUT * 2
    while open_partitions and time.monotonic() < deadline:
        # consume() returns when it has this many or at its timeout: ask for no more
        # than the records left before the ends, so that the last ones come at once.
        left = sum(ends[p] - position[p] for p in open_partitions)
        for message in consumer.consume(max(1, min(left, 500)), timeout=0.5):
            p = message.partition()
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard(p)
                    continue
                raise ConsoleError(f"Reading partition {p} failed: {error.str()}")
            if p not in open_partitions:
                continue
            position[p] = message.offset() + 1
            record = _record(message)
            if (not request.contains or record.matches(request.contains)) and \
                    (path is None or record.selected_by(path)):
                found[p].append(record)
            if message.offset() + 1 >= ends[p] or len(found[p]) >= limit:
                open_partitions.discard(p)
    records = [r for rows in found.values() for r in rows]
    records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    return records[:limit] if request.start != "latest" else records[-limit:]


def produce(connection: Connection, topic: str, partition: int | None, key: str | None,
            value: str, headers: list[tuple[str, str]]) -> tuple[int, int]:
    """Send one record and wait for its acknowledgement: (partition, offset)."""
    from confluent_kafka import KafkaException

    producer = connection.producer()
    with failing(f"Producing to '{topic}' failed"):
        metadata = producer.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise ConsoleError(f"Topic '{topic}' does not exist.")
    result: list[Message] = []
    errors: list[str] = []

    def delivered(error: object, message: Message) -> None:
        if error is not None:
            errors.append(error.str() if hasattr(error, "str") else str(error))
        else:
            result.append(message)

    kwargs = {} if partition is None else {"partition": partition}
    try:
        producer.produce(topic, value=value.encode(), key=None if key is None else key.encode(),
                         headers=[(k, v.encode()) for k, v in headers],
                         on_delivery=delivered, **kwargs)
    except (KafkaException, BufferError) as e:
        raise ConsoleError(f"Producing to '{topic}' failed: {kafka_message(e)}") from e
    deadline = time.monotonic() + TIMEOUT + 3
    while not result and not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    if errors:
        raise ConsoleError(f"Producing to '{topic}' failed: {errors[0]}")
    if not result:
        raise ConsoleError(f"Producing to '{topic}' timed out: the cluster did not "
                           f"acknowledge the record.")
    return result[0].partition(), result[0].offset()
