"""ErrorsPerSec's cost per response: what counting a response's error codes adds to
answering it.

Times, per response, with bytes-free dicts as the handlers build them:

- Produce and Fetch of 1, 100 and 1000 partitions: their encoders (which count as they
  write) against a generic walk of the same dict (what counting them the way every other
  response is counted would add);
- Metadata of 1 and 1000 partitions (replica lists of three) and a one-partition
  OffsetCommit: the generic walk (``server.metrics.error_counts``) alone;
- ``RequestChannelMetrics.record`` with and without a response, for a small one: the
  whole per-request cost of the metrics.

Run: ``python -m benchmarks.error_counts [--seconds 0.5]``. Run it with an older
``PYTHONPATH`` (a checkout before the encoders counted) to see the encoders' cost then.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from benchmarks.fetch_encode import per_call
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.fetch_response import encode_fetch_response
from ottla.protocol.produce_response import encode_produce_response
from ottla.server.metrics import error_counts as counting
from ottla.server.metrics.request_metrics import RequestChannelMetrics

RECORDS = b"r" * 200
"""A small record set inline in the body, as a consumer's fetch of a quiet partition."""


def produce(partitions: int) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [{"name": "t", "topic_id": uuid.uuid4(),
                                               "partition_responses": [
        {"index": i, "error_code": ErrorCode.none, "base_offset": 100, "log_append_time": None,
         "log_start_offset": 0, "record_errors": [], "error_message": None}
        for i in range(partitions)]}]}


def fetch(partitions: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": [
        {"topic": "t", "topic_id": uuid.uuid4(), "partitions": [
            {"partition_index": i, "error_code": ErrorCode.none, "high_watermark": 100,
             "last_stable_offset": 100, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": RECORDS}
            for i in range(partitions)]}], "node_endpoints": []}


def metadata(partitions: int) -> dict[str, Any]:
    return {"throttle_time": 0, "brokers": [], "cluster_id": "c", "controller_id": 1,
            "topics": [{"error_code": ErrorCode.none, "name": "t", "topic_id": None,
                        "is_internal": False, "topic_authorized_operations": -1,
                        "partitions": [
        {"error_code": ErrorCode.none, "partition_index": i, "leader_id": 1,
         "leader_epoch": 0, "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3],
         "offline_replicas": []} for i in range(partitions)]}]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="per measurement")
    seconds = parser.parse_args().seconds

    def us(fn: Any) -> float:
        return per_call(fn, seconds) * 1e6

    walk = counting._walk
    for partitions in (1, 100, 1000):
        p, f = produce(partitions), fetch(partitions)
        print(f"{partitions} partitions:")
        print(f"  Produce v11: encode {us(lambda p=p: encode_produce_response(11, p)):9.2f} us, "
              f"generic walk {us(lambda p=p: walk(p, {})):9.2f} us")
        print(f"  Fetch v16:   encode {us(lambda f=f: encode_fetch_response(16, f)):9.2f} us, "
              f"generic walk {us(lambda f=f: walk(f, {})):9.2f} us")
    for partitions in (1, 1000):
        m = metadata(partitions)
        print(f"Metadata, {partitions} partitions: walk "
              f"{us(lambda m=m: counting.error_counts(ApiKey.METADATA, m)):9.2f} us")
    commit = {"throttle_time": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none}]}]}
    print(f"OffsetCommit, 1 partition: walk "
          f"{us(lambda: counting.error_counts(ApiKey.OFFSET_COMMIT, commit)):9.2f} us")
    metrics = RequestChannelMetrics()
    print(f"record, no response:          "
          f"{us(lambda: metrics.record(ApiKey.OFFSET_COMMIT, 9, None, 0, 0, 0, 0)):9.2f} us")
    print("record, OffsetCommit response: " + format(us(lambda: metrics.record(
        ApiKey.OFFSET_COMMIT, 9, None, 0, 0, 0, 0, response=commit, request_bytes=80)),
        "9.2f") + " us")


if __name__ == "__main__":
    main()
