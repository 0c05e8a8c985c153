"""Kafka's StandardAuthorizer, sans I/O: who may do what on which resource, decided from
the ACLs of the metadata image (``org.apache.kafka.metadata.authorizer.StandardAuthorizer``
and ``StandardAuthorizerData``; ``Authorizer.authorizeByResourceType``).

The rules, Kafka's:

- a principal named in ``super.users`` may do everything;
- the ACLs that apply to a resource (type T, name N) are T's LITERAL ACLs on N, its
  PREFIXED ACLs on every prefix of N, and its LITERAL ACLs on ``*`` (all names but those
  that begin with ``*`` without being ``*``: Kafka's scan skips the wildcard for those);
- of those, an ACL matches a request when its principal is the request's (type and name)
  or ``User:*``, its host is the client's address or ``*``, and its operation is the
  request's or ALL, or, for an ALLOW ACL only, implies it: READ, WRITE, DELETE and ALTER
  imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (a DENY of READ does not deny
  DESCRIBE);
- a matching DENY wins over every ALLOW; else a matching ALLOW allows; else the request
  is denied, unless no ACL at all applies to the resource (whoever and whatever it is
  for) and ``allow.everyone.if.no.acl.found`` is true.

The ACLs are indexed by resource type, then by literal name and by prefix, with the
lengths of the prefixes present, so that a check costs a few dictionary lookups whatever
the number of ACLs. The index is updated one ACL at a time (``add_acl``, ``remove_acl``,
``apply_changes`` with a metadata delta's ACL changes) or rebuilt from the image's ACLs
(``load``, after a snapshot).
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ottla.common.principal import Principal
from ottla.security import cidr
from ottla.security.acl import (
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_principal,
)

SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG = "allow.everyone.if.no.acl.found"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""What ``authorizer.class.name`` names to turn Kafka's (and Ottla's) ACLs on."""

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS,
                                       AclOperation.ALTER_CONFIGS})
_WILDCARD_PRINCIPAL = ("User", "*")
HARDCODE = "hardcode"
"""The resource name ``authorizeByResourceType`` first authorizes, so that super users
(and the no-ACL default) are allowed whatever the DENY ACLs say."""


def configured_super_users(configs: Mapping[str, Any]) -> frozenset[str]:
    """``StandardAuthorizer.getConfiguredSuperUsers``: ``super.users`` split on ``;``,
    each trimmed, empty ones skipped, each a ``type:name`` principal (ValueError else)."""
    value = configs.get(SUPER_USERS_CONFIG)
    if value is None:
        return frozenset()
    users = set()
    for part in str(value).split(";"):
        user = part.strip()
        if user:
            parse_principal(user)
            users.add(user)
    return frozenset(users)


def configured_default(configs: Mapping[str, Any]) -> bool:
    """``StandardAuthorizer.getDefaultResult``: ``allow.everyone.if.no.acl.found`` read as
    Java's ``Boolean.parseBoolean`` of the trimmed value (only ``true``, in any case)."""
    value = configs.get(ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG)
    return value is not None and str(value).strip().lower() == "true"


class ConfigLookup(Protocol):
    """A node's config (``KafkaConfig``) or any mapping of its keys."""

    def get(self, name: str, default: Any = None) -> Any: ...


def authorizer_configured(configs: ConfigLookup) -> bool:
    """Whether ``authorizer.class.name`` names an authorizer (Kafka answers the ACL APIs
    SECURITY_DISABLED without one)."""
    return bool(str(configs.get("authorizer.class.name") or "").strip())


def host_matches(acl_host: str, host: str) -> bool:
    """Whether an ACL's host applies to a client at ``host``: ``*``, the same address,
    or (from metadata.version 4.4-IV1) a CIDR block holding it."""
    return acl_host in (WILDCARD_HOST, host) or \
        (cidr.is_cidr(acl_host) and cidr.in_range(host, acl_host))


def java_host_address(address: str) -> str:
    """A client's IP address as Java's ``InetAddress.getHostAddress`` writes it, which is
    what ACL hosts are compared with: IPv4 dotted; IPv4-mapped IPv6 as its IPv4 address;
    other IPv6 as eight uncompressed groups in lower-case hex without leading zeros
    (``0:0:0:0:0:0:0:1``, not ``::1``), the scope kept. Anything else is returned as it is."""
    bare, percent, scope = address.partition("%")
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ip.packed
    text = ":".join(format(groups[i] << 8 | groups[i + 1], "x") for i in range(0, 16, 2))
    return text + percent + scope


SUPER_USER = "SuperUser"
DEFAULT_ALLOW = "DefaultAllow"
DEFAULT_DENY = "DefaultDeny"
"""The rules that decide without an ACL, as Kafka's audit log names them."""


@dataclass(frozen=True, slots=True)
class _Acl:
    """What a check needs of one ACL, computed once."""

    id: uuid.UUID
    binding: AclBinding
    principal: tuple[str, str] | None
    """(type, name), or None when the ACL's principal has no colon: Kafka's check throws
    on such an ACL; here it matches nobody."""
    host: str
    operation: AclOperation
    allow: bool

    def __str__(self) -> str:
        """The rule as Kafka's audit log writes a matching ACL (its ``MatchingAclRule``
        around the ``StandardAcl`` record)."""
        b = self.binding
        return (f"MatchingAcl(acl=StandardAcl[resourceType={b.resource_type.name}, "
                f"resourceName={b.resource_name}, patternType={b.pattern_type.name}, "
                f"principal={b.principal}, host={b.host}, operation={b.operation.name}, "
                f"permissionType={b.permission_type.name}])")


Rule = str | _Acl
"""What decided a check: ``SUPER_USER``, ``DEFAULT_ALLOW``, ``DEFAULT_DENY`` or the ACL
that matched; its ``str`` is what Kafka's audit log says after "based on rule"."""


def _entry(acl_id: uuid.UUID, binding: AclBinding) -> _Acl:
    try:
        principal: tuple[str, str] | None = parse_principal(binding.principal)
    except ValueError:
        principal = None
    return _Acl(acl_id, binding, principal, binding.host, binding.operation,
                binding.permission_type == AclPermissionType.ALLOW)


def _operation_matches(acl: _Acl, operation: AclOperation) -> bool:
    """``StandardAuthorizerData.findResult``'s operation rule."""
    if acl.operation == AclOperation.ALL:
        return True
    if acl.allow:
        if operation == AclOperation.DESCRIBE:
            return acl.operation in _IMPLIES_DESCRIBE
        if operation == AclOperation.DESCRIBE_CONFIGS:
            return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return acl.operation == operation


class _TypeIndex:
    """The ACLs of one resource type."""

    __slots__ = ("_length_counts", "literal", "prefix_lengths", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, dict[uuid.UUID, _Acl]] = {}
        self.prefixed: dict[str, dict[uuid.UUID, _Acl]] = {}
        self.prefix_lengths: tuple[int, ...] = ()
        """The lengths of the PREFIXED names present, ascending."""
        self._length_counts: dict[int, int] = {}

    def add(self, acl: _Acl) -> None:
        name = acl.binding.resource_name
        if acl.binding.pattern_type == PatternType.PREFIXED:
            bucket = self.prefixed.setdefault(name, {})
            if not bucket:
                self._length_counts[len(name)] = self._length_counts.get(len(name), 0) + 1
                self.prefix_lengths = tuple(sorted(self._length_counts))
            bucket[acl.id] = acl
        else:
            self.literal.setdefault(name, {})[acl.id] = acl

    def remove(self, acl: _Acl) -> None:
        name = acl.binding.resource_name
        prefixed = acl.binding.pattern_type == PatternType.PREFIXED
        buckets = self.prefixed if prefixed else self.literal
        bucket = buckets.get(name)
        if bucket is None or bucket.pop(acl.id, None) is None or bucket:
            return
        del buckets[name]
        if prefixed:
            count = self._length_counts[len(name)] - 1
            if count:
                self._length_counts[len(name)] = count
            else:
                del self._length_counts[len(name)]
                self.prefix_lengths = tuple(sorted(self._length_counts))

    def applying_to(self, name: str) -> list[dict[uuid.UUID, _Acl]]:
        """The buckets of every ACL that applies to the resource ``name``."""
        found = []
        bucket = self.literal.get(name)
        if bucket:
            found.append(bucket)
        if name != WILDCARD_RESOURCE and not name.startswith(WILDCARD_RESOURCE):
            bucket = self.literal.get(WILDCARD_RESOURCE)
            if bucket:
                found.append(bucket)
        if self.prefixed:
            for length in self.prefix_lengths:
                if length > len(name):
                    break
                bucket = self.prefixed.get(name[:length])
                if bucket:
                    found.append(bucket)
        return found

    def all(self) -> Iterable[_Acl]:
        for buckets in (self.literal, self.prefixed):
            for bucket in buckets.values():
                yield from bucket.values()


class StandardAuthorizer:
    """Kafka's StandardAuthorizer over ACLs given to it (from the metadata image)."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False, loaded: bool = True) -> None:
        self.super_users = frozenset(super_users)
        """Principals (``User:admin``) allowed everything, compared as strings."""
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.loaded = loaded
        """Whether the ACLs of the metadata log as of the node's start are in (Kafka's
        ``completeInitialLoad``). Until then only super users are allowed anything (Kafka
        throws AuthorizerNotReadyException for the others): without it a node with
        ``allow.everyone.if.no.acl.found`` would let everyone through before it knew an
        ACL."""
        self._by_id: dict[uuid.UUID, _Acl] = {}
        self._by_type: dict[ResourceType, _TypeIndex] = {}

    @classmethod
    def from_config(cls, configs: Mapping[str, Any]) -> StandardAuthorizer:
        """Configured as Kafka's ``StandardAuthorizer.configure``: ``super.users`` and
        ``allow.everyone.if.no.acl.found`` of ``configs`` (a node's ``server.properties``
        as given, e.g. ``KafkaConfig.originals``)."""
        return cls(configured_super_users(configs), configured_default(configs))

    # --- the ACLs --------------------------------------------------------------------

    def load(self, acls: Mapping[uuid.UUID, AclBinding]) -> None:
        """Replace every ACL with ``acls`` (by id): Kafka's ``loadSnapshot``."""
        self._by_id.clear()
        self._by_type.clear()
        for acl_id, binding in acls.items():
            self.add_acl(acl_id, binding)

    def add_acl(self, acl_id: uuid.UUID, binding: AclBinding) -> None:
        if acl_id in self._by_id:
            self.remove_acl(acl_id)
        acl = _entry(acl_id, binding)
        self._by_id[acl_id] = acl
        index = self._by_type.get(binding.resource_type)
        if index is None:
            index = self._by_type[binding.resource_type] = _TypeIndex()
        index.add(acl)

    def remove_acl(self, acl_id: uuid.UUID) -> None:
        acl = self._by_id.pop(acl_id, None)
        if acl is not None:
            self._by_type[acl.binding.resource_type].remove(acl)

    def apply_changes(self, changes: Mapping[uuid.UUID, AclBinding | None]) -> None:
        """Apply a metadata delta's ACL changes (``MetadataDelta.acl_changes``: the ACL
        now stored under each id, None for one removed), as Kafka's AclPublisher does."""
        for acl_id, binding in changes.items():
            if binding is None:
                self.remove_acl(acl_id)
            else:
                self.add_acl(acl_id, binding)

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Every ACL ``acl_filter`` matches (Kafka's ``Authorizer.acls``)."""
        return [acl.binding for acl in self._by_id.values() if acl_filter.matches(acl.binding)]

    @property
    def acl_count(self) -> int:
        return len(self._by_id)

    # --- decisions -------------------------------------------------------------------

    def authorize(self, principal: Principal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal``, connected from ``host`` (the client's IP address as
        ``java_host_address`` writes it), may do ``operation`` on the resource
        (``resource_type``, ``name``): ``StandardAuthorizerData.authorize`` of a LITERAL
        resource pattern."""
        return self.decide(principal, host, operation, resource_type, name)[0]

    def decide(self, principal: Principal, host: str, operation: AclOperation,
               resource_type: ResourceType, name: str) -> tuple[bool, Rule]:
        """``authorize`` with the rule that decided, for the audit log: a super user, the
        matching DENY (which wins at once), else the first matching ALLOW, else the
        default of a resource no ACL applies to, else denied (Kafka's
        ``MatchingRuleBuilder.build``)."""
        if self.super_users and str(principal) in self.super_users:
            return True, SUPER_USER
        if not self.loaded:
            return False, DEFAULT_DENY
        index = self._by_type.get(resource_type)
        buckets = index.applying_to(name) if index is not None else None
        if not buckets:
            if self.allow_everyone_if_no_acl_found:
                return True, DEFAULT_ALLOW
            return False, DEFAULT_DENY
        who = (principal.type, principal.name)
        allowed_by: _Acl | None = None
        for bucket in buckets:
            for acl in bucket.values():
                if acl.principal != who and acl.principal != _WILDCARD_PRINCIPAL:
                    continue
                if not host_matches(acl.host, host):
                    continue
                if not _operation_matches(acl, operation):
                    continue
                if not acl.allow:
                    return False, acl
                if allowed_by is None:
                    allowed_by = acl
        if allowed_by is None:
            return False, DEFAULT_DENY
        return True, allowed_by

    def authorize_by_resource_type(self, principal: Principal, host: str,
                                   operation: AclOperation, resource_type: ResourceType
                                   ) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of
        ``resource_type``, as Kafka's ``Authorizer.authorizeByResourceType`` decides: an
        ALLOW (for the operation itself or ALL: no implied operations here) on some
        literal name or prefix that no DENY of a literal name, of ``*`` or of a prefix
        dominates. ValueError for ANY or UNKNOWN, as Kafka's argument check."""
        if resource_type == ResourceType.ANY:
            raise ValueError("Must specify a non-filter resource type for "
                             "authorizeByResourceType")
        if resource_type == ResourceType.UNKNOWN:
            raise ValueError("Unknown resource type")
        if operation == AclOperation.ANY:
            raise ValueError("Must specify a non-filter operation type for "
                             "authorizeByResourceType")
        if operation == AclOperation.UNKNOWN:
            raise ValueError("Unknown operation type")
        if self.authorize(principal, host, operation, resource_type, HARDCODE):
            return True
        index = self._by_type.get(resource_type)
        if index is None:
            return False
        who = (principal.type, principal.name)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allow = False
        for acl in index.all():
            if not host_matches(acl.host, host):
                continue
            if acl.principal != who and acl.binding.principal != "User:*":
                continue
            if acl.operation != operation and acl.operation != AclOperation.ALL:
                continue
            literal = acl.binding.pattern_type == PatternType.LITERAL
            name = acl.binding.resource_name
            if not acl.allow:
                if acl.binding.permission_type != AclPermissionType.DENY:
                    continue
                if literal and name == WILDCARD_RESOURCE:
                    return False
                (deny_literal if literal else deny_prefixed).add(name)
                continue
            if literal and name == WILDCARD_RESOURCE:
                wildcard_allow = True
            else:
                (allow_literal if literal else allow_prefixed).add(name)
        if wildcard_allow:
            return True
        for allowed, literal in ((allow_literal, True), (allow_prefixed, False)):
            for name in allowed:
                if literal and name in deny_literal:
                    continue
                if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                    return True
        return False
