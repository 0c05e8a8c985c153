"""An older librdkafka compresses against Ottla (KAFKA-18659).

librdkafka before the fix of its issue 4956 (2.0.x, as Debian bookworm's kcat 1.7.1 is
built on) decides whether a broker can take gzip, snappy and lz4 from the lowest Produce
version the broker lists; when that is 3 or more it sends those batches uncompressed,
silently. Ottla lists Produce from version 0 as Kafka 4.0 does, so such a client
compresses again: the batches on disk carry the codec it was asked for.

Needs the ``kcat`` command (``apt-get install kcat``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import OttlaProcess
from tests.segments import CODEC_IDS, stored_codecs

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
CODECS = {name: CODEC_IDS[name] for name in ("gzip", "snappy", "lz4", "zstd")}
RECORDS = 500


@pytest.fixture(scope="module", autouse=True)
def kcat_installed() -> None:
    """``.ci/run`` installs kcat: without it these tests fail rather than skip, so that a
    broken install cannot pass for a green run."""
    if KCAT is None:
        pytest.fail("kcat is not installed (apt-get install kcat; .ci/run installs it)",
                    pytrace=False)


def librdkafka_version() -> tuple[int, ...]:
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    assert found, f"kcat -V printed no librdkafka version:\n{out}"
    return tuple(int(n) for n in found.groups())


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    node = OttlaProcess(str(tmp_path_factory.mktemp("kcat") / "data")).start()
    yield node
    assert node.stop() == 0, node.log()


def consume(node: OttlaProcess, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "the broker stopped answering"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return got
            got.append((msg.key(), msg.value()))
    finally:
        consumer.close()


def test_kcat_is_an_affected_librdkafka() -> None:
    """The point of this file: a librdkafka older than the fix (2.11.1, #4956/#5130)."""
    assert librdkafka_version() < (2, 11, 1), "this kcat's librdkafka has the fix already"


@pytest.mark.parametrize("codec", list(CODECS))
def test_kcat_batches_are_stored_with_the_codec_it_was_asked_for(node, codec: str) -> None:
    topic = f"kcat-{codec}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10)[topic].result()
    # Compressible values, so that a codec a client applies cannot go unnoticed.
    sent = [(f"key-{i}".encode(), f"value-{i}-".encode() * 20) for i in range(RECORDS)]
    lines = b"".join(k + b":" + v + b"\n" for k, v in sent)
    done = subprocess.run(
        [KCAT, "-P", "-b", node.bootstrap, "-t", topic, "-p", "0", "-K", ":",
         "-z", codec, "-X", "linger.ms=50", "-X", "request.required.acks=all"],
        input=lines, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")

    codecs = stored_codecs(node.data_dir, topic)
    assert codecs, "nothing was stored"
    assert set(codecs) == {CODECS[codec]}, (
        f"kcat asked for {codec} ({CODECS[codec]}) but the log holds codecs {set(codecs)}")
    assert consume(node, topic) == sent
