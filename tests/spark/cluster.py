"""A Spark standalone cluster and a Spark Connect server started from the PySpark install,
as an operator would start them, for the tests that need executors in JVMs of their own.

Every JVM runs in a process group of its own; ``stop`` SIGKILLs the groups of it and of
everything under it (executors, their Python daemons and workers), so nothing outlives the
run. Ports are chosen at run time and everything listens on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from tests.helpers import free_port, wait_until
from tests.spark.test_exactly_once import descendants, kill_driver

SPARK_HOME = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
# Short-lived JVMs on a small machine: the C1 compiler alone and one GC thread start
# them faster and leave the two cores to the work.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# What the test's own environment may carry that would change how Spark starts.
_INHERITED = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "SPARK_REMOTE",
              "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "PYSPARK_SUBMIT_ARGS",
              "SPARK_CONF_DIR", "SPARK_MASTER", "MASTER")


def spark_env(conf_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a Spark script: this PySpark's home, an empty configuration
    directory (no spark-defaults.conf or spark-env.sh of the machine), loopback only."""
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED}
    conf_dir.mkdir(parents=True, exist_ok=True)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf_dir),
               SPARK_LOCAL_IP="127.0.0.1", **extra)
    return env


def conf_args(conf: Mapping[str, str]) -> list[str]:
    return [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]


@dataclass
class SparkProcess:
    """One Spark script (a JVM under it) or driver in a process group of its own, run in
    the directory of its log file."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SparkProcess:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.args, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.log_path.parent, start_new_session=True)
        return self

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def check_running(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.proc and self.proc.returncode}):\n"
                               f"{self.log()}")

    def wait(self, timeout: float) -> int:
        """Its exit code; after ``timeout`` seconds it is stopped and the test fails."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"{self.name} did not finish in {timeout} s:\n"
                                 f"{self.log()}") from None

    def stop(self) -> None:
        """SIGKILL it with everything it started, however they grouped themselves."""
        if self.proc is not None and self.proc.poll() is None:
            kill_driver(self.proc)


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for its parent to reap does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def executor_of(pid: int) -> int | None:
    """The executor JVM that ``pid`` (a Python worker, its daemon, or the JVM) runs under."""
    current: int | None = pid
    while current and current > 1:
        if EXECUTOR_CLASS in cmdline(current):
            return current
        current = parent(current)
    return None


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores and ``memory`` each, every one
    with its own work and scratch directory), started with ``spark-class``."""

    root: Path
    workers: int = 2
    cores: int = 1
    memory: str = "512m"
    master_port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    processes: list[SparkProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def app_conf(self) -> dict[str, str]:
        """Settings that keep an application to one executor per worker, reachable on
        127.0.0.1 and quick to start."""
        return {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.executor.cores": str(self.cores),
            "spark.executor.memory": self.memory,
            "spark.cores.max": str(self.workers * self.cores),
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.locality.wait": "0",
            "spark.driver.extraJavaOptions": FAST_JVM,
            "spark.executor.extraJavaOptions": FAST_JVM,
        }

    def _daemon_env(self, **extra: str) -> dict[str, str]:
        return spark_env(self.root / "conf", SPARK_DAEMON_MEMORY="256m",
                         SPARK_DAEMON_JAVA_OPTS=FAST_JVM, **extra)

    def start(self, timeout: float = 90) -> StandaloneCluster:
        """Start the master and the workers and wait until every worker is registered;
        on failure stop what started before raising."""
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        try:
            # No REST submission server: it would take the fixed port 6066.
            self.processes.append(SparkProcess(
                "master", [spark_class, "org.apache.spark.deploy.master.Master",
                           "--host", "127.0.0.1", "--port", str(self.master_port),
                           "--webui-port", str(self.ui_port)],
                self._daemon_env(SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false"),
                self.root / "master.log").start())
            for i in range(self.workers):
                work = self.root / f"worker-{i}"
                (work / "local").mkdir(parents=True)
                self.processes.append(SparkProcess(
                    f"worker-{i}", [spark_class, "org.apache.spark.deploy.worker.Worker",
                                    "--host", "127.0.0.1", "--port", str(free_port()),
                                    "--webui-port", str(free_port()),
                                    "--cores", str(self.cores), "--memory", self.memory,
                                    "--work-dir", str(work), self.url],
                    self._daemon_env(SPARK_WORKER_DIR=str(work),
                                     SPARK_LOCAL_DIRS=str(work / "local")),
                    self.root / f"worker-{i}.log").start())

            def registered() -> bool:
                for p in self.processes:
                    p.check_running()
                return self.state()["aliveworkers"] == self.workers

            wait_until(registered, timeout, 0.2,
                       lambda: f"{self.workers} workers to register:\n"
                               + "\n".join(f"--- {p.name}\n{p.log(1500)}"
                                           for p in self.processes))
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict[str, Any]:
        """The master's view (its web UI's JSON): workers, cores, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.load(r)

    def executors(self) -> list[int]:
        """The executor JVMs running now (the workers' CoarseGrainedExecutorBackends)."""
        return [pid for p in self.processes[1:] if p.proc is not None
                for pid in descendants(p.proc.pid)
                if EXECUTOR_CLASS in cmdline(pid) and alive(pid)]

    def idle(self) -> bool:
        """No application holds executors (the previous test's is gone)."""
        return not self.state()["activeapps"] and not self.executors()

    def stop(self) -> None:
        for p in reversed(self.processes):  # the workers first: they start executors
            p.stop()


@dataclass
class ConnectServer:
    """A Spark Connect server on ``local[2]``, started with the PySpark install's
    ``sbin/start-connect-server.sh --wait`` (in the foreground), whose Python workers run
    ``python`` (which must import ottla, see docs/spark.md)."""

    root: Path
    python: str = sys.executable
    port: int = field(default_factory=free_port)
    process: SparkProcess | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> ConnectServer:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.local.dir": str(self.root / "local"),
            "spark.sql.streaming.stopTimeout": "30s",
        }
        env = spark_env(self.root / "conf", PYSPARK_PYTHON=self.python,
                        SPARK_LOG_DIR=str(self.root / "logs"),
                        SPARK_PID_DIR=str(self.root / "pid"))
        self.process = SparkProcess(
            "connect-server",
            [str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--wait",
             "--master", "local[2]", "--driver-memory", "1g",
             "--driver-java-options", FAST_JVM, *conf_args(conf)],
            env, self.root / "connect-server.log").start()

        def listening() -> bool:
            assert self.process is not None
            self.process.check_running()
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True

        try:
            wait_until(listening, timeout, 0.2, lambda: "the Spark Connect server:\n"
                       + (self.process.log() if self.process else ""))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def executor_python(directory: Path) -> str:
    """A Python like an executor's on a cluster where nothing of the job is installed:
    it has PySpark's, pyarrow's and confluent-kafka's packages (a venv whose only
    site-packages entry is this environment's) but not ``ottla``, whose editable install
    is a .pth file a venv does not read from another environment's directory. What the
    Python workers import of ottla comes from the zip the job ships."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)],
                   check=True, timeout=60)
    python = directory / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                           "'purelib'))"], capture_output=True, text=True, check=True)
    Path(site.stdout.strip(), "deps.pth").write_text(
        "".join(sorted({sysconfig.get_path("purelib") + "\n",
                        sysconfig.get_path("platlib") + "\n"})))
    probe = subprocess.run([str(python), "-c", "import confluent_kafka, pyarrow, pandas\n"
                            "try:\n import ottla\nexcept ImportError:\n pass\n"
                            "else:\n raise SystemExit('ottla is importable')"],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, (
        f"the executors' Python must have the dependencies and not ottla: {probe.stderr}")
    return str(python)


def result_line(output: str, key: str) -> dict[str, Any]:
    """The JSON line with ``key`` that a driver or client printed among its log lines."""
    return json.loads(next(line for line in output.splitlines()
                           if line.startswith("{") and f'"{key}"' in line))


def file_sink_files(output: Path) -> list[Path]:
    """The data files Spark's file sink committed to ``output``: those of its metadata
    log (``_spark_metadata``: the newest compacted batch and the batches after it), as
    Spark reads them. A task attempt that died may have left a file of its own beside
    them, which is not the output."""
    log = output / "_spark_metadata"
    entries = sorted((int(p.name.split(".")[0]), p) for p in log.iterdir()
                     if p.name.split(".")[0].isdigit())
    compacted = [i for i, (_, p) in enumerate(entries) if p.name.endswith(".compact")]
    files: dict[str, None] = {}
    for _, path in entries[compacted[-1] if compacted else 0:]:
        version, *lines = path.read_text().splitlines()
        assert version == "v1", f"{path}: file sink log version {version}"
        for line in lines:
            entry = json.loads(line)
            name = urllib.parse.unquote(urllib.parse.urlparse(entry["path"]).path)
            if entry["action"] == "add":
                files[name] = None
            else:
                files.pop(name, None)
    return [Path(name) for name in files]


def read_file_sink(output: Path) -> list[dict[str, Any]]:
    """Every row of the Parquet files the file sink committed to ``output``."""
    import pyarrow.parquet as pq

    return [row for path in file_sink_files(output)
            for row in pq.read_table(path).to_pylist()]
