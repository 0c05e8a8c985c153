"""A log directory that runs out of space goes offline like any failed directory: its
partitions answer KAFKA_STORAGE_ERROR, the other directory and the metadata log keep
serving, and a restart with space brings it back. The small directory is an 8 MiB tmpfs
(mounting one needs root; the tests skip otherwise)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.batches import raw_batch, record
from tests.helpers import WireClient
from tests.integration.test_fetch import partition_data, values_of

STORAGE_ERROR = ErrorCode.kafka_storage_error


@pytest.fixture
def small_dir(tmp_path) -> Iterator[str]:
    path = str(tmp_path / "small")
    os.mkdir(path)
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", path],
                                 capture_output=True, text=True, timeout=30)
    except OSError as e:
        pytest.skip(f"needs root to mount an 8 MiB tmpfs to fill: cannot run mount ({e})")
    if mounted.returncode != 0:
        pytest.skip("needs root (CAP_SYS_ADMIN) to mount an 8 MiB tmpfs to fill: mount "
                    f"failed ({mounted.stderr.strip()})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=30)


def start(make_ottla, tmp_path, small: str, **overrides: str):
    big = str(tmp_path / "big")
    return make_ottla(data_dir=big, **{"log.dirs": f"{big},{small}", "metadata.log.dir": big,
                                       **overrides})


def fill(path: str) -> None:
    """Write a file until the file system refuses (ENOSPC)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * (1 << 16))
    except OSError:
        pass
    finally:
        os.close(fd)


def produce(client: WireClient, topic: str, partition: int, value: bytes) -> int:
    response = client.produce(topic, partition, raw_batch(record(b"k", value), 1))
    return response.responses[0].partition_responses[0].error_code


def log_dirs(client: WireClient) -> dict[str, int]:
    response = client.request(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})
    return {r.log_dir: r.error_code for r in response.results}


def test_a_full_log_dir_goes_offline_and_the_node_keeps_serving(make_ottla, tmp_path,
                                                                 small_dir) -> None:
    node = start(make_ottla, tmp_path, small_dir)
    with WireClient(node.bootstrap) as client:
        assert client.create_topic("t", partitions=2).topics[0].error_code == 0
        on_small = [p for p in (0, 1) if os.path.isdir(os.path.join(small_dir, f"t-{p}"))]
        assert len(on_small) == 1, os.listdir(small_dir)
        small, big = on_small[0], 1 - on_small[0]
        # Room to give back before the restart: the operator's cleanup.
        with open(os.path.join(small_dir, "reserved"), "wb") as f:
            f.write(b"\0" * (1 << 20))

        acked: list[bytes] = []
        errors = []
        for i in range(200):  # 200 x 64 KiB is more than the 8 MiB there are
            value = b"%06d" % i + b"." * 65530
            errors.append(produce(client, "t", small, value))
            if errors[-1] != ErrorCode.none:
                break
            acked.append(value)
        assert errors[-1] == STORAGE_ERROR, errors
        assert acked

        # The full dir's partition is offline; the rest of the node is not.
        assert produce(client, "t", small, b"again") == STORAGE_ERROR
        assert partition_data(client.fetch("t", small, 0)).error_code == STORAGE_ERROR
        assert produce(client, "t", big, b"fine") == ErrorCode.none
        assert log_dirs(client) == {os.path.abspath(small_dir): STORAGE_ERROR,
                                    os.path.abspath(node.data_dir): ErrorCode.none}
        # The metadata log (in the other dir) takes new topics; they go to the dir online.
        assert client.create_topic("later", partitions=2).topics[0].error_code == 0
        assert produce(client, "later", 0, b"x") == produce(client, "later", 1, b"y") == 0
    assert not [n for n in os.listdir(small_dir) if n.startswith("later-")]
    assert node.proc is not None and node.proc.poll() is None
    assert f"Log directory {small_dir} is offline" in node.log()

    assert node.stop() == 0
    os.unlink(os.path.join(small_dir, "reserved"))
    node.start()
    with WireClient(node.bootstrap) as client:
        assert produce(client, "t", small, b"back") == ErrorCode.none
        fetched: list[bytes] = []
        while len(fetched) < len(acked) + 1:
            data = partition_data(client.fetch("t", small, len(fetched)))
            assert data.error_code == ErrorCode.none
            fetched += values_of(data.records)
        assert fetched == [*acked, b"back"]  # every acknowledged record is still there
        assert log_dirs(client)[os.path.abspath(small_dir)] == ErrorCode.none


def test_a_new_partition_meant_for_a_full_dir_does_not_halt_the_node(make_ottla, tmp_path,
                                                                     small_dir) -> None:
    """The metadata asks for a new log in a dir that is full but not yet known to be:
    the dir goes offline and the log is made in the other one."""
    node = start(make_ottla, tmp_path, small_dir)
    fill(os.path.join(small_dir, "filler"))
    with WireClient(node.bootstrap) as client:
        assert client.create_topic("new", partitions=2).topics[0].error_code == 0
        for p in (0, 1):
            assert produce(client, "new", p, b"v%d" % p) == ErrorCode.none
        assert log_dirs(client)[os.path.abspath(small_dir)] == STORAGE_ERROR
    assert sorted(os.listdir(small_dir)) == ["filler", "meta.properties"] or \
        not [n for n in os.listdir(small_dir) if n.startswith("new-")]
    assert node.proc is not None and node.proc.poll() is None
