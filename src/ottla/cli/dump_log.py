"""``ottla dump-log --files ...``: print segments and indexes (kafka-dump-log.sh)."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import re
import struct
import uuid
from typing import Any

from ottla.common.config import INT_MAX
from ottla.common.uuids import kafka_uuid_text
from ottla.protocol.compression import CompressionType
from ottla.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    CorruptRecord,
    check_batch,
    decode_legacy_message_set,
    decode_records,
    read_header,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dump-log", help="print the batches, records and indexes of segments",
                       description="Dump log segments (.log), offset indexes (.index) and time "
                                   "indexes (.timeindex).")
    p.add_argument("--files", required=True, help="comma separated segment or index files")
    p.add_argument("--print-data-log", action="store_true", help="print the records")
    p.add_argument("--deep-iteration", action="store_true", help="iterate records too")
    p.add_argument("--cluster-metadata-decoder", action="store_true",
                   help="decode records as cluster metadata records")
    p.add_argument("--max-bytes", type=int, default=INT_MAX)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files.split(","):
        print(f"Dumping {path}")
        try:
            if path.endswith(".log"):
                dump_segment(path, args)
            elif path.endswith(".timeindex"):
                dump_time_index(path)
            elif path.endswith(".index"):
                dump_offset_index(path)
            else:
                print(f"Ignoring unknown file {path}")
        except OSError as e:
            print(f"Error: {e}")
            status = 1
    return status


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".")[0]
    return int(stem) if stem.isdigit() else 0


def dump_offset_index(path: str) -> None:
    base = _base_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    for rel, position in struct.iter_unpack(">ii", data[: len(data) // 8 * 8]):
        print(f"offset: {base + rel} position: {position}")


def dump_time_index(path: str) -> None:
    base = _base_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    for ts, rel in struct.iter_unpack(">qi", data[: len(data) // 12 * 12]):
        print(f"timestamp: {ts} offset: {base + rel}")


def _payload(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "replace")


def _optional_long(value: int | None) -> str:
    """As Java prints an ``OptionalLong`` (Kafka's dump shows the delete horizon so)."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def metadata_json(record: Any) -> str:
    """A metadata record as Kafka's tool prints it: ``{"type":..,"version":..,"data":..}``
    with the schema's field names and ids as Kafka prints them (``Uuid.toString()``)."""
    cls = type(record)
    kind = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).upper()
    return json.dumps({"type": kind, "version": cls.__version__, "data": _json(record)},
                      separators=(",", ":"))


def _json(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {_camel(f.name): _json(getattr(value, f.name))
                for f in dataclasses.fields(value)}
    if isinstance(value, uuid.UUID):
        return kafka_uuid_text(value)
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def dump_segment(path: str, args: argparse.Namespace) -> None:
    with open(path, "rb") as f:
        data = f.read(args.max_bytes)
    print(f"Log starting offset: {_base_offset(path)}")
    pos = 0
    deep = args.deep_iteration or args.print_data_log or args.cluster_metadata_decoder
    while pos + LOG_OVERHEAD <= len(data):
        magic = data[pos + MAGIC_OFFSET] if pos + MAGIC_OFFSET < len(data) else -1
        (size,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + LOG_OVERHEAD + size
        if end > len(data) or size < 0:
            print(f"Found {len(data) - pos} invalid bytes at the end of {os.path.basename(path)}")
            return
        if magic < 2:
            for rec in decode_legacy_message_set(data[pos:end]):
                print(f"offset: {rec.offset} position: {pos} CreateTime: {rec.timestamp} "
                      f"magic: {magic} keySize: {len(rec.key or b'') if rec.key else -1} "
                      f"payload: {_payload(rec.value) if args.print_data_log else ''}")
            pos = end
            continue
        if pos + HEADER_SIZE > len(data):
            print(f"Found {len(data) - pos} invalid bytes at the end of {os.path.basename(path)}")
            return
        header = read_header(data, pos)
        try:
            check_batch(data, pos)
            valid = True
        except CorruptRecord:
            valid = False
        ts_type = "LogAppendTime" if header.timestamp_type else "CreateTime"
        print(f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
              f"count: {header.record_count} baseSequence: {header.base_sequence} "
              f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
              f"producerEpoch: {header.producer_epoch} "
              f"partitionLeaderEpoch: {header.partition_leader_epoch} "
              f"isTransactional: {str(header.is_transactional).lower()} "
              f"isControl: {str(header.is_control).lower()} "
              f"deleteHorizonMs: {_optional_long(header.delete_horizon_ms)} position: {pos} "
              f"{ts_type}: {header.max_timestamp} size: {header.size} magic: {header.magic} "
              f"compresscodec: {CompressionType(header.compression).name.lower()} "
              f"crc: {header.crc} isvalid: {str(valid).lower()}")
        if deep and valid:
            for rec in decode_records(data, pos, header):
                line = (f"| offset: {rec.offset} {ts_type}: {rec.timestamp} "
                        f"keySize: {len(rec.key) if rec.key is not None else -1} "
                        f"valueSize: {len(rec.value) if rec.value is not None else -1} "
                        f"sequence: {header.base_sequence + rec.offset - header.base_offset if header.base_sequence >= 0 else -1} "  # noqa: E501
                        f"headerKeys: [{','.join(k for k, _ in rec.headers)}]")
                if args.cluster_metadata_decoder and rec.value is not None:
                    from ottla.metadata import records as meta

                    try:
                        line += f" payload: {metadata_json(meta.decode(rec.value))}"
                    except Exception as e:
                        line += f" payload: <undecodable: {e}>"
                elif args.print_data_log:
                    if rec.key is not None:
                        line += f" key: {_payload(rec.key)}"
                    line += f" payload: {_payload(rec.value)}"
                print(line)
        pos = end
