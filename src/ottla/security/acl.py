"""Kafka's ACL model, sans I/O: the wire enums of ``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``, ACL bindings and binding filters with Kafka's
matching, and the checks the controller makes before it stores an ACL
(``AclControlManager.validateNewAcl`` and ``validateFilter``).

An ``AclBinding`` is Kafka's ``StandardAcl`` flattened (a resource pattern and an access
control entry) with the id its ``AccessControlEntryRecord`` carries. Two bindings are equal
when everything but the id is, as Kafka's ``AclBinding`` and ``StandardAcl`` are: the
controller refuses to store one ACL twice, and kafka-acls compares bindings so.

``str()`` of every type is what Kafka's ``toString`` prints (kafka-acls prints them): enums
by their Java name (``TOPIC``, ``LITERAL``, ``WRITE``, ``ALLOW``), patterns as
``ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)``, entries as
``(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Self

from ottla.security import cidr

WILDCARD_RESOURCE = "*"
"""``ResourcePattern.WILDCARD_RESOURCE``: a LITERAL ACL on ``*`` applies to every name."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
"""``Resource.CLUSTER_NAME``: the one name a CLUSTER resource has."""


def _pascal_case(name: str) -> str:
    """``SecurityUtils.toPascalCase``: ``CLUSTER_ACTION`` -> ``ClusterAction``."""
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_"))


_NAMES: dict[type, dict[str, Any]] = {}


class _KafkaEnum(IntEnum):
    """A Kafka enum with byte codes: ``from_code`` gives UNKNOWN for a code it does not
    know (Kafka's ``fromCode``), ``str`` the Java name."""

    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @classmethod
    def from_name(cls, name: str) -> Self:
        """``SecurityUtils.resourceType/operation/permissionType``: the Pascal-case name
        (``IdempotentWrite``) or the same upper-cased (``IDEMPOTENTWRITE``); UNKNOWN else."""
        by_name = _NAMES.get(cls)
        if by_name is None:
            by_name = _NAMES[cls] = {}
            for member in cls:
                pascal = _pascal_case(member.name)
                by_name[pascal] = member
                by_name[pascal.upper()] = member
        found = by_name.get(name)
        if found is None:
            found = by_name.get(name.upper())
        return found if found is not None else cls(0)

    @property
    def pascal_name(self) -> str:
        """``SecurityUtils.operationName`` and its siblings: ``ClusterAction``."""
        return _pascal_case(self.name)

    def __str__(self) -> str:
        return self.name


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    """In a filter: any pattern type, the name matched exactly."""
    MATCH = 2
    """In a filter: every pattern that applies to the name (literal, ``*``, prefixes)."""
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        """``PatternType.isSpecific``: what an ACL (not a filter) may have."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15
    """KIP-939 (Kafka 4.1): InitProducerId with 2PC needs it on the transactional id."""


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({
        AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}
"""Kafka's ``AclEntry.supportedOperations``: what kafka-acls lets an ACL of each resource
type name (ALL besides)."""


def parse_principal(text: str | None) -> tuple[str, str]:
    """``SecurityUtils.parseKafkaPrincipal``: ``type:name``, split at the first colon."""
    if not text:
        raise ValueError("expected a string in format principalType:principalName but got "
                         f"{'null' if text is None else text}")
    principal_type, sep, name = text.partition(":")
    if not sep:
        raise ValueError("expected a string in format principalType:principalName but got "
                         f"{text}")
    return principal_type, name


# --- patterns and entries ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource an ACL applies to (Kafka's ``ResourcePattern``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type}, name={self.name}, "
                f"patternType={self.pattern_type})")


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ``ResourcePatternFilter``: resource type ANY, name None (any name), pattern
    type ANY (any pattern, the name exactly) or MATCH (every pattern that applies to the
    name: the literal name, the literal ``*``, and each prefix of it)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    @property
    def is_unknown(self) -> bool:
        return (self.resource_type == ResourceType.UNKNOWN
                or self.pattern_type == PatternType.UNKNOWN)

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and \
                self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and \
                self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        # Kafka throws IllegalArgumentException("Unsupported PatternType"); a stored ACL
        # always has a specific pattern type.
        return False

    def find_indefinite_field(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (f"ResourcePattern(resourceType={self.resource_type}, name={name}, "
                f"patternType={self.pattern_type})")


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who may (or may not) do what from where (Kafka's ``AccessControlEntry``)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation,
                                        self.permission_type)

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation}, permissionType={self.permission_type})")


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's ``AccessControlEntryFilter``: None principal or host, ANY operation or
    permission type match anything."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        return (self.operation == AclOperation.UNKNOWN
                or self.permission_type == AclPermissionType.UNKNOWN)

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return (self.permission_type == AclPermissionType.ANY
                or self.permission_type == entry.permission_type)

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation == AclOperation.ANY:
            return "Operation is ANY"
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type == AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None

    def __str__(self) -> str:
        principal = "<any>" if self.principal is None else self.principal
        host = "<any>" if self.host is None else self.host
        return (f"(principal={principal}, host={host}, operation={self.operation}, "
                f"permissionType={self.permission_type})")


ANY_ENTRY = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)
"""``AccessControlEntryFilter.ANY``."""


# --- bindings ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry, with the id of the
    AccessControlEntryRecord that stored it (None for one not stored yet). The id takes
    no part in equality."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType
    id: uuid.UUID | None = field(default=None, compare=False)

    @classmethod
    def of(cls, pattern: ResourcePattern, entry: AccessControlEntry,
           acl_id: uuid.UUID | None = None) -> AclBinding:
        return cls(pattern.resource_type, pattern.name, pattern.pattern_type,
                   entry.principal, entry.host, entry.operation, entry.permission_type,
                   acl_id)

    @classmethod
    def from_codes(cls, resource_type: int, resource_name: str, pattern_type: int,
                   principal: str, host: str, operation: int, permission_type: int,
                   acl_id: uuid.UUID | None = None) -> AclBinding:
        """From wire or record codes, a code Kafka does not know being UNKNOWN
        (``StandardAcl.fromRecord``)."""
        return cls(ResourceType.from_code(resource_type), resource_name,
                   PatternType.from_code(pattern_type), principal, host,
                   AclOperation.from_code(operation),
                   AclPermissionType.from_code(permission_type), acl_id)

    def with_id(self, acl_id: uuid.UUID) -> AclBinding:
        return AclBinding(self.resource_type, self.resource_name, self.pattern_type,
                          self.principal, self.host, self.operation, self.permission_type,
                          acl_id)

    @property
    def pattern(self) -> ResourcePattern:
        return ResourcePattern(self.resource_type, self.resource_name, self.pattern_type)

    @property
    def entry(self) -> AccessControlEntry:
        return AccessControlEntry(self.principal, self.host, self.operation,
                                  self.permission_type)

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(self.resource_type, self.resource_name, self.pattern_type,
                                self.principal, self.host, self.operation,
                                self.permission_type)

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter`` (a ``ResourcePatternFilter`` and an
    ``AccessControlEntryFilter``), flattened as ``AclBinding`` is: what DescribeAcls and
    each filter of DeleteAcls carry."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(cls, pattern: ResourcePatternFilter,
           entry: AccessControlEntryFilter = ANY_ENTRY) -> AclBindingFilter:
        return cls(pattern.resource_type, pattern.name, pattern.pattern_type,
                   entry.principal, entry.host, entry.operation, entry.permission_type)

    @classmethod
    def from_codes(cls, resource_type: int, resource_name: str | None, pattern_type: int,
                   principal: str | None, host: str | None, operation: int,
                   permission_type: int) -> AclBindingFilter:
        return cls(ResourceType.from_code(resource_type), resource_name,
                   PatternType.from_code(pattern_type), principal, host,
                   AclOperation.from_code(operation),
                   AclPermissionType.from_code(permission_type))

    @property
    def pattern_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.resource_name, self.pattern_type)

    @property
    def entry_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation,
                                        self.permission_type)

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return (self.pattern_filter.matches(binding.pattern)
                and self.entry_filter.matches(binding.entry))

    def find_indefinite_field(self) -> str | None:
        return (self.pattern_filter.find_indefinite_field()
                or self.entry_filter.find_indefinite_field())

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern_filter}, entryFilter={self.entry_filter})"


ANY_BINDING = AclBindingFilter()
"""``AclBindingFilter.ANY``: every ACL."""


# --- what the controller refuses --------------------------------------------------------


def validate_new_acl(binding: AclBinding) -> str | None:
    """``AclControlManager.validateNewAcl``, but for its host pattern
    (``validate_host_pattern``): the INVALID_REQUEST message for an ACL that cannot be
    stored, or None."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type}"
    if not binding.pattern_type.is_specific:
        return f"Invalid patternType {binding.pattern_type}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation}"
    if binding.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {binding.permission_type}"
    if not binding.resource_name:
        return "Resource name should not be empty"
    return None


CIDR_METADATA_VERSION = "4.4-IV1"


def validate_host_pattern(host: str, cidr_supported: bool) -> tuple[bool, str] | None:
    """``AclControlManager.validateHostPattern``: (whether UNSUPPORTED_VERSION rather than
    INVALID_REQUEST, message) for a host an ACL cannot have, or None. A CIDR block needs
    metadata.version 4.4-IV1 (``cidr_supported``)."""
    if not host:
        return False, "Host pattern cannot be null or empty"
    if host == WILDCARD_HOST or not cidr.is_cidr(host):
        return None
    if not cidr_supported:
        return True, (f"CIDR-based ACL host patterns require metadata version "
                      f"{CIDR_METADATA_VERSION} or higher.")
    problem = cidr.validate(host)
    if problem is not None:
        return False, f"Invalid CIDR notation '{host}': {problem}"
    return None


def validate_filter(acl_filter: AclBindingFilter) -> str | None:
    """``AclControlManager.validateFilter``: the INVALID_REQUEST message for a DeleteAcls
    filter naming something unknown, or None."""
    if acl_filter.pattern_filter.is_unknown:
        return "Unknown patternFilter."
    if acl_filter.entry_filter.is_unknown:
        return "Unknown entryFilter."
    return None
