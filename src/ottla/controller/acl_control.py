"""ACLs as metadata (Kafka's AclControlManager): CreateAcls turns each valid binding into
an AccessControlEntryRecord under a new id, DeleteAcls each ACL its filters match into a
RemoveAccessControlEntryRecord, with Kafka's checks and one result per creation or
filter.

Before the controller's own checks come those of Kafka's ``AclApis.handleCreateAcls``
(which in KRaft runs on the controller, since brokers forward CreateAcls): a CLUSTER ACL
must be on ``kafka-cluster``, and a resource name must not be empty. Then
``validateNewAcl``: a concrete resource type, a LITERAL or PREFIXED pattern, a concrete
operation, ALLOW or DENY. An ACL already stored, or named twice in one request, succeeds
without a second record. A DeleteAcls filter naming an unknown resource or pattern type,
operation or permission type is INVALID_REQUEST; each valid filter answers every ACL it
matches, and an ACL matched by several filters is answered by each and removed once.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import Any

from ottla.common.features import METADATA_VERSION, METADATA_VERSION_LEVEL, cidr_acls_supported
from ottla.common.uuids import kafka_uuid_text
from ottla.controller.results import ControllerResult, check_user_op
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode
from ottla.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    ResourceType,
    validate_filter,
    validate_host_pattern,
    validate_new_acl,
)

CreateResult = tuple[ErrorCode, str | None]
"""(error, message) of one creation."""
DeleteResult = tuple[ErrorCode, str | None, list[AclBinding]]
"""(error, message, the ACLs deleted) of one filter."""


def check_creation(binding: AclBinding, cidr_supported: bool = True
                   ) -> tuple[ErrorCode, str] | None:
    """The error Kafka gives a binding it will not store (AclApis's checks, then
    ``validateNewAcl``), or None: INVALID_REQUEST, or UNSUPPORTED_VERSION for a CIDR host
    below metadata.version 4.4-IV1 (``cidr_supported``)."""
    if binding.resource_type == ResourceType.CLUSTER and \
            binding.resource_name != CLUSTER_NAME:
        return (ErrorCode.invalid_request,
                f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not binding.resource_name:
        return ErrorCode.invalid_request, "Invalid empty resource name"
    message = validate_new_acl(binding)
    if message is not None:
        return ErrorCode.invalid_request, message
    host = validate_host_pattern(binding.host, cidr_supported)
    if host is not None:
        unsupported, message = host
        return ErrorCode.unsupported_version if unsupported else ErrorCode.invalid_request, \
            message
    return None


class AclControlManager:
    def __init__(self, image: MetadataImage, rng: random.Random) -> None:
        self.image = image
        self.rng = rng

    def _new_id(self, taken: set[uuid.UUID]) -> uuid.UUID:
        """Kafka's ``newAclId``: a random id no ACL has (nor the zero id, nor one whose
        text begins with ``-``, as ``Uuid.randomUuid``)."""
        while True:
            value = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if value.int and value not in self.image.acls and value not in taken and \
                    not kafka_uuid_text(value).startswith("-"):
                return value

    def create_acls(self, bindings: Sequence[AclBinding]) -> ControllerResult:
        """CreateAcls: a record for each new valid ACL; the response is one
        ``CreateResult`` per binding, in order."""
        records: list[Any] = []
        results: list[CreateResult] = []
        created: set[AclBinding] = set()
        taken: set[uuid.UUID] = set()
        for binding in bindings:
            refused = check_creation(binding, cidr_acls_supported(
                self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)))
            if refused is not None:
                results.append(refused)
                continue
            if binding not in created and self.image.acl_id(binding) is None:
                created.add(binding)
                acl_id = self._new_id(taken)
                taken.add(acl_id)
                records.append(r.AccessControlEntryRecord(
                    id=acl_id, resource_type=binding.resource_type,
                    resource_name=binding.resource_name, pattern_type=binding.pattern_type,
                    principal=binding.principal, host=binding.host,
                    operation=binding.operation, permission_type=binding.permission_type))
            results.append((ErrorCode.none, None))
        check_user_op(len(records))
        return ControllerResult(records, results)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> ControllerResult:
        """DeleteAcls: a removal record for each ACL some valid filter matches; the
        response is one ``DeleteResult`` per filter, in order, with the ACLs it matched
        (each with its id)."""
        removed: dict[uuid.UUID, Any] = {}
        results: list[DeleteResult] = []
        for acl_filter in filters:
            message = validate_filter(acl_filter)
            if message is not None:
                results.append((ErrorCode.invalid_request, message, []))
                continue
            matched = self.image.acl_bindings(acl_filter)
            for binding in matched:
                assert binding.id is not None
                removed.setdefault(binding.id, r.RemoveAccessControlEntryRecord(id=binding.id))
            results.append((ErrorCode.none, None, matched))
        check_user_op(len(removed))
        return ControllerResult(list(removed.values()), results)
