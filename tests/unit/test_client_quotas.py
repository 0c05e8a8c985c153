"""Client quotas as KRaft metadata (KIP-546): ClientQuotaRecord, the image and its
snapshots, the delta, the controller's AlterClientQuotas (Kafka's
ClientQuotaControlManager), DescribeClientQuotas's filters (Kafka's
ClientQuotasImage.describe), and both APIs over the wire.

The expectations are Kafka's: the record layout of
``metadata/src/main/resources/common/metadata/ClientQuotaRecord.json``, and the errors
and messages of ClientQuotaControlManager (4.4's, with its finite-number check) and
ClientQuotasImage as ClientQuotaControlManagerTest and ClientQuotasImageTest hold them.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from kio.static.primitive import f64

from ottla.broker.handlers import broker_apis
from ottla.broker.handlers.client_quotas import handle_describe_client_quotas
from ottla.broker.handlers.forwarding import FORWARDED
from ottla.controller.client_quota_control import QuotaAlteration
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot
from ottla.metadata.client_quotas import (
    QuotaEntity,
    QuotaFilterError,
    describe,
    entity_str,
    quota_entity,
)
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import RequestHeader, encode_body
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.protocol.requests import RequestContext
from ottla.server.controller_apis import controller_apis
from ottla.timeline import SnapshotRegistry
from tests.kafka_versions import BROKER_APIS, CONTROLLER_APIS
from tests.unit.test_controller_apis import ask, make_env

ALICE: QuotaEntity = (("user", "alice"),)
APP: QuotaEntity = (("client-id", "app"),)
ALICE_APP: QuotaEntity = (("client-id", "app"), ("user", "alice"))
DEFAULT_USER: QuotaEntity = (("user", None),)
DEFAULT_CLIENT: QuotaEntity = (("client-id", None),)
DEFAULT_BOTH: QuotaEntity = (("client-id", None), ("user", None))
INVALID = ErrorCode.invalid_request
OK = (ErrorCode.none, None)


def quota_record(entity: QuotaEntity, key: str, value: float | None = None
                 ) -> r.ClientQuotaRecord:
    """A record setting ``key`` (removing it when ``value`` is None)."""
    data = tuple(r.ClientQuotaEntityData(entity_type=k, entity_name=n) for k, n in entity)
    if value is None:
        return r.ClientQuotaRecord(entity=data, key=key, remove=True)
    return r.ClientQuotaRecord(entity=data, key=key, value=f64(float(value)))


# --- the record -------------------------------------------------------------------------


def test_client_quota_record_is_type_14_v0_in_kafkas_layout() -> None:
    record = quota_record((("user", "alice"), ("client-id", None)), "producer_byte_rate",
                          1048576.0)
    assert r.encode(record) == bytes.fromhex(
        "01" "0e" "00"  # frame version 1, api key 14, version 0
        "03"  # two entity entries (compact array)
        "05" + b"user".hex() + "06" + b"alice".hex() + "00"
        "0a" + b"client-id".hex() + "00" "00"  # a null name: the default
        "13" + b"producer_byte_rate".hex() +
        "4130000000000000"  # 1048576.0, a big-endian double
        "00" "00")  # remove false, no tagged fields
    assert r.decode(r.encode(record)) == record


# --- the image, its snapshots, the delta --------------------------------------------------


def test_the_image_keeps_each_entitys_quotas_and_forgets_an_empty_one() -> None:
    image = MetadataImage()
    image.replay(quota_record(ALICE, "producer_byte_rate", 1024))
    image.replay(quota_record(ALICE, "consumer_byte_rate", 2048))
    image.replay(quota_record(ALICE, "producer_byte_rate", 4096))  # replaces
    image.replay(quota_record(DEFAULT_BOTH, "request_percentage", 50))
    # The order a record names the types in does not make another entity.
    image.replay(quota_record((("user", "alice"), ("client-id", "app")), "producer_byte_rate",
                              10))
    assert dict(image.client_quotas) == {
        ALICE: {"producer_byte_rate": 4096.0, "consumer_byte_rate": 2048.0},
        DEFAULT_BOTH: {"request_percentage": 50.0},
        ALICE_APP: {"producer_byte_rate": 10.0}}
    image.replay(quota_record(DEFAULT_BOTH, "request_percentage"))
    image.replay(quota_record(ALICE, "no_such_key"))  # removing what is not there
    assert DEFAULT_BOTH not in image.client_quotas
    assert image.client_quotas[ALICE] == {"producer_byte_rate": 4096.0,
                                          "consumer_byte_rate": 2048.0}


def test_a_snapshot_carries_the_quotas_after_the_configs() -> None:
    image = MetadataImage()
    image.replay(r.ConfigRecord(resource_type=2, resource_name="t", name="retention.ms",
                                value="1"))
    image.replay(r.ProducerIdsRecord(broker_id=1, next_producer_id=1000))
    for record in (quota_record(APP, "producer_byte_rate", 100),
                   quota_record(DEFAULT_USER, "consumer_byte_rate", 200),
                   quota_record((("ip", "10.0.0.1"),), "connection_creation_rate", 5),
                   quota_record(DEFAULT_CLIENT, "producer_byte_rate", 300)):
        image.replay(record)
    records = image.to_records()
    kinds = [type(rec).__name__ for rec in records]
    assert kinds == ["ConfigRecord", *["ClientQuotaRecord"] * 4, "ProducerIdsRecord"]
    copy = MetadataImage()
    loader = MetadataLoader(copy)
    loader.load_snapshot(decode_snapshot(encode_snapshot(records, 1)).records, 10)
    assert copy.digest() == image.digest()
    assert dict(copy.client_quotas) == dict(image.client_quotas)


def test_the_delta_notes_the_entities_whose_quotas_changed() -> None:
    loader = MetadataLoader(MetadataImage())
    assert not loader.apply(quota_record(ALICE, "producer_byte_rate", 1), 0)
    loader.apply(quota_record((("user", "alice"), ("client-id", "app")),
                              "consumer_byte_rate", 1), 1)
    delta = loader.take_delta()
    assert delta.client_quotas == {ALICE, ALICE_APP} and delta.changed
    assert not loader.take_delta().client_quotas


def test_a_timeline_image_reverts_uncommitted_quotas() -> None:
    registry = SnapshotRegistry()
    image = MetadataImage(registry)
    image.replay(quota_record(ALICE, "producer_byte_rate", 1))
    registry.get_or_create_snapshot(1)
    image.replay(quota_record(ALICE, "producer_byte_rate"))
    image.replay(quota_record(APP, "producer_byte_rate", 2))
    registry.revert_to_snapshot(1)
    assert dict(image.client_quotas) == {ALICE: {"producer_byte_rate": 1.0}}


def test_an_entity_prints_as_kafkas_client_quota_entity() -> None:
    assert entity_str(quota_entity([("user", "alice"), ("client-id", None)])) == \
        "ClientQuotaEntity(entries={client-id=null, user=alice})"
    assert quota_entity([("user", "a"), ("user", "b")]) == (("user", "b"),)


# --- the controller: AlterClientQuotas ------------------------------------------------------


def alter(c: QuorumController, *alterations: tuple[QuotaEntity, dict[str, float | None]],
          validate_only: bool = False) -> list[tuple[QuotaEntity, int, str | None]]:
    result = c.client_quotas.alter_client_quotas(
        [QuotaAlteration(entity, tuple(ops.items())) for entity, ops in alterations],
        validate_only)
    for record in result.records:
        c.replay(r.decode(r.encode(record)))
    return result.response


def test_setting_quotas_writes_one_record_per_key_and_only_changes() -> None:
    c = QuorumController(1)
    result = c.client_quotas.alter_client_quotas([QuotaAlteration(
        ALICE_APP, (("producer_byte_rate", 1048576.0), ("request_percentage", 12.5)))])
    assert result.response == [(ALICE_APP, *OK)]
    assert sorted(result.records, key=lambda rec: rec.key) == [
        quota_record(ALICE_APP, "producer_byte_rate", 1048576),
        quota_record(ALICE_APP, "request_percentage", 12.5)]
    for record in result.records:
        c.replay(record)
    # The same value again writes nothing; a new one, and removals of keys it has, do.
    again = c.client_quotas.alter_client_quotas([QuotaAlteration(
        ALICE_APP, (("producer_byte_rate", 1048576.0), ("request_percentage", None),
                    ("consumer_byte_rate", None), ("controller_mutation_rate", 3.0)))])
    assert again.response == [(ALICE_APP, *OK)]
    assert sorted(again.records, key=lambda rec: rec.key) == [
        quota_record(ALICE_APP, "controller_mutation_rate", 3),
        quota_record(ALICE_APP, "request_percentage")]


def test_defaults_and_ip_entities_are_accepted() -> None:
    c = QuorumController(1)
    assert alter(c, (DEFAULT_USER, {"consumer_byte_rate": 100}),
                 (DEFAULT_BOTH, {"producer_byte_rate": 200}),
                 ((("ip", "10.1.2.3"),), {"connection_creation_rate": 10}),
                 ((("ip", "::1"),), {"connection_creation_rate": 10}),
                 ((("ip", None),), {"connection_creation_rate": 20})) == [
        (DEFAULT_USER, *OK), (DEFAULT_BOTH, *OK), ((("ip", "10.1.2.3"),), *OK),
        ((("ip", "::1"),), *OK), ((("ip", None),), *OK)]
    assert c.image.client_quotas[DEFAULT_BOTH] == {"producer_byte_rate": 200.0}


@pytest.mark.parametrize("entity,ops,message", [
    (ALICE, {"no_such_key": 1.0}, "Invalid configuration key no_such_key"),
    (ALICE, {"connection_creation_rate": 1.0},
     "Invalid configuration key connection_creation_rate"),
    ((("ip", "10.0.0.1"),), {"producer_byte_rate": 1.0},
     "Invalid configuration key producer_byte_rate"),
    (ALICE, {"producer_byte_rate": -1.0}, "Quota producer_byte_rate must be greater than 0"),
    (ALICE, {"request_percentage": 0.0}, "Quota request_percentage must be greater than 0"),
    (ALICE, {"producer_byte_rate": math.nan}, "Quota producer_byte_rate must be a finite number"),
    (ALICE, {"consumer_byte_rate": math.inf}, "Quota consumer_byte_rate must be a finite number"),
    (ALICE, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
    (ALICE, {"producer_byte_rate": 1e19},
     "Proposed value for producer_byte_rate is too large for a LONG."),
    ((("ip", None),), {"connection_creation_rate": 2.0**31},
     "Proposed value for connection_creation_rate is too large for an INT."),
    ((("ip", "10.0.0.1"),), {"connection_creation_rate": 0.5},
     "connection_creation_rate cannot be a fractional value."),
    ((("ip", "10.0.0.1"),), {"connection_creation_rate": 0.0},
     "Quota connection_creation_rate must be greater than 0"),
    ((), {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    ((("user", ""),), {"producer_byte_rate": 1.0}, "Empty user not supported"),
    ((("client-id", ""),), {"producer_byte_rate": 1.0}, "Empty client-id not supported"),
    ((("group", "g"),), {"producer_byte_rate": 1.0},
     "Unhandled client quota entity type: group"),
    ((("ip", "10.0.0.1"), ("user", "alice")), {"connection_creation_rate": 1.0},
     "Invalid quota entity combination, IP entity shouldnot be combined with User or "
     "ClientId"),
    ((("ip", "not an address"),), {"connection_creation_rate": 1.0},
     "not an address is not a valid IP or resolvable host."),
])
def test_invalid_alterations_get_kafkas_messages(entity: QuotaEntity,
                                                 ops: dict[str, float | None],
                                                 message: str) -> None:
    c = QuorumController(1)
    result = c.client_quotas.alter_client_quotas([QuotaAlteration(
        quota_entity(entity), tuple(ops.items()))])
    assert (result.records, result.response) == ([], [(quota_entity(entity), INVALID,
                                                       message)])


def test_fractional_doubles_and_tiny_remainders_are_accepted() -> None:
    """request_percentage and controller_mutation_rate are doubles; a LONG key allows a
    remainder up to 1e-6, as Kafka's getErrorForIntegralQuotaValue."""
    c = QuorumController(1)
    assert alter(c, (ALICE, {"request_percentage": 0.5, "controller_mutation_rate": 1.25,
                             "producer_byte_rate": 1000.0000001})) == [(ALICE, *OK)]


def test_one_bad_key_refuses_its_entity_but_not_the_others() -> None:
    c = QuorumController(1)
    result = c.client_quotas.alter_client_quotas([
        QuotaAlteration(ALICE, (("producer_byte_rate", 10.0), ("bogus", 1.0))),
        QuotaAlteration(APP, (("producer_byte_rate", 20.0),))])
    assert result.records == [quota_record(APP, "producer_byte_rate", 20)]
    assert result.response == [(ALICE, INVALID, "Invalid configuration key bogus"),
                               (APP, *OK)]


def test_removing_an_unknown_key_is_no_error_and_writes_nothing() -> None:
    """Kafka checks only the keys it sets."""
    result = QuorumController(1).client_quotas.alter_client_quotas([QuotaAlteration(
        ALICE, (("bogus", None), ("producer_byte_rate", None)))])
    assert (result.records, result.response) == ([], [(ALICE, *OK)])


def test_duplicates_are_answered_as_kafka_answers_them() -> None:
    """An entity named twice: its first alteration applies, its one result says it was
    ignored; a key named twice in an alteration: the entity is ignored (Kafka's
    "Duplicate quota key" message is overwritten by "Ignoring duplicate entity")."""
    c = QuorumController(1)
    result = c.client_quotas.alter_client_quotas([
        QuotaAlteration(ALICE, (("producer_byte_rate", 10.0),)),
        QuotaAlteration(ALICE, (("producer_byte_rate", 20.0),)),
        QuotaAlteration(APP, (("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)))])
    assert result.records == [quota_record(ALICE, "producer_byte_rate", 10)]
    assert result.response == [
        (ALICE, INVALID, "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"),
        (APP, INVALID, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app})")]


def test_validate_only_answers_without_records() -> None:
    c = QuorumController(1)
    assert alter(c, (ALICE, {"producer_byte_rate": 10}), (APP, {"bad": 1}),
                 validate_only=True) == [(ALICE, *OK),
                                         (APP, INVALID, "Invalid configuration key bad")]
    assert not c.image.client_quotas


def test_the_first_bad_key_named_is_the_one_kafkas_map_meets_first() -> None:
    """Kafka checks an entity's keys in its HashMap's order: consumer_byte_rate before
    producer_byte_rate for two keys."""
    result = QuorumController(1).client_quotas.alter_client_quotas([QuotaAlteration(
        ALICE, (("producer_byte_rate", -1.0), ("consumer_byte_rate", -1.0)))])
    assert result.response == [(ALICE, INVALID,
                                "Quota consumer_byte_rate must be greater than 0")]


# --- DescribeClientQuotas's filters -----------------------------------------------------------


QUOTAS: dict[QuotaEntity, dict[str, float]] = {
    ALICE: {"producer_byte_rate": 1.0},
    DEFAULT_USER: {"producer_byte_rate": 2.0},
    APP: {"consumer_byte_rate": 3.0},
    DEFAULT_CLIENT: {"consumer_byte_rate": 4.0},
    ALICE_APP: {"request_percentage": 5.0},
    DEFAULT_BOTH: {"request_percentage": 6.0},
    (("client-id", None), ("user", "alice")): {"request_percentage": 7.0},
    (("ip", "10.0.0.1"),): {"connection_creation_rate": 8.0},
}


def selected(components: list[tuple[str, int, str | None]], strict: bool = False
             ) -> list[float]:
    """The values of the entities a filter selects (each entity has one)."""
    return [next(iter(values.values())) for _, values in describe(QUOTAS, components,
                                                                  strict)]


@pytest.mark.parametrize("components,strict,values", [
    ([], False, [4.0, 6.0, 7.0, 3.0, 5.0, 8.0, 2.0, 1.0]),  # all, sorted, defaults first
    ([], True, []),  # strict with no components: entities with no types, none
    ([("user", 0, "alice")], False, [7.0, 5.0, 1.0]),
    ([("user", 0, "alice")], True, [1.0]),
    ([("user", 1, None)], True, [2.0]),
    ([("user", 1, None)], False, [6.0, 2.0]),
    ([("user", 2, None)], True, [2.0, 1.0]),  # SPECIFIED: the default too, as Kafka's code
    ([("client-id", 0, "app"), ("user", 2, None)], True, [5.0]),
    ([("client-id", 1, None), ("user", 1, None)], True, [6.0]),
    ([("client-id", 2, None)], False, [4.0, 6.0, 7.0, 3.0, 5.0]),
    ([("ip", 2, None)], False, [8.0]),
    ([("user", 0, "nobody")], False, []),
])
def test_a_filter_selects_as_kafkas_image_does(components: list[tuple[str, int, str | None]],
                                               strict: bool, values: list[float]) -> None:
    assert selected(components, strict) == values


@pytest.mark.parametrize("components,code,message", [
    ([("", 0, "x")], INVALID, "Invalid empty entity type."),
    ([("user", 0, "a"), ("user", 1, None)], INVALID,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", 0, "g")], ErrorCode.unsupported_version, "Unsupported entity type group"),
    ([("user", 0, None)], INVALID,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", 1, "a")], INVALID,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 2, "a")], INVALID,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 3, None)], INVALID, "Unknown match type 3"),
    ([("ip", 2, None), ("client-id", 0, "app")], INVALID,
     "Invalid entity filter component combination. IP filter component should not be "
     "used with user or clientId filter component."),
])
def test_a_bad_filter_is_refused_with_kafkas_error(components: list[tuple[str, int, str | None]],
                                                   code: ErrorCode, message: str) -> None:
    with pytest.raises(QuotaFilterError) as refused:
        describe(QUOTAS, components, False)
    assert (refused.value.code, refused.value.message) == (code, message)


# --- the wire -------------------------------------------------------------------------------


def test_the_quota_apis_are_served_where_kafka_44_serves_them() -> None:
    """DescribeClientQuotas on brokers only; AlterClientQuotas on both listeners, brokers
    forwarding it to the controller."""
    broker = {s.api_key: (s.min_version, s.max_version) for s in broker_apis()}
    controller_side = {s.api_key: (s.min_version, s.max_version) for s in controller_apis()}
    assert broker[ApiKey.DESCRIBE_CLIENT_QUOTAS] == BROKER_APIS[48] == (0, 1)
    assert ApiKey.DESCRIBE_CLIENT_QUOTAS not in controller_side
    assert 48 not in CONTROLLER_APIS
    assert controller_side[ApiKey.ALTER_CLIENT_QUOTAS] == CONTROLLER_APIS[49] == (0, 1)
    assert (ApiKey.ALTER_CLIENT_QUOTAS, 0, 1) in FORWARDED


def wire_entry(entity: QuotaEntity, ops: dict[str, float | None]) -> dict[str, Any]:
    return {"entity": [{"entity_type": k, "entity_name": n} for k, n in entity],
            "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None}
                    for k, v in ops.items()]}


def describe_on_wire(image: MetadataImage, version: int, body: dict[str, Any]) -> Any:
    header = RequestHeader(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, 3, "test", 0)
    ctx = RequestContext(header, "PLAINTEXT", "broker", "127.0.0.1", 1)
    req = build(request_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, version), body)
    response = handle_describe_client_quotas(SimpleNamespace(image=image),  # type: ignore[arg-type]
                                             ctx, req)
    schema = response_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    from kio.serial import entity_reader
    encoded = encode_body(build(schema, response))
    return entity_reader(schema)(encoded, 0)[0]


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_then_describe_over_the_wire(version: int) -> None:
    env = make_env()
    response = await ask(env, ApiKey.ALTER_CLIENT_QUOTAS, version, {
        "entries": [wire_entry(ALICE_APP, {"producer_byte_rate": 1048576.0}),
                    wire_entry(DEFAULT_CLIENT, {"consumer_byte_rate": 2048.0}),
                    wire_entry(APP, {"bogus": 1.0})], "validate_only": False})
    assert [(tuple((e.entity_type, e.entity_name) for e in entry.entity), entry.error_code,
             entry.error_message) for entry in response.entries] == [
        (ALICE_APP, *OK), (DEFAULT_CLIENT, *OK), (APP, INVALID, "Invalid configuration key bogus")]
    described = describe_on_wire(env.image, version, {"components": [
        {"entity_type": "client-id", "match_type": 2, "match": None}], "strict": False})
    assert (described.error_code, described.error_message) == OK
    assert [(tuple((e.entity_type, e.entity_name) for e in entry.entity),
             [(v.key, v.value) for v in entry.values]) for entry in described.entries] == [
        (DEFAULT_CLIENT, [("consumer_byte_rate", 2048.0)]),
        (ALICE_APP, [("producer_byte_rate", 1048576.0)])]
    removed = await ask(env, ApiKey.ALTER_CLIENT_QUOTAS, version, {
        "entries": [wire_entry(ALICE_APP, {"producer_byte_rate": None})],
        "validate_only": False})
    assert removed.entries[0].error_code == ErrorCode.none
    assert ALICE_APP not in env.image.client_quotas


def test_a_refused_filter_answers_the_error_and_no_entries() -> None:
    described = describe_on_wire(MetadataImage(), 1, {"components": [
        {"entity_type": "user", "match_type": 0, "match": None}], "strict": False})
    assert (described.error_code, described.error_message, described.entries) == (
        INVALID, "Request specified MATCH_TYPE_EXACT, but set match string to null.", None)


async def test_without_the_cluster_permissions_both_apis_refuse_as_kafka() -> None:
    """DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster (the error at the top,
    no entries), AlterClientQuotas ALTER_CONFIGS (the error in every entry, its entity as
    the request named it, Errors' own message)."""
    from ottla.common.principal import Principal
    from ottla.security.authorizer import StandardAuthorizer
    from tests.unit.test_controller_apis import as_read, context

    nobody = StandardAuthorizer()
    header = RequestHeader(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, 3, "test", 0)
    ctx = RequestContext(header, "PLAINTEXT", "broker", "127.0.0.1", 1,
                         principal=Principal("User", "alice"), authorizer=nobody)
    req = build(request_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1),
                {"components": [], "strict": False})
    assert handle_describe_client_quotas(SimpleNamespace(image=MetadataImage()),  # type: ignore[arg-type]
                                         ctx, req) == {
        "throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
        "error_message": "Cluster authorization failed.", "entries": None}
    env = make_env()
    alter_ctx = context(env, ApiKey.ALTER_CLIENT_QUOTAS, 1)
    alter_ctx.principal, alter_ctx.authorizer = Principal("User", "alice"), nobody
    alter_req = build(request_schema(ApiKey.ALTER_CLIENT_QUOTAS, 1), {"entries": [
        wire_entry((("user", "bob"), ("client-id", None)), {"producer_byte_rate": 1.0})],
        "validate_only": False})
    spec = env.dispatcher.table.get(ApiKey.ALTER_CLIENT_QUOTAS)
    assert spec is not None
    refused = as_read(env, alter_ctx, await env.dispatcher.call(spec, alter_ctx, alter_req))
    assert [(tuple((e.entity_type, e.entity_name) for e in entry.entity), entry.error_code,
             entry.error_message) for entry in refused.entries] == [
        ((("user", "bob"), ("client-id", None)), ErrorCode.cluster_authorization_failed,
         "Cluster authorization failed.")]
    assert not env.image.client_quotas


# --- Java's orders and numbers, as kafka-configs prints them ---------------------------------


def test_hash_map_order_is_javas() -> None:
    """Checked against a JVM (Java 17): ``new HashMap<>(n)`` of the first n quota keys,
    a ``HashMap`` of entities keyed by ``Objects.hash(entries)``, a ``HashSet``."""
    from ottla.cli.client_quota_configs import _entity_hash
    from ottla.common.java import hash_map_order, hash_set_order, string_hash

    keys = ["producer_byte_rate", "consumer_byte_rate", "request_percentage",
            "controller_mutation_rate"]
    assert [hash_map_order(keys[:n], string_hash, n) for n in range(1, 5)] == [
        ["producer_byte_rate"], ["consumer_byte_rate", "producer_byte_rate"],
        ["consumer_byte_rate", "producer_byte_rate", "request_percentage"],
        ["producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate",
         "request_percentage"]]
    numbered = {ALICE: 1, DEFAULT_USER: 2, APP: 3, DEFAULT_CLIENT: 4, ALICE_APP: 5,
                DEFAULT_BOTH: 6}
    assert [numbered[e] for e in hash_map_order(numbered, _entity_hash, len(numbered))] == \
        [5, 3, 2, 1, 4, 6]
    assert hash_set_order(["zzz", "foo", "bogus"], string_hash) == ["bogus", "foo", "zzz"]


@pytest.mark.parametrize("value,text", [
    (1048576.0, "1048576.0"), (1e7, "1.0E7"), (10485760.0, "1.048576E7"), (0.5, "0.5"),
    (1e-4, "1.0E-4"), (123456789.0, "1.23456789E8"), (9.223372036854776e18,
                                                       "9.223372036854776E18")])
def test_doubles_print_as_javas_double_to_string(value: float, text: str) -> None:
    from ottla.common.java import double_str

    assert double_str(value) == text


@pytest.mark.parametrize("text,value", [
    ("1048576", 1048576.0), (" 1e6 ", 1e6), ("12d", 12.0), ("2.5F", 2.5), (".5", 0.5),
    ("-Infinity", -math.inf), ("inf", None), ("1_000", None), ("", None), ("abc", None),
    ("NaNd", None)])
def test_values_parse_as_javas_parse_double(text: str, value: float | None) -> None:
    from ottla.common.java import parse_double

    if value is None:
        with pytest.raises(ValueError):
            parse_double(text)
    else:
        assert parse_double(text) == value


# --- ottla configs --entity-type users / clients (kafka-configs) --------------------------


class QuotaWire:
    """Stands in for the CLI's BlockingClient: DescribeClientQuotas answered by a broker's
    handler from the controller's image, everything else by the controller listener."""

    def __init__(self) -> None:
        self.env = make_env()

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        import asyncio

        if api_key == ApiKey.DESCRIBE_CLIENT_QUOTAS:
            return describe_on_wire(self.env.image, version, body)
        return asyncio.run(ask(self.env, api_key, version, body))


@pytest.fixture
def configs(monkeypatch: Any, capsys: Any) -> Any:
    """``ottla configs ARGS...`` against a ``QuotaWire``: (exit code, stdout, stderr)."""
    import contextlib

    from ottla.cli import configs as configs_cli
    from ottla.cli.main import main as ottla_main

    wire = QuotaWire()

    @contextlib.contextmanager
    def connect(*_: Any) -> Any:
        yield wire

    monkeypatch.setattr(configs_cli, "connect", connect)

    def run(*args: str) -> tuple[int, str, str]:
        code = ottla_main(["configs", "--bootstrap-server", "x:9092", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    run.wire = wire  # type: ignore[attr-defined]
    return run


def test_configs_alters_and_describes_quotas_as_kafka_configs(configs: Any) -> None:
    alice = ["--entity-type", "users", "--entity-name", "alice"]
    assert configs("--alter", *alice, "--add-config",
                   "producer_byte_rate=1048576,consumer_byte_rate=20971520") == (
        0, "Completed updating config for user alice.\n", "")
    assert configs("--alter", "--entity-type", "clients", "--entity-default", "--add-config",
                   "producer_byte_rate=1024") == (
        0, "Completed updating default config for clients in the cluster.\n", "")
    assert configs("--alter", *alice, "--entity-type", "clients", "--entity-name", "app",
                   "--add-config", "request_percentage=12.5") == (
        0, "Completed updating config for user alice.\n", "")
    assert configs("--alter", "--entity-type", "clients", "--entity-default",
                   "--entity-type", "users", "--entity-default", "--add-config",
                   "consumer_byte_rate=2048") == (
        0, "Completed updating default config for clients in the cluster.\n", "")
    assert configs("--describe", *alice) == (0, (
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2.097152E7, "
        "producer_byte_rate=1048576.0\n"), "")
    assert configs("--describe", "--entity-type", "clients") == (
        0, "Quota configs for the default client-id are producer_byte_rate=1024.0\n", "")
    code, out, _ = configs("--describe", "--entity-type", "users", "--entity-type", "clients")
    assert code == 0 and sorted(out.splitlines()) == [
        "Quota configs for the default user-principal, the default client-id are "
        "consumer_byte_rate=2048.0",
        "Quota configs for user-principal 'alice', client-id 'app' are "
        "request_percentage=12.5"]
    assert configs("--alter", *alice, "--delete-config", "consumer_byte_rate") == (
        0, "Completed updating config for user alice.\n", "")
    assert configs("--describe", *alice) == (
        0, "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n", "")
    assert configs.wire.env.image.client_quotas[ALICE] == {"producer_byte_rate": 1048576.0}


@pytest.mark.parametrize("args,message", [
    (["--entity-type", "users", "--entity-name", "alice", "--add-config", "bogus=1"],
     "Only quota and SCRAM credential configs can be added for 'users' using "
     "--bootstrap-server. Unexpected config names: bogus"),
    (["--entity-type", "clients", "--entity-name", "app", "--add-config",
      "SCRAM-SHA-256=[password=x]"],
     "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
     "config names: SCRAM-SHA-256"),
    (["--entity-type", "clients", "--entity-name", "app", "--delete-config", "bogus"],
     "Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected "
     "config names: bogus"),
    (["--entity-type", "users", "--entity-name", "alice", "--add-config",
      "producer_byte_rate=fast"],
     "Cannot parse quota configuration value for producer_byte_rate: fast"),
    (["--entity-type", "users", "--entity-name", "alice", "--add-config",
      "producer_byte_rate=-5"], "Quota producer_byte_rate must be greater than 0"),
    (["--entity-type", "clients", "--entity-name", "app", "--add-config",
      "consumer_byte_rate=1.5"], "consumer_byte_rate cannot be a fractional value."),
    (["--entity-type", "users", "--entity-name", "alice", "--delete-config",
      "producer_byte_rate"], "Invalid config(s): producer_byte_rate"),
    (["--entity-type", "users", "--entity-type", "clients", "--entity-name", "alice",
      "--add-config", "producer_byte_rate=1"],
     "Exactly one entity name must be specified for every entity type"),
    (["--entity-type", "users", "--entity-type", "users", "--entity-name", "alice",
      "--add-config", "producer_byte_rate=1"], "Duplicate entity type(s) specified: users"),
    (["--entity-type", "users", "--entity-type", "topics", "--entity-name", "alice",
      "--add-config", "producer_byte_rate=1"],
     "Only 'users' and 'clients' entity types may be specified together"),
    (["--entity-type", "clients", "--add-config", "producer_byte_rate=1"],
     "An entity-name or default entity must be specified with --alter of users, clients, "
     "brokers or ips"),
])
def test_configs_refuses_what_kafka_configs_refuses_for_quotas(configs: Any, args: list[str],
                                                               message: str) -> None:
    code, out, err = configs("--alter", *args)
    assert (code, out) == (1, "")
    assert message in err
    assert not configs.wire.env.image.client_quotas
