"""Throughput over each security protocol beside PLAINTEXT in the same run, and the rate
of new authenticated connections, on Ottla and on Apache Kafka 4.4 configured alike.

One node of each system with four listeners (PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL,
SCRAM-SHA-512 on the SASL ones, the same certificate made for the run): for each,
confluent-kafka produces ``--size``-byte records with acks=1 for ``--seconds`` to a topic
of its own and consumes them back; the PLAINTEXT figures are the ceiling the others are
read against (TLS encrypts in user space on both sides, and a TLS listener sends fetched
records without the zero-copy path, on Kafka as on Ottla). Then the handshake rate: new
connections per second that complete TLS and a SCRAM-SHA-512 exchange (4096 iterations)
and one ApiVersions, made one after another by Ottla's own protocol client, and the
node's CPU per handshake. The two systems run one after the other, never side by side.

Run: ``python -m benchmarks.security [--size 1024] [--seconds 5] [--repeat 3]
[--handshakes 200] [--no-kafka]`` (medians of the rounds, each in another order after a
warm-up; Kafka's jars come from ``make kafka-ref``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
from tests.kafka_ref.cluster import single_node
from tests.tls import CertificateAuthority

from benchmarks.throughput import consume, proc_cpu_seconds, produce
from benchmarks.vs_kafka import KAFKA_JVM_OPTS
from ottla.client.blocking import BlockingClient
from ottla.client.security import properties_security

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def listener_props(plaintext: int, controller: int, ports: dict[str, int],
                   keystore: Path) -> dict[str, str]:
    """The same listeners and TLS and SASL settings for either system."""
    secured = ",".join(f"{p}://127.0.0.1:{ports[p]}" for p in PROTOCOLS[1:])
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},"
                     f"CONTROLLER://127.0.0.1:{controller},{secured}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plaintext},{secured}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT," + ",".join(
            f"{p}:{p}" for p in PROTOCOLS),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        # Kafka wants a JAAS section for each mechanism a listener serves, even SCRAM's
        # (whose credentials are in the metadata log).
        **{f"listener.name.{p.lower()}.scram-sha-512.sasl.jaas.config":
           "org.apache.kafka.common.security.scram.ScramLoginModule required;"
           for p in PROTOCOLS if "SASL" in p},
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
    }


@contextmanager
def secured_node(system: str, root: Path, ca: CertificateAuthority
                 ) -> Iterator[tuple[str, dict[str, int], int]]:
    """One node of ``system`` ("ottla" or "kafka") with the four listeners and the
    benchmark's SCRAM user: its PLAINTEXT bootstrap, each listener's port, its pid."""
    keystore = root / "tls" / "keystore.pem"
    if not keystore.exists():
        keystore.write_bytes(ca.server().pem())
    ports = {p: free_port() for p in PROTOCOLS}
    if system == "ottla":
        node = OttlaProcess(str(root / "ottla" / "data"))
        (root / "ottla").mkdir(parents=True, exist_ok=True)
        ports["PLAINTEXT"] = node.port
        node.overrides = listener_props(node.port, node.controller_port, ports, keystore)
        node.start()
        stop = node.stop
        assert node.proc is not None
        pid = node.proc.pid
    else:
        cluster = single_node(root / "kafka")
        kafka = cluster.nodes[1]
        kafka.jvm_opts = KAFKA_JVM_OPTS
        ports["PLAINTEXT"] = kafka.port
        kafka.props.update(listener_props(kafka.port, kafka.controller_port, ports, keystore))
        cluster.start()
        stop = cluster.stop
        assert kafka.pid is not None
        pid = kafka.pid
    bootstrap = f"127.0.0.1:{ports['PLAINTEXT']}"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
            PASSWORD.encode())])[USER].result(30)
        yield bootstrap, ports, pid
    finally:
        stop()


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


def measure(system: str, root: Path, ca: CertificateAuthority,
            args: argparse.Namespace) -> dict[str, Any]:
    """Every listener's produce and consume rates (medians of the rounds) and the
    SASL_SSL handshake rate, on one node of ``system``."""
    with secured_node(system, root, ca) as (bootstrap, ports, pid):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("warm-up", 1, 1)])["warm-up"].result(30)
        produce(bootstrap, "warm-up", args.size, min(args.seconds, 3), "1")
        rounds: dict[str, list[tuple[float, float]]] = {p: [] for p in PROTOCOLS}
        for index in range(args.repeat):
            # Each round in another order, so that no listener always goes first.
            order = PROTOCOLS[index % len(PROTOCOLS):] + PROTOCOLS[:index % len(PROTOCOLS)]
            for protocol in order:
                topic = f"bench-{protocol.lower()}-{index}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                settings = client_settings(protocol, ca)
                listener = f"127.0.0.1:{ports[protocol]}"
                produced = produce(listener, topic, args.size, args.seconds, "1",
                                   client=settings)
                consumed = consume(listener, topic, args.size, produced["records"],
                                   client=settings)
                rounds[protocol].append((produced["mb_per_s"], consumed["mb_per_s"]))
        figures: dict[str, Any] = {
            p: {"produce_mb_per_s": statistics.median(r[0] for r in rounds[p]),
                "consume_mb_per_s": statistics.median(r[1] for r in rounds[p]),
                "rounds": rounds[p]} for p in PROTOCOLS}
        cpu_before = proc_cpu_seconds(pid)
        rate = handshakes(ports["SASL_SSL"], ca, args.handshakes)
        cpu = proc_cpu_seconds(pid) - cpu_before
        figures["handshakes"] = {"per_s": rate,
                                 "node_cpu_ms_each": 1000 * cpu / args.handshakes}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--handshakes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds (each listener once per round, the order rotated); "
                        "the table shows medians")
    parser.add_argument("--no-kafka", action="store_true",
                        help="measure Ottla only (without Kafka's jars)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    systems = ["ottla"] if args.no_kafka else ["ottla", "kafka"]
    with tempfile.TemporaryDirectory(prefix="ottla-security-bench-") as root:
        ca = CertificateAuthority(Path(root) / "tls")
        figures = {system: measure(system, Path(root), ca, args) for system in systems}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{args.size}-byte records, acks=1, {args.seconds:.0f} s each, median of "
          f"{args.repeat} rounds; ratios to the same system's PLAINTEXT in the same run")
    header = f"{'listener':<16}"
    for system in systems:
        header += f"{system + ' produce':>16}{'ratio':>7}{system + ' consume':>16}{'ratio':>7}"
    print(header)
    for protocol in PROTOCOLS:
        line = f"{protocol:<16}"
        for system in systems:
            f, base = figures[system][protocol], figures[system]["PLAINTEXT"]
            line += (f"{f['produce_mb_per_s']:>12.1f} MB/s"
                     f"{f['produce_mb_per_s'] / base['produce_mb_per_s']:>7.2f}"
                     f"{f['consume_mb_per_s']:>12.1f} MB/s"
                     f"{f['consume_mb_per_s'] / base['consume_mb_per_s']:>7.2f}")
        print(line)
    for system in systems:
        h = figures[system]["handshakes"]
        print(f"{system}: SASL_SSL handshakes (TLS + SCRAM-SHA-512, 4096 iterations): "
              f"{h['per_s']:.0f}/s one after another; node CPU "
              f"{h['node_cpu_ms_each']:.1f} ms each")


if __name__ == "__main__":
    main()
