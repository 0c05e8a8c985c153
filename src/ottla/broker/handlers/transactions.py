"""Transactions (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, answered by the
transaction coordinator of the transactional id, and WriteTxnMarkers, the coordinator's
request to the partition leaders to write COMMIT or ABORT markers.

Authorization (Kafka's KafkaApis): a producer's requests need WRITE on its transactional
id, and then WRITE on the topics it adds (AddPartitionsToTxn v0-3; an internal topic is
never added), READ on the group whose offsets it commits (AddOffsetsToTxn,
TxnOffsetCommit) and READ on their topics (TxnOffsetCommit). The brokers' requests need
CLUSTER_ACTION on the cluster: AddPartitionsToTxn v4+, and WriteTxnMarkers (or ALTER)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from ottla.broker.broker import Broker
from ottla.broker.coordinators.coordinator_service import partition_for
from ottla.broker.purgatory.delayed_produce import DelayedProduce, ProducePartitionStatus
from ottla.common.topics import OFFSETS_TOPIC, TopicPartition, is_internal_topic
from ottla.coordinator.transaction.shard import ProducerIdAndEpoch
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    ALTER,
    CLUSTER_ACTION,
    GROUP,
    MSG_CLUSTER,
    MSG_TXN,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    authorize,
    authorize_cluster,
    authorized_names,
    deny_cluster,
)

MARKER_TIMEOUT_MS = 30_000

# A coordinator that cannot answer now is retriable for the client, as is a transaction
# whose previous markers are still being written (transactions v2); a fenced producer is
# told so (Kafka's TxnOffsetCommit answers PRODUCER_FENCED / INVALID_PRODUCER_EPOCH).
_VERIFY_ERRORS = {
    ErrorCode.coordinator_not_available: ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator: ErrorCode.coordinator_load_in_progress,
    ErrorCode.concurrent_transactions: ErrorCode.coordinator_load_in_progress,
}


# --- AddPartitionsToTxn -------------------------------------------------------------------

async def _add(broker: Broker, transactional_id: str, producer_id: int, producer_epoch: int,
               topics: Any, verify_only: bool, client_version: int = 0,
               writable: set[str | None] | None = None) -> dict[TopicPartition, ErrorCode]:
    """Each partition's answer: topics not ``writable`` (None: all are) and unknown
    partitions fail and the rest are not attempted, as Kafka answers; otherwise the
    coordinator's one answer for all."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    denied = set() if writable is None else {tp for tp in wanted if tp[0] not in writable}
    unknown = {tp for tp in wanted if tp not in denied and (
        tp[0] not in broker.image.topics_by_name or
        tp[1] not in broker.image.topics_by_name[tp[0]].partitions)}
    if unknown or denied:
        return {tp: ErrorCode.topic_authorization_failed if tp in denied
                else ErrorCode.unknown_topic_or_partition if tp in unknown
                else ErrorCode.operation_not_attempted for tp in wanted}
    coordinator = broker.transaction_coordinator
    try:
        if verify_only:
            return coordinator.verify_partitions(transactional_id, producer_id,
                                                 producer_epoch, frozenset(wanted))
        error = await coordinator.add_partitions(transactional_id, producer_id,
                                                 producer_epoch, frozenset(wanted),
                                                 client_version)
    except KafkaError as e:
        error = e.code
    return dict.fromkeys(wanted, error)


def _topic_results(results: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (topic, index), error in results.items():
        by_topic[topic].append({"partition_index": index, "partition_error_code": error})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def handle_add_partitions_to_txn(broker: Broker, ctx: RequestContext, req: Any
                                       ) -> dict[str, Any]:
    if ctx.api_version <= 3:
        transactional_id = req.v3_and_below_transactional_id
        if not authorize(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
            return {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(
                dict.fromkeys(((t.name, p) for t in req.v3_and_below_topics
                               for p in t.partitions),
                              ErrorCode.transactional_id_authorization_failed))}
        # A client may never add an internal topic to its transaction.
        writable = authorized_names(ctx, WRITE, TOPIC, (
            t.name for t in req.v3_and_below_topics if not is_internal_topic(t.name)))
        results = await _add(broker, transactional_id,
                             req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                             req.v3_and_below_topics, verify_only=False, writable=writable)
        return {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(results)}
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    # v4+ comes from brokers: to verify (KIP-890 part 1), or to add the partitions of a
    # transactions v2 producer's Produce or TxnOffsetCommit (part 2).
    transactions = []
    for txn in req.transactions:
        results = await _add(broker, txn.transactional_id, txn.producer_id,
                             txn.producer_epoch, txn.topics, txn.verify_only,
                             client_version=2)
        if ctx.api_version < 5:  # TRANSACTION_ABORTABLE is from v5
            results = {tp: ErrorCode.invalid_txn_state
                       if e == ErrorCode.transaction_abortable else e
                       for tp, e in results.items()}
        transactions.append({"transactional_id": txn.transactional_id,
                             "topic_results": _topic_results(results)})
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "results_by_transaction": transactions}


async def handle_add_offsets_to_txn(broker: Broker, ctx: RequestContext, req: Any
                                    ) -> dict[str, Any]:
    """The group's ``__consumer_offsets`` partition joins the transaction, so its
    transactional offset commits are decided with it."""
    if not authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return {"throttle_time": 0,
                "error_code": ErrorCode.transactional_id_authorization_failed}
    if not authorize(ctx, READ, GROUP, req.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    group = broker.group_coordinator
    offsets_partition = (OFFSETS_TOPIC, partition_for(req.group_id, group.num_partitions))
    try:
        error = await broker.transaction_coordinator.add_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch,
            frozenset({offsets_partition}))
    except KafkaError as e:
        error = e.code
    return {"throttle_time": 0, "error_code": error}


async def handle_end_txn(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """EndTxn; from v5 (transactions v2) the epoch is bumped and the producer id and
    epoch to use next are in the answer."""
    answer = ProducerIdAndEpoch(ErrorCode.none)
    if not authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        response: dict[str, Any] = {
            "throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed}
        if ctx.api_version >= 5:
            response.update(producer_id=-1, producer_epoch=-1)
        return response
    try:
        answer = await broker.transaction_coordinator.end_transaction(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
            client_version=2 if ctx.api_version >= 5 else 0)
        error = answer.error
    except KafkaError as e:
        error = e.code
    response = {"throttle_time": 0, "error_code": error}
    if ctx.api_version >= 5:
        response["producer_id"] = answer.producer_id if error == ErrorCode.none else -1
        response["producer_epoch"] = answer.producer_epoch if error == ErrorCode.none else -1
    return response


# --- TxnOffsetCommit ---------------------------------------------------------------------

async def handle_txn_offset_commit(broker: Broker, ctx: RequestContext, req: Any
                                   ) -> dict[str, Any]:
    """The consumed offsets of a consume-transform-produce transaction: written to the
    group's partition in the producer's transaction, visible once it commits (KIP-98,
    KIP-447 group fencing by generation and member id from v3)."""
    if not authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        raise KafkaError(ErrorCode.transactional_id_authorization_failed, MSG_TXN)
    if not authorize(ctx, READ, GROUP, req.group_id):
        raise KafkaError(ErrorCode.group_authorization_failed)
    offsets = [(t.name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in req.topics for p in t.partitions]
    known = broker.image.topics_by_name
    readable = authorized_names(ctx, READ, TOPIC, (t.name for t in req.topics))
    results: dict[TopicPartition, ErrorCode] = {
        (t, p): ErrorCode.topic_authorization_failed for t, p, *_ in offsets
        if t not in readable}
    results.update({
        (t, p): ErrorCode.unknown_topic_or_partition for t, p, *_ in offsets
        if (t, p) not in results and (t not in known or p not in known[t].partitions)})
    wanted = [o for o in offsets if (o[0], o[1]) not in results]
    if wanted:
        # The group's partition must be in the producer's ongoing transaction
        # (AddOffsetsToTxn), and the producer current: otherwise nothing is written
        # (KIP-890 part 1, as for transactional produce). From v5 (transactions v2) the
        # partition is added here instead, as a v2 client sends no AddOffsetsToTxn.
        offsets_partition = (OFFSETS_TOPIC, partition_for(
            req.group_id, broker.group_coordinator.num_partitions))
        add = ctx.api_version >= 5
        hosted = broker.replica_manager.partitions.get(offsets_partition)
        verification = broker.txn_verification
        answer = (await verification.verify(
            req.transactional_id, req.producer_id, req.producer_epoch,
            {offsets_partition: hosted}, add=add))[offsets_partition]
        error = answer.error
        if error == ErrorCode.none and hosted is not None and \
                not verification.guard_holds(hosted, req.producer_id, answer.guard):
            # The transaction ended while the answer was on the wire: written now, the
            # offsets would stay pending forever.
            error = ErrorCode.transaction_abortable
        if error != ErrorCode.none:
            error = _VERIFY_ERRORS.get(error, error)
            if error == ErrorCode.transaction_abortable and ctx.api_version < 4:
                error = ErrorCode.invalid_txn_state
            results.update({(t, p): error for t, p, *_ in wanted})
            wanted = []
    if wanted:
        generation = getattr(req, "generation_id", -1)
        member_id = getattr(req, "member_id", "")
        instance_id = getattr(req, "group_instance_id", None)
        try:
            answer = await broker.group_coordinator.write(
                req.group_id, lambda shard, now: shard.txn_commit_offsets(
                    now, req.group_id, req.producer_id, req.producer_epoch, generation,
                    member_id, instance_id, wanted))
            results.update(answer)
        except KafkaError as e:
            results.update({(t, p): e.code for t, p, *_ in wanted})
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t, p, *_ in offsets:
        by_topic[t].append({"partition_index": p, "error_code": results[(t, p)]})
    return {"throttle_time": 0, "topics": [{"name": t, "partitions": ps}
                                           for t, ps in by_topic.items()]}


# --- WriteTxnMarkers --------------------------------------------------------------------

async def handle_write_txn_markers(broker: Broker, ctx: RequestContext, req: Any
                                   ) -> dict[str, Any]:
    """Append each marker to each partition this broker leads and answer once the
    in-sync replicas have them (the coordinator completes the transaction only then)."""
    if not authorize_cluster(ctx, ALTER, log_if_denied=False) and \
            not authorize_cluster(ctx, CLUSTER_ACTION):
        raise KafkaError(ErrorCode.cluster_authorization_failed, MSG_CLUSTER)
    replica_manager = broker.replica_manager
    now_ms = broker.now_ms()
    results: list[tuple[int, dict[TopicPartition, ErrorCode]]] = []
    waiting: dict[TopicPartition, ProducePartitionStatus] = {}
    parked: list[tuple[dict[TopicPartition, ErrorCode], TopicPartition]] = []
    for marker in req.markers:
        errors: dict[TopicPartition, ErrorCode] = {}
        for topic in marker.topics:
            for index in topic.partition_indexes:
                tp = (topic.name, index)
                try:
                    partition = replica_manager.require(topic.name, index, broker.image)
                    info = replica_manager.append_marker(
                        partition, marker.producer_id, marker.producer_epoch,
                        marker.transaction_result, marker.coordinator_epoch, now_ms,
                        broker.topic_stats)
                    errors[tp] = ErrorCode.none
                    if partition.high_watermark <= info.last_offset:
                        waiting[tp] = ProducePartitionStatus(
                            info.last_offset + 1, partition.leader_epoch, 1)
                        parked.append((errors, tp))
                    if topic.name == OFFSETS_TOPIC:
                        broker.group_coordinator.transaction_ended(
                            tp, marker.producer_id, marker.transaction_result,
                            info.first_offset)
                except KafkaError as e:
                    errors[tp] = e.code
                    if broker.topic_stats is not None:  # Kafka's append counts it too
                        broker.topic_stats.produced(topic.name, e.code, 0, 0)
        results.append((marker.producer_id, errors))
    if waiting:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def respond(statuses: dict[TopicPartition, ProducePartitionStatus]) -> None:
            for errors, tp in parked:
                if statuses[tp].error != ErrorCode.none:
                    errors[tp] = statuses[tp].error
            if not done.done():
                done.set_result(None)

        replica_manager.produce_purgatory.try_complete_else_watch(
            DelayedProduce(now_ms + MARKER_TIMEOUT_MS, waiting, replica_manager.partitions.get,
                           respond), waiting, now_ms)
        await done
    return {"markers": [
        {"producer_id": producer_id, "topics": [
            {"name": topic, "partitions": [{"partition_index": index, "error_code": error}
                                           for (t, index), error in errors.items()
                                           if t == topic]}
            for topic in dict.fromkeys(t for t, _ in errors)]}
        for producer_id, errors in results]}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, handle_add_partitions_to_txn),
    ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, handle_add_offsets_to_txn),
    ApiSpec(ApiKey.END_TXN, 0, 5, handle_end_txn),
    ApiSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 5, handle_txn_offset_commit),
    ApiSpec(ApiKey.WRITE_TXN_MARKERS, 1, 1, handle_write_txn_markers),  # v0 gone (KIP-896)
]
