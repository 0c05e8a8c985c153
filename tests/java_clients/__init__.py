"""Kafka's own Java clients (kafka-clients 4.4: KafkaProducer, KafkaConsumer,
KafkaShareConsumer, Admin) as the tests drive them: ``JavaClients.java`` takes one JSON
command and prints JSON lines, one per event. It is compiled with ``javac`` on first use
against the jars ``tests.kafka_ref.install`` resolves (the class files go beside them, in
the cache outside the repository, keyed by the source's digest).

``run(command)`` waits for the program and returns its events; ``start(command)`` returns
a ``JavaClient`` whose events are read as they come (a consumer in a group while others
join, a share consumer that is killed)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.kafka_ref.cluster import TOOLS_LOG4J2
from tests.kafka_ref.install import install

SOURCE = Path(__file__).parent / "src" / "ottla" / "clients" / "JavaClients.java"
MAIN = "ottla.clients.JavaClients"
JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={TOOLS_LOG4J2}")
"""A client is a short-lived JVM: the C1 compiler and the serial GC start it fastest;
its log (warnings and errors) goes to stderr, its events to stdout."""

Event = dict[str, Any]


class JavaClientError(AssertionError):
    """The Java client ended with an error (its ``error`` event, or a bad exit)."""


def classpath() -> str:
    """The compiled client and Kafka's jars, compiling on first use."""
    libs = install()
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    classes = libs.parent / "java-clients" / digest
    if not (classes / ".compiled").is_file():
        classes.mkdir(parents=True, exist_ok=True)
        with open(classes / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (classes / ".compiled").is_file():
                compiled = subprocess.run(
                    ["javac", "-d", str(classes), "-cp", f"{libs}/*", str(SOURCE)],
                    capture_output=True, text=True, timeout=300)
                if compiled.returncode != 0:
                    raise JavaClientError(f"javac failed:\n{compiled.stderr}")
                (classes / ".compiled").write_text(digest)
    return f"{classes}{os.pathsep}{libs}/*"


def _argv(command: dict[str, Any]) -> list[str]:
    return ["java", *JVM_OPTS, "-cp", classpath(), MAIN, json.dumps(command)]


def run(command: dict[str, Any], timeout: float = 120.0, check: bool = True) -> list[Event]:
    """Run one command to its end; its events (the last is ``done`` or ``error``).
    With ``check``, an ``error`` event or a failed exit raises JavaClientError."""
    done = subprocess.run(_argv(command), capture_output=True, text=True, timeout=timeout)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if check and (done.returncode != 0 or not events or events[-1]["event"] != "done"):
        raise JavaClientError(f"Java client failed ({done.returncode}) on {command['op']}: "
                              f"{events[-1:]}\n{done.stderr[-4000:]}")
    return events


class JavaClient:
    """A Java client running in the background; ``events`` collects what it printed."""

    def __init__(self, command: dict[str, Any]) -> None:
        self.command = command
        self.proc = subprocess.Popen(_argv(command), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.events: list[Event] = []
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self._queue.put(json.loads(line))
        self._queue.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def drain(self) -> list[Event]:
        """Move what the client printed so far into ``events``; the new events."""
        new: list[Event] = []
        with contextlib.suppress(queue.Empty):
            while True:
                event = self._queue.get_nowait()
                if event is None:
                    break
                new.append(event)
        self.events.extend(new)
        return new

    def records(self) -> list[Event]:
        self.drain()
        return [e for e in self.events if e["event"] == "record"]

    def wait_for(self, condition: Callable[[JavaClient], bool], timeout: float,
                 message: str = "the Java client") -> None:
        """Until ``condition(self)`` holds (events drained first), bounded."""
        deadline = time.monotonic() + timeout
        while True:
            self.drain()
            if condition(self):
                return
            if self.proc.poll() is not None:
                self.drain()
                if condition(self):
                    return
                raise JavaClientError(f"{message}: the client ended ({self.proc.returncode}) "
                                      f"first: {self.events[-3:]}\n{self.stderr()}")
            if time.monotonic() > deadline:
                raise JavaClientError(f"timed out after {timeout}s waiting for {message}: "
                                      f"{self.events[-3:]}\n{self.stderr()}")
            time.sleep(0.05)

    def wait(self, timeout: float = 120.0, check: bool = True) -> list[Event]:
        """Until the client ends; all its events. With ``check`` it must end ``done``."""
        self.proc.wait(timeout)
        self._reader.join(10)  # everything it printed is queued once its stdout closed
        self.drain()
        if check and (self.proc.returncode != 0 or not self.events or
                      self.events[-1]["event"] != "done"):
            raise JavaClientError(f"Java client failed ({self.proc.returncode}): "
                                  f"{self.events[-3:]}\n{self.stderr()}")
        return self.events

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stderr(self) -> str:
        return "".join(self._stderr)[-4000:]


def start(command: dict[str, Any]) -> JavaClient:
    return JavaClient(command)


@contextlib.contextmanager
def started(command: dict[str, Any]) -> Iterator[JavaClient]:
    """``start``, killed at the end if still running."""
    client = start(command)
    try:
        yield client
    finally:
        if client.proc.poll() is None:
            client.kill9()
