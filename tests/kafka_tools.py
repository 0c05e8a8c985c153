"""Kafka's own command-line tools run the same way against an Ottla node and a Kafka 4.4
node, for tests that compare what a user of the tools sees on each.

A ``Side`` is one of the two systems under comparison: its bootstrap, controller, cluster id
and data directory, which a tool's arguments name as ``{bootstrap}``, ``{controller}`` and
``{data}`` and which ``Side.normalise`` turns back into placeholders in its output, so that
the two outputs can be compared as text. ``run_all`` runs a batch of independent commands
on both sides, a few JVMs at a time (a tool JVM costs 1-2 s of CPU to start, half that
from the class-data archive ``write_tools_archive`` makes). Records are written with
``produce_batch``: the same bytes on both sides, so that what the brokers store can be
compared byte for byte.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cramjam
import pytest

from tests.batches import raw_batch, record
from tests.helpers import WireClient, wait_until
from tests.kafka_ref.cluster import TOOL_JVM_OPTS, run_tool
from tests.kafka_ref.install import InstallError, install

SIDES = ("ottla", "kafka")
LZ4 = 3
RETRIABLE = (3, 5, 6)
"""UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: a topic just
created is not yet in every metadata cache (Kafka's broker learns it from the controller
a moment after CreateTopics returns)."""
PARALLEL_TOOLS = 4
"""Tool JVMs at once: two per command, two commands at a time on a 2-core machine."""
TOOLS_ARCHIVE = "kafka-tools.jsa"
"""A class-data archive (AppCDS) of the tools' classes beside Kafka's libs: a tool JVM
mapped from it starts in half the time (0.8 s instead of 1.6 s here), and a module runs
a hundred of them."""


def tool_jvm_opts(libs: Path) -> tuple[str, ...]:
    """The tools' JVM options, with ``TOOLS_ARCHIVE`` once ``write_tools_archive`` made it
    (a JVM ignores an archive of other jars, and ``-Xlog:cds*=error`` keeps its notes out
    of the tool's output)."""
    archive = libs.parent / TOOLS_ARCHIVE
    if not archive.exists():
        return TOOL_JVM_OPTS
    return (*TOOL_JVM_OPTS, f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=error")


def write_tools_archive(libs: Path, bootstrap: str) -> None:
    """Write ``TOOLS_ARCHIVE`` from one admin tool's run against ``bootstrap`` unless it
    exists: to a file of this process, renamed into place, so that concurrent runs never
    map half an archive."""
    archive = libs.parent / TOOLS_ARCHIVE
    if archive.exists():
        return
    pending = archive.with_name(f"{TOOLS_ARCHIVE}.{os.getpid()}.tmp")
    run_tool("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--list", check=True,
             jvm_opts=(*TOOL_JVM_OPTS, f"-XX:ArchiveClassesAtExit={pending}",
                       "-Xlog:cds*=error"))
    os.replace(pending, archive)


def require_kafka() -> Path:
    """Kafka's jars (installed on first use); without Java 17+ or Maven the test fails
    with the reason, never skips (as tests/kafka_ref/conftest.py's ``kafka_libs``)."""
    done = None
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    except OSError:
        pass
    found = re.search(r'version "(?:1\.)?(\d+)', (done.stderr + done.stdout) if done else "")
    if done is None or done.returncode != 0 or not found or int(found.group(1)) < 17:
        pytest.fail("Kafka's tools need Java 17+ on PATH (apt-get install "
                    "openjdk-17-jre-headless)", pytrace=False)
    try:
        return install()
    except InstallError as e:
        failure = str(e)
    pytest.fail(f"Apache Kafka 4.4 could not be installed (make kafka-ref): {failure}",
                pytrace=False)


@dataclass
class Side:
    """One system under comparison, as a tool's arguments and its output name it."""

    name: str
    bootstrap: str
    controller: str = ""
    cluster_id: str = ""
    data_dir: Path = Path()

    def args(self, args: Sequence[str]) -> list[str]:
        values = {"bootstrap": self.bootstrap, "controller": self.controller,
                  "data": str(self.data_dir)}
        return [a.format(**values) for a in args]

    def normalise(self, text: str) -> str:
        """Its own addresses, ids and paths as placeholders, longest first."""
        values = {"bootstrap": self.bootstrap, "controller": self.controller,
                  "cluster-id": self.cluster_id, "data": str(self.data_dir)}
        for key, value in sorted(values.items(), key=lambda kv: -len(kv[1])):
            if value:
                text = text.replace(value, f"<{key}>")
        return text


@dataclass
class Run:
    """One command's outcome on both sides, keyed by side name."""

    args: tuple[str, ...]
    done: dict[str, subprocess.CompletedProcess[str]]
    sides: dict[str, Side]
    seconds: dict[str, float] = field(default_factory=dict)
    """How long each side's JVM ran, which failure messages show (a slow tool is a
    tool that waited for something)."""

    def out(self, side: str, check: bool = True) -> str:
        """The tool's stdout on ``side``, normalised; with ``check`` it must have exited 0."""
        done = self.done[side]
        if check:
            assert done.returncode == 0, (
                f"{' '.join(self.args)} failed on {side} ({done.returncode}):\n"
                f"{done.stdout}\n{done.stderr[-4000:]}")
        return self.sides[side].normalise(done.stdout)

    def err(self, side: str) -> str:
        return self.sides[side].normalise(self.done[side].stderr)

    def code(self, side: str) -> int:
        return self.done[side].returncode

    @property
    def ottla(self) -> str:
        return self.out("ottla")

    @property
    def kafka(self) -> str:
        return self.out("kafka")

    def describe(self) -> str:
        """Both outputs, for assertion messages."""
        return "\n".join(f"--- {side} ({self.done[side].returncode}, "
                         f"{self.seconds.get(side, 0):.1f} s): "
                         f"{' '.join(self.args)}\n{self.out(side, check=False)}"
                         f"{self.err(side)[-2000:]}" for side in self.done)


def run_all(sides: Iterable[Side], commands: Sequence[Sequence[str]], timeout: float = 120
            ) -> list[Run]:
    """Every command (a tool name from ``run_tool``'s TOOLS, then its arguments with
    ``{bootstrap}`` etc.) on every side, ``PARALLEL_TOOLS`` JVMs at a time. Commands in
    one call must not depend on each other's effects."""
    by_name = {s.name: s for s in sides}
    jvm_opts = tool_jvm_opts(install())
    def timed(command: Sequence[str], side: Side
              ) -> tuple[subprocess.CompletedProcess[str], float]:
        start = time.monotonic()
        done = run_tool(command[0], *side.args(command[1:]), timeout=timeout,
                        jvm_opts=jvm_opts)
        return done, time.monotonic() - start

    with ThreadPoolExecutor(PARALLEL_TOOLS) as pool:
        futures = [[(name, pool.submit(timed, command, side))
                    for name, side in by_name.items()] for command in commands]
        runs = []
        for command, pending in zip(commands, futures):
            results = {name: f.result() for name, f in pending}
            runs.append(Run(tuple(command), {n: r[0] for n, r in results.items()}, by_name,
                            {n: r[1] for n, r in results.items()}))
        return runs


def rows(text: str) -> list[tuple[str, ...]]:
    """The non-empty lines of a table the tools print, split on whitespace (a tab or the
    padding of a column), each as a tuple."""
    return [tuple(line.split()) for line in text.splitlines() if line.strip()]


def blank(text: str, *patterns: str, token: str = "<t>") -> str:
    """``text`` with every match of each regex pattern replaced by ``token`` (for values
    that differ run to run on both sides alike: a duration, a wall-clock time)."""
    for pattern in patterns:
        text = re.sub(pattern, token, text)
    return text


def lz4_frame(data: bytes) -> bytes:
    """An LZ4 frame of independent blocks, as Kafka's clients write one: Kafka refuses a
    frame of linked blocks ("Dependent block stream is unsupported"), which is what
    ``ottla.protocol.compression.compress`` writes (see the tools' DIFFERENCES)."""
    compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    compressor.compress(data)
    return bytes(compressor.finish().read())


def produce_batch(bootstrap: str, topic: str, partition: int,
                  records: Sequence[tuple[bytes | None, bytes | None,
                                          tuple[tuple[str, bytes | None], ...]]],
                  base_ts: int, codec: int = 0, ts_step: int = 1) -> int:
    """One record batch of ``records`` (key, value, headers) with CreateTime ``base_ts``
    plus ``ts_step`` ms per record, written with acks=all; the batch is built here, so two
    brokers receive exactly the same bytes. Returns its base offset."""
    body = b"".join(record(key, value, delta=i, ts_delta=i * ts_step, headers=headers)
                    for i, (key, value, headers) in enumerate(records))
    batch = raw_batch(lz4_frame(body) if codec == LZ4 else body, len(records), codec=codec,
                      base_ts=base_ts, max_ts=base_ts + (len(records) - 1) * ts_step,
                      compressed=codec == LZ4)
    answers: list[Any] = []

    def written() -> bool:
        with WireClient(bootstrap, timeout=30) as client:
            response = client.produce(topic, partition, batch, acks=-1)
        answers[:] = [response.responses[0].partition_responses[0]]
        if answers[0].error_code in RETRIABLE:
            return False
        assert answers[0].error_code == 0, f"produce to {topic}-{partition}: {answers[0]}"
        return True
    wait_until(written, 30, 0.1, lambda: f"produce to {topic}-{partition} on {bootstrap} "
                                         f"({answers})")
    return int(answers[0].base_offset)
