"""What a node wrote to disk: the record batches of a partition's segment files, read
directly, so a test sees what a broker stored rather than what it serves back."""

from __future__ import annotations

import os

from ottla.protocol.records import scan_batches

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
"""Kafka's codec ids: the low 3 bits of a v2 batch's attributes
(``DefaultRecordBatch.COMPRESSION_CODEC_MASK``, ``CompressionType.id``)."""


def stored_codecs(data_dir: str, topic: str, partitions: int = 1) -> list[int]:
    """The codec of every batch in the ``.log`` segment files of ``topic``'s partitions
    under a node's data directory, in log order per partition (each batch's CRC and
    structure checked, so a torn or garbled file fails loudly)."""
    codecs: list[int] = []
    for partition in range(partitions):
        directory = os.path.join(data_dir, f"{topic}-{partition}")
        for name in sorted(os.listdir(directory)):
            if name.endswith(".log"):
                with open(os.path.join(directory, name), "rb") as f:
                    codecs += [header.attributes & 0x07
                               for _, header in scan_batches(f.read(), verify=True)]
    return codecs
