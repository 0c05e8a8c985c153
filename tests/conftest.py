from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from tests.helpers import OttlaProcess, stop_all


@pytest.fixture
def ottla(tmp_path) -> Iterator[OttlaProcess]:
    """A fresh ``ottla server`` process with its own data directory; the test fails if
    it does not exit cleanly at the end (``OttlaProcess.stop`` checks)."""
    node = OttlaProcess(str(tmp_path / "data")).start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def make_ottla(tmp_path) -> Iterator:
    """Start ottla processes with custom overrides; all are stopped at the end, and the
    test fails if one that was running does not exit cleanly."""
    nodes: list[OttlaProcess] = []

    def make(data_dir: str | None = None, start: bool = True, **overrides: str) -> OttlaProcess:
        node = OttlaProcess(data_dir or str(tmp_path / f"data{len(nodes)}"),
                            overrides=overrides)
        nodes.append(node)
        return node.start() if start else node

    yield make
    stop_all(nodes)


LOG_TAIL = 4000
"""How much of each node's log a failed test shows (the end: what led to the failure)."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that ran ``ottla`` processes in its ``tmp_path`` shows the end of each
    node's log: a CI run keeps nothing else of them."""
    outcome = yield
    report = outcome.get_result()
    tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
    if report.when != "call" or not report.failed or tmp_path is None:
        return
    for path in sorted(tmp_path.glob("**/ottla-*.log"))[:12]:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        report.sections.append((f"end of {path.relative_to(tmp_path)}", text[-LOG_TAIL:]))


SPARK_MODULES = ("tests/spark/", "tests/integration/test_spark_kafka_connector.py")
"""The modules whose tests run PySpark, in one process (one JVM)."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (``make test`` runs two workers), each worker takes whole test
    modules, so a module's shared cluster starts once, and every test that runs PySpark
    goes to one worker: there the session's broker, SparkSession and Spark clusters start
    once, and test_spark_kafka_connector (first in collection order) starts the worker's
    JVM with Spark's Kafka connector on its class path, as it must."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module.startswith(SPARK_MODULES):
                return "spark"
            return module

    return ByModule(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if os.sep + "integration" + os.sep in str(item.fspath):
            item.add_marker(pytest.mark.integration)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Name the fresh simulation seeds this run tried (tests/simulation draws them anew
    each run, ids ``fresh ... seed <n>``), so that a quiet run still says what it
    covered; a failing one replays with the command its module's docstring gives."""
    seeds: dict[str, dict[int, str]] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid = getattr(report, "nodeid", "")
            found = re.search(r"\[fresh\b.*\bseed (\d+)\]$", nodeid)
            if found and getattr(report, "when", "") in ("setup", "call"):
                outcomes = seeds.setdefault(nodeid.split("::")[0], {})
                if outcomes.get(int(found.group(1))) != "failed":
                    outcomes[int(found.group(1))] = report.outcome
    if not seeds:
        return
    terminalreporter.section("fresh simulation seeds")
    for module, outcomes in sorted(seeds.items()):
        failed = sorted(seed for seed, outcome in outcomes.items() if outcome == "failed")
        terminalreporter.write_line(
            f"{module}: {len(outcomes)} seed{'s' if len(outcomes) > 1 else ''} in "
            f"{min(outcomes)}..{max(outcomes)}"
            + (f"; failed: {', '.join(map(str, failed))} (replay: see the module's "
               f"docstring)" if failed else ""))


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
