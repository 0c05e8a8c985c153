"""Transaction administration (KIP-664): DescribeTransactions, answered by the coordinator
of each transactional id, and ListTransactions, which every broker answers for the
``__transaction_state`` partitions it leads (the admin client asks them all). They are
what ``kafka-transactions.sh`` (``ottla transactions``) uses to find hanging
transactions: open on a partition, unknown to their coordinator.

Authorization (Kafka's KafkaApis): a transaction is described or listed only to a
principal with DESCRIBE on its transactional id (DescribeTransactions answers the others
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ListTransactions leaves them out), and a described
transaction shows only the topics the principal may DESCRIBE."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ottla.broker.broker import Broker
from ottla.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    DESCRIBE,
    TOPIC,
    TRANSACTIONAL_ID,
    authorize,
    authorized_names,
    enabled,
)

STATES_BY_NAME = {state.kafka_name: state for state in TransactionState}


# --- DescribeTransactions -----------------------------------------------------------------

def _described(transactional_id: str, error: ErrorCode,
               md: TransactionMetadata | None = None) -> dict[str, Any]:
    if md is None:  # the other fields as Kafka leaves them: their defaults
        return {"error_code": error, "transactional_id": transactional_id,
                "transaction_state": "", "transaction_timeout": 0,
                "transaction_start_time": 0, "producer_id": 0, "producer_epoch": 0,
                "topics": []}
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, index in sorted(md.partitions):
        by_topic[topic].append(index)
    return {"error_code": error, "transactional_id": transactional_id,
            "transaction_state": md.state.kafka_name, "transaction_timeout": md.timeout_ms,
            "transaction_start_time": md.start_ms, "producer_id": md.producer_id,
            "producer_epoch": md.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


async def _describe(broker: Broker, transactional_id: str) -> dict[str, Any]:
    """Kafka's ``handleDescribeTransactions``: an id being expired (Dead) is not found."""
    service = broker.transaction_coordinator
    if service is None:
        return _described(transactional_id, ErrorCode.coordinator_not_available)
    if not transactional_id:
        return _described(transactional_id, ErrorCode.invalid_request)
    try:
        md = await service.describe_transaction(transactional_id)
    except KafkaError as e:
        return _described(transactional_id, e.code)
    if md.state is TransactionState.DEAD:
        return _described(transactional_id, ErrorCode.transactional_id_not_found)
    return _described(transactional_id, ErrorCode.none, md)


async def handle_describe_transactions(broker: Broker, ctx: RequestContext, req: Any
                                       ) -> dict[str, Any]:
    states = []
    for transactional_id in req.transactional_ids:
        if not authorize(ctx, DESCRIBE, TRANSACTIONAL_ID, transactional_id):
            states.append(_described(transactional_id,
                                     ErrorCode.transactional_id_authorization_failed))
            continue
        described = await _describe(broker, transactional_id)
        if enabled(ctx) and described["topics"]:
            shown = authorized_names(ctx, DESCRIBE, TOPIC,
                                     (t["topic"] for t in described["topics"]))
            described["topics"] = [t for t in described["topics"] if t["topic"] in shown]
        states.append(described)
    return {"throttle_time": 0, "transaction_states": states}


# --- ListTransactions ---------------------------------------------------------------------

def list_transactions(transactions: Iterable[TransactionMetadata], state_filters: list[str],
                      producer_id_filters: list[int], duration_filter_ms: int, now_ms: int
                      ) -> tuple[list[TransactionMetadata], list[str]]:
    """Kafka's ``listTransactionStates`` filters: the listed transactions and the state
    names the coordinator does not know. A filter with only unknown names matches
    nothing; ``duration_filter_ms >= 0`` keeps transactions started longer ago than it
    (KIP-994; an id that never started one counts as started at -1, as in Kafka)."""
    unknown = [name for name in state_filters if name not in STATES_BY_NAME]
    states = {STATES_BY_NAME[name] for name in state_filters if name in STATES_BY_NAME}
    producer_ids = set(producer_id_filters)
    listed = [md for md in transactions
              if md.state is not TransactionState.DEAD
              and (not producer_ids or md.producer_id in producer_ids)
              and (not state_filters or md.state in states)
              and not (duration_filter_ms >= 0 and now_ms - md.start_ms <= duration_filter_ms)]
    return listed, unknown


async def handle_list_transactions(broker: Broker, ctx: RequestContext, req: Any
                                   ) -> dict[str, Any]:
    empty = {"throttle_time": 0, "unknown_state_filters": [], "transaction_states": []}
    service = broker.transaction_coordinator
    if service is None:
        return {**empty, "error_code": ErrorCode.coordinator_not_available}
    try:
        every = await service.transaction_states()
    except KafkaError as e:
        return {**empty, "error_code": e.code}
    listed, unknown = list_transactions(
        every, list(req.state_filters), list(req.producer_id_filters),
        getattr(req, "duration_filter", -1), broker.now_ms())
    if enabled(ctx):
        shown = authorized_names(ctx, DESCRIBE, TRANSACTIONAL_ID,
                                 (md.transactional_id for md in listed))
        listed = [md for md in listed if md.transactional_id in shown]
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "unknown_state_filters": unknown, "transaction_states": [
                {"transactional_id": md.transactional_id, "producer_id": md.producer_id,
                 "transaction_state": md.state.kafka_name} for md in listed]}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, handle_describe_transactions),
    ApiSpec(ApiKey.LIST_TRANSACTIONS, 0, 1, handle_list_transactions),
]
