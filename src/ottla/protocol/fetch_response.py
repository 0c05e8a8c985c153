"""Fetch responses (v4-17) encoded straight from the handler's dict, without kio objects.

Fetch is the hot response: the generic path (``messages.build`` into kio entities, then
kio's writers) spent about a quarter of a 1 MiB fetch's handling time on objects that live
for one response. This writes the same bytes as kio, field for field (kio's schema is the
reference; ``tests/unit/test_fetch_response.py`` compares every version), as a list of
chunks: the fixed parts in byte arrays, each large record set (a segment's ``FileSlice``)
as the object it is, so the connection can still send it from the page cache.

The input is the dict the Fetch handler builds (the shape ``messages.build`` takes):
fields a version lacks are ignored, optional ones default as in kio's schema.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from ottla.protocol.direct_encoding import (
    I32,
    NULL_I32,
    EncodedBody,
    array_length,
    node_endpoints,
    string,
    uvarint,
)
from ottla.protocol.messages import ms

__all__ = ["EncodedBody", "encode_fetch_response"]


MIN_VERSION = 4
MAX_VERSION = 18
"""v18 (KIP-1166) changed only the request: its response is v17's."""
INLINE_RECORDS = 16384
"""Record sets in bytes shorter than this are copied into the fixed parts (as
``codec.ChunkWriter`` does); longer ones, and every ``FileSlice``, stay chunks."""

_TOP_V7 = struct.Struct(">ihi")  # throttle_time, error_code, session_id
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log start offset
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
# Tagged fields of PartitionData (v12+): tag, size, the struct and its empty tag count.
_DIVERGING_EPOCH = struct.Struct(">BBiqB")  # tag 0: epoch, end_offset
_CURRENT_LEADER = struct.Struct(">BBiiB")  # tag 1: leader_id, leader_epoch
_SNAPSHOT_ID = struct.Struct(">BBqiB")  # tag 2: end_offset, epoch
_ZERO_UUID = bytes(16)


def _partition_tags(p: Mapping[str, Any]) -> bytes:
    """Tagged fields of a partition (v12+): kio writes those that differ from -1, -1."""
    tags = []
    value = p.get("diverging_epoch")
    if value:
        epoch, end_offset = value.get("epoch", -1), value.get("end_offset", -1)
        if epoch != -1 or end_offset != -1:
            tags.append(_DIVERGING_EPOCH.pack(0, 13, epoch, end_offset, 0))
    value = p.get("current_leader")
    if value:
        leader_id, leader_epoch = value.get("leader_id", -1), value.get("leader_epoch", -1)
        if leader_id != -1 or leader_epoch != -1:
            tags.append(_CURRENT_LEADER.pack(1, 9, leader_id, leader_epoch, 0))
    value = p.get("snapshot_id")
    if value:
        end_offset, epoch = value.get("end_offset", -1), value.get("epoch", -1)
        if end_offset != -1 or epoch != -1:
            tags.append(_SNAPSHOT_ID.pack(2, 13, end_offset, epoch, 0))
    if not tags:
        return b"\x00"
    return uvarint(len(tags)) + b"".join(tags)


def encode_fetch_response(version: int, response: Mapping[str, Any]) -> EncodedBody:
    """The body of a Fetch response of ``version`` (4-18), as kio would write it."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} responses are not encoded here")
    flexible = version >= 12
    chunks: list[Any] = []
    size = 0
    buf = bytearray()
    throttle = ms(response["throttle_time"])
    # Kafka's FetchResponse.errorCounts: the top-level error (NONE before v7 too, as its
    # data object holds one) and each partition's.
    top_error = response.get("error_code", 0)
    error_counts = {top_error: 1}
    if version >= 7:
        buf += _TOP_V7.pack(throttle, top_error, response.get("session_id", 0))
    else:
        buf += I32.pack(throttle)
    topics = response["responses"]
    buf += array_length(topics, flexible)
    for topic in topics:
        if version >= 13:
            topic_id = topic["topic_id"]
            buf += _ZERO_UUID if topic_id is None else topic_id.bytes
        else:
            buf += string(topic["topic"], flexible)
        partitions = topic["partitions"]
        buf += array_length(partitions, flexible)
        for p in partitions:
            error = p["error_code"]
            error_counts[error] = error_counts.get(error, 0) + 1
            if version >= 5:
                buf += _PARTITION_V5.pack(p["partition_index"], error,
                                          p["high_watermark"], p.get("last_stable_offset", -1),
                                          p.get("log_start_offset", -1))
            else:
                buf += _PARTITION_V4.pack(p["partition_index"], error,
                                          p["high_watermark"], p.get("last_stable_offset", -1))
            aborted = p["aborted_transactions"]
            buf += array_length(aborted, flexible)
            for txn in aborted or ():
                buf += _ABORTED.pack(txn["producer_id"], txn["first_offset"])
                if flexible:
                    buf.append(0)
            if version >= 11:
                buf += I32.pack(p.get("preferred_read_replica", -1))
            records = p["records"]
            if records is None:
                buf += b"\x00" if flexible else NULL_I32
            else:
                n = len(records)
                buf += uvarint(n + 1) if flexible else I32.pack(n)
                if n < INLINE_RECORDS and isinstance(records, bytes | bytearray | memoryview):
                    buf += records
                else:  # its own chunk: a FileSlice leaves from the page cache
                    size += len(buf) + n
                    chunks.append(buf)
                    chunks.append(records)
                    buf = bytearray()
            if flexible:
                buf += _partition_tags(p)
        if flexible:
            buf.append(0)
    if flexible:
        buf += node_endpoints(response.get("node_endpoints")) if version >= 16 else b"\x00"
    if buf:
        size += len(buf)
        chunks.append(buf)
    return EncodedBody(chunks, size, error_counts, throttle)
