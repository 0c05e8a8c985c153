"""The metadata log of a one-voter quorum: the local node is the only voter and leader.

A record batch is committed once it is written and fsynced, since the leader alone is a
majority. Every start begins a new epoch, recorded in ``quorum-state`` as Kafka does. The
multi-voter Raft (election, replication by Fetch, snapshots) replaces this class behind
the same interface: ``append`` then ``commit``, and ``read_committed`` to replay.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from ottla.metadata import records as meta
from ottla.protocol.records import build_batch, decode_records, read_header
from ottla.raft.description import QuorumDescription, ReplicaDescription
from ottla.storage.checkpoint import write_atomically
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig

METADATA_TOPIC = "__cluster_metadata"
QUORUM_STATE_FILE = "quorum-state"


class SingleVoterRaft:
    def __init__(self, metadata_dir: str, node_id: int, now_ms: int) -> None:
        self.node_id = node_id
        self.dir = os.path.join(metadata_dir, f"{METADATA_TOPIC}-0")
        os.makedirs(self.dir, exist_ok=True)
        self.epoch = self._read_epoch() + 1
        self._write_quorum_state()
        self.log = Log(self.dir, METADATA_TOPIC, 0, LogConfig.resolve(), now_ms=now_ms)
        self.high_watermark = self.log.log_end_offset
        self.log.high_watermark = self.high_watermark

    def _read_epoch(self) -> int:
        try:
            with open(os.path.join(self.dir, QUORUM_STATE_FILE), encoding="utf-8") as f:
                return int(json.load(f).get("leaderEpoch", 0))
        except (FileNotFoundError, ValueError, json.JSONDecodeError):
            return 0

    def _write_quorum_state(self) -> None:
        state = {"leaderId": self.node_id, "leaderEpoch": self.epoch, "votedId": self.node_id,
                 "appliedOffset": 0, "currentVoters": [{"voterId": self.node_id}],
                 "data_version": 0}
        write_atomically(os.path.join(self.dir, QUORUM_STATE_FILE), json.dumps(state).encode())

    @property
    def leader_id(self) -> int:
        return self.node_id

    def describe(self, directory_id: str | None, endpoints: list[tuple[str, str, int]],
                 now_ms: int) -> QuorumDescription:
        """The one voter is the leader, always caught up with itself."""
        me = ReplicaDescription(self.node_id, directory_id, self.end_offset, now_ms, now_ms)
        return QuorumDescription(self.node_id, self.epoch, self.high_watermark, [me],
                                 endpoints={self.node_id: endpoints})

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def read_committed(self) -> Iterator[tuple[int, Any]]:
        """Every committed record as (offset, decoded record), in log order."""
        for segment in self.log.segments:
            for pos, header in segment.iter_headers():
                if header.is_control or header.base_offset >= self.high_watermark:
                    continue
                data = segment.read_at(pos, header.size)
                for record in decode_records(data, 0, header):
                    if record.value is not None:
                        yield record.offset, meta.decode(record.value)

    def append(self, records: list[Any], now_ms: int) -> int:
        """Write records as one batch (atomically applied); return the last offset."""
        batch = bytearray(build_batch([(None, meta.encode(rec)) for rec in records],
                                      timestamp=now_ms, partition_leader_epoch=self.epoch))
        info = self.log.append_as_leader(batch, read_header(batch), self.epoch, now_ms)
        return info.last_offset

    def flush(self) -> int:
        """fsync the log; return the end offset that is now durable (run off the loop)."""
        end = self.log.log_end_offset
        self.log.flush(end)
        return end

    def commit(self, end_offset: int) -> None:
        """Everything below ``end_offset`` was fsynced: it is committed."""
        if end_offset > self.high_watermark:
            self.high_watermark = end_offset
            self.log.high_watermark = end_offset

    def close(self) -> None:
        self.log.flush()
        self.log.close()
