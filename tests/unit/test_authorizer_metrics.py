"""The authorizer metrics (Kafka's ``StandardAuthorizer.AuthorizerMetrics``): every action
decided through ``auth_helper`` is counted once, allowed or denied, in rates per minute
over Kafka's sampled windows; an action Kafka could not decide yet (before the initial ACL
load, ``AuthorizerNotReadyException``) is not counted."""

from __future__ import annotations

import uuid

from ottla.common.principal import Principal
from ottla.protocol.codec import RequestHeader
from ottla.protocol.requests import RequestContext
from ottla.security import auth_helper
from ottla.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType
from ottla.security.acl import ResourceType as RT
from ottla.security.authorizer import StandardAuthorizer
from ottla.security.authorizer_metrics import (
    ALLOWED_RATE,
    DENIED_RATE,
    REQUEST_RATE,
    AuthorizerMetrics,
)

NOW_S = 1_000.0


def context(authorizer: StandardAuthorizer, metrics: AuthorizerMetrics,
            principal: str = "alice") -> RequestContext:
    return RequestContext(RequestHeader(3, 12, 1, "c", 0), "PLAINTEXT", "broker", "10.0.0.1",
                          5555, principal=Principal("User", principal), clock=lambda: NOW_S,
                          authorizer=authorizer, authorizer_metrics=metrics)


def test_each_decision_is_counted_as_allowed_or_denied_per_minute() -> None:
    authorizer = StandardAuthorizer(super_users=["User:admin"])
    authorizer.add_acl(uuid.uuid4(), AclBinding(
        RT.TOPIC, "open", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
        AclPermissionType.ALLOW))
    metrics = AuthorizerMetrics(samples=2, window_ms=30_000)
    ctx = context(authorizer, metrics)
    assert auth_helper.authorize(ctx, AclOperation.READ, RT.TOPIC, "open")
    assert not auth_helper.authorize(ctx, AclOperation.READ, RT.TOPIC, "closed")
    assert not auth_helper.authorize(ctx, AclOperation.WRITE, RT.TOPIC, "open")
    assert auth_helper.authorized_names(ctx, AclOperation.READ, RT.TOPIC,
                                        ["open", "open", "closed"]) == {"open"}
    # 2 allowed and 3 denied (each distinct name once), within the first window: Kafka's
    # Rate divides by at least (samples - 1) windows, 30 s, half a minute.
    now_ms = int(NOW_S * 1000)
    assert metrics.rates_per_minute(now_ms) == {
        ALLOWED_RATE: 2 * 2.0, DENIED_RATE: 3 * 2.0, REQUEST_RATE: 5 * 2.0}


def test_an_action_denied_before_the_initial_load_is_not_counted() -> None:
    authorizer = StandardAuthorizer(super_users=["User:admin"], loaded=False)
    metrics = AuthorizerMetrics(samples=2, window_ms=30_000)
    assert not auth_helper.authorize(context(authorizer, metrics), AclOperation.READ,
                                     RT.TOPIC, "t")
    assert auth_helper.authorize(context(authorizer, metrics, "admin"), AclOperation.READ,
                                 RT.TOPIC, "t")  # a super user is decided, and counted
    rates = metrics.rates_per_minute(int(NOW_S * 1000))
    assert (rates[ALLOWED_RATE], rates[DENIED_RATE]) == (2.0, 0.0)
