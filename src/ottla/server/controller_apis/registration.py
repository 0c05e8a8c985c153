"""BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds and
AssignReplicasToDirs: what brokers ask of the controller (KIP-631, KIP-497, KIP-730,
KIP-858); ControllerRegistration, what each controller tells the active one of itself
(KIP-919); and UnregisterBroker, an operator forgetting a broker (KIP-500's
kafka-cluster unregister), which needs ALTER on the cluster instead.

Served on the controller listener. A broker registers (fenced, with an incarnation id, its
listeners and its log dirs' ids) and gets its broker epoch, the offset of its
registration record; its heartbeats keep the session alive, ask to be unfenced once its
metadata has caught up to that offset, and name the log dirs that went offline (whose
partitions then lose it from their ISR and as leader). A broker silent for
``broker.session.timeout.ms`` is fenced and its partitions lose it as leader. A broker
with several log dirs says in which it put each new replica (AssignReplicasToDirs).

Each needs CLUSTER_ACTION on the cluster (the brokers' principals: make them super users);
a denied request gets CLUSTER_AUTHORIZATION_FAILED at its top level.
"""

from __future__ import annotations

import uuid
from typing import Any

from ottla.controller.replication_control import DirectoryAssignment
from ottla.controller.results import ControllerError
from ottla.metadata.isr_change import UNKNOWN_BROKER_EPOCH, IsrChange
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import ALTER, CLUSTER_ACTION, deny_cluster
from ottla.server.controller_apis.services import ControllerServices


async def handle_broker_registration(controller: ControllerServices, ctx: RequestContext,
                                     req: Any) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    if req.cluster_id != controller.cluster_id:
        return {"throttle_time": 0, "error_code": ErrorCode.inconsistent_cluster_id,
                "broker_epoch": -1}
    endpoints = [(ln.name, ln.host, ln.port, ln.security_protocol) for ln in req.listeners]
    channel = controller.channel
    try:
        epoch = await channel.submit(lambda c: c.cluster.register_broker(
            req.broker_id, req.incarnation_id, endpoints, req.rack, channel.next_offset(),
            now_ms=controller.session_ms(), unfence=False,
            previous_broker_epoch=getattr(req, "previous_broker_epoch", -1),
            log_dirs=[d for d in getattr(req, "log_dirs", ()) if d is not None],
            features=[(f.name, f.min_supported_version, f.max_supported_version)
                      for f in req.features]))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "broker_epoch": -1}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "broker_epoch": epoch}


async def handle_controller_registration(controller: ControllerServices,
                                         ctx: RequestContext, req: Any) -> dict[str, Any]:
    """A controller registers where it listens (KIP-919, Kafka's
    ``ControllerApis.handleControllerRegistration``): a RegisterControllerRecord, answered
    once committed."""
    denied = deny_cluster(ctx, req, CLUSTER_ACTION)
    if denied is not None:
        return denied
    endpoints = [(ln.name, ln.host, ln.port, ln.security_protocol) for ln in req.listeners]
    features = [(f.name, f.min_supported_version, f.max_supported_version)
                for f in req.features]
    try:
        await controller.channel.submit(lambda c: c.cluster.register_controller(
            req.controller_id, req.incarnation_id, endpoints, features))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": e.message}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}


def _cordoned(req: Any) -> list[uuid.UUID] | None:
    """BrokerHeartbeat v2's cordoned log dirs (KIP-1066); None when not sent."""
    dirs = getattr(req, "cordoned_log_dirs", None)
    return None if dirs is None else [d for d in dirs if d is not None]


async def handle_broker_heartbeat(controller: ControllerServices, ctx: RequestContext,
                                  req: Any) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    try:
        reply = await controller.channel.submit(lambda c: c.cluster.broker_heartbeat(
            req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
            req.want_shut_down, controller.session_ms(),
            [d for d in getattr(req, "offline_log_dirs", ()) if d is not None],
            _cordoned(req)))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "is_caught_up": False,
                "is_fenced": True, "should_shut_down": False}
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "is_caught_up": reply.is_caught_up, "is_fenced": reply.is_fenced,
            "should_shut_down": reply.should_shut_down}


async def handle_alter_partition(controller: ControllerServices, ctx: RequestContext,
                                 req: Any) -> dict[str, Any]:
    """A partition leader changes its ISR (the controller validates epochs and members)."""
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    changes = []
    for topic in req.topics:
        for p in topic.partitions:
            if ctx.api_version >= 3:
                isr = tuple((b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs)
            else:
                isr = tuple((b, UNKNOWN_BROKER_EPOCH) for b in p.new_isr)
            changes.append(IsrChange(topic.topic_id, p.partition_index, p.leader_epoch, isr,
                                     p.leader_recovery_state, p.partition_epoch))
    try:
        error, results = await controller.channel.submit(
            lambda c: c.replication.alter_partition(req.broker_id, req.broker_epoch, changes))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "topics": []}
    topics: dict[Any, list[dict[str, Any]]] = {}
    for (topic_id, partition), res in results.items():
        topics.setdefault(topic_id, []).append({
            "partition_index": partition, "error_code": res.error, "leader_id": res.leader,
            "leader_epoch": res.leader_epoch, "isr": res.isr,
            "leader_recovery_state": res.leader_recovery_state,
            "partition_epoch": res.partition_epoch})
    return {"throttle_time": 0, "error_code": error,
            "topics": [{"topic_id": t, "partitions": parts} for t, parts in topics.items()]}


async def handle_allocate_producer_ids(controller: ControllerServices, ctx: RequestContext,
                                       req: Any) -> dict[str, Any]:
    """A block of producer ids for a broker's idempotent and transactional producers."""
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    try:
        start, length = await controller.channel.submit(
            lambda c: c.producer_ids.allocate_producer_ids(req.broker_id, req.broker_epoch))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "producer_id_start": -1,
                "producer_id_len": 0}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id_start": start,
            "producer_id_len": length}


async def handle_assign_replicas_to_dirs(controller: ControllerServices, ctx: RequestContext,
                                         req: Any) -> dict[str, Any]:
    """A broker with several log dirs says in which it put replicas (KIP-858, Kafka's
    ``ControllerApis.handleAssignReplicasToDirs``)."""
    denied = deny_cluster(ctx, req, CLUSTER_ACTION, None)
    if denied is not None:
        return denied
    assignments = [DirectoryAssignment(d.id_, [(t.topic_id, [p.partition_index
                                                              for p in t.partitions])
                                               for t in d.topics])
                   for d in req.directories]
    try:
        results = await controller.channel.submit(
            lambda c: c.replication.assign_replicas_to_dirs(req.broker_id, req.broker_epoch,
                                                            assignments))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "directories": []}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "directories": [
        {"id_": result.directory, "topics": [
            {"topic_id": topic_id, "partitions": [
                {"partition_index": index, "error_code": error} for index, error in answers]}
            for topic_id, answers in result.topics]}
        for result in results]}


async def handle_unregister_broker(controller: ControllerServices, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    """Kafka's ``ControllerApis.handleUnregisterBroker``: the controller's error and its
    message ("Broker ID 7 is not currently registered"), as Kafka 4.4 answers."""
    denied = deny_cluster(ctx, req, ALTER)
    if denied is not None:
        return denied
    broker_id = req.broker_id
    try:
        await controller.channel.submit(lambda c: c.cluster.unregister_broker(broker_id))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": e.message}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}


async def handle_unregister_controller(controller: ControllerServices, ctx: RequestContext,
                                       req: Any) -> dict[str, Any]:
    """Kafka's ``ControllerApis.handleUnregisterController`` (KIP-1220, kafka-cluster
    unregister-controller): ALTER on the cluster, then the active controller's answer."""
    denied = deny_cluster(ctx, req, ALTER)
    if denied is not None:
        return denied
    controller_id = req.controller_id
    try:
        await controller.channel.submit(
            lambda c: c.cluster.unregister_controller(controller_id, c.node_id))
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": e.message}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.BROKER_REGISTRATION, 0, 4, handle_broker_registration),
    ApiSpec(ApiKey.BROKER_HEARTBEAT, 0, 2, handle_broker_heartbeat),
    ApiSpec(ApiKey.ALTER_PARTITION, 2, 3, handle_alter_partition),
    ApiSpec(ApiKey.ALLOCATE_PRODUCER_IDS, 0, 0, handle_allocate_producer_ids),
    ApiSpec(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, 0, handle_assign_replicas_to_dirs),
    ApiSpec(ApiKey.CONTROLLER_REGISTRATION, 0, 0, handle_controller_registration),
    ApiSpec(ApiKey.UNREGISTER_BROKER, 0, 0, handle_unregister_broker),
    ApiSpec(ApiKey.UNREGISTER_CONTROLLER, 0, 0, handle_unregister_controller),
]
