"""Test helpers: a real ``ottla server`` process on free ports, and a raw wire client."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.messages import build


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


_SIZE = struct.Struct(">i")


class WireClient:
    """A blocking Kafka protocol client for tests: send any request, read its response."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = _SIZE.unpack(self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def _recv_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        from ottla.protocol.api import request_schema

        self.correlation_id += 1
        entity = build(request_schema(api_key, version), body)
        self.send_raw(encode_request(api_key, version, self.correlation_id, "ottla-tests",
                                     entity))
        return self.correlation_id

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = self.send(api_key, version, body)
        return self.receive(api_key, version, correlation_id)

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        got, response = decode_response(api_key, version, self.recv_frame())
        assert got == correlation_id, f"correlation id {got} != {correlation_id}"
        return response

    def api_versions(self, version: int = 3) -> Any:
        body = {"client_software_name": "ottla-tests", "client_software_version": "1.0"}
        return self.request(ApiKey.API_VERSIONS, version, body)

    def produce(self, topic: str, partition: int, records: bytes, acks: int = 1,
                version: int = 9) -> Any:
        return self.request(ApiKey.PRODUCE, version, {
            "transactional_id": None, "acks": acks, "timeout": 10000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]})

    def fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int = 0,
              min_bytes: int = 1, max_bytes: int = 1 << 20, version: int = 11,
              isolation_level: int = 0) -> Any:
        return self.request(ApiKey.FETCH, version, {
            "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": isolation_level, "session_id": 0,
            "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": max_bytes}]}]})

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                     version: int = 7) -> Any:
        return self.request(ApiKey.CREATE_TOPICS, version, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [], "configs": [{"name": k, "value": v}
                                                       for k, v in (configs or {}).items()]}],
            "timeout": 10000, "validate_only": False})
