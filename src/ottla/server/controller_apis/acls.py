"""CreateAcls and DeleteAcls, run on the active controller (brokers forward them), and
DescribeAcls on the controller listener, answered from the image as a broker answers it
(Kafka's ``AclApis`` on the controller, over ``AclControlManager``).

Kafka turns each creation into an ``AclBinding`` before anything else, and an
``AclBinding`` cannot have the ANY resource type, the ANY or MATCH pattern type, the ANY
operation or the ANY permission type: such a request fails whole, UNKNOWN_SERVER_ERROR for
every creation (its ``getErrorResponse``). Codes Kafka does not know become UNKNOWN and
are refused per creation or filter by the controller's checks (INVALID_REQUEST). Kafka's
own request parser also refuses the code 0 itself by closing the connection; here it is
refused as the other unknown codes are.
"""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.acls import handle_describe_acls
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext
from ottla.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from ottla.security.auth_helper import ALTER, deny_cluster
from ottla.security.authorizer import authorizer_configured
from ottla.server.controller_apis.services import ControllerServices

NO_AUTHORIZER = "No Authorizer is configured."
"""CreateAcls's and DeleteAcls's SECURITY_DISABLED message."""


def _not_a_binding(binding: AclBinding) -> bool:
    """What Kafka's ``ResourcePattern`` and ``AccessControlEntry`` constructors throw on."""
    return (binding.resource_type == ResourceType.ANY
            or binding.pattern_type in (PatternType.ANY, PatternType.MATCH)
            or binding.operation == AclOperation.ANY
            or binding.permission_type == AclPermissionType.ANY)


async def handle_create_acls(controller: ControllerServices, ctx: RequestContext, req: Any
                             ) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, ALTER, every_entry=True)
    if denied is not None:
        return denied

    def everyone(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [
            {"error_code": code, "error_message": message} for _ in req.creations]}

    if not authorizer_configured(controller.config):
        return everyone(ErrorCode.security_disabled, NO_AUTHORIZER)
    bindings = [AclBinding.from_codes(c.resource_type, c.resource_name,
                                      c.resource_pattern_type, c.principal, c.host,
                                      c.operation, c.permission_type) for c in req.creations]
    if any(_not_a_binding(b) for b in bindings):
        return everyone(ErrorCode.unknown_server_error, None)
    results = await controller.channel.submit(lambda c: c.acls.create_acls(bindings))
    return {"throttle_time": 0, "results": [
        {"error_code": code, "error_message": message} for code, message in results]}


def _matching_acl(binding: AclBinding) -> dict[str, Any]:
    return {"error_code": ErrorCode.none, "error_message": None,
            "resource_type": binding.resource_type, "resource_name": binding.resource_name,
            "pattern_type": binding.pattern_type, "principal": binding.principal,
            "host": binding.host, "operation": binding.operation,
            "permission_type": binding.permission_type}


async def handle_delete_acls(controller: ControllerServices, ctx: RequestContext, req: Any
                             ) -> dict[str, Any]:
    denied = deny_cluster(ctx, req, ALTER, every_entry=True)
    if denied is not None:
        return denied
    if not authorizer_configured(controller.config):
        return {"throttle_time": 0, "filter_results": [
            {"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER,
             "matching_acls": []} for _ in req.filters]}
    filters = [AclBindingFilter.from_codes(f.resource_type_filter, f.resource_name_filter,
                                           f.pattern_type_filter, f.principal_filter,
                                           f.host_filter, f.operation, f.permission_type)
               for f in req.filters]
    results = await controller.channel.submit(lambda c: c.acls.delete_acls(filters))
    return {"throttle_time": 0, "filter_results": [
        {"error_code": code, "error_message": message,
         "matching_acls": [_matching_acl(b) for b in matched]}
        for code, message, matched in results]}


APIS: list[ApiSpec[ControllerServices]] = [
    ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, handle_describe_acls),
    ApiSpec(ApiKey.CREATE_ACLS, 1, 3, handle_create_acls),
    ApiSpec(ApiKey.DELETE_ACLS, 1, 3, handle_delete_acls),
]
