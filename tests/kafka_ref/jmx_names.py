"""Ottla's Prometheus names against Apache Kafka 4.4's own MBeans: a combined Kafka node
with remote JMX on, some produce, consume, group and transaction traffic, and every MBean
and attribute of the ``kafka*`` domains listed by Kafka's ``org.apache.kafka.tools.JmxTool``;
then an Ottla node serving ``/metrics`` under the same traffic, each of its series mapped
back to the (MBean, attribute) the JMX exporter's Kafka rules would have made it from.

A metric is compared by its identity, the bean's domain and ``type`` with its ``name`` (a
Yammer metric: a meter, gauge, histogram or timer) or with the attribute (a metrics group
such as ``raft-metrics``, whose attributes are the metrics); the keys that become labels
(``topic``, ``request``, ``listener``...) are left out. The report lists:

- the identities both have;
- those only Kafka has, grouped by ``type``, with counts: what Ottla does not serve yet;
- the series only Ottla has under a Kafka domain: a name the rules would never make from
  any of Kafka's beans, a naming bug (or a bean Kafka registers only after traffic this
  workload does not make).

Run: ``python -m tests.kafka_ref.jmx_names [--json FILE]`` (installs Kafka first if needed:
``make kafka-ref``). tests/integration/test_metrics_jmx_names.py asserts that the important
groups have no Ottla-only name; docs/observability.md quotes the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import OttlaProcess, free_port, wait_until
from tests.kafka_ref.cluster import NODE_JVM_OPTS, KafkaCluster, run_tool, single_node

TOPIC = "jmx-names"
GROUP = "jmx-names-group"
RECORDS = 200

QUOTA_TYPES = frozenset({"Produce", "Fetch", "Request", "ControllerMutation"})
"""The metrics groups of client quotas, which the exporter's quota rules name
``kafka_server_quota_<attribute>`` when the bean has a ``user`` or ``client-id`` key."""
NOT_JMX_PREFIXES = ("kafka_consumergroup_", "kafka_topic_", "kafka_brokers",
                    "kafka_broker_info", "kafka_client_")
"""Ottla's series under kafka_exporter's names and the client telemetry ones: not beans."""
SUFFIXES = ("_total", "_count", "_sum", "_created", "_info")


@dataclass(frozen=True, order=True)
class Identity:
    """A metric as Kafka's JMX names it: ``domain:type=T,name=N`` (Yammer) or the
    attribute ``attribute`` of ``domain:type=T`` (a metrics group)."""

    domain: str
    type: str
    name: str
    group: bool
    """A metrics group's attribute, not a Yammer metric's name."""

    def __str__(self) -> str:
        if self.group:
            return f"{self.domain}:type={self.type} {self.name}"
        return f"{self.domain}:type={self.type},name={self.name}"


def _prometheus_safe(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_:]", "_", text).lower()


def prometheus_name(identity: Identity, keys: Iterable[str] = (), counted: bool = False
                    ) -> str:
    """The family name the JMX exporter's Kafka rules (as
    ``ottla.server.metrics.jmx_names`` documents them) make of a bean's metric, without the
    ``_total``/``_count`` a counter or summary adds. ``keys`` are the bean's other keys
    (a quota group's ``user``/``client-id`` name it differently); ``counted``: the Yammer
    bean has a ``Count`` (a meter's ``PerSec`` is dropped)."""
    domain = identity.domain.removeprefix("kafka.").replace(".", "_")
    if identity.group:
        if identity.type in QUOTA_TYPES and {"user", "client-id"} & set(keys):
            return _prometheus_safe(f"kafka_server_quota_{identity.name}")
        return _prometheus_safe(f"kafka_{domain}_{identity.type}_{identity.name}")
    name = identity.name
    if counted and (found := re.fullmatch(r"(.+)PerSec\w*", name)):
        name = found.group(1)
    return _prometheus_safe(f"kafka_{domain}_{identity.type}_{name}")


_LINE = re.compile(r"^(kafka(?:\.[\w.]+)?):((?:[^:=,]+=[^,:]*,?)+):([^=]+)=(.*)$")


def parse_jmx_tool(text: str) -> dict[Identity, tuple[frozenset[str], bool]]:
    """JmxTool's ``--report-format properties`` output (``domain:k=v,...:attribute=value``
    per line) to every identity of the ``kafka*`` domains, with the bean's other keys and
    whether its Yammer bean has a ``Count``."""
    found: dict[Identity, tuple[frozenset[str], bool]] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        domain, props, attribute = match.group(1), match.group(2), match.group(3)
        keys = dict(p.split("=", 1) for p in props.rstrip(",").split(","))
        mbean_type = keys.pop("type", "")
        name = keys.pop("name", None)
        if name is None:
            identity = Identity(domain, mbean_type, attribute, group=True)
            found[identity] = (frozenset(keys), False)
        else:
            identity = Identity(domain, mbean_type, name, group=False)
            have_keys, counted = found.get(identity, (frozenset(), False))
            found[identity] = (have_keys | frozenset(keys), counted or attribute == "Count")
    return found


QUOTAS = "producer_byte_rate=1000000000,consumer_byte_rate=1000000000,request_percentage=1000"


def traffic(bootstrap: str) -> None:
    """What both nodes see: default client quotas (so that the quota metrics exist, set by
    Kafka's kafka-configs on both), a topic, records produced (acks=all) and consumed by a
    group that commits, and a committed transaction."""
    run_tool("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
             "clients", "--entity-default", "--add-config", QUOTAS, check=True)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=str(i).encode(), value=b"v" * 100)
    assert producer.flush(30) == 0
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "jmx-tx"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(TOPIC, value=b"in a transaction")
    transactional.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen = 0

    def consumed_all() -> bool:
        nonlocal seen
        for message in consumer.consume(100, 0.5):
            if message.error() is None:
                seen += 1
        return seen >= RECORDS + 1
    wait_until(consumed_all, 60, 0, lambda: f"{RECORDS + 1} records consumed (got {seen})")
    consumer.commit(asynchronous=False)
    consumer.close()


def kafka_identities(base: Path) -> dict[Identity, str]:
    """Every identity of a Kafka node's ``kafka*`` beans after ``traffic``, with the
    Prometheus name the rules give it."""
    jmx_port = free_port()
    cluster: KafkaCluster = single_node(base)
    cluster.nodes[1].jvm_opts = (
        *NODE_JVM_OPTS, "-Dcom.sun.management.jmxremote",
        f"-Dcom.sun.management.jmxremote.port={jmx_port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={jmx_port}",
        "-Dcom.sun.management.jmxremote.host=127.0.0.1", "-Djava.rmi.server.hostname=127.0.0.1",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false")
    with cluster:
        traffic(cluster.bootstrap)
        done = run_tool("org.apache.kafka.tools.JmxTool", "--jmx-url",
                        f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{jmx_port}/jmxrmi",
                        "--one-time", "true", "--report-format", "properties", check=True)
    return {identity: prometheus_name(identity, keys, counted)
            for identity, (keys, counted) in parse_jmx_tool(done.stdout).items()}


def ottla_names(base: Path) -> set[str]:
    """The sample names an Ottla node serves after ``traffic``."""
    port = free_port()
    base.mkdir(parents=True, exist_ok=True)
    node = OttlaProcess(str(base / "data"), overrides={"prometheus.listener": f"127.0.0.1:{port}"})
    node.start()
    try:
        traffic(node.bootstrap)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            text = response.read().decode()
    finally:
        node.stop()
    return {sample.name for family in text_string_to_metric_families(text)
            for sample in family.samples}


@dataclass
class Comparison:
    both: set[Identity]
    only_kafka: set[Identity]
    only_ottla: set[str]
    """Ottla's series under a Kafka domain that no Kafka identity names."""

    def only_kafka_by_type(self) -> dict[str, list[Identity]]:
        groups: dict[str, list[Identity]] = defaultdict(list)
        for identity in sorted(self.only_kafka):
            groups[f"{identity.domain}:type={identity.type}"].append(identity)
        return dict(groups)

    def both_by_type(self) -> Counter[str]:
        return Counter(f"{i.domain}:type={i.type}" for i in self.both)

    def to_json(self) -> dict[str, object]:
        return {"both": sorted(map(str, self.both)),
                "only_kafka": {t: [str(i) for i in ids]
                               for t, ids in self.only_kafka_by_type().items()},
                "only_ottla": sorted(self.only_ottla)}


def compare(kafka: dict[Identity, str], ottla: Iterable[str]) -> Comparison:
    """Map each of Ottla's sample names to the Kafka identities the rules name so (its
    ``_total``/``_count``/``_sum``/``_info`` suffix tried off)."""
    by_name: dict[str, set[Identity]] = defaultdict(set)
    for identity, name in kafka.items():
        by_name[name].add(identity)
        if not identity.group and (found := re.fullmatch(r"(.+)Percent\w*", identity.name)):
            # The rules' ``name=(.+)Percent\w*><>MeanRate`` -> ``kafka_$1_$2_$3_percent``.
            percent = Identity(identity.domain, identity.type, found.group(1), group=False)
            by_name[prometheus_name(percent) + "_percent"].add(identity)
    both: set[Identity] = set()
    only_ottla: set[str] = set()
    for sample in ottla:
        if not sample.startswith("kafka_") or sample.startswith(NOT_JMX_PREFIXES):
            continue
        candidates = [sample] + [sample.removesuffix(s) for s in SUFFIXES if sample.endswith(s)]
        matched = [i for c in candidates for i in by_name.get(c, ())]
        if matched:
            both.update(matched)
        else:
            only_ottla.add(sample)
    return Comparison(both, set(kafka) - both, only_ottla)


def report(result: Comparison) -> str:
    lines = [f"names both have: {len(result.both)}"]
    for mbean_type, count in sorted(result.both_by_type().items()):
        lines.append(f"  {count:4d}  {mbean_type}")
    groups = result.only_kafka_by_type()
    lines.append(f"names only Kafka has: {len(result.only_kafka)} in {len(groups)} types")
    for mbean_type, ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"  {len(ids):4d}  {mbean_type}: " + ", ".join(i.name for i in ids))
    lines.append(f"names only Ottla has (naming bugs): {len(result.only_ottla)}")
    lines.extend(f"  {name}" for name in sorted(result.only_ottla))
    return "\n".join(lines)


def run(base: Path) -> Comparison:
    kafka = kafka_identities(base / "kafka")
    return compare(kafka, ottla_names(base / "ottla"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the comparison as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jmx-names-") as base:
        result = run(Path(base))
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
