"""A blocking Kafka protocol client: send any request, read its response.

Used by the command-line tools for APIs the confluent-kafka AdminClient does not offer
(OffsetDelete) and by the tests to speak the wire protocol directly.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from ottla.client.security import ClientSecurity, authenticate_blocking
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.messages import build

_SIZE = struct.Struct(">i")


class BlockingClient:
    """A blocking Kafka protocol client for tests: send any request, read its response."""

    def __init__(self, bootstrap: str, timeout: float = 10.0,
                 client_id: str = "ottla-tests", security: ClientSecurity | None = None
                 ) -> None:
        host, port = bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0
        self.client_id = client_id
        try:
            if security is not None and security.ssl_context is not None:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
            self.sock = sock
            if security is not None and security.sasl_mechanism is not None:
                authenticate_blocking(self.request, security)
        except BaseException:
            sock.close()
            raise

    def __enter__(self) -> BlockingClient:
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
        self.correlation_id += 1
        entity = build(request_schema(api_key, version), body)
        self.send_raw(encode_request(api_key, version, self.correlation_id, self.client_id,
                                     entity))
        return self.correlation_id

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = self.send(api_key, version, body)
        return self.receive(api_key, version, correlation_id)

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        got, response = decode_response(api_key, version, self.recv_frame())
        assert got == correlation_id, f"correlation id {got} != {correlation_id}"
        return response

    def api_versions(self, version: int = 4) -> Any:
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
        correlation_id = self.send_fetch(topic, partition, offset, max_wait_ms, min_bytes,
                                         max_bytes, version, isolation_level)
        return self.receive(ApiKey.FETCH, version, correlation_id)

    def send_fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int = 0,
                   min_bytes: int = 1, max_bytes: int = 1 << 20, version: int = 11,
                   isolation_level: int = 0) -> int:
        """Send a Fetch without waiting for its answer (``receive`` it later)."""
        return self.send(ApiKey.FETCH, version, {
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
