"""Produce: validate each partition's batch, append it, answer per partition.

Validation walks every record (``broker.log_validator``). A compressed batch whose
records decompress to more than the validator does on the event loop is finished on a
worker thread; the request then waits for it and appends all its partitions afterwards,
in the order the request named them.

With ``acks=all`` the answer waits in the replica manager's produce purgatory until the
high watermark of every appended partition covers its records (at once with one
replica), the leadership moves, or the request's ``timeout_ms`` passes.

Authorization (Kafka's ``handleProduceRequest``): a request with transactional batches
needs WRITE on its transactional id, else every partition is refused
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then each topic needs WRITE, else its partitions
are TOPIC_AUTHORIZATION_FAILED (after an unknown topic id, before an unknown topic).
There is no IDEMPOTENT_WRITE check here (InitProducerId makes it). A refused ``acks=0``
request closes the connection, as any failed one.

Client quotas (``producer_byte_rate``): when the answer is ready (after ``acks=all``'s
wait) the request's size is recorded against its client's quota, as Kafka records it;
over the quota, the answer carries the throttle time and the connection is muted for it
(an ``acks=0`` request gets no answer but is muted all the same).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.log_validator import PendingBatch, RecordValidationError
from ottla.broker.purgatory.delayed_produce import DelayedProduce, ProducePartitionStatus
from ottla.broker.replication.partition import Partition
from ottla.common.topics import TopicPartition, is_internal_topic
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import ms
from ottla.protocol.produce_response import encode_produce_response
from ottla.protocol.records import ATTRIBUTES_OFFSET, MAGIC_OFFSET, TRANSACTIONAL_FLAG, BatchHeader
from ottla.protocol.requests import NO_RESPONSE, ApiSpec, CloseConnection, RequestContext
from ottla.security.auth_helper import (
    MSG_TXN,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    authorize,
    authorized_names,
    enabled,
)

Validated = tuple[bytearray, BatchHeader]

_ACK_ERRORS = {
    ErrorCode.request_timed_out:
        "The in-sync replicas did not all have the records before the request timed out",
    ErrorCode.not_enough_replicas_after_append:
        "The records were written, but to fewer in-sync replicas than min.insync.replicas",
    ErrorCode.not_leader_or_follower:
        "The leadership moved before the in-sync replicas had the records",
}


class _Entry:
    """One partition of the request: its response fields, and its batch as far as it
    got (None once it failed)."""

    __slots__ = ("abortable", "batch", "guard", "index", "produced_bytes", "result", "topic")

    def __init__(self, topic: str | None, index: int) -> None:
        self.topic = topic
        self.index = index
        self.batch: Validated | PendingBatch | None = None
        self.guard: int | None = None
        """The producer's verification guard when its transaction was verified here."""
        self.abortable = False
        """The request version knows TRANSACTION_ABORTABLE (Produce v11+)."""
        self.produced_bytes = -1
        """The size of its records once it reaches the append, as Kafka's
        BrokerTopicStats counts it (-1: refused before, not counted)."""
        self.result: dict[str, Any] = {
            "index": index, "error_code": ErrorCode.none, "base_offset": -1,
            "log_append_time": None, "log_start_offset": -1, "record_errors": [],
            "error_message": None}

    def fail_append(self, error: KafkaError, partition: Partition | None) -> None:
        """``fail`` with an error of the append (validation included): as Kafka's
        processFailedRecord, the answer carries the partition's log start offset unless
        the error is one of ``_NO_LOG_START``."""
        self.fail(error)
        if partition is not None and error.code not in _NO_LOG_START:
            self.result["log_start_offset"] = partition.log.log_start_offset

    def fail(self, error: KafkaError) -> None:
        self.batch = None
        self.result["error_code"] = error.code
        self.result["error_message"] = error.message
        if isinstance(error, RecordValidationError):
            self.result["record_errors"] = [
                {"batch_index": i, "batch_index_error_message": m}
                for i, m in error.record_errors]

    @property
    def misdirected(self) -> bool:
        return self.result["error_code"] == ErrorCode.not_leader_or_follower


def _has_transactional_records(req: Any) -> bool:
    """Kafka's ``ProduceRequest.hasTransactionalRecords``: the first batch of some
    partition has the transactional flag."""
    for topic_data in req.topic_data:
        for pdata in topic_data.partition_data:
            records = pdata.records
            if records is not None and len(records) > ATTRIBUTES_OFFSET + 1 and \
                    records[MAGIC_OFFSET] >= 2 and \
                    records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG:
                return True
    return False


def handle_produce(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    acks = req.acks
    image = broker.image
    replica_manager = broker.replica_manager
    now_ms = broker.now_ms()
    writable: set[str | None] | None = None
    if enabled(ctx):
        if _has_transactional_records(req) and (
                req.transactional_id is None
                or not authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id)):
            if acks == 0:
                partitions = {(getattr(t, "name", None) or getattr(t, "topic_id", None),
                               p.index) for t in req.topic_data for p in t.partition_data}
                raise CloseConnection("transactional id authorization failed", {
                    ErrorCode.transactional_id_authorization_failed: len(partitions)})
            raise KafkaError(ErrorCode.transactional_id_authorization_failed, MSG_TXN)
        writable = authorized_names(ctx, WRITE, TOPIC, (
            getattr(t, "name", None) or _name_of(image, getattr(t, "topic_id", None))
            for t in req.topic_data))
    topics: list[tuple[str | None, Any, list[_Entry]]] = []
    pending = False
    for topic_data in req.topic_data:
        name = getattr(topic_data, "name", None)
        topic_id = getattr(topic_data, "topic_id", None)
        unknown_error = ErrorCode.unknown_topic_or_partition
        if name is None:
            name = _name_of(image, topic_id)
            unknown_error = ErrorCode.unknown_topic_id
        entries = []
        for pdata in topic_data.partition_data:
            entry = _Entry(name, pdata.index)
            entries.append(entry)
            try:
                if name is None:
                    raise KafkaError(unknown_error, "Unknown topic id")
                if writable is not None and name not in writable:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.invalid_required_acks,
                                     f"Invalid required acks {acks}")
                entry.produced_bytes = len(pdata.records) if pdata.records is not None else 0
                if is_internal_topic(name):
                    # Only the broker's coordinators write their own topics.
                    raise KafkaError(ErrorCode.invalid_topic_exception,
                                     f"Cannot append to internal topic {name}")
                partition = replica_manager.require(name, pdata.index, image)
            except KafkaError as e:
                entry.fail(e)
                continue
            try:
                entry.batch = replica_manager.validate(partition, pdata.records, now_ms)
                pending = pending or isinstance(entry.batch, PendingBatch)
            except KafkaError as e:
                entry.fail_append(e, partition)
        topics.append((name, topic_id, entries))
    timeout_ms = ms(req.timeout)
    coordinator = broker.transaction_coordinator
    # Transactions v2 (Produce v12+, a client that saw transaction.version 2) sends no
    # AddPartitionsToTxn: its first batch on a partition adds it to the transaction.
    add = ctx.api_version >= 12 and coordinator.transaction_version >= 2
    verify = req.transactional_id is not None and \
        (add or broker.config["transaction.partition.verification.enable"])
    if pending or verify:
        return _finish_then_append(broker, ctx, acks, timeout_ms, topics,
                                   req.transactional_id if verify else None, add)
    return _append_all(broker, ctx, acks, timeout_ms, topics, now_ms)


def _name_of(image: Any, topic_id: Any) -> str | None:
    topic = image.topics_by_id.get(topic_id) if topic_id is not None else None
    return topic.name if topic is not None else None


async def _finish_then_append(broker: Broker, ctx: RequestContext, acks: int, timeout_ms: int,
                              topics: list[tuple[str | None, Any, list[_Entry]]],
                              verify_for: str | None = None, add: bool = False) -> Any:
    offload: Callable[[Callable[[], Validated]], Awaitable[Validated]] = broker.offload
    for _, _, entries in topics:
        for entry in entries:
            if isinstance(entry.batch, PendingBatch):
                try:
                    entry.batch = await offload(entry.batch.finish)
                except KafkaError as e:
                    entry.fail_append(e, broker.replica_manager.get(entry.topic or "",
                                                                    entry.index))
    if verify_for is not None:
        await _verify_transaction(broker, verify_for, topics, add,
                                  abortable=ctx.api_version >= 11)
    appended = _append_all(broker, ctx, acks, timeout_ms, topics, broker.now_ms())
    return await appended if inspect.iscoroutine(appended) else appended


# What a failed verification means to the producer (Kafka's ReplicaManager and
# AddPartitionsToTxnManager): a coordinator that cannot answer now is retriable, as
# NOT_ENOUGH_REPLICAS is for every client version; so is a transaction whose previous
# markers are still being written past the retries (CONCURRENT_TRANSACTIONS), which a
# transactions-v2 client (Produce v12+) is told as it is.
_VERIFY_ERRORS = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.network_exception: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
}


def _verify_error(error: ErrorCode, add: bool, abortable: bool) -> ErrorCode:
    if error == ErrorCode.concurrent_transactions and add:
        return error
    error = _VERIFY_ERRORS.get(error, error)
    if error == ErrorCode.transaction_abortable and not abortable:
        return ErrorCode.invalid_txn_state
    return error


async def _verify_transaction(broker: Broker, transactional_id: str,
                              topics: list[tuple[str | None, Any, list[_Entry]]],
                              add: bool, abortable: bool) -> None:
    """KIP-890 (``broker.transaction_verification``): each transactional batch that
    would open the producer's transaction on a partition is verified with (or, with
    ``add``, added by) the coordinator first; one that is not in the transaction gets
    TRANSACTION_ABORTABLE (INVALID_TXN_STATE before Produce v11) instead of leaving a
    transaction open on the partition that nobody will end."""
    verification = broker.txn_verification
    unverified: dict[TopicPartition, tuple[_Entry, Partition]] = {}
    producer: tuple[int, int] | None = None
    for name, _, entries in topics:
        for entry in entries:
            if name is None or not isinstance(entry.batch, tuple):
                continue
            header = entry.batch[1]
            if not header.is_transactional:
                continue
            partition = broker.replica_manager.partitions.get((name, entry.index))
            if partition is None:
                continue  # the append answers NOT_LEADER_OR_FOLLOWER
            if verification.in_transaction(partition, header.producer_id,
                                           header.producer_epoch):
                continue
            entry.abortable = abortable
            unverified[(name, entry.index)] = (entry, partition)
            producer = (header.producer_id, header.producer_epoch)
            verification.begin(partition, header.producer_id, header.producer_epoch,
                               header.base_sequence, add, broker.now_ms())
    if not unverified or producer is None:
        return
    answers = await verification.verify(
        transactional_id, producer[0], producer[1],
        {tp: partition for tp, (_, partition) in unverified.items()}, add)
    for tp, (entry, _) in unverified.items():
        answer = answers[tp]
        # With transactions v2 the marker ending the transaction verified here has a
        # newer epoch than the batch, which the append refuses anyway: no guard then.
        entry.guard = answer.guard
        if answer.error != ErrorCode.none:
            entry.produced_bytes = -1  # Kafka refuses it before the append
            error = _verify_error(answer.error, add, abortable)
            entry.fail(KafkaError(error, f"Partition {tp[0]}-{tp[1]} is not in the "
                                         f"ongoing transaction of {transactional_id}"
                                  if error in (ErrorCode.invalid_txn_state,
                                               ErrorCode.transaction_abortable) else None))


_NO_LOG_START = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
    ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.corrupt_message,
    ErrorCode.kafka_storage_error})
"""Append errors Kafka answers with log_start_offset -1 (``UNKNOWN_LOG_APPEND_INFO``);
every other one carries the partition's log start offset."""


def _check_guard(broker: Broker, partition: Partition, header: BatchHeader,
                 entry: _Entry) -> None:
    """A verified batch that would open a transaction is appended only if its
    verification still holds: else a marker ended the transaction meanwhile, and the
    batch would open one that nobody ends."""
    if broker.txn_verification.guard_holds(partition, header.producer_id, entry.guard):
        return
    raise KafkaError(ErrorCode.transaction_abortable if entry.abortable
                     else ErrorCode.invalid_txn_state,
                     f"The transaction of producer {header.producer_id} ended while the "
                     f"batch for {partition.topic}-{partition.index} was verified")


def _append_all(broker: Broker, ctx: RequestContext, acks: int, timeout_ms: int,
                topics: list[tuple[str | None, Any, list[_Entry]]], now_ms: int) -> Any:
    replica_manager = broker.replica_manager
    stats = broker.topic_stats
    failed = False
    responses = []
    waiting: dict[tuple[str, int], tuple[_Entry, ProducePartitionStatus]] = {}
    for name, topic_id, entries in topics:
        for entry in entries:
            batch = entry.batch
            appended = 0
            if batch is not None and not isinstance(batch, PendingBatch) and name is not None:
                partition = None
                try:
                    partition = replica_manager.require(name, entry.index, broker.image)
                    if entry.guard is not None:
                        _check_guard(broker, partition, batch[1], entry)
                    info = replica_manager.append_validated(partition, *batch, acks, now_ms)
                    appended = info.last_offset - info.first_offset + 1
                    entry.result["base_offset"] = info.first_offset
                    entry.result["log_append_time"] = info.log_append_time \
                        if info.log_append_time >= 0 else None
                    entry.result["log_start_offset"] = info.log_start_offset
                    if acks == -1 and partition.high_watermark <= info.last_offset:
                        waiting[(name, entry.index)] = (entry, ProducePartitionStatus(
                            info.last_offset + 1, partition.leader_epoch,
                            partition.log.config["min.insync.replicas"]))
                except KafkaError as e:
                    entry.fail_append(e, partition)
            error = entry.result["error_code"]
            failed = failed or error != ErrorCode.none
            if stats is not None and entry.produced_bytes >= 0 and name is not None:
                stats.produced(name, error, appended, entry.produced_bytes)
        responses.append({"name": name or "", "topic_id": topic_id,
                          "partition_responses": [entry.result for entry in entries]})
    if acks == 0:
        if failed:
            counts = Counter(p["error_code"] for topic in responses
                             for p in topic["partition_responses"])
            raise CloseConnection("acks=0 produce failed", counts)
        if broker.client_quotas.produce.enabled:
            _record_quota(broker, ctx, now_ms)
        return NO_RESPONSE
    response = {"responses": responses, "throttle_time": 0,
                "node_endpoints": _leader_hints(broker, ctx, topics) if failed else []}
    if waiting:
        return _await_replicas(broker, ctx, response, waiting, timeout_ms, now_ms)
    response["throttle_time"] = _throttle(broker, ctx, now_ms)
    return encode_produce_response(ctx.api_version, response)


def _throttle(broker: Broker, ctx: RequestContext, now_ms: int) -> int:
    """The answer's throttle time: the longer of the byte quota's and the request
    quota's (Kafka's ``handleProduceRequest``)."""
    throttle = _record_quota(broker, ctx, now_ms) if broker.client_quotas.produce.enabled \
        else 0
    if ctx.charge_request is not None:
        throttle = max(throttle, ctx.charge_request())
    return throttle


def _record_quota(broker: Broker, ctx: RequestContext, now_ms: int) -> int:
    """Record the request's size against its client's ``producer_byte_rate`` (Kafka's
    ``quotas.produce.maybeRecordAndGetThrottleTimeMs``): the throttle time, which the
    connection also mutes itself for."""
    throttle = broker.client_quotas.produce.record(ctx.principal.name, ctx.client_id,
                                                   ctx.request_size, now_ms)
    ctx.throttle_ms, ctx.throttle_quota = throttle, "Produce"
    return throttle


def _leader_hints(broker: Broker, ctx: RequestContext,
                  topics: list[tuple[str | None, Any, list[_Entry]]]) -> list[dict[str, Any]]:
    """Current leaders of the partitions refused NOT_LEADER_OR_FOLLOWER, and their
    endpoints (KIP-951)."""
    misdirected = [(name, entry) for name, _, entries in topics for entry in entries
                   if entry.misdirected]
    if not misdirected:
        return []
    hints, endpoints = broker.leader_hints(ctx.listener_name,
                                           [(name, e.index) for name, e in misdirected])
    for name, entry in misdirected:
        entry.result["current_leader"] = hints[(name, entry.index)]
    return endpoints


def _await_replicas(broker: Broker, ctx: RequestContext, response: dict[str, Any],
                    waiting: dict[tuple[str, int], tuple[_Entry, ProducePartitionStatus]],
                    timeout_ms: int, now_ms: int) -> Any:
    """``acks=all`` with records the in-sync replicas do not all have yet: park the
    request in the produce purgatory until they do, the leadership moves, or the
    request's ``timeout_ms`` ends (REQUEST_TIMED_OUT for what is still waiting)."""
    replica_manager = broker.replica_manager
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def respond(statuses: dict[tuple[str, int], ProducePartitionStatus]) -> None:
        moved = []
        for tp, status in statuses.items():
            if status.error != ErrorCode.none:
                entry = waiting[tp][0]
                entry.fail(KafkaError(status.error, _ACK_ERRORS.get(status.error)))
                if entry.misdirected:
                    moved.append((tp[0], [entry]))
        if moved:
            response["node_endpoints"] = _leader_hints(
                broker, ctx, [(name, None, entries) for name, entries in moved])
        if not done.done():
            done.set_result(None)

    operation = DelayedProduce(now_ms + max(0, timeout_ms),
                               {tp: status for tp, (_, status) in waiting.items()},
                               replica_manager.partitions.get, respond)
    replica_manager.produce_purgatory.try_complete_else_watch(operation, waiting, now_ms)
    return _respond_when(done, broker, ctx, response)


async def _respond_when(done: asyncio.Future[None], broker: Broker, ctx: RequestContext,
                        response: dict[str, Any]) -> Any:
    await done
    response["throttle_time"] = _throttle(broker, ctx, broker.now_ms())
    return encode_produce_response(ctx.api_version, response)


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.PRODUCE, 3, 13, handle_produce),
]
