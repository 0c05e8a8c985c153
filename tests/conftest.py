from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.helpers import OttlaProcess


@pytest.fixture
def ottla(tmp_path) -> Iterator[OttlaProcess]:
    """A fresh ``ottla server`` process with its own data directory."""
    node = OttlaProcess(str(tmp_path / "data")).start()
    try:
        yield node
    finally:
        code = node.stop()
        assert code in (0, None), f"ottla exited with {code}:\n{node.log()}"


@pytest.fixture
def make_ottla(tmp_path) -> Iterator:
    """Start ottla processes with custom overrides; all are stopped at the end."""
    nodes: list[OttlaProcess] = []

    def make(data_dir: str | None = None, start: bool = True, **overrides: str) -> OttlaProcess:
        node = OttlaProcess(data_dir or str(tmp_path / f"data{len(nodes)}"),
                            overrides=overrides)
        nodes.append(node)
        return node.start() if start else node

    yield make
    for node in nodes:
        node.stop()


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if os.sep + "integration" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def fsynced(monkeypatch) -> list[str]:
    """The paths this process fsyncs from now on, in order (files and directories)."""
    paths: list[str] = []
    real = os.fsync

    def record(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)
    monkeypatch.setattr(os, "fsync", record)
    return paths
