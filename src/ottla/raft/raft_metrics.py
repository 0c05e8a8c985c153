"""The sampled stats of Kafka's ``KafkaRaftMetrics`` (``raft-metrics``): what the replica
records as it appends, commits and elects, with the ``now_ms`` it is given, for the node
to read when its metrics are scraped.

As Kafka's sensors: ``commit-latency`` is, per batch a leader appended, the time from the
append to the high watermark passing it, divided by the batch's records (Kafka records
it at the append time); ``election-latency`` the time from the last move to prospective
or candidate to a leader known (this one, or one followed); ``append-records`` the
records a leader appends, ``fetch-records`` those a follower or observer appends from a
Fetch. Kafka's defaults size the windows (``metrics.num.samples=2`` of
``metrics.sample.window.ms=30000``). ``poll-idle-ratio`` is the share of the time since
the previous read that the replica spent between two pieces of work (Kafka's Raft thread
waiting on its queue; the node's driver reports both ends of each wait).
"""

from __future__ import annotations

from collections import deque

from ottla.common.stats.avg import Avg
from ottla.common.stats.max import Max
from ottla.common.stats.rate import Rate
from ottla.common.stats.time_ratio import TimeRatio

NUM_SAMPLES = 2
SAMPLE_WINDOW_MS = 30_000


class RaftMetrics:
    def __init__(self, samples: int = NUM_SAMPLES, window_ms: int = SAMPLE_WINDOW_MS) -> None:
        self.commit_latency_avg = Avg(samples, window_ms)
        self.commit_latency_max = Max(samples, window_ms)
        self.election_latency_avg = Avg(samples, window_ms)
        self.election_latency_max = Max(samples, window_ms)
        self.append_records = Rate(samples, window_ms)
        self.fetch_records = Rate(samples, window_ms)
        self.election_start_ms: int | None = None
        self.poll_idle_ratio = TimeRatio(1.0)
        self._poll_start_ms: float | None = None
        self._uncommitted: deque[tuple[int, int, int]] = deque()
        """(end offset, append time, records) of the batches appended as leader."""

    def leader_appended(self, end_offset: int, records: int, now_ms: int) -> None:
        self.append_records.record(records, now_ms)
        self._uncommitted.append((end_offset, now_ms, records))

    def committed(self, high_watermark: int, now_ms: int) -> None:
        """The leader's high watermark moved: the batches below it are committed."""
        while self._uncommitted and self._uncommitted[0][0] <= high_watermark:
            _, appended_ms, records = self._uncommitted.popleft()
            per_record = max(0, now_ms - appended_ms) / records
            self.commit_latency_avg.record(per_record, appended_ms)
            self.commit_latency_max.record(per_record, appended_ms)

    def leadership_lost(self) -> None:
        """Kafka fails the pending appends of a leader that steps down: never committed
        by it, they are not measured."""
        self._uncommitted.clear()

    def poll_started(self, now_ms: float) -> None:
        """The replica finished a piece of work and waits for the next."""
        self._poll_start_ms = now_ms

    def poll_ended(self, now_ms: float) -> None:
        """The wait ended: its length is an idle spell (none without a start, as in
        Kafka, so a nested piece of work is not counted twice)."""
        if self._poll_start_ms is not None:
            self.poll_idle_ratio.record(max(now_ms - self._poll_start_ms, 0.0), now_ms)
            self._poll_start_ms = None

    def fetched(self, records: int, now_ms: int) -> None:
        self.fetch_records.record(records, now_ms)

    def election_started(self, now_ms: int) -> None:
        self.election_start_ms = now_ms

    def leader_known(self, now_ms: int) -> None:
        if self.election_start_ms is not None:
            latency = now_ms - self.election_start_ms
            self.election_latency_avg.record(latency, now_ms)
            self.election_latency_max.record(latency, now_ms)
            self.election_start_ms = None
