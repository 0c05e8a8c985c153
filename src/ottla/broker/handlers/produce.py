"""Produce: validate each partition's batch, append it, answer per partition."""

from __future__ import annotations

from typing import Any

from ottla.broker.context import NO_RESPONSE, CloseConnection
from ottla.broker.handlers import handles
from ottla.controller.quorum_controller import is_internal_topic
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.produce_response import encode_produce_response


@handles(ApiKey.PRODUCE, 3, 13)
def handle_produce(broker: Any, ctx: Any, req: Any) -> Any:
    acks = req.acks
    image = broker.image
    replica_manager = broker.replica_manager
    now_ms = broker.now_ms()
    responses = []
    failed = False
    for topic_data in req.topic_data:
        name = getattr(topic_data, "name", None)
        topic_id = getattr(topic_data, "topic_id", None)
        unknown_error = ErrorCode.unknown_topic_or_partition
        if name is None:
            topic = image.topics_by_id.get(topic_id)
            name = topic.name if topic is not None else None
            unknown_error = ErrorCode.unknown_topic_id
        partitions = []
        for pdata in topic_data.partition_data:
            result = {"index": pdata.index, "error_code": ErrorCode.none, "base_offset": -1,
                      "log_append_time": None, "log_start_offset": -1, "record_errors": [],
                      "error_message": None}
            try:
                if acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.invalid_required_acks,
                                     f"Invalid required acks {acks}")
                if name is None:
                    raise KafkaError(unknown_error, "Unknown topic id")
                if is_internal_topic(name):
                    # Only the broker's coordinators write their own topics.
                    raise KafkaError(ErrorCode.invalid_topic_exception,
                                     f"Cannot append to internal topic {name}")
                if req.transactional_id is not None:
                    raise KafkaError(ErrorCode.transactional_id_authorization_failed,
                                     "Transactions are not supported yet")
                partition = replica_manager.require(name, pdata.index, image)
                info = replica_manager.append(partition, pdata.records, acks, now_ms)
                result["base_offset"] = info.first_offset
                result["log_append_time"] = info.log_append_time if info.log_append_time >= 0 \
                    else None
                result["log_start_offset"] = info.log_start_offset
            except KafkaError as e:
                failed = True
                result["error_code"] = e.code
                result["error_message"] = e.message
                if e.code == ErrorCode.not_leader_or_follower:
                    result["current_leader"] = {"leader_id": -1, "leader_epoch": -1}
            partitions.append(result)
        responses.append({"name": name or "", "topic_id": topic_id,
                          "partition_responses": partitions})
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return NO_RESPONSE
    return encode_produce_response(ctx.api_version, {
        "responses": responses, "throttle_time": 0, "node_endpoints": []})
