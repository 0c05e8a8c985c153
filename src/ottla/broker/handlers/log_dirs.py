"""DescribeLogDirs and AlterReplicaLogDirs: a broker's log dirs, what each holds, and
moving a replica from one to another (``kafka-log-dirs``, ``kafka-reassign-partitions``
with ``log_dirs``).

Authorization (Kafka's KafkaApis): DescribeLogDirs needs DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED, no log dir); AlterReplicaLogDirs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED for every partition it names)."""

from __future__ import annotations

import os
from typing import Any

from ottla.broker.broker import Broker
from ottla.common.features import METADATA_VERSION, cordoned_log_dirs_supported
from ottla.common.topics import TopicPartition
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.auth_helper import ALTER, DESCRIBE, authorize_cluster


def handle_alter_replica_log_dirs(broker: Broker, ctx: RequestContext, req: Any
                                  ) -> dict[str, Any]:
    """Move replicas to the log dirs named (Kafka's ``handleAlterReplicaLogDirsRequest``);
    the moves go on after the answer, which says only whether each began."""
    dirs: dict[TopicPartition, str] = {}
    for d in req.dirs:
        for topic in d.topics:
            for index in topic.partitions:
                dirs[(topic.name, index)] = d.path
    if authorize_cluster(ctx, ALTER):
        errors = broker.replica_manager.alter_replica_log_dirs(dirs, broker.image,
                                                                broker.now_ms())
    else:
        errors = dict.fromkeys(dirs, ErrorCode.cluster_authorization_failed)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error})
    return {"throttle_time": 0,
            "results": [{"topic_name": name, "partitions": parts}
                        for name, parts in by_topic.items()]}


def handle_describe_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """Sizes of the partitions in each log dir, and whether it is cordoned
    (kafka-log-dirs.sh --describe)."""
    if not authorize_cluster(ctx, DESCRIBE):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "results": []}
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    results = []
    log_manager = broker.replica_manager.log_manager
    # v5 (KIP-1066): whether each dir is cordoned, from metadata.version 4.3-IV0.
    cordoned = log_manager.cordoned_dirs if cordoned_log_dirs_supported(
        broker.image.features.get(METADATA_VERSION, 0)) else frozenset()
    futures = log_manager.describe_futures()
    for log_dir, logs in log_manager.describe().items():
        if log_dir in log_manager.offline_dirs:  # as Kafka: the error, nothing else
            results.append({"error_code": ErrorCode.kafka_storage_error,
                            "log_dir": os.path.abspath(log_dir), "topics": [],
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), lg in sorted(logs.items()):
            if wanted is not None and (topic, index) not in wanted:
                continue
            topics.setdefault(topic, []).append({
                "partition_index": index, "partition_size": lg.size, "offset_lag": 0,
                "is_future_key": False})
        for (topic, index), lg in sorted(futures.get(log_dir, {}).items()):
            if wanted is not None and (topic, index) not in wanted:
                continue
            current = log_manager.logs.get((topic, index))
            # As Kafka: how far the copy is behind the replica's log end.
            lag = 0 if current is None else current.log_end_offset - lg.log_end_offset
            topics.setdefault(topic, []).append({
                "partition_index": index, "partition_size": lg.size, "offset_lag": lag,
                "is_future_key": True})
        try:
            stat = os.statvfs(log_dir)
            total, usable = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
            error = ErrorCode.none
        except OSError:
            total = usable = -1
            error = ErrorCode.kafka_storage_error
        results.append({"error_code": error, "log_dir": os.path.abspath(log_dir),
                        "topics": [{"name": name, "partitions": parts}
                                   for name, parts in topics.items()],
                        "total_bytes": total, "usable_bytes": usable,
                        "is_cordoned": log_dir in cordoned})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2, handle_alter_replica_log_dirs),
    ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, 1, 5, handle_describe_log_dirs),
]
