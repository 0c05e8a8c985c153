"""KRaft's sampled ``raft-metrics`` as a replica records them (Kafka's KafkaRaftMetrics
and where KafkaRaftClient feeds it): commit latency is, per batch a leader appended, the
time until the high watermark passed it divided by its records; election latency the
time from the replica's last move to candidate (or prospective) to a leader known;
append-records counts what a leader appends, fetch-records what a follower fetches."""

from __future__ import annotations

import math

import pytest

from ottla.common.stats.rate import Rate
from ottla.raft.quorum import RaftConfig, Role
from ottla.raft.raft_metrics import RaftMetrics
from tests.unit.test_raft_scenarios import Cluster

MINUTE_AND_MORE_MS = 61_000
"""Longer than Kafka's default sampled span (2 samples of 30 s): what was recorded
before has expired."""


def records_in_window(rate: Rate, now_ms: int) -> float:
    """What a Rate counted: the rate times the span it divides by."""
    return rate.measure(now_ms) * rate.window_size(now_ms) / 1000


def steady_cluster() -> Cluster:
    """Three voters, node 1 leading, everyone caught up, and a quiet minute since."""
    c = Cluster(3, RaftConfig())
    everyone = set(c.nodes)
    c.run({1}, everyone, lambda: c.nodes[1].is_leader)
    c.run(everyone - {1}, everyone,
          lambda: all(c.nodes[i].high_watermark == c.logs[1].end_offset for i in everyone))
    target = c.now + MINUTE_AND_MORE_MS
    while c.now < target:
        stop = min(target, c.now + 20_000)
        c.run(everyone, everyone, lambda stop=stop: c.now >= stop)
    assert c.nodes[1].is_leader
    return c


def hop(c: Cluster, talking: set[int]) -> None:
    """Deliver only the messages queued now (their answers wait for the next hop)."""
    queued, c.queue = c.queue, []
    for source, out in queued:
        if source in talking and out.destination in talking:
            dest = out.destination
            c._after(dest, c.nodes[dest].handle(source, out.message, c.now))


def test_commit_latency_is_the_time_from_append_to_commit_per_record() -> None:
    c = steady_cluster()
    leader = c.nodes[1]
    appended_ms = c.now
    assert leader.propose("batch", c.now, count=4) is not None
    end = c.logs[1].end_offset
    c._after(1, leader.tick(c.now))
    c.now += 300  # the followers fetch it only now
    c.run({1, 2, 3}, {1, 2, 3}, lambda: leader.high_watermark >= end)
    committed_ms = c.now
    assert committed_ms - appended_ms > 300
    metrics = leader.metrics
    per_record = (committed_ms - appended_ms) / 4
    assert metrics.commit_latency_avg.measure(c.now) == per_record
    assert metrics.commit_latency_max.measure(c.now) == per_record
    assert records_in_window(metrics.append_records, c.now) == pytest.approx(4)
    assert records_in_window(metrics.fetch_records, c.now) == 0
    for follower in (c.nodes[2], c.nodes[3]):
        assert records_in_window(follower.metrics.fetch_records, c.now) == pytest.approx(4)
        assert records_in_window(follower.metrics.append_records, c.now) == 0
        assert math.isnan(follower.metrics.commit_latency_avg.measure(c.now))


def test_a_batch_not_yet_committed_is_not_measured() -> None:
    c = steady_cluster()
    leader = c.nodes[1]
    leader.propose("batch", c.now, count=2)
    c._after(1, leader.tick(c.now))
    c.now += 1000  # nobody fetches: a majority has not got it
    c._after(1, leader.tick(c.now))
    assert math.isnan(leader.metrics.commit_latency_avg.measure(c.now))
    assert math.isnan(leader.metrics.commit_latency_max.measure(c.now))
    assert records_in_window(leader.metrics.append_records, c.now) == pytest.approx(2)


def test_election_latency_runs_from_candidacy_to_leadership() -> None:
    c = steady_cluster()
    c.now += 5000  # node 1 is gone; node 2 times out first
    while c.nodes[2].role is not Role.PROSPECTIVE:
        c.now += 10
        c._after(2, c.nodes[2].tick(c.now))
    c.now += 100
    hop(c, {2, 3})  # node 3 grants the pre-vote
    c.now += 100
    hop(c, {2, 3})  # node 2 becomes a candidate
    assert c.nodes[2].role is Role.CANDIDATE
    candidate_ms = c.now
    c.now += 100
    hop(c, {2, 3})  # node 3 votes
    c.now += 100
    hop(c, {2, 3})  # node 2 leads
    assert c.nodes[2].is_leader
    metrics = c.nodes[2].metrics
    assert metrics.election_latency_avg.measure(c.now) == c.now - candidate_ms == 200
    assert metrics.election_latency_max.measure(c.now) == 200
    # Node 3 only voted: no election of its own to measure.
    c.now += 100
    hop(c, {2, 3})  # BeginQuorumEpoch: node 3 follows node 2
    assert c.nodes[3].role is Role.FOLLOWER and c.nodes[3].leader_id == 2
    assert math.isnan(c.nodes[3].metrics.election_latency_avg.measure(c.now))


def test_a_prospective_that_learns_of_a_leader_measures_from_its_pre_vote() -> None:
    c = steady_cluster()
    c.now += 5000  # node 1 is gone; nodes 2 and 3 time out
    prospective_ms = {}
    while len(prospective_ms) < 2:
        c.now += 10
        for i in (2, 3):
            if i not in prospective_ms:
                c._after(i, c.nodes[i].tick(c.now))
                if c.nodes[i].role is Role.PROSPECTIVE:
                    prospective_ms[i] = c.now
    # Node 3's pre-vote requests get lost; node 2's win and it leads, node 3 voting for
    # it in the new epoch (unattached, still in its election) and then following it.
    c.queue = [(s, o) for s, o in c.queue if s != 3]
    for _ in range(8):
        c.now += 50
        hop(c, {2, 3})
        if c.nodes[3].role is Role.FOLLOWER:
            break
    assert c.nodes[2].is_leader and c.nodes[3].leader_id == 2
    assert c.nodes[3].metrics.election_latency_max.measure(c.now) == \
        c.now - prospective_ms[3] > 0


def test_poll_idle_ratio_is_the_idle_share_since_the_last_read() -> None:
    # Kafka's KafkaRaftMetricsTest.shouldRecordPollIdleRatio, step by step.
    metrics = RaftMetrics()
    assert metrics.poll_idle_ratio.measure() == 1.0  # nothing recorded yet
    metrics.poll_started(0)  # the first wait only starts the interval
    metrics.poll_ended(0)
    metrics.poll_started(0)
    metrics.poll_ended(100)  # idle 100 ms
    metrics.poll_started(200)  # busy 100 ms
    metrics.poll_ended(400)  # idle 200 ms
    assert metrics.poll_idle_ratio.measure() == 0.75
    metrics.poll_started(500)  # busy 100 ms, then idle 75 + 25 + 0 ms
    metrics.poll_ended(575)
    metrics.poll_started(575)
    metrics.poll_ended(600)
    metrics.poll_started(600)
    metrics.poll_ended(600)
    assert metrics.poll_idle_ratio.measure() == 0.5
    metrics.poll_ended(700)  # an end without a start (nested work) records nothing
    assert metrics.poll_idle_ratio.measure() == 1.0

