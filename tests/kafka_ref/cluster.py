"""Real Apache Kafka 4.4 nodes beside Ottla, as tests/helpers.py's ``OttlaProcess`` and
``KRaftCluster`` are for Ottla: free ports on 127.0.0.1 chosen at run time, a directory per
node (its data, server.properties, log4j2 config and log), a bounded ``wait_ready``, a
``stop`` whose exit status is checked, and ``kill9``. Kafka's own command-line tools run
against any bootstrap server through ``run_tool``.

The jars come from ``tests.kafka_ref.install`` (installed on first use, which needs Maven).
Every node formats its storage with Kafka's ``kafka.tools.StorageTool`` into a dynamic
KRaft quorum (kraft.version 1: ``--standalone`` for one controller, ``--initial-controllers``
for several, ``--no-initial-controllers`` for brokers), at Kafka 4.4's latest production
metadata.version (4.4-IV2), where share groups (share.version 2) and streams groups are on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ottla.common.uuids import random_uuid
from tests.helpers import WireClient, exit_status, free_port, terminate, wait_until
from tests.kafka_ref.install import install

NODE_JVM_OPTS: tuple[str, ...] = (
    # A small heap for a shared 2-core machine; the GC settings of kafka-run-class.sh.
    "-Xms128m", "-Xmx512m",
    "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
)
TOOL_JVM_OPTS: tuple[str, ...] = (
    # A tool is a short-lived JVM: the C1 compiler and the serial GC start it fastest.
    # Pass NODE_JVM_OPTS (or your own) to a tool that measures performance.
    "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
)
TOOLS_LOG4J2 = Path(__file__).with_name("tools-log4j2.properties")

TOOLS: dict[str, str] = {
    # Kafka's bin/ scripts and the main class each runs, for run_tool("kafka-topics", ...).
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-share-consumer-perf-test": "org.apache.kafka.tools.ShareConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-share-consumer": "org.apache.kafka.tools.VerifiableShareConsumer",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "connect-standalone": "org.apache.kafka.connect.cli.ConnectStandalone",
    "connect-distributed": "org.apache.kafka.connect.cli.ConnectDistributed",
}

SHARE_FAST: dict[str, str] = {
    # tests/integration/test_share_groups.py's FAST: share members heartbeat every second
    # and are dropped after 6 s, so that tests of membership changes are quick.
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "6000",
}
NODE_ARCHIVE = "kafka-node.jsa"
"""In Kafka's home: a class-data archive (AppCDS) of a broker's classes, written at its clean
stop by the first broker a process starts while there is none; later nodes map it and start
in about 60% of the time (on 2 cores: a combined node in 3.0 s instead of 5.5 s, 1 controller
+ 3 brokers in 15 s instead of 22 s). A tool gains 0.3 s from one, so tools go without."""
STARTED = "Kafka Server started"
"""What KafkaRaftServer logs once the node serves (a broker: once it is unfenced)."""


def broker_defaults(brokers: int) -> dict[str, str]:
    """The settings every broker of a cluster of ``brokers`` brokers gets unless a caller
    overrides them: Ottla's dev defaults (``ottla.common.server_config.dev_defaults``, which
    are Kafka's sample config) on one broker; internal state replicated as the cluster's
    size allows on more (as ``ottla dev-cluster`` does), the offsets topic on one replica
    as in tests/helpers.py's ``KRaftCluster``; and the share tests' FAST heartbeats."""
    rf, min_isr = str(min(3, brokers)), str(min(2, brokers))
    return {
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": "0",
        **SHARE_FAST,
    }


def kafka_libs() -> Path:
    """The directory of Kafka's jars, installed first if needed (fails without Maven)."""
    return install()


def java_command(main_class: str, *args: str, jvm_opts: Sequence[str],
                 log4j2_config: Path, libs: Path | None = None) -> list[str]:
    return ["java", *jvm_opts, f"-Dlog4j2.configurationFile={log4j2_config}",
            "-cp", str((libs or kafka_libs()) / "*"), main_class, *args]


def run_tool(main_class: str, *args: str, timeout: float = 120.0, check: bool = False,
             input: str | None = None, jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
             libs: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools (a main class, or a bin/ script name from ``TOOLS``) with
    ``args``, e.g. ``run_tool("kafka-topics", "--bootstrap-server", b, "--list")``; its
    stdout and stderr (where its log goes) are captured. With ``check``, an exit code other
    than 0 fails with both."""
    command = java_command(TOOLS.get(main_class, main_class), *args, jvm_opts=jvm_opts,
                           log4j2_config=TOOLS_LOG4J2, libs=libs)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          input=input, stdin=None if input is not None else subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"{main_class} {' '.join(args)} failed with "
                             f"{exit_status(done.returncode)}:\n{done.stdout}\n{done.stderr}")
    return done


_archives_being_written: set[Path] = set()
"""The archives nodes of this process are writing: one at a time (a dump at exit costs a
few seconds of CPU, and four brokers dumping at once on two cores cost half a minute)."""


def _class_data_sharing(libs: Path, may_write: bool) -> tuple[list[str], Path | None]:
    """The JVM options that start a node from ``NODE_ARCHIVE``, or, while there is none and
    no other node of this process is writing one, that make it (if ``may_write``) write one
    at its exit, to its own file that ``stop`` renames into place after a clean exit. A
    stale archive (other jars) is ignored by the JVM; ``-Xlog:cds*=error`` keeps its notes
    out of stdout.log."""
    archive = libs.parent / NODE_ARCHIVE
    if archive.exists():
        return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=error"], None
    if not may_write or _archives_being_written:
        return [], None
    pending = archive.with_name(f"{NODE_ARCHIVE}.{os.getpid()}-{random_uuid()}.tmp")
    _archives_being_written.add(pending)
    return [f"-XX:ArchiveClassesAtExit={pending}", "-Xlog:cds*=error"], pending


def _log4j2_config(log_path: Path) -> str:
    """The node's log to a file at INFO, as Kafka's config/log4j2.yaml logs server.log."""
    return "\n".join([
        "status = warn",
        "appender.file.type = File",
        "appender.file.name = FILE",
        f"appender.file.fileName = {log_path}",
        "appender.file.append = true",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = INFO",
        "rootLogger.appenderRef.file.ref = FILE",
        # The request log at WARN as in Kafka's config; its state-change log (a file of its
        # own there, at INFO) at WARN here: one line per partition and change is noise.
        "logger.request.name = kafka.request.logger",
        "logger.request.level = WARN",
        "logger.state.name = state.change.logger",
        "logger.state.level = WARN",
        "",
    ])


@dataclass
class KafkaNode:
    """A real Apache Kafka node (``java kafka.Kafka server.properties``) in ``base_dir``,
    which holds its ``data/``, ``server.properties``, ``log4j2.properties``, ``server.log``
    (its log4j2 log) and ``stdout.log`` (what the JVM itself prints: crashes, bad flags).
    ``props`` are its server.properties beyond its roles, id and log.dirs: listeners and
    quorum, which ``KafkaCluster`` (or ``single_node``) chooses and formats the storage
    for; start nodes through one."""

    base_dir: Path
    node_id: int = 1
    roles: str = "broker,controller"
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    props: dict[str, str] = field(default_factory=dict)
    jvm_opts: tuple[str, ...] = NODE_JVM_OPTS
    share_classes: bool = True
    """Start from (or write) the class-data archive ``NODE_ARCHIVE``."""
    directory_id: str = field(default_factory=random_uuid)
    """Its metadata log directory's id, which ``--initial-controllers`` names."""
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log_start: int = field(default=0, init=False, repr=False)
    _pending_archive: Path | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def controller(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def config_file(self) -> Path:
        return self.base_dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "server.log"

    @property
    def stdout_path(self) -> Path:
        return self.base_dir / "stdout.log"

    @property
    def log4j2_path(self) -> Path:
        return self.base_dir / "log4j2.properties"

    @property
    def formatted(self) -> bool:
        return (self.data_dir / "meta.properties").exists()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def write_config(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        props = {"process.roles": self.roles, "node.id": str(self.node_id),
                 "log.dirs": str(self.data_dir), **self.props}
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()),
                                    encoding="utf-8")
        self.log4j2_path.write_text(_log4j2_config(self.log_path), encoding="utf-8")

    def format_command(self, cluster_id: str, *flags: str) -> list[str]:
        return java_command("kafka.tools.StorageTool", "format", "--cluster-id", cluster_id,
                            "--config", str(self.config_file), *flags,
                            jvm_opts=TOOL_JVM_OPTS, log4j2_config=TOOLS_LOG4J2)

    def start(self, wait: bool = True, timeout: float = 90.0) -> KafkaNode:
        if not self.formatted:
            raise RuntimeError(f"kafka node {self.node_id} in {self.base_dir} is not formatted "
                               "(KafkaCluster.start formats its nodes)")
        self.write_config()
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        libs = kafka_libs()
        cds: list[str] = []
        if self.share_classes:
            # A broker's classes: what most nodes load (a controller's are fewer).
            cds, self._pending_archive = _class_data_sharing(libs, may_write=self.is_broker)
        command = java_command("kafka.Kafka", str(self.config_file), libs=libs,
                               jvm_opts=(*self.jvm_opts, *cds,
                                         f"-Dkafka.logs.dir={self.base_dir}"),
                               log4j2_config=self.log4j2_path)
        with open(self.stdout_path, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.base_dir)
        if wait:
            self.wait_ready(timeout)
        return self

    def started(self) -> bool:
        """Whether this run of the node has logged that it serves."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_start)
                return STARTED.encode() in f.read()
        except OSError:
            return False

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Until the node logs that it started and answers ApiVersions on its listener (a
        broker's once it is unfenced, a controller's at once). A JVM that exits fails at
        once, with its log; one that is not ready after ``timeout`` s fails with it too."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise RuntimeError(f"kafka node {self.node_id} ({self.roles}) is not running "
                                   f"({'not started' if code is None else exit_status(code)})"
                                   + self.failure_report())
            if self.started():
                try:
                    with WireClient(self.bootstrap if self.is_broker else self.controller,
                                    timeout=2) as client:
                        client.api_versions()
                    return
                except OSError as e:  # refused, reset, timed out: not yet
                    last_error = e
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"kafka node {self.node_id} ({self.roles}) not ready after {timeout:g} s"
                    + (f" (last error: {last_error!r})" if last_error else "")
                    + self.failure_report())
            time.sleep(0.1)

    def errors(self, limit: int = 4000) -> str:
        """The ERROR and FATAL entries this run logged, each with the first lines of its
        stack trace: the cause of a failure, which the shutdown's logging pushes out of
        the log's tail."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                f.seek(self._log_start)
                lines = f.read().splitlines()
        except OSError:
            return ""
        found: list[str] = []
        trace = 0
        for line in lines:
            if line.startswith("[") and ("] ERROR " in line or "] FATAL " in line):
                found.append(line)
                trace = 6
            elif trace and not line.startswith("["):
                found.append(line)
                trace -= 1
            else:
                trace = 0
        return "\n".join(found)[:limit]

    def failure_report(self) -> str:
        errors = self.errors()
        return ((f"; its errors:\n{errors}\n" if errors else "")
                + f"; the end of its log {self.log_path}:\n{self.log(8000)}")

    def log(self, tail: int = 20000) -> str:
        """The end of the node's log, and anything the JVM printed itself."""
        text = ""
        for path in (self.log_path, self.stdout_path):
            try:
                part = path.read_text(encoding="utf-8", errors="replace")[-tail:]
            except OSError:
                continue
            if part.strip():
                text += f"--- {path.name}\n{part}"
        return text

    def rss_bytes(self) -> int:
        """The JVM's resident set size now (VmRSS), for memory figures."""
        assert self.proc is not None, "the node is not running"
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc status")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0, check: bool = True
             ) -> int | None:
        """Stop the JVM with ``sig`` (SIGKILL after ``timeout`` s) and return its exit code;
        None if none runs. A JVM that ran its shutdown hooks on a signal exits with 128 plus
        it (143 on SIGTERM), so that and 0 are clean; with ``check``, anything else (Kafka
        halts with 1 when its shutdown fails, a hang ends in SIGKILL) fails with the log."""
        if self.proc is None:
            return None
        code, how = terminate(self.proc, sig, timeout)
        self.proc = None
        self._settle_archive(clean=code in (0, 128 + sig) and sig != signal.SIGKILL)
        if check and sig != signal.SIGKILL and code not in (0, 128 + sig):
            raise AssertionError(f"kafka node {self.node_id} ({self.roles}) did not exit "
                                 f"cleanly: {exit_status(code)} ({how})"
                                 + self.failure_report())
        return code

    def kill9(self) -> None:
        """SIGKILL it on purpose: its exit status is not checked (``stop`` returns None)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None
        self._settle_archive(clean=False)

    def _settle_archive(self, clean: bool) -> None:
        """Put the class-data archive this run wrote into place, or drop a partial one."""
        pending, self._pending_archive = self._pending_archive, None
        if pending is None:
            return
        _archives_being_written.discard(pending)
        if not pending.exists():
            return
        if clean and pending.stat().st_size > 0:
            os.replace(pending, pending.parent / NODE_ARCHIVE)
        else:
            pending.unlink(missing_ok=True)


def stop_all(nodes: Iterable[KafkaNode], check: bool = True) -> None:
    """Stop every node in order; one that fails leaves none of the others running, and the
    error names every node that did not exit cleanly."""
    failures: list[str] = []
    for node in nodes:
        try:
            node.stop(check=check)
        except Exception as e:  # the next nodes are stopped all the same
            failures.append(str(e) if isinstance(e, AssertionError)
                            else f"{type(e).__name__}: {e}")
    if failures:
        raise AssertionError("\n\n".join(failures))


class KafkaCluster:
    """Kafka nodes of one cluster id in ``base``: ``controllers`` controllers (ids 1..n)
    and ``brokers`` brokers (ids 101, 102, ...), each in its own directory. With
    ``combined``, the controllers are brokers too (``process.roles=broker,controller``):
    ``KafkaCluster(base, controllers=1, brokers=0, combined=True)`` is the single dev node,
    ``KafkaCluster(base)`` is 1 controller + 3 brokers. ``props`` go to every node,
    ``broker_props``/``controller_props`` to those roles, over ``broker_defaults``;
    ``format_flags`` to every node's ``kafka-storage format`` (``--release-version 4.0-IV3``,
    ``--feature share.version=0``: the cluster's initial metadata.version and features).
    With ``static_quorum`` the controllers are ``controller.quorum.voters`` (kraft.version
    0) instead of a quorum formatted with its initial controllers (kraft.version 1)."""

    def __init__(self, base: str | os.PathLike[str], controllers: int = 1, brokers: int = 3,
                 combined: bool = False, props: Mapping[str, str] | None = None,
                 broker_props: Mapping[str, str] | None = None,
                 controller_props: Mapping[str, str] | None = None,
                 format_flags: Sequence[str] = (), static_quorum: bool = False) -> None:
        if controllers < 1 or (brokers < 1 and not combined):
            raise ValueError("a cluster needs a controller and a broker")
        self.base = Path(base)
        self.cluster_id = random_uuid()
        self.format_flags = tuple(format_flags)
        self.static_quorum = static_quorum
        roles = "broker,controller" if combined else "controller"
        self.nodes: dict[int, KafkaNode] = {}
        for i in range(1, controllers + 1):
            self.nodes[i] = KafkaNode(self.base / f"{'node' if combined else 'controller'}-{i}",
                                      node_id=i, roles=roles)
        for j in range(1, brokers + 1):
            self.nodes[100 + j] = KafkaNode(self.base / f"broker-{100 + j}", node_id=100 + j,
                                            roles="broker")
        quorum = ",".join(self.nodes[i].controller for i in self.controller_ids)
        defaults = broker_defaults(len(self.broker_ids))
        for node in self.nodes.values():
            listeners = ([f"PLAINTEXT://{node.bootstrap}"] if node.is_broker else []) + (
                [f"CONTROLLER://{node.controller}"] if node.is_controller else [])
            node.props = {
                "listeners": ",".join(listeners),
                "advertised.listeners": ",".join(listeners),
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                **({"controller.quorum.voters": ",".join(
                    f"{i}@{self.nodes[i].controller}" for i in self.controller_ids)}
                   if static_quorum else {"controller.quorum.bootstrap.servers": quorum}),
                **({"inter.broker.listener.name": "PLAINTEXT", **defaults}
                   if node.is_broker else {}),
                **(props or {}),
                **((broker_props or {}) if node.is_broker else {}),
                **((controller_props or {}) if node.is_controller else {}),
            }

    @property
    def controller_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.is_controller)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.is_broker)

    def broker(self, i: int | None = None) -> KafkaNode:
        return self.nodes[self.broker_ids[0] if i is None else i]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[b].bootstrap for b in self.broker_ids
                        if self.nodes[b].proc is not None)

    @property
    def bootstrap_controller(self) -> str:
        """For tools' ``--bootstrap-controller`` (kafka-metadata-quorum, kafka-features)."""
        return ",".join(self.nodes[c].controller for c in self.controller_ids)

    def format(self) -> None:
        """Format every node not yet formatted, all at once (one JVM each, in parallel)."""
        voters = ",".join(f"{i}@127.0.0.1:{self.nodes[i].controller_port}:"
                          f"{self.nodes[i].directory_id}" for i in self.controller_ids)
        running: list[tuple[KafkaNode, subprocess.Popen[str]]] = []
        for node in self.nodes.values():
            if node.formatted:
                continue
            node.write_config()
            flags = [] if self.static_quorum else (
                (["--standalone"] if len(self.controller_ids) == 1
                 else ["--initial-controllers", voters]) if node.is_controller else [
                    "--no-initial-controllers"])
            running.append((node, subprocess.Popen(
                node.format_command(self.cluster_id, *flags, *self.format_flags),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                text=True)))
        failures = []
        try:
            for node, proc in running:
                output, _ = proc.communicate(timeout=120)
                if proc.returncode != 0:
                    failures.append(
                        f"node {node.node_id}: {exit_status(proc.returncode)}\n{output}")
        finally:
            for _, proc in running:  # none outlives a failure (or a timeout) of another
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
        if failures:
            raise AssertionError("kafka-storage format failed:\n" + "\n".join(failures))

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Format what needs it, start every node, and wait until each serves and every
        broker is in the cluster's metadata; if that fails, stop them all before raising
        (no JVM outlives a failed fixture)."""
        try:
            self.format()
            for node in self.nodes.values():  # the quorum forms while the brokers start
                node.start(wait=False)
            deadline = time.monotonic() + timeout
            for node in self.nodes.values():
                node.wait_ready(max(1.0, deadline - time.monotonic()))
            seen: set[int] = set()

            def all_registered() -> bool:
                seen.clear()
                seen.update(self.registered_brokers())
                return seen == set(self.broker_ids)
            wait_until(all_registered, max(1.0, deadline - time.monotonic()), 0.2,
                       lambda: f"brokers {self.broker_ids} in the metadata (last seen: "
                               f"{sorted(seen)})")
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def registered_brokers(self) -> set[int]:
        """The broker ids a live broker's Metadata response lists (confluent-kafka)."""
        from confluent_kafka.admin import AdminClient

        metadata = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=5)
        return set(metadata.brokers)

    def stop(self, check: bool = True) -> None:
        """Stop the brokers, then the controllers (each checked as ``KafkaNode.stop``)."""
        brokers_only = [i for i in self.broker_ids if i not in self.controller_ids]
        stop_all((self.nodes[i] for i in [*brokers_only, *self.controller_ids]), check)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        """Stop and check every node; a failure of the block stays the error raised, with
        an unclean exit as a note on it."""
        try:
            self.stop()
        except AssertionError as e:
            if exc is None:
                raise
            exc.add_note(str(e))


def single_node(base: str | os.PathLike[str], **props: str) -> KafkaCluster:
    """One combined broker+controller node (node.id 1), Kafka's quickstart, as
    ``ottla server`` runs by default; ``props`` override its server.properties."""
    return KafkaCluster(base, controllers=1, brokers=0, combined=True, props=props)
