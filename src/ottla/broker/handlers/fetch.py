"""Fetch: long-polling reads with byte limits and incremental fetch sessions (KIP-227).

The response waits (up to ``max_wait_ms``) in the replica manager's fetch purgatory until
``min_bytes`` are available; appends to any fetched partition wake it. Limits follow
Kafka: the response carries at most ``max_bytes`` (and the broker's
``fetch.max.bytes``), each partition at most its ``partition_max_bytes``, except that the
first partition with data returns at least one whole batch so a large batch never blocks
a consumer (KIP-74); a later partition whose next batch does not fit returns nothing
rather than part of it (Kafka's firstEntryIncomplete), and comes first in a later fetch
(a session moves the partitions that returned data to its end; clients rotate theirs).

The response is encoded here, by ``protocol.fetch_response`` rather than through kio
objects; its record sets stay ``FileSlice``s that the connection sends from the page cache.

Authorization (Kafka's ``handleFetchRequest``): a follower (replica id >= 0) needs
CLUSTER_ACTION on the cluster, else every partition of the fetch is
TOPIC_AUTHORIZATION_FAILED; a consumer needs READ on each topic, else that topic's
partitions are (after an unknown topic id, before an unknown partition). Refused
partitions are answered as they are and do not keep a long poll waiting.

Client quotas (``consumer_byte_rate``, consumers only, never followers): a consumer's
fetch is capped to what its quota allows over all but one quota window, and when its
answer is ready the answer's size is recorded against the quota; over it, the size is
taken back and the consumer gets an empty answer carrying the throttle time, and the
connection is muted for that long (Kafka's ``handleFetchRequest``, KIP-219).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
)
from ottla.broker.purgatory.delayed_fetch import DelayedFetch
from ottla.broker.replication.partition import READ_COMMITTED, READ_UNCOMMITTED, DivergingEpoch
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.common.config import INT_MAX
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.fetch_response import EncodedBody, encode_fetch_response
from ottla.protocol.messages import ms
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    CLUSTER_ACTION,
    READ,
    TOPIC,
    authorize_cluster,
    authorized_names,
    enabled,
)

TOPIC_IDS_VERSION = 13
"""Fetch names topics by id from this version on (KIP-516), by name before it."""


def _requested(broker: Broker, req: Any, uses_ids: bool
               ) -> OrderedDict[tuple[Any, int], CachedPartition]:
    image = broker.image
    parts: OrderedDict[tuple[Any, int], CachedPartition] = OrderedDict()
    for topic in req.topics:
        if uses_ids:
            known = image.topics_by_id.get(topic.topic_id)
            name = known.name if known is not None else ""
            topic_key = topic.topic_id
        else:
            name = topic.topic
            known = image.topics_by_name.get(name)
            topic_key = name
        topic_id = known.topic_id if known is not None else getattr(topic, "topic_id", None)
        for p in topic.partitions:
            parts[(topic_key, p.partition)] = CachedPartition(
                name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                getattr(p, "current_leader_epoch", -1), getattr(p, "last_fetched_epoch", -1))
    return parts


def _forgotten(req: Any, uses_ids: bool) -> list[tuple[Any, int]]:
    keys = []
    for topic in getattr(req, "forgotten_topics_data", ()) or ():
        topic_key = topic.topic_id if uses_ids else topic.topic
        keys.extend((topic_key, p) for p in topic.partitions)
    return keys


def _error_response(version: int, error: ErrorCode) -> EncodedBody:
    return encode_fetch_response(version, {
        "throttle_time": 0, "error_code": error, "session_id": INVALID_SESSION_ID,
        "responses": [], "node_endpoints": []})


class Denied:
    """The topics a fetch may not read: ``everything`` for a follower without
    CLUSTER_ACTION, else those not in ``readable`` (None: every topic may be read)."""

    __slots__ = ("everything", "readable")

    def __init__(self, everything: bool = False, readable: set[str | None] | None = None
                 ) -> None:
        self.everything = everything
        self.readable = readable

    def __contains__(self, topic: str) -> bool:
        return self.everything or (self.readable is not None and topic not in self.readable)


NOTHING_DENIED = Denied()


def _denied(ctx: RequestContext, parts: OrderedDict[tuple[Any, int], CachedPartition],
            replica: FetchingReplica | None) -> Denied:
    if not enabled(ctx):
        return NOTHING_DENIED
    if replica is not None:
        return NOTHING_DENIED if authorize_cluster(ctx, CLUSTER_ACTION) else Denied(True)
    return Denied(readable=authorized_names(ctx, READ, TOPIC,
                                            (c.topic for c in parts.values() if c.topic)))


def _read_partition(broker: Broker, cached: CachedPartition, max_bytes: int, isolation: int,
                    min_one: bool, uses_ids: bool, replica: FetchingReplica | None,
                    client_rack: str | None = None, denied: Denied = NOTHING_DENIED
                    ) -> dict[str, Any]:
    data: dict[str, Any] = {
        "partition_index": cached.partition, "error_code": ErrorCode.none,
        "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
        "aborted_transactions": [] if isolation == READ_COMMITTED else None,
        "preferred_read_replica": -1, "records": b"",
    }
    if denied is not NOTHING_DENIED and denied.everything:
        data["error_code"] = ErrorCode.topic_authorization_failed
        return data
    if not cached.topic:
        data["error_code"] = ErrorCode.unknown_topic_id if uses_ids \
            else ErrorCode.unknown_topic_or_partition
        data["aborted_transactions"] = []  # as Kafka answers a partition it does not know
        return data
    if denied is not NOTHING_DENIED and cached.topic in denied:
        data["error_code"] = ErrorCode.topic_authorization_failed
        return data
    partition = None
    try:
        partition = broker.replica_manager.require(cached.topic, cached.partition, broker.image)
        if client_rack and broker.rack_aware_reads:
            preferred = partition.replication.preferred_read_replica(
                cached.fetch_offset, client_rack, broker.rack_of)
            if preferred >= 0:  # KIP-392: read from a replica in the client's rack
                partition.check_leader_epoch(cached.current_leader_epoch)
                data["preferred_read_replica"] = preferred
                data["high_watermark"] = partition.high_watermark
                data["last_stable_offset"] = partition.last_stable_offset
                data["log_start_offset"] = partition.log.log_start_offset
                return data
        read = partition.read(cached.fetch_offset, max_bytes, isolation,
                              cached.current_leader_epoch, min_one, cached.last_fetched_epoch,
                              replica.replica_id if replica is not None else -1,
                              fetch_only_leader=replica is not None or client_rack is None)
        if isinstance(read, DivergingEpoch):
            data["diverging_epoch"] = {"epoch": read.epoch, "end_offset": read.end_offset}
        else:
            if read.records is not None and not (
                    replica is not None and broker.leader_quota.should_throttle(
                        partition.topic, partition.index,
                        replica.replica_id in partition.replication.isr, replica.now_ms)):
                # A FileSlice: sent from the page cache. A throttled follower over its
                # rate gets nothing this time and asks again (KIP-73).
                data["records"] = read.records
                if isolation == READ_COMMITTED:
                    # What of it was aborted: the consumer drops those producers'
                    # batches between each first offset and its ABORT marker.
                    data["aborted_transactions"] = [
                        {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                        for txn in partition.log.collect_aborted(
                            cached.fetch_offset, partition.last_stable_offset)]
            if replica is not None and replica.update_fetch_state:
                # Its fetch offset says what it has: the high watermark may move.
                broker.replica_manager.update_follower_fetch(
                    partition, replica.replica_id, cached.fetch_offset, replica.now_ms,
                    replica.broker_epoch)
    except KafkaError as e:
        data["error_code"] = e.code
        if partition is None:
            data["aborted_transactions"] = []  # as Kafka answers a partition it does not know
    if partition is not None and data["error_code"] == ErrorCode.none:
        # As Kafka's ReplicaManager.readFromLog: a partition answered with an error
        # carries no watermarks (-1); a follower out of range asks ListOffsets.
        data["high_watermark"] = partition.high_watermark
        data["last_stable_offset"] = partition.last_stable_offset
        data["log_start_offset"] = partition.log.log_start_offset
    return data


def _read_all(broker: Broker, parts: OrderedDict[tuple[Any, int], CachedPartition],
              max_bytes: int, isolation: int, uses_ids: bool,
              replica: FetchingReplica | None = None, client_rack: str | None = None,
              denied: Denied = NOTHING_DENIED
              ) -> tuple[dict[tuple[Any, int], dict[str, Any]], int, bool]:
    remaining = max_bytes
    min_one = True
    results = {}
    total = 0
    errors = False
    for key, cached in parts.items():
        data = _read_partition(broker, cached, min(cached.max_bytes, remaining), isolation,
                               min_one, uses_ids, replica, client_rack, denied)
        size = len(data["records"])
        if size:
            min_one = False
            remaining = max(0, remaining - size)
            total += size
        if data["error_code"] == ErrorCode.topic_authorization_failed:
            results[key] = data  # answered as it is; a long poll waits for the others
            continue
        errors = errors or data["error_code"] != ErrorCode.none or \
            "diverging_epoch" in data or data["preferred_read_replica"] >= 0
        results[key] = data
        if replica is not None and size and \
                broker.leader_quota.is_throttled(cached.topic, cached.partition):
            broker.leader_quota.record(size, replica.now_ms)
    return results, total, errors


@dataclass(slots=True)
class FetchingReplica:
    """The follower broker behind a fetch (``replica_id``, or ``ReplicaState`` in v15+)."""

    replica_id: int
    broker_epoch: int
    now_ms: int
    update_fetch_state: bool = True
    """Only the first read records its position; re-reads of a parked fetch do not
    (Kafka's ``readFromPurgatory``)."""


def _fetching_replica(req: Any, now_ms: int) -> FetchingReplica | None:
    state = getattr(req, "replica_state", None)
    if state is not None:
        replica_id, epoch = state.replica_id, state.replica_epoch
    else:
        replica_id, epoch = getattr(req, "replica_id", -1), -1
    return FetchingReplica(replica_id, epoch, now_ms) if replica_id >= 0 else None


def handle_fetch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    version = ctx.api_version
    uses_ids = version >= TOPIC_IDS_VERSION
    now_ms = broker.now_ms()
    sessions = broker.fetch_sessions
    session_id = getattr(req, "session_id", INVALID_SESSION_ID)
    epoch = getattr(req, "session_epoch", FINAL_EPOCH)
    requested = _requested(broker, req, uses_ids)
    session = None
    create_session = False
    if epoch == FINAL_EPOCH:
        if session_id != INVALID_SESSION_ID:
            sessions.remove(session_id)
        parts = requested
    elif epoch == INITIAL_EPOCH:
        if session_id != INVALID_SESSION_ID:
            sessions.remove(session_id)
        parts = requested
        create_session = version >= 7
    else:
        session = sessions.get(session_id)
        if session is None:
            return _error_response(version, ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch or session.uses_topic_ids != uses_ids:
            return _error_response(version, ErrorCode.invalid_fetch_session_epoch)
        for key in _forgotten(req, uses_ids):
            session.partitions.pop(key, None)
        for key, cached in requested.items():
            existing = session.partitions.get(key)
            if existing is None:
                session.partitions[key] = cached
            else:
                existing.fetch_offset = cached.fetch_offset
                existing.max_bytes = cached.max_bytes
                existing.current_leader_epoch = cached.current_leader_epoch
                existing.last_fetched_epoch = cached.last_fetched_epoch
        if uses_ids:
            for cached in session.partitions.values():
                cached.resolve_name(broker.image.topics_by_id)
        session.epoch += 1
        session.last_used_ms = now_ms
        parts = session.partitions

    max_bytes = min(getattr(req, "max_bytes", INT_MAX), broker.config["fetch.max.bytes"])
    isolation = getattr(req, "isolation_level", READ_UNCOMMITTED)
    max_wait = max(0, ms(req.max_wait))
    replica = _fetching_replica(req, now_ms)
    min_bytes = req.min_bytes
    if replica is None and broker.client_quotas.fetch.enabled:
        # Kafka caps a consumer's fetch to what it may fetch without being throttled
        # for certain (getMaxValueInQuotaWindow).
        cap = broker.client_quotas.fetch.max_value_in_quota_window(ctx.principal.name,
                                                                   ctx.client_id)
        if cap is not None:
            max_bytes = min(max_bytes, int(cap))
            min_bytes = min(min_bytes, max_bytes)
    denied = _denied(ctx, parts, replica)
    keys = [(c.topic, c.partition) for c in parts.values()
            if c.topic and (denied is NOTHING_DENIED or c.topic not in denied)]
    # A consumer's Fetch v11+ says where it is (KIP-392): it may read a follower, and a
    # leader may send it to a replica in its rack. None: leaders only.
    client_rack = getattr(req, "rack_id", "") if version >= 11 and replica is None else None
    fetch = _Fetch(broker, parts, session, session_id, create_session, version, max_bytes,
                   isolation, min_bytes, keys, now_ms, replica, ctx, client_rack, denied)
    results, total, errors = _read_all(broker, parts, max_bytes, isolation, uses_ids, replica,
                                       client_rack, denied)
    if broker.topic_stats is not None:
        _count_reads(broker.topic_stats, parts, results)
    if max_wait == 0 or fetch.satisfied(results, total, errors):
        # Data (or nothing to wait for): answer in this loop turn, no task.
        return fetch.respond(results)
    return fetch.park(now_ms + max_wait)


def _count_reads(stats: BrokerTopicStats, parts: OrderedDict[tuple[Any, int], CachedPartition],
                 results: dict[tuple[Any, int], dict[str, Any]]) -> None:
    """TotalFetchRequests (and the failed ones) of every partition the first read
    reached: as in Kafka, not those refused by the authorizer or of unknown topics, and
    not a parked fetch's later reads."""
    for key, data in results.items():
        topic = parts[key].topic
        error = data["error_code"]
        if topic and error != ErrorCode.topic_authorization_failed:
            stats.fetched(topic, error)


class _Fetch:
    """A fetch that found too little parks in the fetch purgatory, watched under its
    partitions, until an append (or a moved watermark, for a session) or ``max_wait``
    ends it."""

    def __init__(self, broker: Broker, parts: OrderedDict[tuple[Any, int], CachedPartition],
                 session: FetchSession | None, session_id: int, create_session: bool,
                 version: int, max_bytes: int, isolation: int, min_bytes: int,
                 keys: list[tuple[str, int]], now_ms: int,
                 replica: FetchingReplica | None, ctx: RequestContext,
                 client_rack: str | None = None, denied: Denied = NOTHING_DENIED) -> None:
        self.broker = broker
        self.parts = parts
        self.session = session
        self.session_id = session_id
        self.create_session = create_session
        self.version = version
        self.uses_ids = version >= TOPIC_IDS_VERSION
        self.max_bytes = max_bytes
        self.isolation = isolation
        self.min_bytes = min_bytes
        self.keys = keys
        self.now_ms = now_ms
        self.replica = replica
        self.ctx = ctx
        self.listener = ctx.listener_name
        self.client_rack = client_rack
        self.denied = denied

    def satisfied(self, results: dict[tuple[Any, int], dict[str, Any]], total: int,
                  errors: bool) -> bool:
        if total >= self.min_bytes or errors or not self.keys:
            return True
        # A consumer's session fetch also answers when a watermark moved. A follower's
        # does not (as in Kafka): its own fetches move the high watermark, and answering
        # each move at once would cost every record a second round trip.
        return self.session is not None and self.replica is None and \
            _has_news(self.parts, results)

    def _read(self) -> dict[tuple[Any, int], dict[str, Any]]:
        return _read_all(self.broker, self.parts, self.max_bytes, self.isolation,
                         self.uses_ids, self.replica, self.client_rack, self.denied)[0]

    def _read_if_satisfied(self) -> dict[tuple[Any, int], dict[str, Any]] | None:
        results, total, errors = _read_all(self.broker, self.parts, self.max_bytes,
                                           self.isolation, self.uses_ids, self.replica,
                                           self.client_rack, self.denied)
        return results if self.satisfied(results, total, errors) else None

    async def park(self, deadline_ms: int) -> EncodedBody:
        if self.replica is not None:
            self.replica.update_fetch_state = False
        answered: asyncio.Future[EncodedBody] = asyncio.get_running_loop().create_future()

        def respond(results: dict[tuple[Any, int], dict[str, Any]]) -> None:
            if not answered.done():
                answered.set_result(self.respond(results))

        operation = DelayedFetch(deadline_ms, self._read_if_satisfied, self._read, respond)
        self.broker.replica_manager.fetch_purgatory.try_complete_else_watch(
            operation, self.keys, self.now_ms)
        return await answered

    def respond(self, results: dict[tuple[Any, int], dict[str, Any]]) -> EncodedBody:
        if self.replica is None and self.broker.client_quotas.fetch.enabled:
            throttled = self._throttled(results)
            if throttled is not None:
                return throttled
        parts, session, session_id = self.parts, self.session, self.session_id
        if self.create_session:
            session_id = self.broker.fetch_sessions.create(parts, self.uses_ids, self.now_ms)
            for key, data in results.items():
                parts[key].must_respond(data)
        elif session is None:
            session_id = INVALID_SESSION_ID
        selected = results
        if session is not None:
            selected = {key: data for key, data in results.items()
                        if parts[key].must_respond(data)}
            for key, data in selected.items():
                if data["records"]:
                    parts.move_to_end(key)  # rotate so every partition gets its turn
        stats = self.broker.topic_stats
        if stats is not None and self.replica is None:
            for key, data in selected.items():
                records = data["records"]
                if records:
                    stats.sent(parts[key].topic, len(records))
        elif stats is not None:  # a follower's bytes are replication, for all topics
            stats.replication_bytes_out += sum(len(data["records"])
                                               for data in selected.values() if data["records"])
        charge = self.ctx.charge_request
        return encode_fetch_response(self.version, {
            "throttle_time": charge() if charge is not None else 0,
            "error_code": ErrorCode.none, "session_id": session_id,
            "responses": _group(parts, selected, self.uses_ids),
            "node_endpoints": self._leader_hints(selected)})

    def _throttled(self, results: dict[tuple[Any, int], dict[str, Any]]
                   ) -> EncodedBody | None:
        """Record the size of the answer ``results`` make against the consumer's quota
        (the partitions a session would send, before anything is remembered as sent):
        None within the quota; over it, the size is taken back and the answer is empty,
        with the throttle time, and in the session's id for an incremental fetch (Kafka's
        ``getThrottledResponse``), nothing else of the session touched."""
        parts, session = self.parts, self.session
        selected = results if session is None else \
            {key: data for key, data in results.items() if parts[key].would_respond(data)}
        size = 4 + encode_fetch_response(self.version, {
            "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
            "responses": _group(parts, selected, self.uses_ids),
            "node_endpoints": []}).size  # FetchResponse.sizeOf
        quota, ctx, now_ms = self.broker.client_quotas.fetch, self.ctx, self.broker.now_ms()
        user, client_id = ctx.principal.name, ctx.client_id
        throttle = quota.record(user, client_id, size, now_ms)
        if throttle <= 0:
            return None
        quota.unrecord(user, client_id, size, now_ms)
        ctx.throttle_ms, ctx.throttle_quota = throttle, "Fetch"
        if ctx.charge_request is not None:  # the longer of the two, as Kafka's
            throttle = max(throttle, ctx.charge_request())
        return encode_fetch_response(self.version, {
            "throttle_time": throttle, "error_code": ErrorCode.none,
            "session_id": session.id if session is not None else INVALID_SESSION_ID,
            "responses": [], "node_endpoints": []})

    def _leader_hints(self, selected: dict[tuple[Any, int], dict[str, Any]]
                      ) -> list[dict[str, Any]]:
        """KIP-951: the current leader of a partition this broker no longer leads (or
        leads in a newer epoch), and its endpoint."""
        misdirected = [(key, data) for key, data in selected.items()
                       if data["error_code"] in (ErrorCode.not_leader_or_follower,
                                                 ErrorCode.fenced_leader_epoch)]
        if not misdirected:
            return []
        hints, endpoints = self.broker.leader_hints(
            self.listener, [(self.parts[key].topic, key[1]) for key, _ in misdirected])
        for key, data in misdirected:
            data["current_leader"] = hints[(self.parts[key].topic, key[1])]
        return endpoints


def _has_news(parts: OrderedDict[tuple[Any, int], CachedPartition],
              results: dict[tuple[Any, int], dict[str, Any]]) -> bool:
    """An incremental fetch also answers early when a watermark moved."""
    for key, data in results.items():
        cached = parts[key]
        if (data["high_watermark"], data["last_stable_offset"], data["log_start_offset"]) != \
                (cached.high_watermark, cached.last_stable_offset, cached.log_start_offset):
            return True
    return False


def _group(parts: OrderedDict[tuple[Any, int], CachedPartition],
           selected: dict[tuple[Any, int], dict[str, Any]], uses_ids: bool
           ) -> list[dict[str, Any]]:
    topics: dict[Any, dict[str, Any]] = {}
    for key, data in selected.items():
        topic_key = key[0]
        entry = topics.get(topic_key)
        if entry is None:
            cached = parts[key]
            entry = topics[topic_key] = {"topic": cached.topic, "topic_id": cached.topic_id
                                         if uses_ids else None, "partitions": []}
            if uses_ids:
                entry["topic_id"] = topic_key
        entry["partitions"].append(data)
    return list(topics.values())


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.FETCH, 4, 18, handle_fetch),
]
