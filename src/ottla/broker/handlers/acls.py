"""DescribeAcls: the ACLs a filter matches, from the metadata image (Kafka's
``AclApis.handleDescribeAcls`` over ``StandardAuthorizer.acls``), grouped by resource
pattern. CreateAcls and DeleteAcls change metadata: brokers forward them to the
controller (``forwarding``), which runs ``controller.acl_control``.

As in Kafka, the ACL APIs answer SECURITY_DISABLED on a node whose
``authorizer.class.name`` is empty. A DescribeAcls request naming the UNKNOWN code (0)
for its resource type, pattern type, operation or permission type cannot be parsed by
Kafka's ``DescribeAclsRequest``, which closes the connection: so does this handler.
"""

from __future__ import annotations

from typing import Any, Protocol

from ottla.broker.broker import Broker
from ottla.common.server_config import KafkaConfig
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, CloseConnection, RequestContext
from ottla.security.acl import AclBinding, AclBindingFilter
from ottla.security.auth_helper import DESCRIBE, deny_cluster
from ottla.security.authorizer import authorizer_configured

NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"
"""DescribeAcls's SECURITY_DISABLED message (CreateAcls and DeleteAcls say
``No Authorizer is configured.``)."""


class HasImageAndConfig(Protocol):
    """A broker, or the controller side of a node: what describing reads."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def config(self) -> KafkaConfig: ...


def describe_resources(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    """``DescribeAclsResponse.aclsResources``: the bindings grouped by resource pattern,
    each entry once."""
    resources: dict[tuple[int, str, int], dict[tuple[str, str, int, int], None]] = {}
    for b in bindings:
        entries = resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), {})
        entries[(b.principal, b.host, b.operation, b.permission_type)] = None
    return [{"resource_type": resource_type, "resource_name": name, "pattern_type": pattern,
             "acls": [{"principal": principal, "host": host, "operation": operation,
                       "permission_type": permission}
                      for principal, host, operation, permission in entries]}
            for (resource_type, name, pattern), entries in resources.items()]


def describe_acls(image: MetadataImage, acl_filter: AclBindingFilter) -> dict[str, Any]:
    """The DescribeAcls response for ``acl_filter`` from ``image``."""
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "resources": describe_resources(image.acl_bindings(acl_filter))}


def handle_describe_acls(node: HasImageAndConfig, ctx: RequestContext, req: Any
                         ) -> dict[str, Any]:
    if 0 in (req.resource_type_filter, req.pattern_type_filter, req.operation,
             req.permission_type):
        raise CloseConnection("DescribeAclsRequest contains UNKNOWN elements")
    denied = deny_cluster(ctx, req, DESCRIBE)
    if denied is not None:
        return denied
    if not authorizer_configured(node.config):
        return {"throttle_time": 0, "error_code": ErrorCode.security_disabled,
                "error_message": NO_AUTHORIZER_ON_BROKER, "resources": []}
    acl_filter = AclBindingFilter.from_codes(
        req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
        req.principal_filter, req.host_filter, req.operation, req.permission_type)
    return describe_acls(node.image, acl_filter)


APIS: list[ApiSpec[Broker]] = [
    ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, handle_describe_acls),
]
