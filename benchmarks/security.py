"""Throughput over each security protocol beside PLAINTEXT in the same run, and the rate
of new authenticated connections.

One ``ottla server`` with four listeners (PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL,
SCRAM-SHA-512 on the SASL ones, a certificate made for the run): for each, confluent-kafka
produces ``--size``-byte records with acks=1 for ``--seconds`` to a topic of its own and
consumes them back; the PLAINTEXT figures are the ceiling the others are read against
(TLS encrypts in user space on both sides, and a TLS listener sends fetched records
without the zero-copy path). Then the handshake rate: new connections per second that
complete TLS and a SCRAM-SHA-512 exchange (4096 iterations) and one ApiVersions, made one
after another by Ottla's own protocol client, and the node's CPU per handshake.

Run: ``python -m benchmarks.security [--size 1024] [--seconds 5] [--repeat 3]
[--handshakes 200]`` (medians of the rounds, each in another order after a warm-up).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from tests.helpers import OttlaProcess, free_port
from tests.tls import CertificateAuthority

from benchmarks.throughput import consume, proc_cpu_seconds, produce
from ottla.client.blocking import BlockingClient
from ottla.client.security import properties_security

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def start(root: Path) -> tuple[OttlaProcess, dict[str, int], CertificateAuthority]:
    ca = CertificateAuthority(root / "tls")
    (root / "tls" / "keystore.pem").write_bytes(ca.server().pem())
    node = OttlaProcess(str(root / "data"))
    ports = {"PLAINTEXT": node.port, **{p: free_port() for p in PROTOCOLS[1:]}}
    secured = ",".join(f"{p}://127.0.0.1:{ports[p]}" for p in PROTOCOLS[1:])
    node.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                     f"CONTROLLER://127.0.0.1:{node.controller_port},{secured}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},{secured}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(root / "tls" / "keystore.pem"),
    }
    node.start()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
        PASSWORD.encode())])[USER].result(30)
    return node, ports, ca


def client_settings(protocol: str, ca: CertificateAuthority) -> dict[str, Any]:
    settings: dict[str, Any] = {"security.protocol": protocol}
    if "SSL" in protocol:
        settings["ssl.ca.location"] = str(ca.cert_path)
    if "SASL" in protocol:
        settings.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                         "sasl.password": PASSWORD})
    return settings


def handshakes(port: int, ca: CertificateAuthority, count: int) -> float:
    """New SASL_SSL connections per second, each authenticated and asked ApiVersions."""
    security = properties_security({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER, "sasl.password": PASSWORD,
        "ssl.ca.location": str(ca.cert_path)})
    start = time.perf_counter()
    for _ in range(count):
        with BlockingClient(f"127.0.0.1:{port}", security=security) as client:
            client.api_versions()
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--handshakes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds (each listener once per round, the order rotated); "
                        "the table shows medians")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ottla-security-bench-") as root:
        node, ports, ca = start(Path(root))
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic("warm-up", 1, 1)])["warm-up"].result(30)
            produce(node.bootstrap, "warm-up", args.size, min(args.seconds, 3), "1")
            rounds: dict[str, list[tuple[float, float]]] = {p: [] for p in PROTOCOLS}
            for index in range(args.repeat):
                # Each round in another order, so that no listener always goes first.
                order = PROTOCOLS[index % len(PROTOCOLS):] + PROTOCOLS[:index % len(PROTOCOLS)]
                for protocol in order:
                    topic = f"bench-{protocol.lower()}-{index}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    settings = client_settings(protocol, ca)
                    bootstrap = f"127.0.0.1:{ports[protocol]}"
                    produced = produce(bootstrap, topic, args.size, args.seconds, "1",
                                       client=settings)
                    consumed = consume(bootstrap, topic, args.size, produced["records"],
                                       client=settings)
                    rounds[protocol].append((produced["mb_per_s"], consumed["mb_per_s"]))
            figures: dict[str, Any] = {
                p: {"produce_mb_per_s": statistics.median(r[0] for r in rounds[p]),
                    "consume_mb_per_s": statistics.median(r[1] for r in rounds[p]),
                    "rounds": rounds[p]} for p in PROTOCOLS}
            assert node.proc is not None
            cpu_before = proc_cpu_seconds(node.proc.pid)
            rate = handshakes(ports["SASL_SSL"], ca, args.handshakes)
            cpu = proc_cpu_seconds(node.proc.pid) - cpu_before
            figures["handshakes"] = {"per_s": rate,
                                     "node_cpu_ms_each": 1000 * cpu / args.handshakes}
        finally:
            node.stop()
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    base = figures["PLAINTEXT"]
    print(f"{args.size}-byte records, acks=1, {args.seconds:.0f} s each, median of "
          f"{args.repeat} rounds; ratios to PLAINTEXT in the same run")
    print(f"{'listener':<16}{'produce MB/s':>14}{'ratio':>8}{'consume MB/s':>15}{'ratio':>8}")
    for protocol in PROTOCOLS:
        f = figures[protocol]
        print(f"{protocol:<16}{f['produce_mb_per_s']:>14.1f}"
              f"{f['produce_mb_per_s'] / base['produce_mb_per_s']:>8.2f}"
              f"{f['consume_mb_per_s']:>15.1f}"
              f"{f['consume_mb_per_s'] / base['consume_mb_per_s']:>8.2f}")
    h = figures["handshakes"]
    print(f"SASL_SSL handshakes (TLS + SCRAM-SHA-512, 4096 iterations): {h['per_s']:.0f}/s "
          f"one after another; node CPU {h['node_cpu_ms_each']:.1f} ms each")


if __name__ == "__main__":
    main()
