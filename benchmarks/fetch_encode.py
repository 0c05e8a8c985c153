"""Fetch response encoding: the hand-written encoder beside the generic kio path.

Times, per response, what the broker does between the Fetch handler's dict and the chunks
the connection sends: ``protocol.fetch_response.encode_fetch_response`` against
``messages.build`` + ``codec.encode_body_chunks`` (the path every other response takes),
measured in the same run. Two shapes: a consumer's fetch of one partition returning a
1 MiB ``FileSlice``, and a fetch of 50 partitions returning about 20 KiB each. Record
sets are slices of a real segment and are not read, as on the broker.

Run: ``python -m benchmarks.fetch_encode [--seconds 0.5] [--version 16]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from ottla.protocol.api import ApiKey, response_schema
from ottla.protocol.codec import encode_body_chunks
from ottla.protocol.errors import ErrorCode
from ottla.protocol.fetch_response import encode_fetch_response
from ottla.protocol.messages import build
from ottla.protocol.records import build_batch, read_header
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig
from ottla.storage.segment import FileSlice


def build_log(path: str) -> Log:
    """2 MiB of 1 KiB records in batches of 20."""
    lg = Log(path, "bench", 0, LogConfig.resolve({}), now_ms=1000, clean_shutdown=False)
    value = b"v" * 1024
    while lg.size < 2 << 20:
        batch = bytearray(build_batch([(None, value)] * 20, timestamp=1000))
        lg.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
    lg.high_watermark = lg.log_end_offset
    return lg


def fetch_response(lg: Log, partitions: int, bytes_each: int) -> dict[str, Any]:
    """The dict the Fetch handler builds for ``partitions`` partitions of one topic."""
    parts = []
    for index in range(partitions):
        records = lg.read(0, bytes_each).records
        assert isinstance(records, FileSlice)
        parts.append({"partition_index": index, "error_code": ErrorCode.none,
                      "high_watermark": lg.high_watermark, "last_stable_offset": lg.high_watermark,
                      "log_start_offset": 0, "aborted_transactions": None,
                      "preferred_read_replica": -1, "records": records})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 7,
            "responses": [{"topic": "bench", "topic_id": uuid.uuid4(), "partitions": parts}],
            "node_endpoints": []}


def per_call(fn: Callable[[], Any], seconds: float) -> float:
    """Seconds per call: the best of five rounds of ``seconds / 5`` each."""
    n = 1
    while True:  # calibrate a batch of calls to about 10 ms
        start = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - start > 0.01:
            break
        n *= 2
    best = float("inf")
    for _ in range(5):
        calls = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds / 5:
            for _ in range(n):
                fn()
            calls += n
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="per path and shape")
    parser.add_argument("--version", type=int, default=16, help="Fetch version (4-17)")
    args = parser.parse_args()
    version = args.version
    schema = response_schema(ApiKey.FETCH, version)
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        lg = build_log(f"{tmp}/bench-0")
        try:
            for label, partitions, each in (("1 partition, 1 MiB", 1, 1 << 20),
                                            ("50 partitions, ~20 KiB each", 50, 20 << 10)):
                response = fetch_response(lg, partitions, each)
                old = b"".join(c.read() if isinstance(c, FileSlice) else c
                               for c in encode_body_chunks(build(schema, response))[0])
                new = b"".join(c.read() if isinstance(c, FileSlice) else c
                               for c in encode_fetch_response(version, response).chunks)
                assert old == new, "the encoders disagree"
                kio = per_call(lambda r=response: encode_body_chunks(build(schema, r)),
                               args.seconds)
                direct = per_call(lambda r=response: encode_fetch_response(version, r),
                                  args.seconds)
                print(f"Fetch v{version}, {label} ({len(new) / (1 << 20):.2f} MiB):")
                print(f"  build + kio encode_body_chunks: {kio * 1e6:8.1f} us per response")
                print(f"  encode_fetch_response:          {direct * 1e6:8.1f} us per response")
                print(f"  ratio (new / old): {direct / kio:.4f}")
        finally:
            lg.close()


if __name__ == "__main__":
    main()
