"""Kafka's verifiable clients (``kafka-verifiable-producer`` and ``-consumer``, the tools
Kafka's own system tests drive), run as a subprocess whose JSON events, one a line on its
stdout, are collected on a thread of their own."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.kafka_ref.cluster import TOOL_JVM_OPTS, TOOLS, TOOLS_LOG4J2, java_command


class VerifiableClient:
    """One run of ``tool`` with ``args``; ``named`` gives its events of one kind so far."""

    def __init__(self, libs: Path, tool: str, *args: str) -> None:
        command = java_command(TOOLS[tool], *args, jvm_opts=TOOL_JVM_OPTS,
                               log4j2_config=TOOLS_LOG4J2, libs=libs)
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                     text=True)
        self.events: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e.get("name") == name]

    def finish(self, timeout: float) -> int:
        """Wait for the tool to exit on its own; its exit code."""
        code = self.proc.wait(timeout)
        self._thread.join(10)
        return code

    def stop(self, timeout: float = 30) -> None:
        """Kill the tool if it still runs, and collect what it printed."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish(timeout)
