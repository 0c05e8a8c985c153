"""How every coordinator writes its records (Kafka's CoordinatorRecordSerde): a key and a
value, each an int16 (the key's record type or version, the value's version) followed by
the fields in Kafka's message encoding. The schemas are kio entities declared by each
coordinator's ``records`` module; this is the framing they share."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

from kio.serial import entity_reader, entity_writer

INT16 = struct.Struct(">h")

EntityWriter = Callable[[IO[bytes], Any], None]
"""Writes one entity's fields (kio's ``entity_writer`` of its class, or a replacement)."""


class UnknownRecordType(ValueError):
    """A key whose record type this coordinator does not know: Kafka's loader skips such a
    record with a warning ("It could be a left over from an aborted upgrade"), as a newer
    version's record types are to an older one."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"unknown record type {record_type}")
        self.record_type = record_type


def field_meta(kafka_type: str, tag: int | None = None) -> dict[str, Any]:
    """A kio field's metadata: its Kafka type, and its tag if it is a tagged field."""
    return {"kafka_type": kafka_type} if tag is None else {"kafka_type": kafka_type, "tag": tag}


class RecordCodec:
    """Writers and readers of one coordinator's record entities."""

    def __init__(self, entities: Iterable[type],
                 writers: Mapping[type, EntityWriter] | None = None) -> None:
        """``writers`` replace kio's writer of some entities (where kio's bytes are not
        Kafka's)."""
        entities = list(entities)
        self._writers: dict[type, EntityWriter] = {cls: entity_writer(cls) for cls in entities}
        self._writers.update(writers or {})
        self._readers = {cls: entity_reader(cls) for cls in entities}

    def prefixed(self, prefix: int, entity: Any) -> bytes:
        """``entity`` after its int16 type or version."""
        buf = io.BytesIO()
        buf.write(INT16.pack(prefix))
        self._writers[type(entity)](buf, entity)
        return buf.getvalue()

    def read(self, cls: type, data: bytes | memoryview) -> Any:
        """The ``cls`` entity after the int16 prefix of ``data``."""
        entity, _ = self._readers[cls](data, INT16.size)
        return entity


def prefix_of(data: bytes | memoryview) -> int:
    """The int16 a key or value starts with (record type or version)."""
    (prefix,) = INT16.unpack_from(data, 0)
    return int(prefix)
