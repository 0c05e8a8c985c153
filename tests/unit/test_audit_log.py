"""Kafka's audit log (``kafka.authorizer.logger``): which decisions are logged at which
level, in the words of Kafka 4.4's ``StandardAuthorizerData.buildAuditMessage``. The
expected lines are written as Kafka's log shows them (the rule of a matching ACL being
its ``MatchingAclRule`` around the ``StandardAcl`` record)."""

from __future__ import annotations

import logging
import uuid

import pytest

from ottla.common.principal import Principal
from ottla.protocol.api import ApiKey
from ottla.protocol.codec import RequestHeader
from ottla.protocol.requests import RequestContext
from ottla.security import auth_helper
from ottla.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from ottla.security.authorizer import StandardAuthorizer

LOGGER = "kafka.authorizer.logger"
ALICE = Principal("User", "alice")


def context(api_key: ApiKey, authorizer: StandardAuthorizer,
            principal: Principal = ALICE) -> RequestContext:
    header = RequestHeader(int(api_key), 9, 1, "app", 0)
    return RequestContext(header, "SASL_PLAINTEXT", "broker", "::ffff:10.0.0.9", 50000,
                          principal=principal, authorizer=authorizer)


def allow_write_on_orders(authorizer: StandardAuthorizer) -> None:
    authorizer.add_acl(uuid.UUID(int=1), AclBinding(
        ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:alice", "*",
        AclOperation.WRITE, AclPermissionType.ALLOW))


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def test_a_denied_request_is_logged_at_info_with_its_rule(caplog) -> None:
    authorizer = StandardAuthorizer()
    allow_write_on_orders(authorizer)
    ctx = context(ApiKey.PRODUCE, authorizer)
    with caplog.at_level(logging.INFO, LOGGER):
        writable = auth_helper.authorized_names(
            ctx, AclOperation.WRITE, ResourceType.TOPIC, ["orders", "pay", "pay"])
    assert writable == {"orders"}
    assert lines(caplog) == [(logging.INFO, (
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.9 on "
        "resource = Topic:LITERAL:pay for request = Produce with resourceRefCount = 2 "
        "based on rule DefaultDeny"))]


def test_an_allowed_request_is_logged_at_debug_with_the_acl_that_allowed_it(caplog
                                                                            ) -> None:
    authorizer = StandardAuthorizer()
    allow_write_on_orders(authorizer)
    ctx = context(ApiKey.PRODUCE, authorizer)
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert auth_helper.authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, "orders")
    assert lines(caplog) == [(logging.DEBUG, (
        "Principal = User:alice is Allowed operation = WRITE from host = 10.0.0.9 on "
        "resource = Topic:LITERAL:orders for request = Produce with resourceRefCount = 1 "
        "based on rule MatchingAcl(acl=StandardAcl[resourceType=TOPIC, resourceName=ord, "
        "patternType=PREFIXED, principal=User:alice, host=*, operation=WRITE, "
        "permissionType=ALLOW])"))]


def test_a_deny_acl_is_the_rule_and_super_users_are_logged_as_such(caplog) -> None:
    authorizer = StandardAuthorizer(["User:admin"])
    allow_write_on_orders(authorizer)
    authorizer.add_acl(uuid.UUID(int=2), AclBinding(
        ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:*", "10.0.0.9",
        AclOperation.WRITE, AclPermissionType.DENY))
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert not auth_helper.authorize(context(ApiKey.PRODUCE, authorizer),
                                         AclOperation.WRITE, ResourceType.TOPIC, "orders")
        assert auth_helper.authorize(context(ApiKey.PRODUCE, authorizer,
                                             Principal("User", "admin")),
                                     AclOperation.WRITE, ResourceType.TOPIC, "orders")
    (denied_level, denied), (allowed_level, allowed) = lines(caplog)
    assert denied_level == logging.INFO and denied.endswith(
        "based on rule MatchingAcl(acl=StandardAcl[resourceType=TOPIC, resourceName=orders, "
        "patternType=LITERAL, principal=User:*, host=10.0.0.9, operation=WRITE, "
        "permissionType=DENY])")
    assert allowed_level == logging.DEBUG and allowed.startswith(
        "Principal = User:admin is Allowed") and allowed.endswith("based on rule SuperUser")


def test_checks_that_only_filter_what_is_shown_log_denials_below_info(caplog) -> None:
    """authorizedOperations, ListGroups' group filter and the hard-coded name of
    authorizeByResourceType pass ``logIfDenied = false``: nothing at INFO."""
    authorizer = StandardAuthorizer()
    with caplog.at_level(logging.INFO, LOGGER):
        ctx = context(ApiKey.DESCRIBE_GROUPS, authorizer)
        assert auth_helper.authorized_operations(ctx, ResourceType.GROUP, "g") == 0
        assert not auth_helper.authorize_by_resource_type(
            context(ApiKey.INIT_PRODUCER_ID, authorizer), AclOperation.WRITE,
            ResourceType.TOPIC)
        assert auth_helper.authorized_names(
            context(ApiKey.LIST_GROUPS, authorizer), AclOperation.DESCRIBE,
            ResourceType.GROUP, ["g"], log_if_denied=False) == set()
    assert lines(caplog) == []
    with caplog.at_level(auth_helper.TRACE, LOGGER):
        auth_helper.authorize_by_resource_type(context(ApiKey.INIT_PRODUCER_ID, authorizer),
                                               AclOperation.WRITE, ResourceType.TOPIC)
    assert lines(caplog) == [(auth_helper.TRACE, (
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.9 on "
        "resource = Topic:LITERAL:hardcode for request = InitProducerId with "
        "resourceRefCount = 0 based on rule DefaultDeny"))]


def test_without_an_authorizer_nothing_is_logged(caplog) -> None:
    header = RequestHeader(int(ApiKey.PRODUCE), 9, 1, "app", 0)
    ctx = RequestContext(header, "PLAINTEXT", "broker", "127.0.0.1", 50000)
    with caplog.at_level(auth_helper.TRACE, LOGGER):
        assert auth_helper.authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, "t")
    assert lines(caplog) == []
