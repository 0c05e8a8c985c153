"""The controller mutation quota (KIP-599, ``controller_mutation_rate``): the token bucket
and its strict and permissive views as Kafka's ControllerMutationQuotaManagerTest checks
them, and CreateTopics, CreatePartitions and DeleteTopics on the controller refusing or
throttling a client over its quota as Kafka's ControllerApis do."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ottla.broker.quota.client_quota_manager import ABSENT
from ottla.broker.quota.controller_mutation_quota import (
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from tests.unit.test_controller_apis import (
    Env,
    answer,
    as_read,
    context,
    create,
    live_broker,
    make_env,
    new_topic,
)

USER, CLIENT = "ANONYMOUS", "test-client"


def manager_with(quota: float, samples: int = 10) -> ControllerMutationQuotaManager:
    manager = ControllerMutationQuotaManager(samples, 1)
    manager.update_quota((USER, CLIENT), quota)
    return manager


def test_strict_accepts_a_spike_then_refuses_until_the_bucket_refills() -> None:
    """Kafka's testControllerMutationQuotaViolation: 10/s, 10 samples (a burst of 100)."""
    manager = manager_with(10)
    now = 1_000_000
    for _ in range(10):  # within the quota
        quota = manager.quota_for(USER, CLIENT, strict=True, now_ms=now)
        quota.record(10, now)
        assert quota.throttle_time_ms(now) == 0
        now += 1000
    spike = manager.quota_for(USER, CLIENT, strict=True, now_ms=now)
    spike.record(110, now)  # 100 tokens left: accepted, the bucket goes to -10
    assert spike.throttle_time_ms(now) == 0
    refused = manager.quota_for(USER, CLIENT, strict=True, now_ms=now)
    with pytest.raises(ThrottlingQuotaExceeded) as exc:
        refused.record(110, now)
    assert exc.value.throttle_time_ms == 1000  # 10 tokens at 10/s
    assert refused.throttle_time_ms(now + 400) == 600  # shrinks as time passes
    again = manager.quota_for(USER, CLIENT, strict=True, now_ms=now + 1000)
    again.record(110, now + 1000)  # back at 0: accepted


def test_permissive_accepts_everything_and_reports_the_throttle() -> None:
    """Kafka's PermissiveControllerMutationQuotaTest: 10/s, 10 samples."""
    manager = manager_with(10)
    now = 5_000_000
    quota = manager.quota_for(USER, CLIENT, strict=False, now_ms=now)
    quota.record(90, now)
    assert quota.throttle_time_ms(now) == 0
    quota.record(90, now)
    assert quota.throttle_time_ms(now) == 8000
    quota.record(90, now)
    assert quota.throttle_time_ms(now) == 17000
    assert quota.throttle_time_ms(now + 5000) == 12000


def test_no_quota_set_is_unbounded_and_keeps_no_sensor() -> None:
    manager = ControllerMutationQuotaManager()
    quota = manager.quota_for(USER, CLIENT, strict=True, now_ms=1)
    for _ in range(100):
        quota.record(10_000, 1)
    assert quota.throttle_time_ms(1) == 0 and manager.sensors == {}


def test_a_quota_of_another_client_does_not_apply() -> None:
    manager = ControllerMutationQuotaManager(10, 1)
    manager.update_quota((ABSENT, "other"), 1)
    quota = manager.quota_for(USER, CLIENT, strict=True, now_ms=1000)
    quota.record(1000, 1000)
    quota.record(1000, 1000)
    assert quota.throttle_time_ms(1000) == 0


# --- on the controller ---------------------------------------------------------------


def quota_env(rate: float) -> Env:
    """A controller whose client ``test-client`` may mutate ``rate`` partitions a second,
    with Kafka's default 11 samples of 1 s (a burst of 11 x rate)."""
    env = make_env()
    manager = ControllerMutationQuotaManager()
    manager.update_quota((ABSENT, CLIENT), rate)
    env.services.mutation_quotas = manager
    return env


async def call(env: Env, api_key: int, version: int, body: dict[str, Any]
               ) -> tuple[Any, int]:
    """The response as the client reads it, and how long its connection is muted."""
    ctx = context(env, api_key, version)
    response = as_read(env, ctx, await answer(env, ctx, build(request_schema(api_key, version),
                                                               body)))
    return response, ctx.throttle_ms


def millis(throttle: timedelta | int) -> int:
    return round(throttle.total_seconds() * 1000) if isinstance(throttle, timedelta) \
        else throttle


async def test_create_topics_over_the_quota_is_refused_with_throttling_quota_exceeded() -> None:
    env = quota_env(2)  # a burst of 22 partitions
    await live_broker(env, 1)
    first = await create(env, new_topic("big", 26))  # 22 tokens: accepted, 4 below zero
    assert first.topics[0].error_code == ErrorCode.none
    assert millis(first.throttle_time) == 0  # strict: a throttle only once refused
    response, muted = await call(env, ApiKey.CREATE_TOPICS, 7, {
        "topics": [new_topic("a", 1), new_topic("b", 1)], "timeout": 1000,
        "validate_only": False})
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("a", ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded."),
        ("b", ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded.")]
    assert millis(response.throttle_time) == muted == 2000
    assert sorted(env.image.topics_by_name) == ["big"]
    env.clock.now += 2.0  # the bucket is back at zero
    later = await create(env, new_topic("a", 1))
    assert later.topics[0].error_code == ErrorCode.none


async def test_a_topic_that_takes_the_bucket_below_zero_is_the_last_one_created() -> None:
    env = quota_env(1)  # a burst of 11
    await live_broker(env, 1)
    response = await create(env, new_topic("a", 8), new_topic("b", 8), new_topic("c", 1))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("a", ErrorCode.none), ("b", ErrorCode.none),
        ("c", ErrorCode.throttling_quota_exceeded)]
    assert millis(response.throttle_time) == 5000


async def test_old_versions_are_permissive_they_only_learn_the_throttle_time() -> None:
    env = quota_env(1)
    await live_broker(env, 1)
    response, muted = await call(env, ApiKey.CREATE_TOPICS, 5, {
        "topics": [new_topic("a", 20), new_topic("b", 5)], "timeout": 1000,
        "validate_only": False})
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("a", ErrorCode.none), ("b", ErrorCode.none)]
    assert millis(response.throttle_time) == muted == 14000
    assert sorted(env.image.topics_by_name) == ["a", "b"]


async def test_create_partitions_and_delete_topics_are_charged_too() -> None:
    env = quota_env(1)
    await live_broker(env, 1)
    assert (await create(env, new_topic("t", 10))).topics[0].error_code == ErrorCode.none
    grown, _ = await call(env, ApiKey.CREATE_PARTITIONS, 3, {
        "topics": [{"name": "t", "count": 12, "assignments": None}], "timeout": 1000,
        "validate_only": False})  # 1 token left: accepted, 1 below zero
    assert grown.results[0].error_code == ErrorCode.none
    refused, _ = await call(env, ApiKey.CREATE_PARTITIONS, 3, {
        "topics": [{"name": "t", "count": 13, "assignments": None}], "timeout": 1000,
        "validate_only": False})
    assert refused.results[0].error_code == ErrorCode.throttling_quota_exceeded
    assert len(env.image.topics_by_name["t"].partitions) == 12
    deleted, muted = await call(env, ApiKey.DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": "t", "topic_id": None}]})
    assert deleted.responses[0].error_code == ErrorCode.throttling_quota_exceeded
    assert muted == 1000 and "t" in env.image.topics_by_name
    env.clock.now += 1.0
    deleted, muted = await call(env, ApiKey.DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": "t", "topic_id": None}]})
    assert deleted.responses[0].error_code == ErrorCode.none
    assert "t" not in env.image.topics_by_name
    assert muted == 0  # the bucket had 0 tokens, not fewer: accepted, no throttle


async def test_a_refused_request_is_not_charged() -> None:
    """Kafka checks the quota after a topic is found valid: invalid topics cost nothing."""
    env = quota_env(1)
    await live_broker(env, 1)
    bad = await create(env, new_topic("x", 100, replication=3))  # one broker only
    assert bad.topics[0].error_code == ErrorCode.invalid_replication_factor
    assert millis(bad.throttle_time) == 0
    assert (await create(env, new_topic("ok", 11))).topics[0].error_code == ErrorCode.none
