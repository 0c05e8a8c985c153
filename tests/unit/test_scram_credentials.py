"""SCRAM credentials as KRaft metadata (KIP-554): the two metadata records, the image's
lookup and its snapshots, the controller's AlterUserScramCredentials (Kafka's
ScramControlManager), DescribeUserScramCredentials, ``storage format --add-scram``
(Kafka's ScramParser) and ``ottla configs --entity-type users``.

The expectations are Kafka's: the record layouts of
``metadata/src/main/resources/common/metadata/{,Remove}UserScramCredentialRecord.json``,
the keys as Kafka's ScramFormatter derives them (``storedKey = H(HMAC(salted, "Client
Key"))``, ``serverKey = HMAC(salted, "Server Key")``, computed here with hashlib), the
errors and messages of ScramControlManager and ScramImage as Kafka's
AlterUserScramCredentialsRequestTest and DescribeUserScramCredentialsRequestTest hold
them, ScramParserTest's vectors, and kafka-configs' output lines.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
from typing import Any

import pytest

from ottla.broker.handlers import broker_apis
from ottla.broker.handlers.forwarding import FORWARDED
from ottla.broker.handlers.scram import describe_user_scram_credentials
from ottla.cli import configs as configs_cli
from ottla.cli.main import main as ottla_main
from ottla.cli.storage import scram_record, scram_records
from ottla.common.features import METADATA_VERSION
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.scram_control import ScramDeletion, ScramUpsertion
from ottla.metadata import records as r
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot, read_bootstrap
from ottla.metadata.delta import MetadataDelta
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import encode_body
from ottla.protocol.error_response import error_response
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.security.scram import ScramMechanism
from ottla.server.controller_apis import controller_apis
from ottla.timeline import SnapshotRegistry
from tests.kafka_versions import BROKER_APIS, CONTROLLER_APIS
from tests.unit.test_controller_apis import Env, ask, make_env

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
HASHES = {1: "sha256", 2: "sha512"}
SALT = b"salt"
SALTED = b"saltedPassword"
"""The salt and salted password Kafka's AlterUserScramCredentialsRequestTest sends."""


def stored_key(mechanism: int, salted: bytes) -> bytes:
    client_key = hmac.new(salted, b"Client Key", HASHES[mechanism]).digest()
    return hashlib.new(HASHES[mechanism], client_key).digest()


def server_key(mechanism: int, salted: bytes) -> bytes:
    return hmac.new(salted, b"Server Key", HASHES[mechanism]).digest()


def credential_record(name: str, mechanism: int, salt: bytes = SALT,
                      salted: bytes = SALTED, iterations: int = 4096
                      ) -> r.UserScramCredentialRecord:
    return r.UserScramCredentialRecord(
        name=name, mechanism=mechanism, salt=salt, stored_key=stored_key(mechanism, salted),
        server_key=server_key(mechanism, salted), iterations=iterations)


# --- records ---------------------------------------------------------------------------


def test_user_scram_credential_record_is_type_11_v0_in_kafkas_layout() -> None:
    record = r.UserScramCredentialRecord(name="alice", mechanism=2, salt=b"NaCl",
                                         stored_key=b"\x01" * 64, server_key=b"\x02" * 64,
                                         iterations=8192)
    # frame 0, apiKey 11, version 0; then, flexible: compact string Name, int8 Mechanism,
    # compact bytes Salt, StoredKey, ServerKey, int32 Iterations, no tagged fields.
    expected = (bytes([1, 11, 0]) + bytes([6]) + b"alice" + bytes([2]) + bytes([5]) + b"NaCl"
                + bytes([65]) + b"\x01" * 64 + bytes([65]) + b"\x02" * 64
                + (8192).to_bytes(4, "big") + bytes([0]))
    assert r.encode(record) == expected
    assert r.decode(expected) == record


def test_remove_user_scram_credential_record_is_type_22_v0_in_kafkas_layout() -> None:
    record = r.RemoveUserScramCredentialRecord(name="bob", mechanism=1)
    expected = bytes([1, 22, 0, 4]) + b"bob" + bytes([1, 0])
    assert r.encode(record) == expected
    assert r.decode(expected) == record


# --- the image -------------------------------------------------------------------------


def test_the_image_finds_a_credential_by_mechanism_and_user() -> None:
    image = MetadataImage()
    image.replay(credential_record("alice", 1), 5)
    image.replay(credential_record("alice", 2, iterations=8192), 6)
    found = image.scram_credential(SHA256, "alice")
    assert found is not None
    assert (found.salt, found.stored_key, found.server_key, found.iterations) == (
        SALT, stored_key(1, SALTED), server_key(1, SALTED), 4096)
    assert image.scram_credential(SHA512, "alice").iterations == 8192  # type: ignore[union-attr]
    assert image.scram_credential(SHA256, "bob") is None
    assert image.scram_users() == {"alice": [(1, 4096), (2, 8192)]}


def test_a_new_record_replaces_the_credential_and_a_removal_deletes_it() -> None:
    image = MetadataImage()
    image.replay(credential_record("alice", 1))
    image.replay(credential_record("alice", 1, salted=b"other", iterations=10000))
    assert image.scram_credential(SHA256, "alice").stored_key == \
        stored_key(1, b"other")  # type: ignore[union-attr]
    image.replay(r.RemoveUserScramCredentialRecord(name="alice", mechanism=1))
    assert image.scram_credential(SHA256, "alice") is None
    assert image.scram_users() == {}
    image.replay(r.RemoveUserScramCredentialRecord(name="alice", mechanism=1))  # no error


def test_a_snapshot_carries_the_credentials() -> None:
    image = MetadataImage()
    image.replay(r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=25))
    for record in (credential_record("bob", 2), credential_record("alice", 1),
                   credential_record("alice", 2, iterations=16384),
                   credential_record("carol", 1),
                   r.RemoveUserScramCredentialRecord(name="carol", mechanism=1)):
        image.replay(record)
    snapshot = image.to_records()
    assert [(x.name, x.mechanism) for x in snapshot
            if isinstance(x, r.UserScramCredentialRecord)] == [
        ("alice", 1), ("alice", 2), ("bob", 2)]
    copy = MetadataImage()
    loader = MetadataLoader(copy)
    loader.load_snapshot(decode_snapshot(encode_snapshot(snapshot, 1, batch_size=2)).records,
                         100)
    assert copy.digest() == image.digest()
    assert copy.scram_users() == {"alice": [(1, 4096), (2, 16384)], "bob": [(2, 4096)]}
    assert copy.scram_credential(SHA512, "bob") == image.scram_credential(SHA512, "bob")
    assert loader.take_delta().full


def test_the_delta_notes_the_users_whose_credentials_changed() -> None:
    image = MetadataImage()
    loader = MetadataLoader(image)
    assert not loader.apply(credential_record("alice", 1), 0)  # no partition work
    loader.apply(r.RemoveUserScramCredentialRecord(name="alice", mechanism=1), 1)
    loader.apply(credential_record("bob", 2), 2)
    delta = loader.take_delta()
    assert delta.scram_users == {"alice", "bob"} and delta.changed
    assert not MetadataDelta().changed


def test_a_timeline_image_reverts_uncommitted_credentials() -> None:
    registry = SnapshotRegistry()
    image = MetadataImage(registry)
    image.replay(credential_record("alice", 1))
    registry.get_or_create_snapshot(1)
    image.replay(r.RemoveUserScramCredentialRecord(name="alice", mechanism=1))
    image.replay(credential_record("bob", 1))
    registry.revert_to_snapshot(1)
    assert set(image.scram_users()) == {"alice"}


# --- the controller: AlterUserScramCredentials ----------------------------------------


def controller(metadata_version: int = 25) -> QuorumController:
    c = QuorumController(1)
    c.replay(r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_version))
    return c


def upsertion(name: str, mechanism: int = 1, iterations: int = 4096,
              salted: bytes = SALTED) -> ScramUpsertion:
    return ScramUpsertion(name, mechanism, iterations, SALT, salted)


def alter(c: QuorumController, deletions: list[ScramDeletion] | None = None,
          upsertions: list[ScramUpsertion] | None = None) -> list[tuple[str, int, str | None]]:
    result = c.scram.alter_credentials(deletions or [], upsertions or [])
    for record in result.records:
        c.replay(r.decode(r.encode(record)))
    return result.response


def test_an_upsertion_writes_the_keys_the_salted_password_gives() -> None:
    c = controller()
    result = c.scram.alter_credentials([], [upsertion("user1", 2, 8192)])
    assert result.records == [credential_record("user1", 2, iterations=8192)]
    assert result.response == [("user1", ErrorCode.none, None)]


def test_altering_nothing_answers_nothing() -> None:
    result = controller().scram.alter_credentials([], [])
    assert (result.records, result.response) == ([], [])


def test_a_user_altered_twice_in_one_request_is_duplicate_resource() -> None:
    """Kafka's testAlterSameThingTwice: both users of each request are refused."""
    c = controller()
    assert alter(c, upsertions=[upsertion("user1"), upsertion("user2")]) == [
        ("user1", ErrorCode.none, None), ("user2", ErrorCode.none, None)]
    d1, d2 = ScramDeletion("user1", 1), ScramDeletion("user2", 1)
    message = "A user credential cannot be altered twice in the same request"
    for deletions, upsertions in (([d1, d1], [upsertion("user2"), upsertion("user2")]),
                                  ([d1, d2], [upsertion("user1"), upsertion("user2")])):
        result = c.scram.alter_credentials(deletions, upsertions)
        assert result.records == []
        assert sorted(result.response) == [("user1", ErrorCode.duplicate_resource, message),
                                           ("user2", ErrorCode.duplicate_resource, message)]


def test_two_mechanisms_of_one_user_in_one_request_are_duplicate_resource() -> None:
    """Kafka's controller keys a request by user alone (testAlterAndDescribe: "do not
    update the same user more than once per request")."""
    result = controller().scram.alter_credentials([], [upsertion("alice", 1),
                                                       upsertion("alice", 2)])
    assert result.records == []
    assert result.response == [("alice", ErrorCode.duplicate_resource,
                                "A user credential cannot be altered twice in the same "
                                "request")]


def test_an_empty_user_name_is_unacceptable() -> None:
    """Kafka's testAlterEmptyUser: one result, whatever was asked for the empty name."""
    empty_deletion = ScramDeletion("", 1)
    for deletions, upsertions in (([empty_deletion], []), ([], [upsertion("")]),
                                  ([empty_deletion, empty_deletion], [upsertion("")])):
        result = controller().scram.alter_credentials(deletions, upsertions)
        assert result.records == []
        assert result.response == [("", ErrorCode.unacceptable_credential,
                                    "Username must not be empty")]


def test_an_unknown_mechanism_is_unsupported_sasl_mechanism() -> None:
    """Kafka's testAlterUnknownMechanism: 5 users refused, user1's valid deletion and
    user4's valid upsertion included, since each user's first alteration was refused."""
    result = controller().scram.alter_credentials(
        [ScramDeletion("user1", 0), ScramDeletion("user1", 1), ScramDeletion("user2", 10)],
        [upsertion("user4", 0, 8192), upsertion("user4", 1, 8192), upsertion("user5", 10, 8192),
         upsertion("user6", 0, 8192)])
    assert result.records == []
    assert sorted(result.response) == [
        (user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        for user in ("user1", "user2", "user4", "user5", "user6")]


@pytest.mark.parametrize("iterations,message", [
    (1, "Too few iterations"), (4095, "Too few iterations"),
    (16385, "Too many iterations"), (2**31 - 1, "Too many iterations")])
def test_iterations_outside_4096_16384_are_unacceptable(iterations: int, message: str
                                                        ) -> None:
    result = controller().scram.alter_credentials([], [upsertion("user1", 1, iterations)])
    assert (result.records, result.response) == (
        [], [("user1", ErrorCode.unacceptable_credential, message)])


@pytest.mark.parametrize("iterations", [4096, 16384])
def test_iterations_at_the_bounds_are_accepted(iterations: int) -> None:
    result = controller().scram.alter_credentials([], [upsertion("user1", 2, iterations)])
    assert result.response == [("user1", ErrorCode.none, None)]


def test_deleting_a_credential_that_does_not_exist_is_resource_not_found() -> None:
    c = controller()
    alter(c, upsertions=[upsertion("user1", 2)])
    result = c.scram.alter_credentials([ScramDeletion("user1", 1)], [])
    assert (result.records, result.response) == ([], [
        ("user1", ErrorCode.resource_not_found,
         "Attempt to delete a user credential that does not exist")])


def test_deleting_a_credential_removes_it_from_the_image() -> None:
    c = controller()
    alter(c, upsertions=[upsertion("user1", 1)])
    alter(c, upsertions=[upsertion("user1", 2, 8192)])
    result = c.scram.alter_credentials([ScramDeletion("user1", 1)], [])
    assert result.records == [r.RemoveUserScramCredentialRecord(name="user1", mechanism=1)]
    for record in result.records:
        c.replay(record)
    assert c.image.scram_credential(SHA256, "user1") is None
    assert c.image.scram_users() == {"user1": [(2, 8192)]}


def test_some_users_refused_do_not_stop_the_others() -> None:
    c = controller()
    alter(c, upsertions=[upsertion("gone", 1)])
    result = c.scram.alter_credentials(
        [ScramDeletion("gone", 1), ScramDeletion("never", 1)],
        [upsertion("ok", 1), upsertion("few", 1, 10)])
    assert result.records == [r.RemoveUserScramCredentialRecord(name="gone", mechanism=1),
                              credential_record("ok", 1)]
    assert result.response == [
        ("gone", ErrorCode.none, None), ("ok", ErrorCode.none, None),
        ("never", ErrorCode.resource_not_found,
         "Attempt to delete a user credential that does not exist"),
        ("few", ErrorCode.unacceptable_credential, "Too few iterations")]


def test_below_metadata_version_3_5_iv2_scram_is_unsupported_version() -> None:
    """Kafka's testMetadataVersionTooLow (3.5-IV2 is level 11)."""
    result = controller(10).scram.alter_credentials([], [upsertion("user1")])
    assert (result.records, result.response) == ([], [
        ("user1", ErrorCode.unsupported_version,
         "The current metadata.version does not support SCRAM")])
    assert controller(11).scram.alter_credentials([], [upsertion("user1")]).records


# --- the wire: the controller listener and the broker's tables ------------------------


def test_both_listeners_serve_the_scram_apis_at_kafka_44s_versions() -> None:
    broker = {s.api_key: (s.min_version, s.max_version) for s in broker_apis()}
    controller_side = {s.api_key: (s.min_version, s.max_version) for s in controller_apis()}
    for key in (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS):
        assert broker[key] == BROKER_APIS[key] == (0, 0)
        assert controller_side[key] == CONTROLLER_APIS[key] == (0, 0)
    assert (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0) in FORWARDED  # to the controller
    assert ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS not in {k for k, _, _ in FORWARDED}


def wire_upsertion(name: str, mechanism: int, iterations: int) -> dict[str, Any]:
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": SALT,
            "salted_password": SALTED}


async def alter_on_wire(env: Env, deletions: list[tuple[str, int]],
                        upsertions: list[dict[str, Any]]) -> dict[str, tuple[int, str | None]]:
    response = await ask(env, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [{"name": n, "mechanism": m} for n, m in deletions],
        "upsertions": upsertions})
    return {res.user: (res.error_code, res.error_message) for res in response.results}


async def describe_on_wire(env: Env, users: list[str] | None) -> Any:
    return await ask(env, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {
        "users": None if users is None else [{"name": u} for u in users]})


def described(response: Any) -> dict[str, Any]:
    assert response.error_code == ErrorCode.none and response.error_message is None
    return {res.user: (res.error_code, [(c.mechanism, c.iterations)
                                        for c in res.credential_infos])
            for res in response.results}


async def test_alter_and_describe_as_kafkas_request_test() -> None:
    """Kafka's testAlterAndDescribe, over the controller listener's wire format."""
    env = make_env()
    ok = (ErrorCode.none, None)
    assert await alter_on_wire(env, [], [wire_upsertion("user1", 1, 4096)]) == {"user1": ok}
    user3 = "user3@user3.com"
    assert await alter_on_wire(env, [], [wire_upsertion(u, 2, 8192)
                                         for u in ("user1", "user2", user3)]) == \
        {"user1": ok, "user2": ok, user3: ok}
    assert env.image.scram_credential(SHA512, "user2").stored_key == \
        stored_key(2, SALTED)  # type: ignore[union-attr]
    everyone = described(await describe_on_wire(env, None))
    assert everyone == {"user1": (0, [(1, 4096), (2, 8192)]), "user2": (0, [(2, 8192)]),
                        user3: (0, [(2, 8192)])}
    assert described(await describe_on_wire(env, [])) == everyone
    assert described(await describe_on_wire(env, ["user1"])) == {
        "user1": (0, [(1, 4096), (2, 8192)])}
    unknown = await describe_on_wire(env, ["user1", "unknownUser"])
    assert described(unknown)["unknownUser"] == (ErrorCode.resource_not_found, [])
    assert unknown.results[1].error_message == \
        "Attempt to describe a user credential that does not exist: unknownUser"
    duplicate = await describe_on_wire(env, ["user1", "user2", "user2"])
    assert described(duplicate) == {"user1": (0, [(1, 4096), (2, 8192)]),
                                    "user2": (ErrorCode.duplicate_resource, [])}
    assert duplicate.results[1].error_message == \
        "Cannot describe SCRAM credentials for the same user twice in a single request: user2"
    assert await alter_on_wire(env, [("user1", 1), ("user2", 2)], []) == \
        {"user1": ok, "user2": ok}
    assert described(await describe_on_wire(env, None)) == {
        "user1": (0, [(2, 8192)]), user3: (0, [(2, 8192)])}
    assert await alter_on_wire(env, [("user1", 2), (user3, 2)], []) == \
        {"user1": ok, user3: ok}
    assert described(await describe_on_wire(env, None)) == {}


async def test_alter_errors_reach_the_client_per_user() -> None:
    env = make_env()
    assert await alter_on_wire(env, [("user1", 1)], [wire_upsertion("user2", 1, 1)]) == {
        "user1": (ErrorCode.resource_not_found,
                  "Attempt to delete a user credential that does not exist"),
        "user2": (ErrorCode.unacceptable_credential, "Too few iterations")}


def test_error_responses_are_kafkas_get_error_response() -> None:
    """Kafka's AlterUserScramCredentialsRequest.getErrorResponse names each user once,
    sorted; DescribeUserScramCredentialsRequest's sets the error at the top and on one
    result per user named (without the name)."""
    alter_request = build(request_schema(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0), {
        "deletions": [{"name": "zed", "mechanism": 1}, {"name": "amy", "mechanism": 2}],
        "upsertions": [wire_upsertion("zed", 2, 4096), wire_upsertion("bob", 1, 4096)]})
    assert error_response(alter_request, ErrorCode.not_controller, "moved") == {
        "throttle_time": 0, "results": [
            {"user": user, "error_code": ErrorCode.not_controller, "error_message": "moved"}
            for user in ("amy", "bob", "zed")]}
    encode_body(build(response_schema(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0),
                      error_response(alter_request, ErrorCode.not_controller, "moved")))
    describe_request = build(request_schema(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0),
                             {"users": [{"name": "amy"}, {"name": "bob"}]})
    response = error_response(describe_request, ErrorCode.cluster_authorization_failed)
    encode_body(build(response_schema(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0), response))
    assert response["error_code"] == ErrorCode.cluster_authorization_failed
    assert [(res["user"], res["error_code"]) for res in response["results"]] == [
        ("", ErrorCode.cluster_authorization_failed)] * 2


def test_describe_from_a_brokers_image() -> None:
    image = MetadataImage()
    image.replay(credential_record("alice", 2, iterations=8192))
    image.replay(credential_record("alice", 1))
    response = describe_user_scram_credentials(image, ["alice", "nobody"])
    assert response["error_code"] == ErrorCode.none
    assert [(res["user"], res["error_code"], res["credential_infos"])
            for res in response["results"]] == [
        ("alice", ErrorCode.none, [{"mechanism": 1, "iterations": 4096},
                                   {"mechanism": 2, "iterations": 8192}]),
        ("nobody", ErrorCode.resource_not_found, [])]


# --- storage format --add-scram (Kafka's ScramParser) ---------------------------------

TEST_SALT = bytes([49, 108, 118, 52, 112, 100, 110, 119, 52, 102, 119, 113, 55, 110, 111,
                   116, 99, 120, 109, 48, 121, 121, 49, 107, 55, 113])
TEST_SALTED_PASSWORD = bytes(b & 0xFF for b in [
    -103, 61, 50, -55, 69, 49, -98, 82, 90, 11, -33, 71, 94, 4, 83, 73, -119, 91, -70, -90,
    -72, 21, 33, -83, 36, 34, 95, 76, -53, -29, 96, 33])
"""ScramParserTest's vectors (Java's signed bytes made unsigned)."""


def test_add_scram_with_salt_and_salted_password_is_kafkas_record() -> None:
    """ScramParserTest.testPerMechanismDataToRecord, from the command-line form."""
    record = scram_record('SCRAM-SHA-512=[name=alice,salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=",'
                          'saltedpassword="mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="]')
    assert record == r.UserScramCredentialRecord(
        name="alice", mechanism=2, salt=TEST_SALT,
        stored_key=stored_key(2, TEST_SALTED_PASSWORD),
        server_key=server_key(2, TEST_SALTED_PASSWORD), iterations=4096)


def test_add_scram_with_a_password_salts_and_hashes_it() -> None:
    record = scram_record('SCRAM-SHA-256=[name=bob,password=my pass,iterations=8192,'
                          'salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E="]')
    salted = hashlib.pbkdf2_hmac("sha256", b"my pass", TEST_SALT, 8192)
    assert record == r.UserScramCredentialRecord(
        name="bob", mechanism=1, salt=TEST_SALT, stored_key=stored_key(1, salted),
        server_key=server_key(1, salted), iterations=8192)


def test_add_scram_without_a_salt_draws_one() -> None:
    first = scram_record("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    second = scram_record("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert first.iterations == 4096 and first.salt != second.salt
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-secret", first.salt, 4096)
    assert first.stored_key == stored_key(1, salted)


@pytest.mark.parametrize("argument,message", [
    ("SCRAM-SHA-512", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-512'"),
    ("SCRAM-SHA-UNSUPPORTED=[name=scram-admin,password=scram-user-secret]",
     "The add-scram mechanism SCRAM-SHA-UNSUPPORTED is not supported."),
    ("SCRAM-SHA-256=name=scram-admin,password=scram-user-secret",
     "Expected configuration string to start with ["),
    ("SCRAM-SHA-256=[name=scram-admin,password=scram-user-secret",
     "Expected configuration string to end with ]"),
    ("SCRAM-SHA-256=[password=mypass]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=bar]",
     "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=bob,password=mypass,unknown=something,unknown2=somethingelse]",
     "Unknown SCRAM configurations: unknown, unknown2"),
    ('SCRAM-SHA-256=[name=alice,saltedpassword="mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="]',
     "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name]", "No equals sign found in SCRAM component: name"),
    ("SCRAM-SHA-256=[name=bob,password=x,iterations=many]",
     "Failed to parse iterations count: many"),
    ("SCRAM-SHA-256=[name=bob,password=x,salt=!!]", "Failed to decode given salt: !!"),
    ("SCRAM-SHA-256=[name=bob,password=x,iterations=4095]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"),
    ("SCRAM-SHA-512=[name=bob,password=x,iterations=16385]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512"),
])
def test_add_scram_refuses_as_kafkas_parser(argument: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        scram_record(argument)
    assert str(e.value) == message


def test_add_scram_values_may_be_quoted_and_empty() -> None:
    """ScramParserTest's splitTrimmedConfigStringComponent cases, through a record."""
    assert scram_record('SCRAM-SHA-256=[name="foo",password=x]').name == "foo"
    assert scram_record('SCRAM-SHA-256=[name="",password=x]').name == ""
    assert scram_record("SCRAM-SHA-256=[name=,password=x]").name == ""


def test_add_scram_needs_metadata_version_3_5_iv2() -> None:
    with pytest.raises(ValueError) as e:
        scram_records(["SCRAM-SHA-256=[name=alice,password=a]"], "3.5-IV1", 10)
    assert str(e.value) == "SCRAM is only supported in metadata.version 3.5-IV2 or later."
    assert len(scram_records(["SCRAM-SHA-256=[name=alice,password=a]",
                              "SCRAM-SHA-512=[name=alice,password=a]"], "3.5-IV2", 11)) == 2


def properties(tmp_path: Any) -> str:
    path = tmp_path / "server.properties"
    path.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1",
        "controller.quorum.voters=1@127.0.0.1:9093",
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names=CONTROLLER", f"log.dirs={tmp_path / 'data'}", ""]))
    return str(path)


def test_format_writes_the_credentials_into_the_bootstrap_snapshot(tmp_path: Any) -> None:
    config = properties(tmp_path)
    assert ottla_main(["storage", "format", "-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c", config,
                       "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
                       "-S", "SCRAM-SHA-512=[name=alice,iterations=8192,password=s]"]) == 0
    bootstrap = read_bootstrap(str(tmp_path / "data"))
    assert bootstrap is not None
    assert isinstance(bootstrap.records[0], r.FeatureLevelRecord)  # metadata.version first
    scram = [x for x in bootstrap.records if isinstance(x, r.UserScramCredentialRecord)]
    assert [(x.name, x.mechanism, x.iterations) for x in scram] == [
        ("alice", 1, 4096), ("alice", 2, 8192)]
    assert bootstrap.records[-2:] == scram
    image = MetadataImage()
    for record in bootstrap.records:
        image.replay(record)
    credential = image.scram_credential(SHA256, "alice")
    assert credential is not None
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-secret", credential.salt, 4096)
    assert credential.stored_key == stored_key(1, salted)


def test_format_refuses_a_bad_add_scram_and_formats_nothing(tmp_path: Any, capsys: Any
                                                           ) -> None:
    config = properties(tmp_path)
    assert ottla_main(["storage", "format", "-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c", config,
                       "--add-scram", "SCRAM-SHA-256=[name=alice]"]) == 1
    assert "You must supply one of 'password' or 'saltedpassword' to add-scram" in \
        capsys.readouterr().err
    assert not (tmp_path / "data").exists()
    assert ottla_main(["storage", "format", "-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c", config,
                       "-r", "3.4", "--add-scram", "SCRAM-SHA-256=[name=a,password=b]"]) == 1
    assert "SCRAM is only supported in metadata.version 3.5-IV2 or later." in \
        capsys.readouterr().err


# --- ottla configs --entity-type users (kafka-configs) ---------------------------------


class WireClient:
    """Stands in for the CLI's BlockingClient: each request goes through the controller
    listener's table (encoded and decoded as on the wire), as a broker would forward it."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.sent: list[tuple[int, dict[str, Any]]] = []

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.sent.append((api_key, body))
        return asyncio.run(ask(self.env, api_key, version, body))


def configs_args(**given: Any) -> argparse.Namespace:
    values = {"bootstrap_server": "x:9092", "entity_type": "users", "entity_name": None,
              "entity_default": False, "describe": False, "alter": False, "all": False,
              "add_config": None, "delete_config": None, "command_config": None}
    values.update(given)
    return argparse.Namespace(**values)


def test_configs_adds_describes_and_deletes_a_users_credentials(capsys: Any) -> None:
    client = WireClient(make_env())
    add = ("SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
           "SCRAM-SHA-512=[password=alice-secret]")
    assert configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
        alter=True, entity_name="alice", add_config=add)) == 0
    assert capsys.readouterr().out == "Completed updating config for user alice.\n"
    # One request per credential: Kafka's controller refuses a user named twice.
    assert [len(body["upsertions"]) for _, body in client.sent] == [1, 1]
    upserted = client.sent[0][1]["upsertions"][0]
    assert upserted["salted_password"] == hashlib.pbkdf2_hmac(
        "sha256", b"alice-secret", upserted["salt"], 8192)
    assert configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
        alter=True, entity_name="bob", add_config="SCRAM-SHA-512=[password=b]")) == 0
    capsys.readouterr()

    assert configs_cli._describe_users(client, configs_args(  # type: ignore[arg-type]
        describe=True, entity_name="alice")) == 0
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    assert configs_cli._describe_users(client, configs_args(describe=True)) == 0  # type: ignore[arg-type]
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096\n")

    assert configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
        alter=True, entity_name="alice", delete_config="SCRAM-SHA-512")) == 0
    capsys.readouterr()
    assert configs_cli._describe_users(client, configs_args(  # type: ignore[arg-type]
        describe=True, entity_name="alice")) == 0
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n")
    # An unknown user prints nothing (UserScramCredentialsCommandTest.testDescribeUnknownUser).
    assert configs_cli._describe_users(client, configs_args(  # type: ignore[arg-type]
        describe=True, entity_name="unknownUser")) == 0
    assert capsys.readouterr().out == ""


def test_configs_reports_the_controllers_error() -> None:
    client = WireClient(make_env())
    with pytest.raises(configs_cli.ConfigsError) as e:
        configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
            alter=True, entity_name="alice", delete_config="SCRAM-SHA-256"))
    assert str(e.value) == "Attempt to delete a user credential that does not exist"
    with pytest.raises(configs_cli.ConfigsError) as e:
        configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
            alter=True, entity_name="alice",
            add_config="SCRAM-SHA-256=[iterations=20000,password=x]"))
    assert str(e.value) == "Too many iterations"


@pytest.mark.parametrize("value,message", [
    ("iterations=100,password=x",
     "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"),
    ("password=", "Password must not be empty"),
    ("passwd=x", "Invalid credential property SCRAM_SHA_256=passwd=x"),
    ("password=x,iterations=8192", None),
])
def test_configs_checks_a_credential_before_sending_it(value: str, message: str | None
                                                       ) -> None:
    if message is None:
        # kafka-configs' pattern: what follows ``password=`` is the password, commas too.
        upsert = configs_cli.scram_upsertion("alice", "SCRAM-SHA-256", value)
        assert upsert["iterations"] == 4096
        assert upsert["salted_password"] == hashlib.pbkdf2_hmac(
            "sha256", b"x,iterations=8192", upsert["salt"], 4096)
        return
    with pytest.raises(ValueError) as e:
        configs_cli.scram_upsertion("alice", "SCRAM-SHA-256", value)
    assert str(e.value) == message


def test_configs_iterations_of_minus_one_is_the_default() -> None:
    upsert = configs_cli.scram_upsertion("alice", "SCRAM-SHA-512", "iterations=-1,password=p")
    assert upsert["iterations"] == 4096 and upsert["mechanism"] == 2
    assert base64.b64encode(upsert["salt"])  # random, sent along


def test_configs_refuses_what_kafka_configs_refuses_for_users(capsys: Any) -> None:
    client = WireClient(make_env())
    assert configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
        alter=True, entity_name="alice", add_config="foo=bar")) == 1
    assert ("Only quota and SCRAM credential configs can be added for 'users' using "
            "--bootstrap-server. Unexpected config names: foo") in capsys.readouterr().err
    assert configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
        alter=True, entity_default=True, add_config="SCRAM-SHA-256=[password=x]")) == 1
    assert ("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
            "Credentials using --bootstrap-server.") in capsys.readouterr().err
    assert configs_cli._alter_users(client, configs_args(  # type: ignore[arg-type]
        alter=True, entity_name="alice",
        add_config="SCRAM-SHA-256=[password=x],consumer_byte_rate=10")) == 1
    assert ("Cannot alter both quota and SCRAM credential configs simultaneously for "
            "'users' using --bootstrap-server.") in capsys.readouterr().err
    assert client.sent == []
