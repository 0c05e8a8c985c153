"""The four Kafka compression codecs, with the framings Kafka clients use.

Codec ids are those of the batch attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
gzip is the gzip container, lz4 the LZ4 frame format, zstd standard frames. Snappy is
written in the xerial framing the Java client writes (snappy-java's SnappyOutputStream),
and read in both that framing and raw snappy, which librdkafka writes.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Parse a ``compression.type`` value (``uncompressed`` means none)."""
        name = name.strip().lower()
        if name == "uncompressed":
            return cls.NONE
        return cls[name.upper()]


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_BE_INT = struct.Struct(">i")


class CompressionError(ValueError):
    """Compressed data that does not decode."""


class OutputTooLarge(CompressionError):
    """Compressed data that decodes to more than the room given for it."""


def compress(codec: int, data: bytes | memoryview, level: int | None = None) -> bytes:
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        return bytes(cramjam.lz4.compress(data, level=level))
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == CompressionType.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, ValueError, struct.error) as e:
        raise CompressionError(f"{CompressionType(codec).name.lower()}: {e}") from e
    raise CompressionError(f"unknown compression codec {codec}")


def _xerial_compress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += _BE_INT.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        (size,) = _BE_INT.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CompressionError("snappy: xerial block runs past the end")
        out += cramjam.snappy.decompress_raw(view[pos : pos + size])
        pos += size
    return bytes(out)


def decompress_into(codec: int, data: bytes | memoryview, out: bytearray | memoryview) -> int:
    """Decompress into ``out``; the bytes written. Never writes or allocates past ``out``:
    ``OutputTooLarge`` if the data decodes to more (a few KiB can promise GiBs), and
    ``CompressionError`` if it does not decode at all."""
    try:
        if codec == CompressionType.GZIP:
            return int(cramjam.gzip.decompress_into(data, out))
        if codec == CompressionType.LZ4:
            return int(cramjam.lz4.decompress_into(data, out))
        if codec == CompressionType.ZSTD:
            return int(cramjam.zstd.decompress_into(data, out))
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress_into(memoryview(data), memoryview(out))
    except cramjam.DecompressionError as e:
        if "failed to write whole buffer" in str(e):
            raise OutputTooLarge(f"{CompressionType(codec).name.lower()}: decompresses to "
                                 f"more than {len(out)} bytes") from e
        raise CompressionError(f"{CompressionType(codec).name.lower()}: {e}") from e
    except (ValueError, struct.error) as e:
        raise CompressionError(f"{CompressionType(codec).name.lower()}: {e}") from e
    raise CompressionError(f"unknown compression codec {codec}")


def _snappy_decompress_into(view: memoryview, out: memoryview) -> int:
    """Raw snappy (librdkafka) or xerial blocks (the Java client): every block declares
    its length, which is checked against the room left before it is decoded."""
    if bytes(view[:8]) != _XERIAL_MAGIC:
        blocks = [view]
    else:
        blocks = []
        pos = len(_XERIAL_HEADER)
        while pos < len(view):
            if pos + 4 > len(view):
                raise CompressionError("snappy: xerial block length runs past the end")
            (size,) = _BE_INT.unpack_from(view, pos)
            pos += 4
            if size < 0 or pos + size > len(view):
                raise CompressionError("snappy: xerial block runs past the end")
            blocks.append(view[pos : pos + size])
            pos += size
    written = 0
    for block in blocks:
        length = int(cramjam.snappy.decompress_raw_len(block))
        if length > len(out) - written:
            raise OutputTooLarge(f"snappy: decompresses to more than {len(out)} bytes")
        written += int(cramjam.snappy.decompress_raw_into(block, out[written:]))
    return written
