"""CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders: run on the active
controller, to which brokers forward them."""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.configs import describe_topic_configs
from ottla.common.topics import NewTopic
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.server.controller_apis.services import ControllerServices


async def handle_create_topics(controller: ControllerServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    new_topics = [NewTopic(
        name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
        assignments={a.partition_index: list(a.broker_ids) for a in t.assignments} or None,
        configs={c.name: c.value for c in t.configs}) for t in req.topics]
    validate_only = req.validate_only
    results = await controller.channel.submit(
        lambda c: c.replication.create_topics(new_topics, validate_only))
    topics = []
    for new, result in zip(new_topics, results):
        entry: dict[str, Any] = {
            "name": result.name, "topic_id": result.topic_id, "error_code": result.error,
            "error_message": result.message, "topic_config_error_code": 0,
            "num_partitions": result.num_partitions,
            "replication_factor": result.replication_factor, "configs": None,
        }
        if result.error == ErrorCode.none:
            if validate_only:
                entry["configs"] = _configs_for_new_topic(controller, new)
            else:
                entry["configs"] = describe_topic_configs(controller, new.name)
        topics.append(entry)
    return {"throttle_time": 0, "topics": topics}


def _configs_for_new_topic(controller: ControllerServices, new: NewTopic) -> list[dict[str, Any]]:
    """What a validate_only create reports: the defaults with the requested overrides."""
    configs = []
    for entry in describe_topic_configs(controller, new.name):
        if new.configs.get(entry["name"]) is not None:
            entry = dict(entry, value=new.configs[entry["name"]], config_source=1)
        configs.append(entry)
    return configs


async def handle_delete_topics(controller: ControllerServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    if ctx.api_version >= 6:
        names = [t.name for t in req.topics]
        ids = [t.topic_id if t.topic_id is not None and t.topic_id.int else None
               for t in req.topics]
    else:
        names = list(req.topic_names)
        ids = [None] * len(names)
    results = await controller.channel.submit(lambda c: c.replication.delete_topics(names, ids))
    return {"throttle_time": 0, "responses": [
        {"name": name, "topic_id": topic_id, "error_code": code, "error_message": msg}
        for name, topic_id, code, msg in results]}


async def handle_create_partitions(controller: ControllerServices, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    requests = [(t.name, t.count,
                 [list(a.broker_ids) for a in t.assignments] if t.assignments else None)
                for t in req.topics]
    results = await controller.channel.submit(
        lambda c: c.replication.create_partitions(requests, req.validate_only))
    return {"throttle_time": 0, "results": [
        {"name": name, "error_code": code, "error_message": msg}
        for name, code, msg in results]}


async def handle_elect_leaders(controller: ControllerServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    """Preferred or unclean leader elections, decided by the controller."""
    election_type = getattr(req, "election_type", 0)
    if election_type not in (0, 1):
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request,
                "replica_election_results": []}
    wanted = None if req.topic_partitions is None else [
        (tp.topic, p) for tp in req.topic_partitions for p in tp.partitions]
    results = await controller.channel.submit(
        lambda c: c.replication.elect_leaders(election_type, wanted))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (error, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": partition, "error_code": error, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "replica_election_results": [{"topic": t, "partition_result": parts}
                                         for t, parts in by_topic.items()]}


async def handle_alter_partition_reassignments(controller: ControllerServices,
                                              ctx: RequestContext, req: Any) -> dict[str, Any]:
    """Start or cancel partition reassignments (KIP-455), decided by the controller."""
    wanted = [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
              for t in req.topics for p in t.partitions]
    allow = getattr(req, "allow_replication_factor_change", True)
    results = await controller.channel.submit(
        lambda c: c.replication.alter_partition_reassignments(wanted, allow))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (error, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": error, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "allow_replication_factor_change": allow,
            "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


async def handle_list_partition_reassignments(controller: ControllerServices,
                                             ctx: RequestContext, req: Any) -> dict[str, Any]:
    """The reassignments in progress (of the partitions named, or all)."""
    wanted = None if req.topics is None else [
        (t.name, p) for t in req.topics for p in t.partition_indexes]
    found = await controller.channel.submit(
        lambda c: c.replication.list_partition_reassignments(wanted))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (replicas, adding, removing) in sorted(found.items()):
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "replicas": replicas, "adding_replicas": adding,
             "removing_replicas": removing})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics),
    ApiSpec(ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics),
    ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions),
    ApiSpec(ApiKey.ELECT_LEADERS, 0, 2, handle_elect_leaders),
    ApiSpec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, handle_alter_partition_reassignments),
    ApiSpec(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, handle_list_partition_reassignments),
]
