"""The broker's client quota managers (Kafka's ClientQuotaManager, DefaultQuotaCallback and
Rate): which quota applies to a request, the rate measured, and the throttle time, with
numbers worked out from Kafka's formulas (``Rate.windowSize``, ``QuotaUtils.throttleTime``)
and precedence cases from Kafka's ClientQuotaManagerTest."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from ottla.broker.handlers import fetch, produce
from ottla.broker.quota.client_quota_manager import (
    ABSENT,
    DEFAULT,
    ClientQuotaManager,
    QuotaType,
    throttle_time_ms,
)
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.common.stats.rate import Rate
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import RequestHeader, encode_body
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.protocol.requests import RequestContext
from tests.unit import test_broker_handlers as broker_tests

# --- Rate: Kafka's Rate over a WindowedSum, 11 windows of 1 s --------------------------------


def test_a_first_burst_is_measured_over_all_but_one_window() -> None:
    """windowSize: the time since the oldest sample, at least (samples - 1) windows."""
    rate = Rate(11, 1000)
    rate.record(1000, 0)
    assert rate.window_size(0) == 10_000
    assert rate.measure(0) == 100.0  # 1000 bytes over 10 s
    rate.record(1000, 500)  # the same sample
    assert rate.window_size(500) == 10_500
    assert rate.measure(500) == pytest.approx(2000 / 10.5)


def test_a_steady_rate_is_measured_as_it_is() -> None:
    rate = Rate(11, 1000)
    for t in range(0, 30_000, 100):  # 1000 bytes/s for 30 s
        rate.record(100, t)
    # The ring keeps twelve samples of 1 s, but the oldest (18-19 s) has had no record
    # for the whole span (11 s) at 29.9 s and is reset: 10.9 s since the oldest left
    # began (19 s), with 10 whole samples and 10 records of the current one in it.
    assert rate.window_size(29_900) == 10_900
    assert rate.measure(29_900) == pytest.approx(11_000 / 10.9)


def test_a_sample_idle_for_the_whole_span_is_reset() -> None:
    rate = Rate(11, 1000)
    rate.record(5000, 0)
    rate.record(100, 10_999)  # a new sample; the first is 10.999 s old, still counted
    assert rate.measure(10_999) == pytest.approx(5100 / 10.999)
    # At 11 s the first sample's last record is samples * window old: reset (to start
    # at 11 s, empty), so only the second counts, over 1 ms plus the 10 s floor.
    assert rate.measure(11_000) == pytest.approx(100 / 10.001)


def test_the_throttle_time_is_kafkas_formula() -> None:
    """X = (O - T) / T * W, rounded half up: O * W / (W + X) = T."""
    assert throttle_time_ms(1000.0, 500.0, 10_000) == 10_000
    assert throttle_time_ms(600.0, 500.0, 10_000) == 2000
    assert throttle_time_ms(500.25, 500.0, 10_000) == 5  # 5.0
    assert throttle_time_ms(512.25, 512.0, 1024) == 1  # exactly 0.5: rounds up


# --- recording and throttling ---------------------------------------------------------------


def test_a_client_over_its_quota_is_throttled_until_its_rate_is_back() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update_quota((ABSENT, "app"), 500.0)
    # 4000 bytes at 0: 400 B/s over the 10 s floor, within 500.
    assert manager.record("alice", "app", 4000, 0) == 0
    # 2000 more at 100 ms: 6000 B / 10.1 s = 594.06 B/s: (594.06 - 500) / 500 * 10100 ms.
    assert manager.record("alice", "app", 2000, 100) == 1900
    # 2000 more: 8000 / 10.1 = 792.08 B/s: (792.08 - 500) / 500 * 10100.
    assert manager.record("alice", "app", 2000, 100) == 5900
    # Still over at 6 s (8000 B over the 10 s floor); once the sample is a whole span
    # old (11 windows after its last record) it is reset and the client is back.
    assert manager.record("alice", "app", 0, 6000) == 6000
    assert manager.record("alice", "app", 0, 11_100) == 0


def test_a_request_quota_throttles_at_most_one_window() -> None:
    managers = ClientQuotaManagers(samples=11, window_seconds=1)
    managers.request.update_quota((ABSENT, "app"), 1.0)  # 1% of a thread
    assert managers.request.record("alice", "app", 500.0, 0) == 1000  # capped
    assert managers.produce.record("alice", "app", 10**9, 0) == 0  # no produce quota


def test_without_quotas_nothing_is_recorded() -> None:
    manager = ClientQuotaManager(QuotaType.FETCH)
    assert not manager.enabled
    assert manager.record("alice", "app", 10**12, 0) == 0
    assert manager.sensors == {} and manager.max_value_in_quota_window("alice", "app") is None
    manager.update_quota(("alice", ABSENT), 100.0)
    manager.update_quota(("alice", ABSENT), None)
    assert not manager.enabled


def test_a_quota_changed_applies_to_the_rate_measured_so_far() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update_quota(("alice", ABSENT), 10_000.0)
    assert manager.record("alice", "app", 50_000, 0) == 0  # 5000 B/s
    manager.update_quota(("alice", ABSENT), 2500.0)
    assert manager.record("alice", "app", 0, 0) == 10_000  # (5000 - 2500) / 2500 * 10 s


def test_a_throttled_fetch_is_taken_back_and_the_fetch_capped() -> None:
    manager = ClientQuotaManager(QuotaType.FETCH)
    manager.update_quota((DEFAULT, ABSENT), 1000.0)
    assert manager.max_value_in_quota_window("bob", "c") == 10_000.0  # 1000 * 10 windows
    assert manager.record("bob", "c", 20_000, 0) > 0
    manager.unrecord("bob", "c", 20_000, 0)
    assert manager.record("bob", "c", 0, 0) == 0


def test_clients_silent_for_an_hour_are_forgotten() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update_quota((ABSENT, DEFAULT), 1.0)
    for i in range(5):
        manager.record("u", f"client-{i}", 1, 0)
    assert len(manager.sensors) == 5
    manager.record("u", "client-0", 1, 3_600_001)
    assert list(manager.sensors) == [(ABSENT, "client-0")]


def test_the_rates_kept_are_bounded_whatever_client_ids_clients_choose(monkeypatch: Any
                                                                        ) -> None:
    from ottla.broker.quota import client_quota_manager

    monkeypatch.setattr(client_quota_manager, "MAX_SENSORS", 10)
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update_quota((ABSENT, DEFAULT), 1.0)
    for i in range(25):
        manager.record("u", f"client-{i}", 1, i)
    assert len(manager.sensors) <= 10
    assert (ABSENT, "client-24") in manager.sensors  # the newest are kept


# --- which quota applies (DefaultQuotaCallback) -------------------------------------------------


def test_one_level_of_quotas_shares_one_rate_per_entity_of_that_level() -> None:
    """Client id quotas measure a client id across users; user quotas a user across its
    client ids; (user, client id) quotas the pair."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update_quota((ABSENT, "app"), 1000.0)
    assert manager.quota_tags("alice", "app") == manager.quota_tags("bob", "app") == \
        (ABSENT, "app")
    manager.set_quotas({("alice", ABSENT): 1000.0})
    assert manager.quota_tags("alice", "a") == manager.quota_tags("alice", "b") == \
        ("alice", ABSENT)
    manager.set_quotas({("alice", "app"): 1000.0})
    assert manager.quota_tags("alice", "app") == ("alice", "app")
    assert manager.quota("alice", "other") is None


PRECEDENCE = [
    (("userA", "client1"), 1.0),
    (("userA", DEFAULT), 2.0),
    (("userA", ABSENT), 3.0),
    ((DEFAULT, "client1"), 4.0),
    ((DEFAULT, DEFAULT), 5.0),
    ((DEFAULT, ABSENT), 6.0),
    ((ABSENT, "client1"), 7.0),
    ((ABSENT, DEFAULT), 8.0),
]
"""Kafka's order, most specific first (ClientQuotaManager's class comment)."""


def test_the_most_specific_quota_applies_in_kafkas_order() -> None:
    """Remove the quotas from the most specific down: each time the next one applies."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.set_quotas(dict(PRECEDENCE))
    for key, value in PRECEDENCE:
        assert manager.quota("userA", "client1") == value, key
        manager.update_quota(key, None)
    assert manager.quota("userA", "client1") is None


@pytest.mark.parametrize("user,client,expected", [
    ("userA", "client1", 1.0),   # /users/userA/clients/client1
    ("userA", "client2", 2.0),   # /users/userA/clients/<default>
    ("userB", "client1", 4.0),   # /users/<default>/clients/client1
    ("userB", "client2", 5.0),   # /users/<default>/clients/<default>
])
def test_quota_lookup_of_kafkas_client_quota_manager_test(user: str, client: str,
                                                          expected: float) -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.set_quotas(dict(PRECEDENCE))
    assert manager.quota(user, client) == expected


def test_a_user_quota_wins_over_a_client_id_quota() -> None:
    manager = ClientQuotaManager(QuotaType.FETCH)
    manager.set_quotas({(ABSENT, "app"): 100.0, ("alice", ABSENT): 200.0,
                        (DEFAULT, ABSENT): 300.0})
    assert manager.quota("alice", "app") == 200.0
    assert manager.quota("bob", "app") == 300.0  # the default user, before the client id
    manager.update_quota((DEFAULT, ABSENT), None)
    assert manager.quota("bob", "app") == 100.0
    assert manager.quota("bob", "") is None  # no client id: no client id quota


def test_managers_follow_the_images_quotas_by_key() -> None:
    managers = ClientQuotaManagers()
    managers.load({(("user", "alice"),): {"producer_byte_rate": 100.0,
                                          "consumer_byte_rate": 200.0},
                   (("client-id", None),): {"request_percentage": 50.0},
                   (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0}})
    assert managers.produce.overrides == {("alice", ABSENT): 100.0}
    assert managers.fetch.overrides == {("alice", ABSENT): 200.0}
    assert managers.request.overrides == {(ABSENT, DEFAULT): 50.0}
    managers.apply([(("user", "alice"),), (("client-id", "x"), ("user", None))],
                   {(("user", "alice"),): {"consumer_byte_rate": 1.0},
                    (("client-id", "x"), ("user", None)): {"producer_byte_rate": 7.0}})
    assert managers.produce.overrides == {(DEFAULT, "x"): 7.0}
    assert managers.fetch.overrides == {("alice", ABSENT): 1.0}


# --- through the Produce and Fetch handlers ------------------------------------------------

broker = broker_tests.broker  # the handler tests' broker, on a fixed clock


async def produced_with_throttle(b: Any, client_id: str) -> tuple[int, int]:
    """One produce of a 1000-record batch as ``client_id``: (throttle in the answer,
    throttle the connection is told to mute for)."""
    header = RequestHeader(ApiKey.PRODUCE, 9, 17, client_id, 0)
    body = broker_tests.produce_body("orders", (0, broker_tests.batch(b"x" * 1000)))
    req = build(request_schema(ApiKey.PRODUCE, 9), body)
    ctx = RequestContext(header, "PLAINTEXT", "broker", "10.0.0.9", 50000,
                         clock=broker_tests.clock, request_size=len(encode_body(req)) + 20)
    answer = broker_tests.decoded(ApiKey.PRODUCE, 9, await _awaited(
        produce.handle_produce(b, ctx, req)))
    assert broker_tests.partition_answer(answer).error_code == ErrorCode.none
    return int(answer.throttle_time.total_seconds() * 1000), ctx.throttle_ms


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def test_a_producer_over_its_quota_is_answered_with_the_throttle(broker: Any) -> None:
    """The request's size against producer_byte_rate; another client id is not
    throttled; without quotas nothing is recorded."""
    broker_tests.create_topic(broker, "orders")
    assert await produced_with_throttle(broker, "fast") == (0, 0)
    assert broker.client_quotas.produce.sensors == {}
    broker.client_quotas.apply([(("client-id", "fast"),)], {
        (("client-id", "fast"),): {"producer_byte_rate": 100.0}})
    throttles = [await produced_with_throttle(broker, "fast") for _ in range(3)]
    assert throttles[0][0] > 0 and all(answered == muted for answered, muted in throttles)
    assert throttles[0][0] < throttles[1][0] < throttles[2][0]  # the rate keeps growing
    # Each request over 10 s (the clock stands still): (O - T) / T * W.
    size = broker.client_quotas.produce.sensors[(ABSENT, "fast")].stat.measure(
        broker_tests.NOW_MS) * 10
    assert throttles[2][0] == throttle_time_ms(size / 10, 100.0, 10_000)
    assert await produced_with_throttle(broker, "slow") == (0, 0)


async def test_a_consumer_over_its_quota_gets_an_empty_answer_with_the_throttle(
        broker: Any) -> None:
    """Kafka's throttled fetch: no partitions, the throttle time, the bytes taken back;
    a fetch may ask for no more than the quota over all but one window."""
    broker_tests.create_topic(broker, "orders")
    await broker_tests.produce_ok(broker, "orders", 0, broker_tests.batch(b"y" * 2000))
    broker.client_quotas.load({(("user", None),): {"consumer_byte_rate": 1000.0}})
    body = broker_tests.fetch_body("orders", (0, 0, 1 << 20))
    header = RequestHeader(ApiKey.FETCH, 12, 17, "reader", 0)
    req = build(request_schema(ApiKey.FETCH, 12), body)
    # At most 10000 bytes per fetch (1000 B/s * 10 windows); each fetch of the batch
    # (4 kB) adds 400 B/s over the 10 s floor: the third is over the quota.
    assert broker.client_quotas.fetch.max_value_in_quota_window("ANONYMOUS", "reader") == \
        10_000
    answers, contexts = [], []
    for _ in range(3):
        ctx = RequestContext(header, "PLAINTEXT", "broker", "10.0.0.9", 50000,
                             clock=broker_tests.clock)
        answers.append(broker_tests.decoded(ApiKey.FETCH, 12, await _awaited(
            fetch.handle_fetch(broker, ctx, req))))
        contexts.append(ctx)
    assert [len(a.responses) for a in answers] == [1, 1, 0]
    assert [c.throttle_ms for c in contexts[:2]] == [0, 0]
    assert answers[2].throttle_time.total_seconds() * 1000 == contexts[2].throttle_ms > 0
    # The throttled answer's bytes were taken back: the rate is two fetches' worth.
    rate = broker.client_quotas.fetch.sensors[("ANONYMOUS", ABSENT)].stat
    assert 800 < rate.measure(broker_tests.NOW_MS) < 1000


async def test_a_followers_fetch_is_never_throttled(broker: Any) -> None:
    broker.client_quotas.load({(("client-id", None),): {"consumer_byte_rate": 1.0}})
    topic_id, _ = broker_tests.leader_with_records(broker, b"z" * 1000)
    response = await broker_tests.ask(broker, ApiKey.FETCH, 15, broker_tests.replica_fetch_body(
        topic_id, (0, 0, 0, -1)))
    assert response.throttle_time.total_seconds() == 0
    assert broker_tests.fetched(response)[0].records
    assert broker.client_quotas.fetch.sensors == {}


def test_a_brokers_managers_follow_the_committed_quotas_and_snapshots() -> None:
    """The metadata publisher applies each commit's quota changes (Kafka's
    DynamicClientQuotaPublisher) and every quota again after a snapshot."""
    from ottla.metadata.bootstrap import encode_snapshot
    from ottla.metadata.image import MetadataImage
    from ottla.raft.messages import Committed, Entry, Snapshot
    from ottla.server.metadata_publisher import MetadataPublisher
    from tests.unit.test_authorization import NoRaft
    from tests.unit.test_client_quotas import quota_record

    managers = ClientQuotaManagers()
    publisher = MetadataPublisher(MetadataImage(), NoRaft(),  # type: ignore[arg-type]
                                  client_quotas=managers)
    alice = (("user", "alice"),)
    publisher.on_committed(Committed(0, [Entry(1, [
        quota_record(alice, "producer_byte_rate", 1000),
        quota_record((("client-id", None),), "consumer_byte_rate", 50)], 2)]))
    assert managers.produce.quota("alice", "any") == 1000.0
    assert managers.fetch.quota("bob", "any") == 50.0
    publisher.on_committed(Committed(2, [Entry(1, [
        quota_record(alice, "producer_byte_rate")])]))
    assert not managers.produce.enabled
    snapshot = encode_snapshot([quota_record(alice, "request_percentage", 20)], 0)
    publisher.on_committed(Committed(10, [], Snapshot(10, 1, snapshot)))
    assert managers.request.quota("alice", "x") == 20.0
    assert not managers.fetch.enabled
