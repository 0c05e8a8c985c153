"""InitProducerId (idempotent producers, and transactional ones through their transaction
coordinator) and DescribeProducers.

Authorization (Kafka's KafkaApis): a transactional producer needs WRITE on its
transactional id; an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic
(KIP-679: ``authorizeByResourceType``), else CLUSTER_AUTHORIZATION_FAILED.
DescribeProducers needs READ on each topic."""

from __future__ import annotations

import logging
from typing import Any

from ottla.broker.broker import Broker
from ottla.common.topics import topic_name_problem
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import ms
from ottla.protocol.requests import ApiSpec, CloseConnection, RequestContext
from ottla.security.auth_helper import (
    IDEMPOTENT_WRITE,
    MSG_TOPIC,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
    authorized_names,
)

log = logging.getLogger(__name__)


def _refused(error: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}


async def handle_init_producer_id(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.transactional_id is not None:
        if not authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            return _refused(ErrorCode.transactional_id_authorization_failed)
    elif not authorize_cluster(ctx, IDEMPOTENT_WRITE, log_if_denied=False) and \
            not authorize_by_resource_type(ctx, WRITE, TOPIC):
        return _refused(ErrorCode.cluster_authorization_failed)
    if req.transactional_id is not None:
        expected = None
        if getattr(req, "producer_id", -1) >= 0:
            expected = (req.producer_id, req.producer_epoch)  # KIP-360: a producer recovers
        try:
            answer = await broker.transaction_coordinator.init_producer_id(
                req.transactional_id, ms(req.transaction_timeout), expected)
        except KafkaError as e:
            return {"throttle_time": 0, "error_code": e.code, "producer_id": -1,
                    "producer_epoch": -1}
        return {"throttle_time": 0, "error_code": answer.error,
                "producer_id": answer.producer_id, "producer_epoch": answer.producer_epoch}
    try:
        producer_id = await broker.producer_ids.generate(broker.broker_epoch)
    except (KafkaError, ConnectionError, CloseConnection) as e:
        # No block of ids from the controller yet: retriable, as Kafka answers it.
        log.info("No producer id for %s: %s", ctx.client_id, e)
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress,
                "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": producer_id,
            "producer_epoch": 0}


def handle_describe_producers(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """The active producers of each partition this broker hosts, leader or follower: a
    follower's producer state comes from the batches it replicated, and Kafka's
    ``ReplicaManager.activeProducerState`` does not require leadership either. A broker
    hosting no replica of a known partition answers NOT_LEADER_OR_FOLLOWER."""
    topics = []
    readable = authorized_names(ctx, READ, TOPIC, (t.name for t in req.topics))
    for topic in req.topics:
        partitions = []
        for index in topic.partition_indexes:
            result: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.none,
                                      "error_message": None, "active_producers": []}
            try:
                if topic_name_problem(topic.name) is not None:
                    raise KafkaError(ErrorCode.invalid_topic_exception,
                                     topic_name_problem(topic.name))
                if topic.name not in readable:
                    raise KafkaError(ErrorCode.topic_authorization_failed, MSG_TOPIC)
                partition = broker.replica_manager.require(topic.name, index, broker.image)
                for entry in partition.log.producer_state.producers.values():
                    txn_start = entry.current_txn_first_offset
                    result["active_producers"].append({
                        "producer_id": entry.producer_id,
                        "producer_epoch": entry.producer_epoch,
                        "last_sequence": entry.last_seq,
                        "last_timestamp": entry.last_timestamp,
                        "coordinator_epoch": entry.coordinator_epoch,
                        "current_txn_start_offset": -1 if txn_start is None else txn_start,
                    })
            except KafkaError as e:
                result["error_code"] = e.code
                result["error_message"] = e.message
            partitions.append(result)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 5, handle_init_producer_id),
    ApiSpec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle_describe_producers),
]
