"""One chaos run, end to end: a proxied cluster of real nodes, the workloads' clients,
the seeded faults while they run, then every fault healed, the final reads, the checker
over the history, and the report (``report.json``, ``timeline.svg``) in the run's
directory beside ``history.jsonl``, the nodes' logs and the clients' log."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from ottla.chaos.checker import ShareHistory, check
from ottla.chaos.cluster import ChaosCluster
from ottla.chaos.faults import KINDS, schedule
from ottla.chaos.nemesis import Nemesis
from ottla.chaos.processes import wait_until
from ottla.chaos.provenance import annotate_reads
from ottla.chaos.proxy import ProxyNetwork
from ottla.chaos.recorder import Recorder
from ottla.chaos.timeline import render
from ottla.chaos.workloads import (
    CommittedReader,
    CopyLoop,
    GroupMember,
    ProduceWorkload,
    ShareMember,
    final_read,
    final_read_committed,
    read_committed_offsets,
)

WORKLOADS = ("produce", "group", "transactional", "share")
PARTITIONS = 3
CHURN_S = 10.0
GROUP = "chaos"
COPY_GROUP = "chaos-copy"
SHARE_GROUP = "chaos-share"
SHARE_DELIVERY_COUNT_LIMIT = 3
"""The share group's share.delivery.count.limit: low, so that records released at
random reach it (and are archived) within a short run."""
DRAIN_S = 90.0
OWNERSHIP_ALLOWANCE_S = 10.0
"""The session timeout the group's members run with: a member cut off from its
coordinator keeps its partitions until then, while the group may already have moved
them (Kafka's rebalance allowance)."""


@dataclass
class RunConfig:
    workload: str
    duration_s: float
    report_dir: str
    seed: int = 0
    nodes: int = 3
    group_protocol: str = "consumer"
    producers: int = 2
    members: int = 3
    rate: float = 150.0
    """Records a second each producer sends."""
    kinds: tuple[str, ...] = KINDS
    churn: bool = True
    """Every CHURN_S a group member leaves and a new one joins."""
    client_debug: str | None = None
    """librdkafka ``debug`` contexts of the workload clients (their log: clients.log)."""
    mutate: str | None = None
    """Break the run on purpose (``lose-write`` or ``duplicate``: the final read;
    ``read-uncommitted``: the sink's final read; ``accept-twice``: a share record's
    acceptance recorded twice)."""
    copiers: int = 2
    """Transactional copy loops of the ``transactional`` workload."""
    share_members: int = 3
    workloads: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.workloads = WORKLOADS if self.workload == "all" else (self.workload,)
        unknown = set(self.workloads) - set(WORKLOADS)
        if unknown:
            raise ValueError(f"unknown workload {sorted(unknown)}; there are {WORKLOADS}")


def topic_of(workload: str) -> str:
    return f"chaos-{workload}"


SINK = "chaos-transactional-sink"
"""Where the transactional copy loops write what they read from topic_of("transactional")."""


def client_logger(path: str) -> logging.Logger:
    """librdkafka's logs of this run, to ``path``, debug lines included (syslog level 7:
    a client logs those of the contexts in its ``debug`` setting only)."""
    logger = logging.getLogger(f"ottla.chaos.clients.{path}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    return logger


EPOCH_BUMP_LINES = ("epoch bump", "bumped epoch", "ERRSEQ", "UNKPID")
"""What librdkafka's eos debug logs when it bumps a producer's epoch, and why."""


def epoch_bumps(path: str, limit: int = 20) -> list[str]:
    """The producers' epoch bumps and their reasons, from their log (the first few)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip() for line in f if any(k in line for k in EPOCH_BUMP_LINES)]
    except FileNotFoundError:
        return []
    return lines[:limit]


def leader_changes(samples: list[int]) -> int:
    """How often a sampled leader differed from the last known one (-1s skipped)."""
    known = [s for s in samples if s >= 0]
    return sum(1 for a, b in pairwise(known) if a != b)


def run(config: RunConfig) -> dict[str, object]:
    """Run it and return the report (also written to ``report.json``)."""
    directory = config.report_dir
    os.makedirs(directory, exist_ok=True)
    history_path = os.path.join(directory, "history.jsonl")
    if os.path.exists(history_path):
        os.remove(history_path)
    logger = client_logger(os.path.join(directory, "clients.log"))
    recorder = Recorder(history_path)
    began = time.monotonic()

    def new_member(i: int) -> GroupMember:
        return GroupMember(recorder, cluster.bootstrap, GROUP, topic_of("group"),
                           f"member-{i}", config.group_protocol, logger, config.client_debug)

    network = ProxyNetwork()
    cluster = ChaosCluster(os.path.join(directory, "cluster"), network, config.nodes,
                           disks="disk-full" in config.kinds,
                           clocks="clock-skew" in config.kinds)
    topics = [topic_of(w) for w in config.workloads]
    created = [*topics, *([SINK] if "transactional" in config.workloads else [])]
    others: list[CopyLoop | CommittedReader | ShareMember] = []
    share_members: list[ShareMember] = []

    def new_share_member(i: int) -> ShareMember:
        return ShareMember(recorder, cluster.bootstrap, SHARE_GROUP, topic_of("share"),
                           f"share-{i}", logger, config.seed * 100 + i)
    timings: dict[str, float] = {}
    producers: list[ProduceWorkload] = []
    members: list[GroupMember] = []
    nemesis: Nemesis | None = None
    quorum_samples: list[int] = []
    partition_samples: dict[str, list[int]] = {}
    exit_codes: dict[int, int | None] = {}
    started_ns = workload_end_ns = 0
    try:
        cluster.start()
        create_topics(cluster, created, min(3, config.nodes))
        timings["startup_s"] = round(time.monotonic() - began, 1)
        started_ns = recorder.now()
        if "produce" in config.workloads:
            producers += [ProduceWorkload(recorder, cluster.bootstrap, topic_of("produce"),
                                          PARTITIONS, f"producer-{i}", config.rate, logger,
                                          config.client_debug)
                          for i in range(config.producers)]
        if "group" in config.workloads:
            producers.append(ProduceWorkload(recorder, cluster.bootstrap, topic_of("group"),
                                             PARTITIONS, "group-feed", config.rate, logger,
                                             config.client_debug))
            members += [new_member(i) for i in range(config.members)]
        if "transactional" in config.workloads:
            producers.append(ProduceWorkload(recorder, cluster.bootstrap,
                                             topic_of("transactional"), PARTITIONS,
                                             "txn-feed", config.rate, logger,
                                             config.client_debug))
            others += [CopyLoop(recorder, cluster.bootstrap, COPY_GROUP,
                                topic_of("transactional"), SINK, f"copier-{i}",
                                config.group_protocol, logger, config.seed * 100 + i,
                                debug=config.client_debug)
                       for i in range(config.copiers)]
            others.append(CommittedReader(recorder, cluster.bootstrap, SINK, PARTITIONS,
                                          "reader", logger))
        if "share" in config.workloads:
            set_group_configs(cluster, SHARE_GROUP, {
                "share.auto.offset.reset": "earliest",
                "share.delivery.count.limit": str(SHARE_DELIVERY_COUNT_LIMIT)})
            producers.append(ProduceWorkload(recorder, cluster.bootstrap, topic_of("share"),
                                             PARTITIONS, "share-feed", config.rate, logger,
                                             config.client_debug))
            share_members += [new_share_member(i) for i in range(config.share_members)]
        for worker in [*producers, *members, *others, *share_members]:
            worker.start()
        faults = schedule(config.seed, 3.0, max(3.0, config.duration_s - 2.0), cluster.ids,
                          config.kinds)
        nemesis = Nemesis(cluster, faults, started_ns,
                          lambda: cluster.partition_leaders(topics[0])).start()
        end = started_ns / 1e9 + config.duration_s
        churn = random.Random(config.seed + 1)
        next_churn = next_share_churn = time.monotonic() + CHURN_S
        while time.monotonic() < end:
            sample(cluster, topics, quorum_samples, partition_samples)
            if members and config.churn and time.monotonic() >= next_churn:
                # a member leaves and a new one joins: partitions change hands
                leaving = members.pop(churn.randrange(len(members)))
                leaving.stop()
                members.append(new_member(int(leaving.process.split("-")[1])
                                          + config.members).start())
                next_churn = time.monotonic() + CHURN_S
            if share_members and config.churn and time.monotonic() >= next_share_churn:
                leaving_share = share_members.pop(churn.randrange(len(share_members)))
                leaving_share.stop()
                share_members.append(new_share_member(
                    int(leaving_share.process.split("-")[1]) + config.share_members).start())
                next_share_churn = time.monotonic() + CHURN_S
            time.sleep(max(0.0, min(1.0, end - time.monotonic())))
        nemesis.stop()
        workload_end_ns = recorder.now()
        for worker in [*producers, *members, *others, *share_members]:
            worker.stop()
        producers, members, others, share_members = [], [], [], []
        timings["workload_s"] = round((recorder.now() - started_ns) / 1e9, 1)
        read_began = time.monotonic()
        wait_until(lambda: healthy(cluster, created), 120, 0.5, "every partition led again")
        sample(cluster, topics, quorum_samples, partition_samples)
        if "group" in config.workloads:
            read_committed_offsets(recorder, cluster.bootstrap, GROUP, topic_of("group"),
                                   PARTITIONS, logger)
        for i, topic in enumerate(topics):
            final_read(recorder, cluster.bootstrap, topic, PARTITIONS, logger,
                       mutate=config.mutate if i == 0 else None)
        if "transactional" in config.workloads:
            read_committed_offsets(recorder, cluster.bootstrap, COPY_GROUP,
                                   topic_of("transactional"), PARTITIONS, logger)
            final_read_committed(recorder, cluster.bootstrap, SINK, PARTITIONS, logger,
                                 mutate=config.mutate)
        if "share" in config.workloads:
            drain_share_group(recorder, cluster.bootstrap, logger, config.mutate)
        timings["final_read_s"] = round(time.monotonic() - read_began, 1)
    finally:
        for worker in [*producers, *members, *others, *share_members]:
            try:
                worker.stop()
            except Exception:  # stopping the rest matters more
                logging.getLogger(__name__).exception("stopping %s", worker)
        if nemesis is not None:
            nemesis.stop()
        exit_codes = cluster.stop()
        cluster.release_disks()  # the data kept in the data dirs, for what follows
        network.close()
        # The nodes are down and their logs final: each record read gets the producer
        # id and epoch of its batch, which tell a broker's duplicate from a client's.
        recorder.rewrite(annotate_reads(recorder.ops, [n.data_dir for n in cluster.nodes.values()]))
        recorder.close()
    checked = time.monotonic()
    result = check(recorder.ops, int(OWNERSHIP_ALLOWANCE_S * 1e9), SHARE_DELIVERY_COUNT_LIMIT)
    timings["check_s"] = round(time.monotonic() - checked, 2)
    timings["total_s"] = round(time.monotonic() - began, 1)
    by_kind: dict[str, Counter[str]] = {}
    for op in recorder.ops:
        by_kind.setdefault(op.kind, Counter())[op.outcome] += 1
    smallest = result.smallest()
    assert nemesis is not None
    report: dict[str, object] = {
        "workload": config.workload, "workloads": list(config.workloads),
        "seed": config.seed, "nodes": config.nodes, "duration_s": config.duration_s,
        "group_protocol": config.group_protocol if "group" in config.workloads else None,
        "mutate": config.mutate, "churn": config.churn,
        "operations": result.operations,
        "operations_by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "valid": result.valid, "checks": result.checks,
        "violation_count": len(result.violations),
        "violations": [v.to_dict() for v in result.violations[:50]],
        "smallest_violation": smallest.to_dict() if smallest else None,
        "client_epoch_bumps": epoch_bumps(os.path.join(directory, "clients.log")),
        "renumbered": len(result.renumbered),
        "renumbered_examples": [v.to_dict() for v in result.renumbered[:10]],
        "faults": dict(nemesis.injected),
        "faults_scheduled": len(nemesis.faults),
        "fault_log": nemesis.log, "nemesis_errors": nemesis.errors,
        "leader_changes": {"quorum": leader_changes(quorum_samples),
                           **{f"{t}-{p}": leader_changes(s)
                              for (t, p), s in _by_partition(partition_samples).items()}},
        "exit_codes": exit_codes, "timings": timings,
    }
    with open(os.path.join(directory, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "timeline.svg"), "w", encoding="utf-8") as f:
        f.write(render(recorder.ops, nemesis.log, started_ns,
                       workload_end_ns or recorder.now(),
                       f"ottla chaos run --workload {config.workload} --seed {config.seed}"))
    return report


def _by_partition(samples: dict[str, list[int]]) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for key, values in samples.items():
        topic, _, partition = key.rpartition("/")
        out[topic, int(partition)] = values
    return out


def sample(cluster: ChaosCluster, topics: list[str], quorum: list[int],
           partitions: dict[str, list[int]]) -> None:
    """The leaders now, as the live nodes tell them (-1 when none answers)."""
    try:
        quorum.append(cluster.quorum_leader())
    except (OSError, ConnectionError):
        quorum.append(-1)
    for topic in topics:
        for p, leader in cluster.partition_leaders(topic).items():
            partitions.setdefault(f"{topic}/{p}", []).append(leader)


def create_topics(cluster: ChaosCluster, topics: list[str], replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, replicas,
                                            config={"min.insync.replicas": "2"})
                                   for t in topics], operation_timeout=30)
    for future in futures.values():
        future.result(60)
    wait_until(lambda: healthy(cluster, topics), 60, 0.2, "the topics' leaders")


def healthy(cluster: ChaosCluster, topics: list[str]) -> bool:
    """Every node up and every partition of ``topics`` with a leader."""
    if len(list(cluster.running())) != len(cluster.nodes):
        return False
    for topic in topics:
        leaders = cluster.partition_leaders(topic)
        if len(leaders) != PARTITIONS or min(leaders.values()) < 0:
            return False
    return True


def set_group_configs(cluster: ChaosCluster, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(60)


def drain_share_group(recorder: Recorder, bootstrap: str, logger: logging.Logger,
                      mutate: str | None) -> None:
    """A last member of the share group accepts what is left until every record of the
    final read is accepted, rejected or archived (or ``DRAIN_S`` passed): what is still
    missing then was lost. ``mutate="accept-twice"`` records one acceptance twice."""
    drain = ShareMember(recorder, bootstrap, SHARE_GROUP, topic_of("share"), "share-drain",
                        logger, 0, weights=(1.0, 0.0, 0.0))
    deadline = time.monotonic() + DRAIN_S
    try:
        while time.monotonic() < deadline:
            if drain.round() == 0 and \
                    not ShareHistory(recorder.ops).lost(SHARE_DELIVERY_COUNT_LIMIT):
                break
    finally:
        drain.stop()
    if mutate == "accept-twice":
        accepted = next((op for op in recorder.ops if op.kind == "ack"
                         and op.ack == "accept" and op.outcome == "ok"), None)
        if accepted is not None:
            recorder.record("mutated", "ack", "ok", recorder.now(), group=accepted.group,
                            topic=accepted.topic, partition=accepted.partition,
                            offset=accepted.offset, value=accepted.value, ack="accept")
