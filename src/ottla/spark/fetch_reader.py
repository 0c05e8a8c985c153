"""Executor-side reading of one offset range with the Fetch API, decoded column-wise.

The columnar reader (``reader=columnar``, the default) asks the partition's leader for
raw record batches (Fetch v12, one partition, a few MiB at a time, the next request sent
before the last answer is decoded so the broker works while this task decodes) and turns
each answer into one Arrow batch with :mod:`ottla.spark.arrow_records`: no Python
object per record, where the confluent-kafka reader makes several.

It keeps the confluent-kafka reader's semantics: records in ``[from, until)`` in offset
order; control batches never, and with ``read_committed`` (Fetch's isolation level, so
the broker stops at the last stable offset) the batches of aborted transactions dropped
as Kafka's consumer drops them; a start before the log start fails with
``failOnDataLoss`` and moves to the log start without it; the range ends when the next
offset to fetch reaches its end (markers, aborted batches and compaction gaps leave no
record to wait for) or when the broker has nothing from there on although its high
watermark (last stable offset) is at or past the end (a tail compacted away); a task
that gets no closer to the end for ``kafkaConsumer.pollTimeoutMs`` fails.

It speaks plaintext only, through :mod:`ottla.client`: with TLS or SASL client settings
the source falls back to the confluent-kafka reader (:func:`unusable_because`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ottla.client.blocking import BlockingClient
from ottla.protocol.api import ApiKey
from ottla.protocol.codec import decode_response, skip_tagged_fields
from ottla.protocol.errors import ErrorCode, MalformedRequest
from ottla.protocol.varint import read_unsigned_varint
from ottla.spark.arrow_records import AbortedTransactions, available, select_batches, to_arrow
from ottla.spark.offset_reader import OffsetRange, data_loss

FETCH_VERSION = 12  # the first flexible version; topics by name (v13+ want topic ids)
METADATA_VERSION = 12
LIST_OFFSETS_VERSION = 7
FETCH_MAX_BYTES = 4 * 1024 * 1024  # per request; kafka.max.partition.fetch.bytes overrides
LARGEST_FETCH = 1 << 30
FETCH_MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.1
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # Fetch's and ListOffsets' isolation levels
CLIENT_ID = "ottla-spark"

_SIZE = struct.Struct(">i")


def unusable_because(client: Mapping[str, str]) -> str | None:
    """Why the columnar reader cannot read with these ``kafka.*`` settings on this
    machine (None when it can): it needs the compiled decoder and a plaintext listener."""
    if not available():
        return "the compiled decoder ottla._records is not importable"
    protocol = client.get("security.protocol", "plaintext").strip().lower()
    if protocol != "plaintext":
        return f"security.protocol is {protocol}"
    secured = sorted(k for k in client if k.startswith(("sasl.", "ssl.")))
    if secured:
        return f"{secured[0]} is set"
    return None


class _Connection(BlockingClient):
    """A blocking connection that receives each response frame into one reused buffer
    (no chunks joined, no fresh zeroed buffer per response)."""

    def __init__(self, address: str, timeout: float, client_id: str) -> None:
        super().__init__(address, timeout=timeout, client_id=client_id)
        self._buffer = bytearray()

    def receive_frame(self) -> memoryview:
        """The next response frame (without its size); valid until the next call."""
        (size,) = _SIZE.unpack(self._recv_exactly(_SIZE.size))
        if len(self._buffer) < size:
            self._buffer = bytearray(max(size, 2 * len(self._buffer)))
        view = memoryview(self._buffer)[:size]
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if not n:
                raise ConnectionError("connection closed by the broker")
            got += n
        return view

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        got_id, response = decode_response(api_key, version, self.receive_frame().toreadonly())
        if got_id != correlation_id:
            raise ConnectionError(f"response {got_id} to request {correlation_id}")
        return response


@dataclass(slots=True)
class FetchedPartition:
    """One partition of a Fetch response, its records a view of the received frame."""

    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[int, int]]  # (producer id, first offset)
    records: memoryview


_TOP = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, last stable, log start
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_PREFERRED_READ_REPLICA = 4


def _compact_length(frame: memoryview, pos: int) -> tuple[int, int]:
    """A compact array or bytes length (-1 for null) and the position after it."""
    n, pos = read_unsigned_varint(frame, pos)
    return n - 1, pos


def parse_fetch_response(frame: memoryview, topic: str, partition: int
                         ) -> tuple[int, ErrorCode, FetchedPartition | None]:
    """(correlation id, top-level error, ``topic``-``partition``'s data) of a Fetch v12
    response frame. Parsed here rather than by kio so the records stay a view of the
    frame: kio would copy every fetched byte once more."""
    (correlation_id,) = _SIZE.unpack_from(frame, 0)
    pos = skip_tagged_fields(frame, 4)
    _throttle, error, _session = _TOP.unpack_from(frame, pos)
    pos += _TOP.size
    found = None
    topics, pos = _compact_length(frame, pos)
    for _ in range(topics):
        length, pos = _compact_length(frame, pos)
        name = bytes(frame[pos:pos + length]).decode()
        pos += max(length, 0)
        partitions, pos = _compact_length(frame, pos)
        for _ in range(partitions):
            index, p_error, high, stable, log_start = _PARTITION.unpack_from(frame, pos)
            pos += _PARTITION.size
            count, pos = _compact_length(frame, pos)
            aborted = []
            for _ in range(count):
                aborted.append(_ABORTED.unpack_from(frame, pos))
                pos = skip_tagged_fields(frame, pos + _ABORTED.size)
            pos += _PREFERRED_READ_REPLICA
            length, pos = _compact_length(frame, pos)
            if pos + max(length, 0) > len(frame):
                raise MalformedRequest("records run past the end of the frame")
            records = frame[pos:pos + max(length, 0)]
            pos = skip_tagged_fields(frame, pos + max(length, 0))
            if name == topic and index == partition:
                found = FetchedPartition(ErrorCode(p_error), high, stable, log_start, aborted,
                                         records)
        pos = skip_tagged_fields(frame, pos)
    return correlation_id, ErrorCode(error), found


class PartitionFetcher:
    """Fetch, ListOffsets and Metadata for one partition, at its leader."""

    def __init__(self, client: Mapping[str, str], topic: str, partition: int,
                 read_committed: bool) -> None:
        self.bootstrap = [s.strip() for s in client["bootstrap.servers"].split(",")
                          if s.strip()]
        self.client_id = client.get("client.id", CLIENT_ID)
        self.timeout_s = int(client.get("socket.timeout.ms", "60000")) / 1000
        self.max_bytes = int(client.get("max.partition.fetch.bytes", FETCH_MAX_BYTES))
        self.topic = topic
        self.partition = partition
        self.isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        self._leader: _Connection | None = None

    def close(self) -> None:
        if self._leader is not None:
            self._leader.close()
            self._leader = None

    def _connect(self, address: str) -> _Connection:
        return _Connection(address, timeout=self.timeout_s, client_id=self.client_id)

    def leader(self) -> _Connection:
        """The connection to the partition's leader, found through Metadata."""
        if self._leader is not None:
            return self._leader
        failures = []
        for address in self.bootstrap:
            try:
                with self._connect(address) as bootstrap:
                    response = bootstrap.request(ApiKey.METADATA, METADATA_VERSION, {
                        "topics": [{"name": self.topic, "topic_id": None}],
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False})
            except OSError as e:
                failures.append(f"{address}: {e}")
                continue
            brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
            for topic in response.topics:
                if topic.name != self.topic:
                    continue
                if topic.error_code != ErrorCode.none:
                    raise RetriableError(f"Metadata of {self.topic}: {topic.error_code.name}")
                for p in topic.partitions:
                    if p.partition_index == self.partition and p.leader_id in brokers:
                        self._leader = self._connect(brokers[p.leader_id])
                        return self._leader
            raise RetriableError(f"{self.topic}-{self.partition} has no leader")
        raise RetriableError(f"no bootstrap server answered: {'; '.join(failures)}")

    def send_fetch(self, offset: int) -> int:
        """Send a Fetch at ``offset`` without waiting: the correlation id to receive."""
        return self.leader().send(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": -1, "max_wait": FETCH_MAX_WAIT_MS, "min_bytes": 1,
            "max_bytes": self.max_bytes, "isolation_level": self.isolation, "session_id": 0,
            "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": self.topic, "partitions": [{
                "partition": self.partition, "current_leader_epoch": -1,
                "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": self.max_bytes}]}]})

    def receive_fetch(self, correlation_id: int) -> FetchedPartition:
        """The partition's part of the Fetch response (a view valid until the next)."""
        frame = self.leader().receive_frame()
        try:
            got_id, error, found = parse_fetch_response(frame, self.topic, self.partition)
        except (MalformedRequest, struct.error, ValueError) as e:
            raise ConnectionError(f"a Fetch response that cannot be read: {e}") from e
        if got_id != correlation_id:
            raise ConnectionError(f"response {got_id} to request {correlation_id}")
        if error.retriable:
            raise RetriableError(f"Fetch failed: {error.name}")
        if error != ErrorCode.none:
            raise RuntimeError(f"Fetch of {self.topic}-{self.partition} failed: {error.name}")
        if found is None:
            raise ConnectionError(f"the Fetch response has no {self.topic}-{self.partition}")
        return found

    def list_offset(self, timestamp: int) -> int:
        """ListOffsets at the leader: EARLIEST_TIMESTAMP or LATEST_TIMESTAMP."""
        response = self.leader().request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": -1, "isolation_level": self.isolation, "topics": [
                {"name": self.topic, "partitions": [{
                    "partition_index": self.partition, "current_leader_epoch": -1,
                    "timestamp": timestamp}]}]})
        answer = response.topics[0].partitions[0]
        error = ErrorCode(answer.error_code)
        if error.retriable:
            raise RetriableError(f"ListOffsets: {error.name}")
        if error != ErrorCode.none:
            raise RuntimeError(f"ListOffsets of {self.topic}-{self.partition} failed: "
                               f"{error.name}")
        return int(answer.offset)


class RetriableError(Exception):
    """A leader move, a broker restart or a topic not yet known: look up the leader again
    and retry until the poll timeout."""


def read_range_columnar(r: OffsetRange, client: Mapping[str, str], include_headers: bool,
                        fail_on_data_loss: bool, poll_timeout_ms: int,
                        isolation_level: str = "read_uncommitted") -> Iterator[pa.RecordBatch]:
    """Every record in ``[r.from_offset, r.until_offset)`` that the isolation level
    shows, in offset order, one Arrow batch per Fetch response that has any."""
    if r.size <= 0:
        return
    fetcher = PartitionFetcher(client, r.topic, r.partition,
                               read_committed=isolation_level == "read_committed")
    try:
        yield from _RangeRead(fetcher, r, include_headers, fail_on_data_loss,
                              poll_timeout_ms).batches()
    finally:
        fetcher.close()


class _RangeRead:
    """The fetch loop of one range, with what it needs to retry and to give up."""

    def __init__(self, fetcher: PartitionFetcher, r: OffsetRange, include_headers: bool,
                 fail_on_data_loss: bool, poll_timeout_ms: int) -> None:
        self.fetcher = fetcher
        self.r = r
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.timeout_s = poll_timeout_ms / 1000
        self.deadline = time.monotonic() + self.timeout_s

    @property
    def name(self) -> str:
        return f"{self.r.topic}-{self.r.partition}"

    def _retry(self, problem: str, position: int, reconnect: bool = True) -> None:
        """Back off after a failure (looking the leader up again), or fail once the
        range has made no progress for the poll timeout."""
        if reconnect:
            self.fetcher.close()
        if time.monotonic() > self.deadline:
            raise TimeoutError(
                f"no records of {self.name} arrived for {int(self.timeout_s * 1000)} ms while "
                f"reading offsets {self.r.from_offset} to {self.r.until_offset} (at "
                f"{position}): {problem}")
        time.sleep(RETRY_BACKOFF_S)

    def _list_offset(self, timestamp: int) -> int:
        while True:
            try:
                return self.fetcher.list_offset(timestamp)
            except (OSError, RetriableError) as e:
                self._retry(str(e), -1)

    def _out_of_range(self, position: int) -> int | None:
        """Where to go on after OFFSET_OUT_OF_RANGE (None: the range is done)."""
        low = self._list_offset(EARLIEST_TIMESTAMP)
        if position < low:
            if self.fail_on_data_loss:
                raise data_loss(f"Cannot fetch offset {position} of {self.name}: the "
                                f"earliest available offset is {low}")
            return low
        high = self._list_offset(LATEST_TIMESTAMP)
        if position < high:  # in range again (a leader that had not caught up)
            self._retry(f"offset {position} was out of range", position)
            return position
        if self.fail_on_data_loss:
            raise data_loss(f"Offset out of range for {self.name}: offset {position} is "
                            f"past the end of the log ({high})")
        return None  # the log was truncated below the range: nothing is left to read

    def batches(self) -> Iterator[pa.RecordBatch]:
        r = self.r
        until = r.until_offset
        position = r.from_offset if r.from_offset >= 0 else \
            self._list_offset(EARLIEST_TIMESTAMP)
        read_committed = self.fetcher.isolation == READ_COMMITTED
        in_flight: int | None = None  # the correlation id of the Fetch at ``position``
        while position < until:
            try:
                if in_flight is None:
                    in_flight = self.fetcher.send_fetch(position)
                data = self.fetcher.receive_fetch(in_flight)
            except (OSError, RetriableError) as e:  # socket errors are OSErrors
                in_flight = None
                self._retry(str(e), position)
                continue
            in_flight = None
            error = data.error_code
            if error == ErrorCode.offset_out_of_range:
                moved = self._out_of_range(position)
                if moved is None:
                    return
                position = moved
                continue
            if error.retriable:
                self._retry(error.name, position)
                continue
            if error != ErrorCode.none:
                raise RuntimeError(f"Fetch of {self.name} at offset {position} failed: "
                                   f"{error.name}")
            aborted = None
            if read_committed:
                aborted = AbortedTransactions.of(data.aborted_transactions)
            selection = select_batches(data.records, position, aborted)
            if selection.next_offset > position:
                fetched_at, position = position, selection.next_offset
                self.deadline = time.monotonic() + self.timeout_s
                if position < until:
                    # The broker reads the next answer while this one is decoded.
                    try:
                        in_flight = self.fetcher.send_fetch(position)
                    except (OSError, RetriableError):
                        in_flight = None  # sent again (after a retry) by the loop
                if selection.segments:
                    batch = to_arrow(selection.segments, r.topic, r.partition,
                                     self.include_headers, fetched_at, until)
                    if batch.num_rows:
                        yield batch
            elif selection.truncated:
                # One batch is larger than a whole fetch: ask for more (KIP-74 brokers
                # always send the first batch whole, so this is for older ones).
                if self.fetcher.max_bytes >= LARGEST_FETCH:
                    raise RuntimeError(f"a record batch of {self.name} at offset {position} "
                                       f"is larger than {LARGEST_FETCH} bytes")
                self.fetcher.max_bytes *= 2
            else:
                log_end = data.last_stable_offset if read_committed else data.high_watermark
                if log_end >= until:
                    return  # nothing readable is left before the range's end
                # The broker waited FETCH_MAX_WAIT_MS for records that should be there
                # (a new leader's high watermark can lag behind the old one's).
                self._retry(f"the log ends at {log_end}", position, reconnect=False)
