"""Kafka's BrokerTopicStats: what the Produce and Fetch handlers counted, per topic.

Plain integers on the request path (a few attribute additions per partition); the node's
metrics endpoint turns them into Prometheus series when scraped
(``server/metrics/broker_collectors.py``). What each counter counts follows Kafka's
``ReplicaManager`` and ``KafkaApis``, where the same meters are marked:

- ``total_produce_requests``: partitions of Produce requests that reached the append (a
  known, authorized topic; internal topics and partitions led elsewhere included), and
  the broker's own appends (coordinators' batches, transaction markers), one per
  partition of each, as Kafka's appendToLocalLog marks them whatever their origin,
  ``failed_produce_requests`` those of them refused for an unexpected reason (not for
  NOT_LEADER_OR_FOLLOWER, an unknown partition, a batch too large or corrupt, a failed
  log dir or an internal topic, which Kafka does not count as failures);
- ``messages_in`` and ``bytes_in``: records and bytes (as produced) appended, the
  coordinators' batches to their internal topics too;
- ``total_fetch_requests``: partitions read by Fetch requests (consumers and followers,
  the first read of each request), ``failed_fetch_requests`` those failing for an
  unexpected reason;
- ``bytes_out``: bytes of records sent to consumers (followers' are replication).

Replication has two broker-wide counters (Kafka registers its ``ReplicationBytesInPerSec``
and ``ReplicationBytesOutPerSec`` meters on the all-topics bean only):
``replication_bytes_in``, the records this broker's followers got in their leaders' Fetch
responses, and ``replication_bytes_out``, the records this broker's Fetch responses sent
to followers.
"""

from __future__ import annotations

from ottla.protocol.errors import ErrorCode

EXPECTED_PRODUCE_ERRORS = frozenset({
    ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
    ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.corrupt_message,
    ErrorCode.kafka_storage_error, ErrorCode.invalid_topic_exception})
"""Produce errors that are not FailedProduceRequests (Kafka's "known exceptions")."""

EXPECTED_FETCH_ERRORS = frozenset({
    ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_leader_epoch, ErrorCode.fenced_leader_epoch,
    ErrorCode.replica_not_available, ErrorCode.kafka_storage_error,
    ErrorCode.inconsistent_topic_id, ErrorCode.offset_out_of_range})
"""Fetch errors that are not FailedFetchRequests."""


class BrokerTopicMetrics:
    """The counters of one topic (or of all topics: ``BrokerTopicStats.all_topics``)."""

    __slots__ = ("bytes_in", "bytes_out", "failed_fetch_requests", "failed_produce_requests",
                 "messages_in", "total_fetch_requests", "total_produce_requests")

    FIELDS = ("messages_in", "bytes_in", "bytes_out", "total_produce_requests",
              "failed_produce_requests", "total_fetch_requests", "failed_fetch_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0

    def add(self, other: BrokerTopicMetrics) -> None:
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class BrokerTopicStats:
    """Counters per topic, made on a topic's first use. The all-topics figures are the
    sum of the topics' plus what ``remove`` retired, so they never go back when a deleted
    topic's counters go (a Prometheus counter must not decrease)."""

    def __init__(self) -> None:
        self.topics: dict[str, BrokerTopicMetrics] = {}
        self._retired = BrokerTopicMetrics()
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def topic(self, name: str) -> BrokerTopicMetrics:
        metrics = self.topics.get(name)
        if metrics is None:
            metrics = self.topics[name] = BrokerTopicMetrics()
        return metrics

    def produced(self, topic: str, error: int, records: int, size: int) -> None:
        """One partition of a Produce request reached the append: appended ``records``
        records of ``size`` bytes, or failed with ``error``. A partition the metadata
        does not know is not counted (Kafka answers it before the append)."""
        if error == ErrorCode.unknown_topic_or_partition:
            return
        metrics = self.topic(topic)
        metrics.total_produce_requests += 1
        if error == ErrorCode.none:
            metrics.messages_in += records
            metrics.bytes_in += size
        elif error not in EXPECTED_PRODUCE_ERRORS:
            metrics.failed_produce_requests += 1

    def appended(self, topic: str, records: int, size: int) -> None:
        """The broker appended a batch of its own as leader (a coordinator's records to
        its internal topic, a transaction marker): counted as a Produce request's
        partition is, since Kafka's appendToLocalLog, through which every local append
        goes whatever its origin, marks TotalProduceRequests, MessagesIn and BytesIn.
        A failed one is ``produced`` with its error."""
        self.produced(topic, ErrorCode.none, records, size)

    def fetched(self, topic: str, error: int) -> None:
        """One partition of a Fetch request was read (or failed with ``error``); not
        one the metadata does not know."""
        if error == ErrorCode.unknown_topic_or_partition:
            return
        metrics = self.topic(topic)
        metrics.total_fetch_requests += 1
        if error not in EXPECTED_FETCH_ERRORS:
            metrics.failed_fetch_requests += 1

    def sent(self, topic: str, size: int) -> None:
        """``size`` bytes of records of ``topic`` went to a consumer."""
        self.topic(topic).bytes_out += size

    def remove(self, topic: str) -> None:
        """Forget a topic (deleted): its counts stay in the all-topics figures."""
        metrics = self.topics.pop(topic, None)
        if metrics is not None:
            self._retired.add(metrics)

    @property
    def all_topics(self) -> BrokerTopicMetrics:
        total = BrokerTopicMetrics()
        total.add(self._retired)
        for metrics in self.topics.values():
            total.add(metrics)
        return total
