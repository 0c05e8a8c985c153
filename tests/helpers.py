"""Test helpers: a real ``ottla server`` process on free ports, and a raw wire client."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ottla.client.blocking import BlockingClient


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05,
               message: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout``."""
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
    raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


@dataclass
class OttlaProcess:
    """A real ``ottla server`` child process with its own data directory."""

    data_dir: str
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log_path: str = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def args(self) -> list[str]:
        props = {
            "log.dirs": self.data_dir,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            **self.overrides,
        }
        args = [sys.executable, "-m", "ottla", "server"]
        for key, value in props.items():
            args += ["--override", f"{key}={value}"]
        return args

    def start(self, wait: bool = True) -> OttlaProcess:
        self.log_path = os.path.join(os.path.dirname(self.data_dir.rstrip("/")),
                                     f"ottla-{self.port}.log")
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"ottla exited with {self.proc.returncode}:\n{self.log()}")
            with WireClient(self.bootstrap, timeout=2) as client:
                client.api_versions()
            return True
        wait_until(ready, timeout, 0.1, f"ottla on port {self.port}")

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-20000:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        code = self.proc.returncode
        self.proc = None
        return code

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None


@contextlib.contextmanager
def running_ottla(data_dir: str, **overrides: str) -> Iterator[OttlaProcess]:
    node = OttlaProcess(data_dir, overrides=dict(overrides)).start()
    try:
        yield node
    finally:
        node.stop()


WireClient = BlockingClient
"""The tests' raw protocol client (``ottla.client.blocking``)."""
