"""Request-level client errors show in the node's log at Kafka's levels, naming the
client's address and client id, once a minute per address and kind: a request version the
node does not serve and a frame it cannot parse (Kafka's SocketServer: ERROR, "Closing
socket ... because of error")."""

from __future__ import annotations

import socket
import struct

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until


def frame(api_key: int, version: int, client_id: str, body: bytes) -> bytes:
    """A request with header v1 (no tagged fields): enough for any version we send."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", api_key, version, 7, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def send_and_see_closed(bootstrap_port: int, data: bytes) -> tuple[str, int]:
    """Send ``data`` on a new connection; the node closes it. Returns our address."""
    with socket.create_connection(("127.0.0.1", bootstrap_port)) as sock:
        address = sock.getsockname()
        sock.sendall(data)
        sock.settimeout(10)
        try:
            assert sock.recv(1) == b""
        except ConnectionResetError:
            pass
    return address[0], address[1]


def lines_with(node, text: str) -> list[str]:
    return [line for line in node.log().splitlines() if text in line]


def test_an_unsupported_version_and_a_malformed_frame_are_logged(make_ottla) -> None:
    node = make_ottla()
    host, port = send_and_see_closed(
        node.port, frame(ApiKey.PRODUCE, 2, "old-producer", b"\x00" * 16))
    logged = wait_until(lambda: lines_with(node, "'old-producer'"), 10,
                        message=lambda: f"the unsupported version in the log:\n{node.log()}")
    assert len(logged) == 1
    assert " ERROR " in logged[0]
    assert f"Closing connection from {host}:{port} (client id 'old-producer')" in logged[0]
    assert "PRODUCE with version 2 which is not enabled" in logged[0]

    # Metadata v12 whose topic array claims a billion entries in a 5-byte body.
    host, port = send_and_see_closed(
        node.port, frame(ApiKey.METADATA, 12, "broken\nclient", b"\x00\xff\xff\xff\xff\x0f"))
    logged = wait_until(lambda: lines_with(node, "'broken\\nclient'"), 10,
                        message=lambda: f"the malformed frame in the log:\n{node.log()}")
    assert len(logged) == 1  # the client's newline is escaped, not a forged line
    assert " ERROR " in logged[0]
    assert f"Closing connection from {host}:{port} (client id 'broken\\nclient')" in logged[0]

    # The same again, many times: once a minute per address and kind, not per request.
    for _ in range(20):
        send_and_see_closed(node.port, frame(ApiKey.METADATA, 12, "flood",
                                             b"\x00\xff\xff\xff\xff\x0f"))
        send_and_see_closed(node.port, frame(ApiKey.PRODUCE, 1, "flood", b""))
    # (Each connection is closed after its line would have been written.)
    assert not lines_with(node, "'flood'")
    assert len(lines_with(node, "Closing connection from")) == 2
