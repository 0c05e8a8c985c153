"""KRaft's ``raft-metrics`` group (Kafka's ``KafkaRaftMetrics``), read when scraped from
the node's Raft replica: every node runs one, controllers as voters, brokers as
observers, so every node serves them."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.raft.quorum import RaftReplica, Role
from ottla.raft.raft_metrics import RaftMetrics
from ottla.server.metrics.jmx_names import group_metric
from ottla.server.raft_driver import RaftDriver

GROUP = "raft-metrics"


def current_state(replica: RaftReplica) -> str:
    """``current-state`` as Kafka names it: ``leader``, ``candidate``, ``voted``
    (unattached, having voted this epoch), ``follower`` or, for a follower that is no
    voter, ``observer``, else ``unattached`` (a prospective replica too: Kafka counts only
    its candidate state apart)."""
    role = replica.role
    if role is Role.LEADER:
        return "leader"
    if role is Role.CANDIDATE:
        return "candidate"
    if role is Role.UNATTACHED and replica.voted_for is not None:
        return "voted"
    if role is Role.FOLLOWER:
        return "follower" if replica.is_voter else "observer"
    return "unattached"


def current_vote(replica: RaftReplica) -> int:
    """``current-vote``: itself for a leader or candidate, whom an unattached replica
    voted for this epoch, else -1."""
    if replica.role in (Role.LEADER, Role.CANDIDATE):
        return replica.node_id
    if replica.role is Role.UNATTACHED and replica.voted_for is not None:
        return replica.voted_for
    return -1


class RaftMetricsCollector:
    """``kafka_server_raft_metrics_*``: the gauges of ``kafka.server:type=raft-metrics``
    (current-state as ``..._current_state{state}``, as the exporter's rule for its string
    makes it: the rule says ``..._info``, which the 1.x agent serves without the suffix),
    and its sampled latencies and rates, measured at scrape time by the
    driver's clock (NaN, as Kafka's, while a latency has nothing in its windows).
    ``poll-idle-ratio-avg`` is, as Kafka's, over the time since the previous scrape."""

    def __init__(self, raft: RaftDriver) -> None:
        self.raft = raft

    def collect(self) -> Iterator[Metric]:
        replica = self.raft.replica
        log = self.raft.log
        state = GaugeMetricFamily(
            group_metric(GROUP, "current-state"),
            f"The current state of this member (kafka.server:type={GROUP} current-state)",
            labels=("state",))
        state.add_metric((current_state(replica),), 1)
        yield state
        leader = replica.leader_id
        for attribute, value, doc in (
                ("current-leader", -1 if leader is None else leader,
                 "The current quorum leader's id; -1 indicates unknown"),
                ("current-epoch", replica.epoch, "The current quorum epoch"),
                ("current-vote", current_vote(replica),
                 "The current voted id; -1 indicates not voted for anyone"),
                ("high-watermark", replica.high_watermark,
                 "The high watermark maintained on this member"),
                ("log-end-offset", log.end_offset, "The current raft log end offset"),
                ("log-end-epoch", log.last_epoch, "The current raft log end epoch"),
                # Kafka's too: every voter's endpoint is known (configured, or in the
                # voter set), so none is unknown.
                ("number-unknown-voter-connections", 0,
                 "Number of unknown voters whose connection information is not cached; "
                 "would never be larger than quorum-size"),
                ("number-of-voters", len(replica.voters),
                 "Number of voters for a KRaft topic partition."),
                *self._leader_only(replica, self.raft.now_ms()),
                *self._sampled(replica.metrics)):
            yield GaugeMetricFamily(group_metric(GROUP, attribute),
                                    f"{doc} (kafka.server:type={GROUP} {attribute})",
                                    value=value)

    @staticmethod
    def _leader_only(replica: RaftReplica, now_ms: int) -> Iterator[tuple[str, float, str]]:
        """Kafka registers ``number-of-observers`` and ``uncommitted-voter-change`` when
        the replica becomes leader and removes them when it steps down: only the leader
        tracks observers (the ones that fetched from it in the last five minutes, and
        itself when it leads without voting) and handles voter changes."""
        if replica.role is Role.LEADER:
            yield ("number-of-observers", len(replica.replica_states(now_ms)[1]),
                   "Number of observers being tracked by the KRaft topic partition "
                   "leader.")
            yield ("uncommitted-voter-change", int(replica.uncommitted_voter_change),
                   "1 if there is a voter change that has not been committed, 0 otherwise.")

    def _sampled(self, metrics: RaftMetrics) -> Iterator[tuple[str, float, str]]:
        now_ms = self.raft.now_ms()
        yield ("commit-latency-avg", metrics.commit_latency_avg.measure(now_ms),
               "The average time in milliseconds to commit an entry in the raft log")
        yield ("commit-latency-max", metrics.commit_latency_max.measure(now_ms),
               "The maximum time in milliseconds to commit an entry in the raft log")
        yield ("election-latency-avg", metrics.election_latency_avg.measure(now_ms),
               "The average time in milliseconds spent on electing a new leader")
        yield ("election-latency-max", metrics.election_latency_max.measure(now_ms),
               "The maximum time in milliseconds spent on electing a new leader")
        yield ("poll-idle-ratio-avg", metrics.poll_idle_ratio.measure(),
               "The ratio of time the Raft IO thread is idle as opposed to doing work (e.g. "
               "handling requests or replicating from the leader)")
        yield ("append-records-rate", metrics.append_records.measure(now_ms),
               "The average number of records appended per sec as the leader of the raft "
               "quorum")
        yield ("fetch-records-rate", metrics.fetch_records.measure(now_ms),
               "The average number of records fetched from the leader of the raft quorum")
