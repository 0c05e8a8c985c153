"""The one seam request handlers authorize through (Kafka's ``AuthHelper``).

A request's ``RequestContext`` carries the node's authorizer (None without
``authorizer.class.name``) and the client's principal and address; every check a handler
makes is one call here, for one operation on one resource (a LITERAL resource pattern, as
Kafka asks). Without an authorizer every check passes and an ``authorized_operations``
field reports every operation the resource type supports, as Kafka's does.

- ``authorize``: may the client do ``operation`` on the resource?
- ``authorize_cluster``: the same for the CLUSTER resource (``kafka-cluster``);
  ``cluster_authorization_error`` is Kafka's ``authorizeClusterOperation`` failure, for a
  handler to raise (the request's error response then carries it for all it names).
- ``authorized_names``: which of some names pass (each distinct name asked once, as
  Kafka's ``filterByAuthorized``).
- ``authorize_by_resource_type``: Kafka's ``authorizeByResourceType``.
- ``authorized_operations``: the 32-bit field of the operations allowed on a resource.

Hosts are compared as Java writes the client's address (``java_host_address``).

Every decision is counted in the serving role's authorizer metrics (Kafka's
``authorization-{request,allowed,denied}-rate-per-minute``) and goes to Kafka's audit
log, the ``kafka.authorizer.logger`` logger, in Kafka's words: a denial at INFO when the
request asked for that resource (``log_if_denied``), an allowed access at DEBUG when it
is granted (``log_if_allowed``), anything else at TRACE (level 5). Checks that only filter what a
client is shown (``authorized_operations``, the hard-coded name of
``authorize_by_resource_type``, the places Kafka passes ``logIfDenied = false``) log
their denials at TRACE, as Kafka's do.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ottla.protocol.api import REQUEST_NAMES, ApiKey
from ottla.protocol.error_response import error_response, top_level_error_response
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import RequestContext
from ottla.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
from ottla.security.authorizer import HARDCODE, Rule, java_host_address

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
USER = ResourceType.USER

READ = AclOperation.READ
WRITE = AclOperation.WRITE
CREATE = AclOperation.CREATE
DELETE = AclOperation.DELETE
ALTER = AclOperation.ALTER
DESCRIBE = AclOperation.DESCRIBE
CLUSTER_ACTION = AclOperation.CLUSTER_ACTION
DESCRIBE_CONFIGS = AclOperation.DESCRIBE_CONFIGS
ALTER_CONFIGS = AclOperation.ALTER_CONFIGS
IDEMPOTENT_WRITE = AclOperation.IDEMPOTENT_WRITE

MSG_TOPIC = "Topic authorization failed."
MSG_GROUP = "Group authorization failed."
MSG_CLUSTER = "Cluster authorization failed."
MSG_TXN = "Transactional Id authorization failed."
"""``Errors.X.message`` of the authorization errors: what a response built from
``Errors.X.exception`` (or ``new ApiError(X)``) carries."""

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""Default of every ``*authorized_operations`` field: not asked for."""

_host = lru_cache(maxsize=4096)(java_host_address)

AUDIT_LOG = logging.getLogger("kafka.authorizer.logger")
"""Kafka's audit log (``StandardAuthorizerData.auditLog``), under Kafka's name, so a
logging configuration routes it as Kafka's log4j2 config routes that logger."""
TRACE = 5
"""Below DEBUG: log4j's TRACE, which Python's logging lacks."""


def _bits(operations: Iterable[AclOperation]) -> int:
    """``Utils.to32BitField``: bit ``code`` for each operation."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


ALL_OPERATIONS: dict[ResourceType, int] = {
    resource_type: _bits(operations) for resource_type, operations in SUPPORTED_OPERATIONS.items()}
"""The ``authorized_operations`` of each resource type without an authorizer."""


def enabled(ctx: RequestContext) -> bool:
    """Whether the node has an authorizer (``authorizer.class.name``)."""
    return ctx.authorizer is not None


def authorize(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
              name: str | None, *, log_if_allowed: bool = True, log_if_denied: bool = True,
              ref_count: int = 1) -> bool:
    """May the request's principal, from its client's address, do ``operation`` on the
    resource ``resource_type`` named ``name``? Always, without an authorizer. The
    decision is audited (``log_if_*``: Kafka's ``Action`` flags; ``ref_count``: how many
    times the request names the resource)."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    host = _host(ctx.client_host)
    name = "" if name is None else name
    allowed, rule = authorizer.decide(ctx.principal, host, operation, resource_type, name)
    metrics = ctx.authorizer_metrics
    if metrics is not None and (allowed or authorizer.loaded):
        metrics.record(allowed, ctx.now_ms())  # Kafka's throws, uncounted, until loaded
    if allowed:
        level = logging.DEBUG if log_if_allowed else TRACE
    else:
        level = logging.INFO if log_if_denied else TRACE
    if AUDIT_LOG.isEnabledFor(level):
        AUDIT_LOG.log(level, audit_message(ctx, host, allowed, rule, operation, resource_type,
                                           name, ref_count))
    return allowed


def audit_message(ctx: RequestContext, host: str, allowed: bool, rule: Rule,
                  operation: AclOperation, resource_type: ResourceType, name: str,
                  ref_count: int) -> str:
    """Kafka's ``StandardAuthorizerData.buildAuditMessage``, word for word."""
    request = REQUEST_NAMES.get(ctx.header.api_key, str(ctx.header.api_key))
    return (f"Principal = {ctx.principal} is {'Allowed' if allowed else 'Denied'} "
            f"operation = {operation.name} from host = {host} on resource = "
            f"{resource_type.pascal_name}:LITERAL:{name} for request = {request} "
            f"with resourceRefCount = {ref_count} based on rule {rule}")


def authorize_cluster(ctx: RequestContext, operation: AclOperation, *,
                      log_if_denied: bool = True) -> bool:
    return authorize(ctx, operation, CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def cluster_authorization_error(ctx: RequestContext, operation: AclOperation) -> KafkaError:
    """What Kafka's ``authorizeClusterOperation`` throws: CLUSTER_AUTHORIZATION_FAILED,
    "Request ... needs OPERATION permission." (the request described as Ottla can)."""
    try:
        api = ApiKey(ctx.header.api_key).name
    except ValueError:
        api = str(ctx.header.api_key)
    request = (f"{api} v{ctx.api_version} from {ctx.principal} at {ctx.client_host} "
               f"(client id {ctx.client_id!r}, listener {ctx.listener_name})")
    return KafkaError(ErrorCode.cluster_authorization_failed,
                      f"Request {request} needs {operation.name} permission.")


def require_cluster(ctx: RequestContext, operation: AclOperation) -> None:
    """``authorizeClusterOperation``: raise its error unless ``operation`` on the cluster
    is allowed."""
    if not authorize_cluster(ctx, operation):
        raise cluster_authorization_error(ctx, operation)


NEEDS_PERMISSION: Any = object()
"""``deny_cluster``'s message: the one ``cluster_authorization_error`` words."""


def deny_cluster(ctx: RequestContext, request: Any, operation: AclOperation,
                 message: str | None = NEEDS_PERMISSION, every_entry: bool = False
                 ) -> dict[str, Any] | None:
    """None if the principal may ``operation`` the cluster; else the response Kafka sends
    when ``authorizeClusterOperation`` fails: CLUSTER_AUTHORIZATION_FAILED with
    ``message`` at the top level (the response's arrays empty), or with ``every_entry``
    in every entry the request named as well (its ``getErrorResponse``)."""
    if authorize_cluster(ctx, operation):
        return None
    if message is NEEDS_PERMISSION:
        message = cluster_authorization_error(ctx, operation).message
    build = error_response if every_entry else top_level_error_response
    return build(request, ErrorCode.cluster_authorization_failed, message)


def authorized_names(ctx: RequestContext, operation: AclOperation,
                     resource_type: ResourceType, names: Iterable[str | None], *,
                     log_if_denied: bool = True) -> set[str | None]:
    """The names among ``names`` the principal may ``operation`` (Kafka's
    ``filterByAuthorized``: each distinct name asked once, audited with the number of
    times it was named)."""
    if ctx.authorizer is None:
        return set(names)
    # iter(): a mapping's keys are the names, its values no counts.
    return {name for name, count in Counter(iter(names)).items()
            if authorize(ctx, operation, resource_type, name, ref_count=count,
                         log_if_denied=log_if_denied)}


def authorize_by_resource_type(ctx: RequestContext, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    """Kafka's ``authorizeByResourceType``: may the principal ``operation`` at least one
    resource of ``resource_type``?"""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    if resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN) and operation not in (
            AclOperation.ANY, AclOperation.UNKNOWN) and authorize(
            ctx, operation, resource_type, HARDCODE, log_if_denied=False, ref_count=0):
        return True  # Kafka's first check, audited as Kafka's (its Action: count 0)
    return authorizer.authorize_by_resource_type(ctx.principal, _host(ctx.client_host),
                                                 operation, resource_type)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType,
                          name: str | None) -> int:
    """``AuthHelper.authorizedOperations``: the bits of the operations the resource type
    supports that the principal may do on the resource (all of them without an
    authorizer)."""
    if ctx.authorizer is None:
        return ALL_OPERATIONS[resource_type]
    return _bits(operation for operation in SUPPORTED_OPERATIONS[resource_type]
                 if authorize(ctx, operation, resource_type, name, log_if_allowed=False,
                              log_if_denied=False))


def cluster_authorized_operations(ctx: RequestContext, requested: bool) -> int:
    """DescribeCluster's (and Metadata v8-10's) ``cluster_authorized_operations``: omitted
    unless ``requested``; 0 without DESCRIBE on the cluster; else the allowed set
    (``AuthHelper.computeDescribeClusterResponse``)."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not authorize_cluster(ctx, DESCRIBE):
        return 0
    return authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
