"""The voter set on disk and on the wire: Kafka's KRaftVersionRecord and VotersRecord
control records (KIP-853), in the metadata log and at the head of every snapshot.

A VotersRecord control batch in ``__cluster_metadata`` is an entry whose payload is a
:class:`VoterSet`; a ``.checkpoint`` written with ``kraft.version`` 1 carries the set in
force at its end offset right after its header, as Kafka's snapshots do.
"""

from __future__ import annotations

import io
import struct

from kio.schema.voters_record.v0.data import Endpoint as WireEndpoint
from kio.schema.voters_record.v0.data import KRaftVersionFeature, Voter, VotersRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, u16

from ottla.common.uuids import kafka_uuid_text, parse_kafka_uuid
from ottla.protocol.records import (
    build_batch,
    control_record_type,
    decode_records,
    scan_batches,
)
from ottla.raft.messages import KRaftVersionUpgrade
from ottla.raft.voter_set import Endpoint, ReplicaKey, VoterNode, VoterSet

KRAFT_VERSION, KRAFT_VOTERS = 5, 6
_ZERO_UUID = parse_kafka_uuid(None)


def encode_voters(voters: VoterSet) -> bytes:
    """A VotersRecord (v0) value."""
    record = VotersRecord(version=i16(0), voters=tuple(
        Voter(voter_id=i32(n.key.id),
              voter_directory_id=parse_kafka_uuid(n.key.directory_id),
              endpoints=tuple(WireEndpoint(name=e.listener, host=e.host, port=u16(e.port))
                              for e in n.endpoints),
              k_raft_version_feature=KRaftVersionFeature(
                  min_supported_version=i16(n.kraft_versions[0]),
                  max_supported_version=i16(n.kraft_versions[1])))
        for n in voters.nodes))
    buf = io.BytesIO()
    entity_writer(VotersRecord)(buf, record)
    return buf.getvalue()


def decode_voters(value: bytes) -> VoterSet:
    record, _ = entity_reader(VotersRecord)(value, 0)
    return VoterSet(tuple(
        VoterNode(ReplicaKey(int(v.voter_id), None if v.voter_directory_id == _ZERO_UUID
                             else kafka_uuid_text(v.voter_directory_id)),
                  tuple(Endpoint(e.name, e.host, int(e.port)) for e in v.endpoints),
                  (int(v.k_raft_version_feature.min_supported_version),
                   int(v.k_raft_version_feature.max_supported_version)))
        for v in record.voters))


def _control(kind: int, value: bytes) -> tuple[bytes, bytes]:
    return struct.pack(">hh", 0, kind), value


def voters_batch(voters: VoterSet, now_ms: int, base_offset: int = 0) -> bytes:
    """The control batch a leader appends to change the voters."""
    return build_batch([_control(KRAFT_VOTERS, encode_voters(voters))],
                       base_offset=base_offset, timestamp=now_ms, control=True)


def _kraft_version_record(version: int) -> tuple[bytes, bytes]:
    """A KRaftVersionRecord (v0): version, kraft.version, no tagged fields."""
    return _control(KRAFT_VERSION, struct.pack(">hh", 0, version) + b"\x00")


def upgrade_batch(version: int, voters: VoterSet, now_ms: int) -> bytes:
    """The control batch a static quorum's leader appends to upgrade ``kraft.version``:
    the KRaftVersionRecord, then the VotersRecord, as Kafka's leader writes them."""
    return build_batch([_kraft_version_record(version),
                        _control(KRAFT_VOTERS, encode_voters(voters))],
                       timestamp=now_ms, control=True)


def start_of_epoch_batch(leader_change: tuple[bytes, bytes], version: int,
                         voters: VoterSet, now_ms: int) -> bytes:
    """The control batch a new leader writes first when it also writes the voters: the
    LeaderChangeMessage (``leader_change``, key and value), the KRaftVersionRecord and the
    VotersRecord, as Kafka's appendStartOfEpochControlRecords."""
    return build_batch([leader_change, _kraft_version_record(version),
                        _control(KRAFT_VOTERS, encode_voters(voters))],
                       timestamp=now_ms, control=True)


def control_voters(batch: bytes) -> VoterSet | KRaftVersionUpgrade | None:
    """The voter set of a control batch, if it holds a VotersRecord (with the
    kraft.version when a KRaftVersionRecord comes with it)."""
    version = None
    for pos, header in scan_batches(batch):
        for record in decode_records(batch, pos, header):
            kind = control_record_type(record.key)
            if kind == KRAFT_VERSION and record.value:
                version = struct.unpack_from(">h", bytes(record.value), 2)[0]
            elif kind == KRAFT_VOTERS and record.value:
                voters = decode_voters(bytes(record.value))
                return voters if version is None else KRaftVersionUpgrade(version, voters)
    return None


def snapshot_voters(data: bytes | bytearray | memoryview) -> VoterSet | None:
    """The voter set a ``.checkpoint`` file records, if any."""
    for pos, header in scan_batches(data):
        if not header.is_control:
            continue
        for record in decode_records(data, pos, header):
            if control_record_type(record.key) == KRAFT_VOTERS and record.value:
                return decode_voters(bytes(record.value))
    return None


def with_snapshot_voters(data: bytes, voters: VoterSet, now_ms: int) -> bytes:
    """``data`` (a checkpoint file: header batch first) with the KRaft version and
    ``voters`` after its header, as Kafka writes every snapshot under ``kraft.version``
    1; the batches after it move two offsets on (a batch's CRC does not cover its base
    offset). Unchanged when it already records voters."""
    if snapshot_voters(data) is not None:
        return data
    batches = [(pos, header) for pos, header in scan_batches(data)]
    if not batches:
        return data
    first_pos, first = batches[0]
    out = bytearray(data[first_pos:first_pos + first.size])
    offset = first.last_offset + 1
    out += build_batch([_kraft_version_record(1),
                        _control(KRAFT_VOTERS, encode_voters(voters))],
                       base_offset=offset, timestamp=now_ms, control=True)
    for pos, header in batches[1:]:
        batch = bytearray(data[pos:pos + header.size])
        struct.pack_into(">q", batch, 0, header.base_offset + 2)
        out += batch
    return bytes(out)
