"""Real ``ottla server`` processes on 127.0.0.1 with free ports: one node, or a KRaft
cluster of controller and broker processes formatted as an operator would, started,
killed (kill -9), paused and restarted. The chaos harness runs its clusters with these, and
the integration tests theirs (``tests.helpers`` re-exports them)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ottla.client.blocking import BlockingClient
from ottla.protocol.api import ApiKey
from ottla.server.stack_dump import DUMP_SIGNAL

WireClient = BlockingClient


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stable_port(rng: random.Random, taken: set[int] | None = None) -> int:
    """A free port below the ephemeral range, for a node that restarts on it: no
    outgoing connection or ``bind(0)`` (a proxy's, a client's) can take it meanwhile, as
    one can a port ``free_port`` found."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    taken = taken if taken is not None else set()
    for _ in range(1000):
        port = rng.randrange(10000, max(10001, low))
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    return free_port()


def wait_until(condition: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05,
               message: str | Callable[[], str] = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout``
    (``message`` may be a function, to describe the state at the end)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except Exception as e:
            last_error = e
        time.sleep(interval)
    if callable(message):
        message = message()
    raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


def terminate(proc: subprocess.Popen[bytes], sig: int, timeout: float,
              dump: signal.Signals | None = None) -> tuple[int, str]:
    """Send ``sig`` to a child process and wait (SIGKILL after ``timeout`` seconds): its
    exit code, and how it ended, in words for a failure message. A process that hangs is
    sent ``dump`` first, if given, to write its stacks where its log goes."""
    how = f"had exited on its own before {signal.Signals(sig).name}"
    if proc.poll() is None:
        how = f"on {signal.Signals(sig).name}"
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            how = f"hung for {timeout:g} s after {signal.Signals(sig).name}, then SIGKILL"
            if dump is not None:
                proc.send_signal(dump)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(2)  # time to write the stacks
            proc.kill()
            proc.wait(10)
    return proc.returncode, how


@dataclass
class OttlaProcess:
    """A real ``ottla server`` child process with its own data directory: a combined
    dev node configured by ``--override``s, or any node of a cluster started from its
    ``config_file`` (a server.properties)."""

    data_dir: str
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log_path: str = ""
    config_file: str | None = None
    roles: str = "broker,controller"
    node_id: int = 1
    env: dict[str, str] = field(default_factory=dict)
    """Set in the process's environment on top of this one's (the chaos harness's
    libfaketime, for one)."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def controller(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    def args(self) -> list[str]:
        args = [sys.executable, "-m", "ottla", "server"]
        if self.config_file is not None:
            return [*args, self.config_file]
        props = {
            "log.dirs": self.data_dir,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            **self.overrides,
        }
        for key, value in props.items():
            args += ["--override", f"{key}={value}"]
        return args

    def start(self, wait: bool = True) -> OttlaProcess:
        self.log_path = os.path.join(os.path.dirname(self.data_dir.rstrip("/")),
                                     f"ottla-{self.node_id}-{self.port}.log")
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **self.env} if self.env else None)
        log.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"ottla exited with {self.proc.returncode}:\n{self.log()}")
            # A broker answers once it is unfenced; a controller at once.
            with WireClient(self.bootstrap if self.is_broker else self.controller,
                            timeout=2) as client:
                client.api_versions()
            return True
        wait_until(ready, timeout, 0.1, f"ottla node {self.node_id} ({self.roles})")

    def log(self, tail: int = 20000) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-tail:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0, check: bool = True
             ) -> int | None:
        """Stop the process with ``sig`` (SIGKILL after ``timeout`` seconds) and return
        its exit code; None if none runs (never started, already stopped, or ``kill9``ed
        on purpose). With ``check``, the default, anything but a clean exit (0) fails
        the test with the log's tail: a crash or a hang on shutdown is a bug, and a
        teardown that drops the code would hide it. SIGKILL is never checked."""
        if self.proc is None:
            return None
        code, how = terminate(self.proc, sig, timeout, dump=DUMP_SIGNAL)
        self.proc = None
        if check and code != 0 and sig != signal.SIGKILL:
            raise AssertionError(f"ottla node {self.node_id} ({self.roles}, {self.bootstrap}) "
                                 f"did not exit cleanly: {exit_status(code)} ({how}); the "
                                 f"end of its log {self.log_path}:\n{self.log(8000)}")
        return code

    def kill9(self) -> None:
        """SIGKILL it on purpose: its exit status is not checked (``stop`` returns None)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None


def exit_status(code: int) -> str:
    """``code`` as a reader wants it: a negative one is the signal that killed it."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def stop_all(nodes: Iterable[OttlaProcess], check: bool = True) -> None:
    """Stop every node in order, each checked as ``OttlaProcess.stop`` does; one that
    fails leaves none of the others running, and the error names every one that did not
    exit cleanly."""
    failures: list[str] = []
    for node in nodes:
        try:
            node.stop(check=check)
        except Exception as e:  # the next nodes are stopped all the same
            failures.append(f"{type(e).__name__}: {e}" if not isinstance(e, AssertionError)
                            else str(e))
    if failures:
        raise AssertionError("\n\n".join(failures))


def configure(node: OttlaProcess, config_file: str, props: dict[str, str],
              cluster_id: str | None = None) -> None:
    """Write ``node``'s server.properties and, given ``cluster_id``, format its storage
    (``ottla storage format``), as an operator would before its first start."""
    node.config_file = config_file
    with open(config_file, "w", encoding="utf-8") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    if cluster_id is not None:
        format_storage([node], cluster_id)


def format_storage(nodes: Iterable[OttlaProcess], cluster_id: str) -> None:
    """``ottla storage format`` every node's config under ``cluster_id``, all at once."""
    running = [subprocess.Popen(
        [sys.executable, "-m", "ottla", "storage", "format", "--cluster-id", cluster_id,
         "--config", str(node.config_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for node in nodes]
    errors = []
    for proc in running:
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            errors.append(err)
    if errors:
        raise RuntimeError(f"ottla storage format failed: {errors}")


def describe_quorum(controllers: Iterable[OttlaProcess]) -> Any:
    """The metadata partition as the first live controller of ``controllers`` that
    answers DescribeQuorum reports it."""
    last: Exception | None = None
    for node in controllers:
        if node.proc is None:
            continue
        try:
            with WireClient(node.controller, timeout=5) as client:
                response = client.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
                    "topic_name": "__cluster_metadata",
                    "partitions": [{"partition_index": 0}]}]})
            partition = response.topics[0].partitions[0]
            if response.error_code == 0 and partition.error_code == 0:
                return partition
        except (OSError, ConnectionError) as e:
            last = e
    raise ConnectionError(f"no controller described the quorum ({last!r})")


class KRaftCluster:
    """Controller processes (node ids 1..n, voters of the quorum) and broker processes
    (ids 101, 102, ...), each formatted with ``ottla storage format`` under one cluster
    id and started from its own server.properties, as an operator would."""

    def __init__(self, base: str, controllers: int = 3, brokers: int = 2,
                 controller_props: dict[str, str] | None = None,
                 broker_props: dict[str, str] | None = None) -> None:
        from ottla.common.uuids import random_uuid

        self.base = base
        os.makedirs(base, exist_ok=True)
        self.cluster_id = random_uuid()
        self.nodes: dict[int, OttlaProcess] = {}
        for i in range(1, controllers + 1):
            self.nodes[i] = OttlaProcess(os.path.join(base, f"controller-{i}"),
                                         roles="controller", node_id=i)
        for j in range(1, brokers + 1):
            self.nodes[100 + j] = OttlaProcess(os.path.join(base, f"broker-{j}"),
                                               roles="broker", node_id=100 + j)
        voters = ",".join(f"{i}@127.0.0.1:{self.nodes[i].controller_port}"
                          for i in self.controller_ids)
        for node in self.nodes.values():
            props = {
                "process.roles": node.roles, "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "log.dirs": node.data_dir,
            }
            if node.is_broker:
                props.update({"listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                              "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                              "inter.broker.listener.name": "PLAINTEXT",
                              # One replica of each offsets partition unless a test
                              # asks for more (tests of replicated groups do).
                              "offsets.topic.replication.factor": "1",
                              **(broker_props or {})})
            else:
                props.update({"listeners": f"CONTROLLER://127.0.0.1:{node.controller_port}",
                              **(controller_props or {})})
            configure(node, os.path.join(base, f"node-{node.node_id}.properties"), props,
                      self.cluster_id)

    @property
    def controller_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if not n.is_broker)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.is_broker)

    def broker(self, i: int = 101) -> OttlaProcess:
        return self.nodes[i]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[b].bootstrap for b in self.broker_ids
                        if self.nodes[b].proc is not None)

    def start(self) -> KRaftCluster:
        """Start every node; if one does not come up, stop the others before raising
        (no process outlives a failed fixture)."""
        try:
            for node in self.nodes.values():  # the quorum forms while the rest start
                node.start(wait=False)
            for node in self.nodes.values():
                node.wait_ready(60)
        except BaseException:
            self.stop(check=False)  # the node that did not come up says why
            raise
        return self

    def stop(self, check: bool = True) -> None:
        """Stop the brokers, then the controllers; with ``check`` fail if any node that
        was running did not exit cleanly (see ``stop_all``)."""
        stop_all((self.nodes[i] for i in self.broker_ids + self.controller_ids), check)

    def describe_quorum(self, via: int | None = None) -> Any:
        """The DescribeQuorum partition as a live controller (or ``via``) reports it."""
        candidates = [via] if via is not None else self.controller_ids
        return describe_quorum(self.nodes[i] for i in candidates)

    def leader(self) -> int:
        """The current leader (active controller), once one is elected."""
        return wait_until(lambda: max(self.describe_quorum().leader_id, 0), 30, 0.2,
                          "a metadata quorum leader")
