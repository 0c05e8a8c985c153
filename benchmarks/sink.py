"""The ceiling server: Ottla's own network layer and codec, with handlers that store
nothing. Produce is acknowledged at once; Fetch answers as a broker with data waiting
does, with as many whole batches as the request's byte limits allow, pre-built, rewritten
to the requested offsets and taken in turn from a pool larger than the CPU caches. A
client's throughput against it is what the wire, the client and frame handling allow;
the broker's ratio to it is what storage and the broker's logic cost.

With ``--store DIR`` the sink also appends every produced batch to one file per
partition (``pwrite``, no fsync, like the broker's default flush policy): the ceiling
for a broker that must at least put the bytes in the page cache.

Run: ``python -m benchmarks.sink --port 9192 --record-size 1024 [--store DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.fetch_response import EncodedBody, encode_fetch_response
from ottla.protocol.produce_response import encode_produce_response
from ottla.protocol.records import build_batch, set_base_offset
from ottla.protocol.requests import NO_RESPONSE, ApiSpec, ApiTable
from ottla.server import allocator
from ottla.server.network import KafkaServer
from ottla.server.request_dispatcher import RequestDispatcher

PARTITIONS = 1
HIGH_WATERMARK = 1 << 50
POOL_BYTES = 128 << 20


class SinkState:
    def __init__(self, host: str, port: int, record_size: int, store: str | None = None
                 ) -> None:
        self.host = host
        self.port = port
        self.offsets: dict[tuple[str, int], int] = {}
        self.store = store
        self.files: dict[tuple[str, int], list[int]] = {}  # fd, size
        # Batches of about 1 MiB laid end to end in one pool larger than the CPU caches
        # (128 MiB; L3 is 32 MiB here): served from one hot buffer, the "ceiling"
        # measured the cache, at twice what any server can send from memory it does not
        # hold in cache.
        count = max(1, (1 << 20) // (record_size + 20))
        batch = build_batch([(None, b"x" * record_size)] * count, timestamp=1_700_000_000_000)
        self.batch_bytes = len(batch)
        self.batches = POOL_BYTES // len(batch) + 1
        self.pool = bytearray(batch) * self.batches
        self.next_batch = 0
        self.batch_records = count

    def records_for(self, fetch_offset: int, max_bytes: int) -> memoryview:
        """As many whole batches as ``max_bytes`` allows (at least one), as a broker with
        data waiting answers: a view of the pool, offsets rewritten in place."""
        n = min(self.batches, max(1, max_bytes // self.batch_bytes))
        if self.next_batch + n > self.batches:
            self.next_batch = 0
        start = self.next_batch * self.batch_bytes
        for i in range(n):
            set_base_offset(self.pool, start + i * self.batch_bytes,
                            fetch_offset + i * self.batch_records)
        self.next_batch += n
        return memoryview(self.pool)[start:start + n * self.batch_bytes]


def api_versions(state: SinkState, ctx: Any, req: Any) -> dict[str, Any]:
    return {"error_code": ErrorCode.none, "throttle_time": 0, "api_keys": [
        {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
        for s in SINK_APIS], "supported_features": [],
        "finalized_features_epoch": -1, "finalized_features": [],
        "zk_migration_ready": False}


def metadata(state: SinkState, ctx: Any, req: Any) -> dict[str, Any]:
    topics = [t.name for t in (req.topics or [])]
    return {"throttle_time": 0, "brokers": [
        {"node_id": 0, "host": state.host, "port": state.port, "rack": None}],
        "cluster_id": "sink", "controller_id": 0, "cluster_authorized_operations": 0,
        "topics": [{"error_code": ErrorCode.none, "name": name, "topic_id": uuid.UUID(int=0),
                    "is_internal": False, "topic_authorized_operations": 0, "partitions": [
                        {"error_code": ErrorCode.none, "partition_index": p, "leader_id": 0,
                         "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0],
                         "offline_replicas": []} for p in range(PARTITIONS)]}
                   for name in topics]}


def produce(state: SinkState, ctx: Any, req: Any) -> Any:
    responses = []
    for topic in req.topic_data:
        parts = []
        for p in topic.partition_data:
            key = (topic.name, p.index)
            base = state.offsets.get(key, 0)
            records = p.records or b""
            count = int.from_bytes(records[57:61], "big") if len(records) >= 61 else 0
            state.offsets[key] = base + count
            if state.store is not None:
                store(state, key, records)
            parts.append({"index": p.index, "error_code": ErrorCode.none, "base_offset": base,
                          "log_append_time": -1, "log_start_offset": 0, "record_errors": [],
                          "error_message": None})
        responses.append({"name": topic.name, "partition_responses": parts})
    if req.acks == 0:
        return NO_RESPONSE
    # Encoded as the broker encodes its Produce responses, so only storage differs.
    return encode_produce_response(ctx.api_version, {"responses": responses,
                                                     "throttle_time": 0})


def store(state: SinkState, key: tuple[str, int], records: bytes) -> None:
    entry = state.files.get(key)
    if entry is None:
        path = os.path.join(state.store, f"{key[0]}-{key[1]}.log")
        entry = state.files[key] = [os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644), 0]
    view = memoryview(records)
    written = 0
    while written < len(view):
        written += os.pwrite(entry[0], view[written:], entry[1] + written)
    entry[1] += len(view)


def fetch(state: SinkState, ctx: Any, req: Any) -> EncodedBody:
    topics = []
    budget = req.max_bytes
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            batch = state.records_for(p.fetch_offset, min(p.partition_max_bytes, budget))
            budget = max(0, budget - len(batch))
            parts.append({"partition_index": p.partition, "error_code": ErrorCode.none,
                          "high_watermark": HIGH_WATERMARK,
                          "last_stable_offset": HIGH_WATERMARK, "log_start_offset": 0,
                          "aborted_transactions": None, "preferred_read_replica": -1,
                          "records": batch})
        topics.append({"topic": topic.topic, "partitions": parts})
    # Encoded as the broker encodes its Fetch responses, so only storage differs.
    return encode_fetch_response(ctx.api_version, {
        "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
        "responses": topics, "node_endpoints": []})


def list_offsets(state: SinkState, ctx: Any, req: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": ErrorCode.none,
             "timestamp": -1, "offset": 0 if p.timestamp == -2 else HIGH_WATERMARK,
             "leader_epoch": 0} for p in t.partitions]} for t in req.topics]}


SINK_APIS = [ApiSpec(int(k), lo, hi, fn) for k, lo, hi, fn in [
    (ApiKey.API_VERSIONS, 0, 4, api_versions), (ApiKey.METADATA, 0, 12, metadata),
    (ApiKey.PRODUCE, 3, 9, produce), (ApiKey.FETCH, 4, 12, fetch),
    (ApiKey.LIST_OFFSETS, 1, 7, list_offsets)]]


async def serve(host: str, port: int, record_size: int, ready: asyncio.Event | None = None,
                store: str | None = None) -> None:
    state = SinkState(host, port, record_size, store)
    server = KafkaServer(RequestDispatcher(ApiTable("broker", state, SINK_APIS)), "PLAINTEXT",
                         host, port, 104857600)
    await server.start()
    state.port = server.port
    print(f"sink listening on {host}:{server.port}", flush=True)
    if ready is not None:
        ready.set()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--store", help="append produced batches to files in this directory")
    args = parser.parse_args()
    allocator.tune()  # the same malloc settings as the broker
    run = serve(args.host, args.port, args.record_size, store=args.store)
    try:
        import uvloop
        uvloop.run(run)
    except ImportError:
        asyncio.run(run)


if __name__ == "__main__":
    main()
