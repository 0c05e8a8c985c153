"""Snapshot files, and the bootstrap snapshot a freshly formatted cluster starts from.

``ottla storage format`` writes ``__cluster_metadata-0/00000000000000000000-0000000000
.checkpoint`` as Kafka 4 does: a snapshot file of record batches, a header control
record, the KRaft version and initial voters (``--standalone`` or
``--initial-controllers``) as control records, the bootstrap metadata records
(``metadata.version`` from ``--release-version``, then the other features, then the SCRAM
credentials of ``--add-scram``) and a footer. On its first start a
node with an empty metadata log replays these records instead of the built-in defaults.
"""

from __future__ import annotations

import io
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from kio.schema.voters_record.v0.data import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, u16

from ottla.common.features import METADATA_VERSION, default_feature_levels
from ottla.common.files import write_atomically
from ottla.common.topics import METADATA_PARTITION_DIR
from ottla.common.uuids import kafka_uuid_text, parse_kafka_uuid
from ottla.metadata import records as meta
from ottla.protocol.records import build_batch, control_record_type, decode_records, scan_batches

BOOTSTRAP_CHECKPOINT = "00000000000000000000-0000000000.checkpoint"

# Kafka's MetadataVersion levels a KRaft cluster can be bootstrapped at (3.3-IV3 and up).
METADATA_VERSIONS = {
    "3.3-IV3": 7, "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11,
    "3.6-IV0": 12, "3.6-IV1": 13, "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16,
    "3.7-IV2": 17, "3.7-IV3": 18, "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21,
    "4.0-IV0": 22, "4.0-IV1": 23, "4.0-IV2": 24, "4.0-IV3": 25, "4.1-IV0": 26,
    "4.1-IV1": 27, "4.2-IV0": 28, "4.2-IV1": 29, "4.3-IV0": 30, "4.4-IV0": 31,
    "4.4-IV1": 32, "4.4-IV2": 33,
}
LATEST_PRODUCTION = "4.4-IV2"

SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = 3, 4, 5, 6


@dataclass(frozen=True)
class InitialVoter:
    """One entry of ``--initial-controllers``: ``id@host:port:directory-id``."""

    node_id: int
    host: str
    port: int
    directory_id: str  # Kafka's base64 uuid text

    @classmethod
    def parse(cls, text: str) -> InitialVoter:
        match = re.fullmatch(r"(\d+)@(\[[^\]]+\]|[^:@]+):(\d+):([A-Za-z0-9_-]{22})", text.strip())
        if match is None:
            raise ValueError(f"invalid controller {text!r}: expected id@host:port:directory-id")
        return cls(int(match.group(1)), match.group(2).strip("[]"), int(match.group(3)),
                   match.group(4))


@dataclass
class BootstrapMetadata:
    records: list[Any] = field(default_factory=list)
    voters: list[InitialVoter] = field(default_factory=list)
    last_contained_log_timestamp: int = -1
    """Its SnapshotHeaderRecord's ``LastContainedLogTimestamp`` (-1 without one)."""

    @property
    def metadata_version_level(self) -> int | None:
        for record in self.records:
            if isinstance(record, meta.FeatureLevelRecord) and record.name == METADATA_VERSION:
                return record.feature_level
        return None


def metadata_version(text: str | None) -> tuple[str, int]:
    """``--release-version``: a release (``3.9``) or a version (``3.7-IV4``) -> level."""
    if text is None:
        return LATEST_PRODUCTION, METADATA_VERSIONS[LATEST_PRODUCTION]
    if text in METADATA_VERSIONS:
        return text, METADATA_VERSIONS[text]
    latest = [name for name in METADATA_VERSIONS if name.split("-")[0] == text]
    if not latest:
        releases = sorted({n.split("-")[0] for n in METADATA_VERSIONS})
        raise ValueError(f"unknown release version {text!r}; supported: "
                         f"{', '.join(releases)} (or a full version such as 3.7-IV4)")
    return latest[-1], METADATA_VERSIONS[latest[-1]]


def bootstrap_path(metadata_log_dir: str) -> str:
    return os.path.join(metadata_log_dir, METADATA_PARTITION_DIR, BOOTSTRAP_CHECKPOINT)


def _control(kind: int, value: bytes) -> tuple[bytes, bytes]:
    return struct.pack(">hh", 0, kind), value


def _voters_value(voters: list[InitialVoter]) -> bytes:
    """VotersRecord v0, every voter on the CONTROLLER listener, kraft.version 0-1."""
    record = VotersRecord(version=i16(0), voters=tuple(
        Voter(voter_id=i32(v.node_id),
              voter_directory_id=parse_kafka_uuid(v.directory_id),
              endpoints=(Endpoint(name="CONTROLLER", host=v.host, port=u16(v.port)),),
              k_raft_version_feature=KRaftVersionFeature(
                  min_supported_version=i16(0), max_supported_version=i16(1)))
        for v in voters))
    buf = io.BytesIO()
    entity_writer(VotersRecord)(buf, record)
    return buf.getvalue()


def _parse_voters(value: bytes) -> list[InitialVoter]:
    record, _ = entity_reader(VotersRecord)(value, 0)
    return [InitialVoter(v.voter_id, v.endpoints[0].host if v.endpoints else "",
                         v.endpoints[0].port if v.endpoints else 0,
                         kafka_uuid_text(v.voter_directory_id))
            for v in record.voters]


def encode_snapshot(records: list[Any], now_ms: int, voters: list[InitialVoter] | None = None,
                    batch_size: int = 1000) -> bytes:
    """A ``.checkpoint`` file as Kafka writes one: a header control batch, the KRaft
    version and voters when given, the records in batches of ``batch_size``, a footer.
    Offsets inside the file start at 0."""
    header = _control(SNAPSHOT_HEADER, struct.pack(">hq", 0, now_ms) + b"\x00")
    footer = _control(SNAPSHOT_FOOTER, struct.pack(">h", 0) + b"\x00")
    batches = [build_batch([header], base_offset=0, timestamp=now_ms, control=True)]
    offset = 1
    if voters:
        kraft = _control(KRAFT_VERSION, struct.pack(">hh", 0, 1) + b"\x00")
        batches.append(build_batch([kraft, _control(KRAFT_VOTERS, _voters_value(voters))],
                                   base_offset=offset, timestamp=now_ms, control=True))
        offset += 2
    for i in range(0, len(records), batch_size):
        chunk = records[i:i + batch_size]
        batches.append(build_batch([(None, meta.encode(r)) for r in chunk],
                                   base_offset=offset, timestamp=now_ms))
        offset += len(chunk)
    batches.append(build_batch([footer], base_offset=offset, timestamp=now_ms, control=True))
    return b"".join(batches)


def decode_snapshot(data: bytes | bytearray | memoryview) -> BootstrapMetadata:
    """The records and voters of a ``.checkpoint`` file (CRCs checked)."""
    result = BootstrapMetadata()
    for pos, header in scan_batches(data, verify=True):
        for record in decode_records(data, pos, header):
            if header.is_control:
                kind = control_record_type(record.key)
                if kind == KRAFT_VOTERS and record.value:
                    result.voters = _parse_voters(bytes(record.value))
                elif kind == SNAPSHOT_HEADER and record.value is not None and \
                        len(record.value) >= 10:
                    result.last_contained_log_timestamp = \
                        struct.unpack_from(">q", bytes(record.value), 2)[0]
            elif record.value is not None:
                result.records.append(meta.decode(bytes(record.value)))
    return result


def write_bootstrap(metadata_log_dir: str, level: int, voters: list[InitialVoter],
                    now_ms: int, features: dict[str, int] | None = None,
                    extra_records: list[Any] | None = None) -> str:
    """Write the bootstrap snapshot (atomically, fsynced) and return its path: the
    metadata.version, then the other features at ``features`` (by default the release's
    defaults, ``default_feature_levels``), then ``extra_records`` (the
    UserScramCredentialRecords of ``--add-scram``, as Kafka's Formatter appends them)."""
    levels = default_feature_levels(level) if features is None else features
    records = [meta.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level)]
    records += [meta.FeatureLevelRecord(name=name, feature_level=feature_level)
                for name, feature_level in sorted(levels.items()) if feature_level > 0]
    records += extra_records or []
    path = bootstrap_path(metadata_log_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomically(path, encode_snapshot(records, now_ms, voters))
    return path


def read_bootstrap(metadata_log_dir: str) -> BootstrapMetadata | None:
    """The records and voters of the bootstrap snapshot, or None if there is none."""
    try:
        with open(bootstrap_path(metadata_log_dir), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return decode_snapshot(data)
