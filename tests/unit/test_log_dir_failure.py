"""A log dir that cannot take a new log (ENOSPC) goes offline instead of failing the
caller; the log is made in another online dir, or refused with KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import errno
import os
import uuid

import pytest

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage import log as log_module
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

TOPIC_ID = uuid.UUID(int=7)


@pytest.fixture
def full_dir(monkeypatch, tmp_path) -> str:
    """``tmp_path/full`` refuses every partition.metadata write, as a full disk does."""
    full = str(tmp_path / "full")
    real = log_module.Log._write_partition_metadata

    def write(self, topic_id):
        if os.path.dirname(self.dir) == full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, topic_id)
    monkeypatch.setattr(log_module.Log, "_write_partition_metadata", write)
    return full


def test_a_new_log_goes_to_another_dir_when_its_dir_is_full(tmp_path, full_dir) -> None:
    other = str(tmp_path / "other")
    manager = LogManager([full_dir, other], now_ms=1000)
    lg = manager.load_log(("t", 0), LogConfig.resolve(), TOPIC_ID, 1000)
    assert os.path.dirname(lg.dir) == other and not lg.offline
    assert manager.offline_dirs == {full_dir}
    assert os.listdir(full_dir) == []  # nothing half made for the next start to load


def test_with_every_dir_offline_a_new_log_is_refused(full_dir) -> None:
    manager = LogManager([full_dir], now_ms=1000)
    with pytest.raises(KafkaError) as refused:
        manager.load_log(("t", 0), LogConfig.resolve(), TOPIC_ID, 1000)
    assert refused.value.code == ErrorCode.kafka_storage_error
    assert manager.offline_dirs == {full_dir} and not manager.logs
