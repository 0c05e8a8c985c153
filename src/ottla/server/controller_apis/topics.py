"""CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders and the partition
reassignments: run on the active controller, to which brokers forward them.

Authorization, as Kafka's ControllerApis: CreateTopics needs CREATE on the cluster or on
each topic (a denied topic is not created: TOPIC_AUTHORIZATION_FAILED "Authorization
failed."), and returns a created topic's configs only with DESCRIBE_CONFIGS on it;
DeleteTopics needs DESCRIBE then DELETE on each topic (or DELETE on the cluster);
CreatePartitions ALTER on each topic; ElectLeaders and AlterPartitionReassignments ALTER
on the cluster, ListPartitionReassignments DESCRIBE.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from ottla.broker.handlers.configs import describe_topic_configs
from ottla.common.topics import METADATA_TOPIC, NewTopic
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import (
    ALTER,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    MSG_TOPIC,
    TOPIC,
    authorize,
    authorize_cluster,
    authorized_names,
    deny_cluster,
)
from ottla.server.controller_apis.services import ControllerServices

ZERO_UUID = uuid.UUID(int=0)


def _refused_topic(name: str, error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": error,
            "error_message": message, "topic_config_error_code": 0, "num_partitions": -1,
            "replication_factor": -1, "configs": []}


async def handle_create_topics(controller: ControllerServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    named = Counter(t.name for t in req.topics)
    creatable = authorize_cluster(ctx, CREATE, log_if_denied=False)
    refused: dict[int, dict[str, Any]] = {}
    for i, t in enumerate(req.topics):
        if named[t.name] > 1:
            refused[i] = _refused_topic(t.name, ErrorCode.invalid_request,
                                        "Duplicate topic name.")
        elif t.name == METADATA_TOPIC:
            refused[i] = _refused_topic(t.name, ErrorCode.invalid_request,
                                        f"Creation of internal topic {METADATA_TOPIC} is "
                                        "prohibited.")
        elif not creatable and not authorize(ctx, CREATE, TOPIC, t.name):
            refused[i] = _refused_topic(t.name, ErrorCode.topic_authorization_failed,
                                        "Authorization failed.")
    new_topics = [NewTopic(
        name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
        assignments={a.partition_index: list(a.broker_ids) for a in t.assignments} or None,
        configs={c.name: c.value for c in t.configs})
        for i, t in enumerate(req.topics) if i not in refused]
    validate_only = req.validate_only
    quota = controller.mutation_quota(ctx, strict_since=6)
    charge = controller.partition_change_quota(quota)
    results = await controller.channel.submit(
        lambda c: c.replication.create_topics(new_topics, validate_only, charge)
    ) if new_topics else []
    created = iter(zip(new_topics, results))
    topics = []
    for i in range(len(req.topics)):
        if i in refused:
            if not _repeated(req.topics, i, named):
                topics.append(refused[i])
            continue
        new, result = next(created)
        entry: dict[str, Any] = {
            "name": result.name, "topic_id": result.topic_id, "error_code": result.error,
            "error_message": result.message, "topic_config_error_code": 0,
            "num_partitions": result.num_partitions,
            "replication_factor": result.replication_factor, "configs": [],
        }
        if result.error == ErrorCode.none:
            if not authorize(ctx, DESCRIBE_CONFIGS, TOPIC, new.name, log_if_denied=False):
                # Created, but its configs are not the principal's to see.
                entry.update(topic_config_error_code=ErrorCode.topic_authorization_failed,
                             num_partitions=-1, replication_factor=-1, configs=[])
            elif validate_only:
                entry["configs"] = _configs_for_new_topic(controller, new)
            else:
                entry["configs"] = describe_topic_configs(controller, new.name)
        topics.append(entry)
    return {"throttle_time": controller.throttle(ctx, quota), "topics": topics}


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
    if not controller.config["delete.topic.enable"]:
        # Kafka refuses the whole request before looking at any topic.
        raise KafkaError(ErrorCode.invalid_request if ctx.api_version < 3
                         else ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
    if ctx.api_version >= 6:
        names = [t.name for t in req.topics]
        ids = [t.topic_id if t.topic_id is not None and t.topic_id.int else None
               for t in req.topics]
    else:
        names = list(req.topic_names)
        ids = [None] * len(names)
    malformed, repeated = _malformed_deletions(names, ids)
    checked = [i for i in range(len(names)) if i not in malformed and i not in repeated]
    refused = _undeletable(controller, ctx, [names[i] for i in checked],
                           [ids[i] for i in checked])
    refused = {checked[j]: answer for j, answer in refused.items()}
    refused.update(malformed)
    kept = [i for i in range(len(names)) if i not in refused and i not in repeated]
    quota = controller.mutation_quota(ctx, strict_since=5)
    charge = controller.partition_change_quota(quota)
    results = await controller.channel.submit(lambda c: c.replication.delete_topics(
        [names[i] for i in kept], [ids[i] for i in kept], charge)) if kept else []
    answers = dict(zip(kept, results))
    answers.update(refused)
    return {"throttle_time": controller.throttle(ctx, quota), "responses": [
        {"name": name, "topic_id": topic_id, "error_code": code, "error_message": msg}
        for name, topic_id, code, msg in (answers[i] for i in range(len(names))
                                          if i not in repeated)]}


def _malformed_deletions(names: list[str | None], ids: list[uuid.UUID | None]
                         ) -> tuple[dict[int, tuple[str | None, uuid.UUID, ErrorCode, str]],
                                    set[int]]:
    """Entries Kafka's ControllerApis refuses before anything else: neither or both of a
    name and an id, and a name or id given twice (answered once, INVALID_REQUEST, nothing
    deleted). Returns those answers by entry, and the later entries of a repeated name or
    id, which get no answer of their own."""
    invalid = ErrorCode.invalid_request
    answers: dict[int, tuple[str | None, uuid.UUID, ErrorCode, str]] = {}
    first: dict[str | uuid.UUID, int] = {}
    repeated: set[int] = set()
    for i, (name, topic_id) in enumerate(zip(names, ids)):
        if name is None and topic_id is None:
            answers[i] = (None, ZERO_UUID, invalid, "Neither topic name nor id were specified.")
        elif name is not None and topic_id is not None:
            answers[i] = (name, topic_id, invalid,
                          "You may not specify both topic name and topic id.")
        else:
            key: str | uuid.UUID
            if name is not None:
                key, answer = name, (name, ZERO_UUID, invalid, "Duplicate topic name.")
            else:
                assert topic_id is not None
                key, answer = topic_id, (None, topic_id, invalid, "Duplicate topic id.")
            if key in first:
                repeated.add(i)
                answers[first[key]] = answer
            else:
                first[key] = i
    return answers, repeated


def _undeletable(controller: ControllerServices, ctx: RequestContext,
                 names: list[str | None], ids: list[uuid.UUID | None]
                 ) -> dict[int, tuple[str | None, uuid.UUID, ErrorCode, str]]:
    """The entries the principal may not delete, answered as Kafka answers them: a topic
    must be describable (else its existence is not told: by name, refused before it is
    looked up; by id, refused without its name) and deletable; DELETE on the cluster
    allows both. As Kafka's ControllerApis, both are asked once for every name given and
    every name a known id resolves to (so both are audited), whether or not it exists."""
    if authorize_cluster(ctx, DELETE, log_if_denied=False):
        return {}
    image = controller.image
    resolved: list[str | None] = []
    for name, topic_id in zip(names, ids):
        topic = image.topics_by_id.get(topic_id) if name is None and topic_id else None
        resolved.append(topic.name if topic is not None else name)
    asked = [name for name in resolved if name is not None]
    describable = authorized_names(ctx, DESCRIBE, TOPIC, set(asked))
    deletable = authorized_names(ctx, DELETE, TOPIC, set(asked))
    denied = ErrorCode.topic_authorization_failed
    refused = {}
    for i, (name, topic_id) in enumerate(zip(names, ids)):
        if name is not None:
            if name not in describable or (name in image.topics_by_name
                                           and name not in deletable):
                refused[i] = (name, ZERO_UUID, denied, MSG_TOPIC)
        elif topic_id is not None:
            found = resolved[i]
            if found is None or found in deletable:
                continue  # unknown ids are the controller's to answer
            shown = found if found in describable else None
            refused[i] = (shown, topic_id, denied, MSG_TOPIC)
    return refused


async def handle_create_partitions(controller: ControllerServices, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    named = Counter(t.name for t in req.topics)
    refused: dict[int, tuple[str, ErrorCode, str | None]] = {}
    for i, t in enumerate(req.topics):
        if named[t.name] > 1:
            refused[i] = (t.name, ErrorCode.invalid_request, "Duplicate topic name.")
        elif not authorize(ctx, ALTER, TOPIC, t.name):
            refused[i] = (t.name, ErrorCode.topic_authorization_failed, None)
    kept = [i for i in range(len(req.topics)) if i not in refused]
    requests = [(t.name, t.count,
                 [list(a.broker_ids) for a in t.assignments] if t.assignments else None)
                for t in (req.topics[i] for i in kept)]
    quota = controller.mutation_quota(ctx, strict_since=3)
    charge = controller.partition_change_quota(quota)
    results = await controller.channel.submit(
        lambda c: c.replication.create_partitions(requests, req.validate_only, charge)) \
        if requests else []
    answers = dict(zip(kept, results))
    answers.update(refused)
    return {"throttle_time": controller.throttle(ctx, quota), "results": [
        {"name": name, "error_code": code, "error_message": msg}
        for name, code, msg in (answers[i] for i in range(len(req.topics))
                                if not _repeated(req.topics, i, named))]}


def _repeated(topics: Any, i: int, named: Counter[str]) -> bool:
    """Whether entry ``i`` names a topic an earlier entry named: Kafka answers a name given
    twice once ("Duplicate topic name."), not once per entry."""
    name = topics[i].name
    return named[name] > 1 and any(t.name == name for t in topics[:i])


async def handle_elect_leaders(controller: ControllerServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    """Preferred or unclean leader elections, decided by the controller."""
    denied = deny_cluster(ctx, req, ALTER, every_entry=True)
    if denied is not None:
        return denied
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
    denied = deny_cluster(ctx, req, ALTER, every_entry=True)
    if denied is not None:
        return denied
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
    denied = deny_cluster(ctx, req, DESCRIBE, every_entry=True)
    if denied is not None:
        return denied
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
