"""Record batches as a hostile or buggy client would write them: any record bytes, any
header fields, with a CRC that is right, so that only the records themselves are wrong."""

from __future__ import annotations

import random
import struct

import zstandard
from crc32c import crc32c

from ottla.protocol.compression import compress
from ottla.protocol.records import CRC_OFFSET, HEADER, HEADER_SIZE, LOG_OVERHEAD, encode_record

NOW = 1_700_000_000_000


def raw_batch(body: bytes, count: int, *, codec: int = 0, base_ts: int = NOW,
              max_ts: int = NOW, attributes: int = 0, last_delta: int | None = None,
              compressed: bool = False) -> bytes:
    """A batch with ``body`` as its records (compressed with ``codec`` unless
    ``compressed`` says it already is) and a valid CRC."""
    payload = compress(codec, body) if codec and not compressed else body
    batch = bytearray(HEADER.pack(0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2, 0,
                                  attributes | codec,
                                  count - 1 if last_delta is None else last_delta,
                                  base_ts, max_ts, -1, -1, -1, count))
    batch += payload
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def record(key: bytes | None = b"k", value: bytes | None = b"v", delta: int = 0,
           ts_delta: int = 0, headers: tuple[tuple[str, bytes | None], ...] = ()) -> bytes:
    """One record's bytes, as a v2 batch holds them."""
    out = bytearray()
    encode_record(out, delta, ts_delta, key, value, headers)
    return bytes(out)


def _varint(value: int) -> bytes:
    """A zigzag varint, as a v2 record writes its lengths."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record_with_lengths(key_len: int, value_len: int,
                        headers: tuple[tuple[int, int], ...] = ()) -> bytes:
    """One record whose key, value and header lengths are what is given, even a length
    no client writes (below -1): a field of length n >= 0 holds n bytes ``x``, a
    negative one none."""
    def field(length: int) -> bytes:
        return _varint(length) + b"x" * max(length, 0)
    body = b"\x00" + _varint(0) + _varint(0) + field(key_len) + field(value_len)
    body += _varint(len(headers)) + b"".join(field(k) + field(v) for k, v in headers)
    return _varint(len(body)) + body


def zstd_bomb(records: int, value_bytes: int) -> bytes:
    """The zstd-compressed records of a batch of ``records`` records, each a value of
    ``value_bytes`` zeros: a few KiB that decompress to ``records * value_bytes``.
    Streamed, so the expanded bytes are never held here either."""
    one = record(key=None, value=b"\x00" * value_bytes)
    stream = zstandard.ZstdCompressor(level=1).compressobj()
    return b"".join([*(stream.compress(one) for _ in range(records)), stream.flush()])


def mutate_bytes(data: bytes, rng: random.Random, most: int = 3) -> bytes:
    """``data`` with one to ``most`` bytes changed, removed or inserted."""
    out = bytearray(data)
    for _ in range(rng.randint(1, most)):
        if not out:
            break
        pos = rng.randrange(len(out))
        match rng.randrange(3):
            case 0:
                out[pos] = rng.randrange(256)
            case 1:
                del out[pos]
            case _:
                out.insert(pos, rng.randrange(256))
    return bytes(out)
