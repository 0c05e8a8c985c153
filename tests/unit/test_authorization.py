"""Authorization of requests against the ACLs, as Kafka's KafkaApis and ControllerApis
authorize them (``tests/authorization_table.py`` is the specification).

The node's authorizer follows the image's ACLs (``MetadataPublisher``); requests a broker
forwards carry the client's principal in their Envelope, which the controller authorizes
the inner request with.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from kio.schema.default_principal_data.v0 import DefaultPrincipalData
from kio.serial import entity_writer

from ottla.common.principal import (
    Principal,
    PrincipalDeserializationError,
    deserialize_principal,
    serialize_principal,
)
from ottla.metadata import records as r
from ottla.metadata.bootstrap import encode_snapshot
from ottla.metadata.image import MetadataImage
from ottla.raft.messages import Committed, Entry, Snapshot
from ottla.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from ottla.security.authorizer import StandardAuthorizer
from ottla.server.metadata_publisher import MetadataPublisher

ALICE = Principal("User", "alice")
HOST = "10.0.0.9"


def acl_record(acl_id: uuid.UUID, resource_type: ResourceType, name: str,
               operation: AclOperation, principal: str = "User:alice",
               pattern: PatternType = PatternType.LITERAL,
               permission: AclPermissionType = AclPermissionType.ALLOW
               ) -> r.AccessControlEntryRecord:
    return r.AccessControlEntryRecord(
        id=acl_id, resource_type=resource_type, resource_name=name, pattern_type=pattern,
        principal=principal, host="*", operation=operation, permission_type=permission)


# --- the principal in an Envelope ----------------------------------------------------------

def test_a_principal_is_serialized_as_kafkas_default_principal_data() -> None:
    out = io.BytesIO()
    entity_writer(DefaultPrincipalData)(out, DefaultPrincipalData(
        type_="User", name="CN=alice,O=acme", token_authenticated=False))
    assert serialize_principal(Principal("User", "CN=alice,O=acme")) == \
        b"\x00\x00" + out.getvalue()  # Kafka's version prefix, then the message
    assert deserialize_principal(b"\x00\x00" + out.getvalue()) == \
        Principal("User", "CN=alice,O=acme")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x01\x05User\x06alice\x00\x00",
                                  b"\x00\x00\x05User", b"\x00\x00\x00\x06alice\x00\x00",
                                  b"\x00\x00\x05Us\xffr\x06alice\x00\x00"])
def test_bytes_that_are_no_principal_are_refused(data: bytes) -> None:
    with pytest.raises(PrincipalDeserializationError):
        deserialize_principal(data)


# --- the authorizer follows the image ------------------------------------------------------

class NoRaft:
    def create_snapshot(self, end_offset: int, data: Any) -> bool:
        return False


def test_the_authorizer_follows_the_acls_committed_and_reloads_after_a_snapshot() -> None:
    image = MetadataImage()
    authorizer = StandardAuthorizer()
    publisher = MetadataPublisher(image, NoRaft(), authorizer=authorizer)  # type: ignore[arg-type]
    first, second = uuid.UUID(int=1), uuid.UUID(int=2)
    publisher.on_committed(Committed(0, [Entry(1, [
        acl_record(first, ResourceType.TOPIC, "orders", AclOperation.READ),
        acl_record(second, ResourceType.GROUP, "billing", AclOperation.READ)], 2)]))
    assert authorizer.authorize(ALICE, HOST, AclOperation.READ, ResourceType.TOPIC, "orders")
    assert authorizer.acl_count == 2
    publisher.on_committed(Committed(2, [Entry(1, [
        r.RemoveAccessControlEntryRecord(id=first)])]))
    assert not authorizer.authorize(ALICE, HOST, AclOperation.READ, ResourceType.TOPIC,
                                    "orders")
    assert authorizer.acl_count == 1
    # A snapshot replaces everything: the authorizer loads the image's ACLs again.
    third = uuid.UUID(int=3)
    snapshot = encode_snapshot([acl_record(third, ResourceType.TOPIC, "pay",
                                           AclOperation.WRITE, pattern=PatternType.PREFIXED)],
                               0)
    publisher.on_committed(Committed(10, [], Snapshot(10, 1, snapshot)))
    assert authorizer.acl_count == 1
    assert authorizer.authorize(ALICE, HOST, AclOperation.WRITE, ResourceType.TOPIC,
                                "payments")
    assert not authorizer.authorize(ALICE, HOST, AclOperation.READ, ResourceType.GROUP,
                                    "billing")
