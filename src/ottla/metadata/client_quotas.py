"""Client quotas as the metadata holds them (KIP-546; Kafka's ClientQuotaEntity and
ClientQuotasImage): what a quota entity is, and which entities a DescribeClientQuotas
filter selects.

An entity is a user, a client id, a user and a client id together, or an IP address,
each named or the default of its type (a null name). It is kept as its (type, name)
pairs in the order Kafka's entity maps iterate (Java's HashMap of these type names:
client-id, user, ip), which is how Kafka writes them in records and responses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import IntEnum

from ottla.protocol.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (CLIENT_ID, USER, IP)
"""In the order Kafka's maps of them iterate."""

QuotaEntity = tuple[tuple[str, str | None], ...]
"""(entity type, name or None for the default), in ``ENTITY_TYPES`` order."""

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
USER_AND_CLIENT_QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
                              CONTROLLER_MUTATION_RATE)
"""Kafka's ``QuotaConfig.userAndClientQuotaConfigs``."""
IP_QUOTA_KEYS = (CONNECTION_CREATION_RATE,)
"""Kafka's ``QuotaConfig.ipConfigs``."""


def _type_order(item: tuple[str, str | None]) -> tuple[int, str]:
    kind = item[0]
    return (ENTITY_TYPES.index(kind) if kind in ENTITY_TYPES else len(ENTITY_TYPES), kind)


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """An entity from its (type, name) pairs; a type given twice keeps its last name, as
    Kafka's map of them does."""
    entries: dict[str, str | None] = {}
    for kind, name in pairs:
        entries[kind] = name
    return tuple(sorted(entries.items(), key=_type_order))


def entity_str(entity: QuotaEntity) -> str:
    """Kafka's ``ClientQuotaEntity.toString``, which its error messages carry."""
    inner = ", ".join(f"{kind}={'null' if name is None else name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def entity_sort_key(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    """A total order on entities (names may be None): how lists of them are sorted."""
    return tuple((kind, name is not None, name or "") for kind, name in entity)


class MatchType(IntEnum):
    """A DescribeClientQuotas filter component's match type."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


class QuotaFilterError(Exception):
    """A DescribeClientQuotas filter Kafka refuses: the whole request's error."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_NO_MATCH = object()


def describe(quotas: Mapping[QuotaEntity, Mapping[str, float]],
             components: Sequence[tuple[str, int, str | None]], strict: bool
             ) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities a filter selects, with their quotas, sorted (Kafka's
    ``ClientQuotasImage.describe``). Each component is (entity type, match type, match):
    EXACT matches the name given, DEFAULT the default entity of the type, SPECIFIED any
    entity that has the type (the default included, as Kafka's code has it). An entity
    must satisfy every component; ``strict`` also excludes entities with other types.
    Raises ``QuotaFilterError`` with Kafka's errors and messages."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for kind, match_type, match in components:
        if not kind:
            raise QuotaFilterError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise QuotaFilterError(ErrorCode.invalid_request, f"Entity type {kind} cannot "
                                   "appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise QuotaFilterError(ErrorCode.unsupported_version,
                                   f"Unsupported entity type {kind}")
        if match_type == MatchType.EXACT:
            if match is None:
                raise QuotaFilterError(ErrorCode.invalid_request, "Request specified "
                                       "MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = match
        elif match_type == MatchType.DEFAULT:
            if match is not None:
                raise QuotaFilterError(ErrorCode.invalid_request, "Request specified "
                                       "MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif match_type == MatchType.SPECIFIED:
            if match is not None:
                raise QuotaFilterError(ErrorCode.invalid_request, "Request specified "
                                       "MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(kind)
        else:
            raise QuotaFilterError(ErrorCode.invalid_request, f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and any(k in exact or k in typed for k in (USER, CLIENT_ID)):
        raise QuotaFilterError(ErrorCode.invalid_request, "Invalid entity filter component "
                               "combination. IP filter component should not be used with "
                               "user or clientId filter component.")
    found = []
    for entity, values in quotas.items():
        entries = dict(entity)
        if strict and len(entries) != len(exact) + len(typed):
            continue
        if any(entries.get(kind, _NO_MATCH) != name for kind, name in exact.items()):
            continue
        if any(kind not in entries for kind in typed):
            continue
        found.append((entity, dict(sorted(values.items()))))
    found.sort(key=lambda item: entity_sort_key(item[0]))
    return found
