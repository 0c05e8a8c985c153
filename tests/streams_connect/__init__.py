"""Kafka Streams and Kafka Connect (4.4) as a user runs them, for tests against Ottla and
Apache Kafka alike: a Streams application and a distributed Connect worker, each a JVM of
its own, started, killed and restarted from Python.

The Java sources in ``src/`` (the Streams application ``ottla.streams.WindowedCounts`` and
the file connectors ``ottla.connect.LineFile{Source,Sink}{Connector,Task}``, which stand in
for ``connect-file``, not served by the registry here) are compiled with ``javac`` on first
use against the jars ``tests.kafka_ref.install`` resolves, into the cache beside them, in a
directory keyed by the sources' digest; ``src/META-INF`` goes with the classes, so that the
worker finds the connectors with ``plugin.discovery=service_load`` (no classpath scan).

Every JVM logs at INFO to a file in its own directory; a failure quotes that log's ERROR
entries and its tail, as ``tests.kafka_ref`` does for a node."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.helpers import exit_status, free_port, terminate
from tests.kafka_ref.install import install

SOURCES = Path(__file__).parent / "src"
STREAMS_MAIN = "ottla.streams.WindowedCounts"
CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
SOURCE_CONNECTOR = "ottla.connect.LineFileSourceConnector"
SINK_CONNECTOR = "ottla.connect.LineFileSinkConnector"
JVM_OPTS = ("-Xms64m", "-Xmx320m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true")
"""Small heaps on a shared 2-core machine; C1 and the serial GC start a JVM fastest."""

Event = dict[str, Any]


class JavaProcessError(AssertionError):
    """A JVM of these tests failed, or what a test waited for did not happen in time."""


def java_problem() -> str | None:
    """Why these tests cannot run here (no JDK 17+ with javac on PATH), None if they can."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        return ("Kafka Streams and Connect tests need a JDK 17+ (java and javac) on PATH "
                "(apt-get install openjdk-17-jdk-headless)")
    done = subprocess.run(["javac", "-version"], capture_output=True, text=True, timeout=60)
    version = (done.stdout + done.stderr).split()[-1:] or ["?"]
    major = version[0].split(".")[0]
    if not major.isdigit() or int(major) < 17:
        return f"Kafka Streams and Connect 4.4 need a JDK 17+, found javac {version[0]}"
    return None


def _digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in SOURCES.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def classpath() -> str:
    """The compiled sources (with ``META-INF``) and Kafka's jars, compiling on first use;
    Kafka is installed first if the cache lacks it (InstallError without Maven)."""
    libs = install()
    digest = _digest()
    classes = libs.parent / "streams-connect" / digest
    if not (classes / ".compiled").is_file():
        classes.mkdir(parents=True, exist_ok=True)
        with open(classes / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (classes / ".compiled").is_file():
                compiled = subprocess.run(
                    ["javac", "-Xlint:all,-processing", "-d", str(classes),
                     "-cp", f"{libs}/*", *map(str, sorted(SOURCES.rglob("*.java")))],
                    capture_output=True, text=True, timeout=300)
                if compiled.returncode != 0:
                    raise JavaProcessError(f"javac failed:\n{compiled.stderr}")
                shutil.copytree(SOURCES / "META-INF", classes / "META-INF", dirs_exist_ok=True)
                (classes / ".compiled").write_text(digest)
    return f"{classes}{os.pathsep}{libs}/*"


def _log4j2(log_path: Path) -> str:
    """INFO to one file, the JVM's stdout left for its JSON events."""
    return "\n".join([
        "status = warn",
        "appender.file.type = File",
        "appender.file.name = FILE",
        f"appender.file.fileName = {log_path}",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p [%t] %m (%c)%n",
        "rootLogger.level = INFO",
        "rootLogger.appenderRef.file.ref = FILE",
        # Every client logs its whole configuration at INFO: pages of it per restart.
        "logger.configs.name = org.apache.kafka.common.config.AbstractConfig",
        "logger.configs.level = WARN",
        "",
    ])


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


class JavaProcess:
    """One JVM in ``base_dir`` running ``main`` with ``args``: JSON lines it prints become
    ``events``; its log (INFO) goes to ``base_dir/<name>.log``, what else it prints to
    ``base_dir/<name>.out``. ``start`` may be called again after ``stop`` or ``kill9``."""

    def __init__(self, base_dir: Path, name: str, main: str, *args: str) -> None:
        self.base_dir, self.name, self.main, self.args = base_dir, name, main, args
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = base_dir / f"{name}.log"
        self.out_path = base_dir / f"{name}.out"
        self.log4j2_path = base_dir / f"{name}-log4j2.properties"
        self.log4j2_path.write_text(_log4j2(self.log_path), encoding="utf-8")
        self.proc: subprocess.Popen[str] | None = None
        self.events: list[Event] = []
        self.starts = 0
        self._queue: queue.Queue[Event] = queue.Queue()

    def start(self) -> JavaProcess:
        assert self.proc is None, f"{self.name} is running"
        self.starts += 1
        with open(self.out_path, "a", encoding="utf-8") as out:
            out.write(f"--- start {self.starts}\n")
            out.flush()
            self.proc = subprocess.Popen(
                ["java", *JVM_OPTS, f"-Dlog4j2.configurationFile={self.log4j2_path}",
                 "-cp", classpath(), self.main, *self.args],
                stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL, text=True,
                cwd=self.base_dir)
        threading.Thread(target=self._read, args=(self.proc, self.starts), daemon=True).start()
        return self

    def _read(self, proc: subprocess.Popen[str], run: int) -> None:
        assert proc.stdout is not None
        with open(self.out_path, "a", encoding="utf-8") as out:
            for line in proc.stdout:
                if line.startswith("{"):
                    self._queue.put({**json.loads(line), "run": run})
                else:
                    out.write(line)

    def drain(self) -> list[Event]:
        """Move the events printed so far into ``events``; the new ones."""
        new: list[Event] = []
        while not self._queue.empty():
            new.append(self._queue.get_nowait())
        self.events.extend(new)
        return new

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_for(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        """Until ``condition()`` is truthy (events drained before each try), bounded; a
        JVM that exits meanwhile fails at once, with its log."""
        deadline = time.monotonic() + timeout
        while True:
            self.drain()
            result = condition()
            if result:
                return result
            if self.proc is not None and self.proc.poll() is not None:
                raise JavaProcessError(f"{what}: {self.name} exited first "
                                       f"({exit_status(self.proc.returncode)})" + self.report())
            if time.monotonic() > deadline:
                raise JavaProcessError(f"timed out after {timeout:g} s waiting for {what}"
                                       + self.report())
            time.sleep(0.1)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None

    def stop(self, timeout: float = 60.0, check: bool = True) -> None:
        """SIGTERM, which runs the JVM's shutdown hooks (exit 143); with ``check``, any
        other end (a crash, or SIGKILL after ``timeout`` s of hanging) fails."""
        if self.proc is None:
            return
        code, how = terminate(self.proc, signal.SIGTERM, timeout)
        self.proc = None
        if check and code not in (0, 128 + signal.SIGTERM):
            raise JavaProcessError(f"{self.name} did not stop cleanly: {exit_status(code)} "
                                   f"({how})" + self.report())

    def errors(self, limit: int = 3000) -> str:
        """The ERROR entries of its log, each with the head of its stack trace."""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        found, trace = [], 0
        for line in lines:
            if line.startswith("[") and "] ERROR " in line:
                found.append(line)
                trace = 4
            elif trace and not line.startswith("["):
                found.append(line)
                trace -= 1
            else:
                trace = 0
        return "\n".join(found)[-limit:]

    def report(self) -> str:
        def tail(path: Path, size: int) -> str:
            try:
                return path.read_text(encoding="utf-8", errors="replace")[-size:]
            except OSError:
                return ""
        errors = self.errors()
        return ((f"\n{self.name}'s errors:\n{errors}" if errors else "")
                + f"\nits last events: {self.events[-3:]}"
                + f"\nthe end of {self.log_path}:\n{tail(self.log_path, 4000)}"
                + f"\n{self.out_path.name}:\n{tail(self.out_path, 2000)}")


class StreamsInstance(JavaProcess):
    """One instance of the ``WindowedCounts`` application, with its own state directory;
    ``config`` is its StreamsConfig (application.id, bootstrap.servers, ...)."""

    def __init__(self, base_dir: Path, name: str, input_topic: str, output_topic: str,
                 config: Mapping[str, str]) -> None:
        base_dir.mkdir(parents=True, exist_ok=True)
        properties = write_properties(base_dir / f"{name}.properties",
                                      {**config, "state.dir": str(base_dir / "state")})
        super().__init__(base_dir, name, STREAMS_MAIN, input_topic, output_topic,
                         str(properties))

    def state(self) -> Event | None:
        """Its last state event in this run, None before the first."""
        self.drain()
        states = [e for e in self.events if e["event"] == "state" and e["run"] == self.starts]
        return states[-1] if states else None

    def active_tasks(self) -> list[str]:
        """Its active tasks, while it is RUNNING (empty otherwise)."""
        state = self.state()
        return state["active"] if state and state["state"] == "RUNNING" else []

    def failures(self) -> list[Event]:
        self.drain()
        return [e for e in self.events if e["event"] == "error"]


class ConnectWorker(JavaProcess):
    """A distributed Connect worker (``ConnectDistributed``) of group ``group``, its config,
    offset and status topics named after the group, its REST API on a free 127.0.0.1 port,
    string keys and values; ``props`` add to or override its worker config."""

    def __init__(self, base_dir: Path, bootstrap: str, group: str, replication_factor: int,
                 props: Mapping[str, str] | None = None) -> None:
        base_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        rf = str(replication_factor)
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": rf,
            "offset.storage.replication.factor": rf,
            "status.storage.replication.factor": rf,
            "offset.storage.partitions": "5",
            "status.storage.partitions": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            # The connectors are on the classpath with ServiceLoader manifests, as are
            # Kafka's own plugins: no reflective scan of 94 jars at every start.
            "plugin.discovery": "service_load",
            # Source offsets and sink consumer offsets committed every second, not every
            # minute: a restart then resumes close to where the pipeline was.
            "offset.flush.interval.ms": "1000",
            **(props or {}),
        }
        properties = write_properties(base_dir / "worker.properties", config)
        super().__init__(base_dir, "connect-worker", CONNECT_MAIN, str(properties))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 30.0
             ) -> tuple[int, Any]:
        """One REST call: its HTTP status and its JSON body (None if empty)."""
        request = urllib.request.Request(
            self.url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        return status, json.loads(raw) if raw.strip() else None

    def wait_serving(self, timeout: float = 120.0) -> None:
        """Until the REST API answers and the worker has joined its group: it lists the
        connectors (503 or 409 while it starts or rebalances)."""
        def listed() -> bool:
            try:
                return self.rest("GET", "/connectors", timeout=5)[0] == 200
            except OSError:
                return False
        self.wait_for(listed, timeout, f"worker {self.url} to list its connectors")

    def put_connector(self, name: str, config: Mapping[str, str], timeout: float = 60.0
                      ) -> None:
        """Create (or update) a connector; a worker still rebalancing answers 409, so
        that is retried until ``timeout``."""
        answers: list[tuple[int, Any]] = []

        def accepted() -> bool:
            answers.append(self.rest("PUT", f"/connectors/{name}/config", dict(config)))
            return answers[-1][0] in (200, 201)
        try:
            self.wait_for(accepted, timeout, f"connector {name} accepted")
        except JavaProcessError as e:
            raise JavaProcessError(f"{e}\nREST answers: {answers[-3:]}") from None

    def connector_status(self, name: str) -> Any:
        return self.rest("GET", f"/connectors/{name}/status")[1]

    def wait_running(self, name: str, timeout: float = 90.0) -> None:
        """Until the connector and its one task are RUNNING (a FAILED one fails at once,
        with its trace)."""
        last: list[Any] = [None]

        def running() -> bool:
            last[0] = status = self.connector_status(name)
            if not status or "connector" not in status:
                return False
            states = [status["connector"]["state"], *(t["state"] for t in status["tasks"])]
            if "FAILED" in states:
                raise JavaProcessError(f"connector {name} failed: {status}" + self.report())
            return len(states) == 2 and set(states) == {"RUNNING"}
        try:
            self.wait_for(running, timeout, f"connector {name} and its task RUNNING")
        except JavaProcessError as e:
            raise JavaProcessError(f"{e}\nlast status: {last[0]}") from None
