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
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.error_response import error_response, top_level_error_response
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.requests import RequestContext
from ottla.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
from ottla.security.authorizer import java_host_address

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
              name: str | None) -> bool:
    """May the request's principal, from its client's address, do ``operation`` on the
    resource ``resource_type`` named ``name``? Always, without an authorizer."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, _host(ctx.client_host), operation,
                                resource_type, "" if name is None else name)


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    return authorize(ctx, operation, CLUSTER, CLUSTER_NAME)


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
                     resource_type: ResourceType, names: Iterable[str | None]) -> set[str | None]:
    """The names among ``names`` the principal may ``operation`` (Kafka's
    ``filterByAuthorized``: each distinct name asked once)."""
    distinct = set(names)
    if ctx.authorizer is None:
        return distinct
    return {name for name in distinct if authorize(ctx, operation, resource_type, name)}


def authorize_by_resource_type(ctx: RequestContext, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    """Kafka's ``authorizeByResourceType``: may the principal ``operation`` at least one
    resource of ``resource_type``?"""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
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
                 if authorize(ctx, operation, resource_type, name))


def cluster_authorized_operations(ctx: RequestContext, requested: bool) -> int:
    """DescribeCluster's (and Metadata v8-10's) ``cluster_authorized_operations``: omitted
    unless ``requested``; 0 without DESCRIBE on the cluster; else the allowed set
    (``AuthHelper.computeDescribeClusterResponse``)."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not authorize_cluster(ctx, DESCRIBE):
        return 0
    return authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
