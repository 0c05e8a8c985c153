"""What a response tells ErrorsPerSec and ThrottleTimeMs: its error codes, counted as
Kafka's ``AbstractResponse.errorCounts`` counts them, and its throttle time.

Kafka's ``RequestChannel.sendResponse`` marks ``ErrorsPerSec{request, error}`` once per
occurrence of each error code in ``errorCounts()``, NONE included. For nearly every API
that is every ``ErrorCode`` field of the response (top level, per topic, per partition,
per member...), which is what is counted here, generically: every field named
``error_code`` anywhere in the response (a handler's dict, or the kio entity an error
response is). The response walked is the handler's version-agnostic dict, as Kafka's
``errorCounts`` reads its data object, which holds every field whatever the version (a
top-level NONE is counted for versions whose wire form has no such field too).

The APIs whose ``errorCounts`` is not "every ErrorCode field" (all of Kafka's 4.x
``*Response.errorCounts`` read for this) are counted as Kafka counts them:

- AddPartitionsToTxn: its partitions' errors are ``PartitionErrorCode``, counted; the
  top-level error only in a v4+ response (``ResultsByTopicV3AndBelow`` empty);
- FindCoordinator: each coordinator's error (v4+), the top-level one only without any;
- OffsetFetch: v8+ (``groups``), each group's error and each partition's, not the
  top-level one;
- DeleteAcls: each filter result's error, not the top-level one nor each matching ACL's;
- DescribeUserScramCredentials: each result's error, not the top-level one;
- AssignReplicasToDirs: the top-level error alone.

Fields that are errors under other names and that Kafka does not count either
(CreateTopics' ``TopicConfigErrorCode``, ShareFetch's ``AcknowledgeErrorCode``) are not
counted. What Ottla does not do: a response Kafka never builds (closing the connection
instead, a failed ``acks=0`` produce) counts nothing here, where Kafka's
``closeConnection`` counts the errors the handler had.

Produce and Fetch, whose responses can hold thousands of partitions, are not walked: their
encoders (``protocol.produce_response``, ``protocol.fetch_response``) count as they write
(Kafka's ``ProduceResponse.errorCounts``: each partition's error; ``FetchResponse``'s: the
top-level error and each partition's) and hand the counts over in the ``EncodedBody``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.direct_encoding import EncodedBody
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import ms

_Plan = tuple[tuple[str, ...], tuple[str, ...]]
"""An entity type's walk: its error fields and the fields that may hold further
entities."""

_PLANS: dict[type, _Plan] = {}


def error_counts(api_key: int, response: object) -> dict[int, int]:
    """Each error code a response of ``api_key`` carries, with how many times (NONE is
    0), as Kafka's ``errorCounts`` counts them."""
    if type(response) is EncodedBody:
        return response.errors
    counts: dict[int, int] = {}
    special = _SPECIAL.get(api_key)
    if special is None:
        _walk(response, counts)
    else:
        special(response, counts)
    return counts


def throttle_ms(response: object) -> int:
    """The throttle_time_ms the response carries, 0 when it carries none."""
    if type(response) is EncodedBody:
        return response.throttle_ms
    if isinstance(response, Mapping):
        value = response.get("throttle_time")
    else:
        value = getattr(response, "throttle_time", None)
    return 0 if value is None else ms(value)


def _field(node: object, name: str) -> Any:
    """A field of a dict or an entity (None if it has none)."""
    if isinstance(node, Mapping):
        return node.get(name)
    return getattr(node, name, None)


def _count(counts: dict[int, int], code: object) -> None:
    if code is not None:
        value = int(code)  # type: ignore[call-overload]
        counts[value] = counts.get(value, 0) + 1


def _each(node: object, name: str, counts: dict[int, int]) -> None:
    """The ``error_code`` of each item of the list field ``name``."""
    for item in _field(node, name) or ():
        _count(counts, _field(item, "error_code"))


def _add_partitions_to_txn(response: object, counts: dict[int, int]) -> None:
    if not _field(response, "results_by_topic_v3_and_below"):
        _count(counts, _field(response, "error_code"))
    for name in ("results_by_topic_v3_and_below", "results_by_transaction"):
        _walk_value(_field(response, name), counts)


def _find_coordinator(response: object, counts: dict[int, int]) -> None:
    if _field(response, "coordinators"):
        _each(response, "coordinators", counts)
    else:
        _count(counts, _field(response, "error_code"))


def _offset_fetch(response: object, counts: dict[int, int]) -> None:
    groups = _field(response, "groups")
    if groups:
        _walk_value(groups, counts)
    else:
        _walk(response, counts)


_SPECIAL: dict[int, Callable[[object, dict[int, int]], None]] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.DELETE_ACLS: lambda response, counts: _each(response, "filter_results", counts),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        lambda response, counts: _each(response, "results", counts),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS:
        lambda response, counts: _count(counts, _field(response, "error_code")),
}
"""The APIs whose ``errorCounts`` is not every ``error_code`` (the module's docstring)."""

_ERROR_FIELDS = frozenset(("error_code", "partition_error_code"))
"""The fields that are counted: ``partition_error_code`` is AddPartitionsToTxn's."""


def _walk(node: object, counts: dict[int, int]) -> None:
    if type(node) is dict:
        _walk_dict(node, counts)
        return
    plan = _plan(type(node))
    if plan is None:
        return
    errors, nested = plan
    for name in errors:
        _count(counts, getattr(node, name))
    for name in nested:
        _walk_value(getattr(node, name), counts)


def _walk_dict(node: dict[str, Any], counts: dict[int, int]) -> None:
    """A handler's dict: the common case, kept to type checks on each value (a scalar
    costs one set lookup)."""
    for key, value in node.items():
        kind = type(value)
        if kind in _SCALARS:
            if key in _ERROR_FIELDS:
                code = int(value)  # type: ignore[call-overload]
                counts[code] = counts.get(code, 0) + 1
        elif kind is list or kind is tuple:
            if value:
                first = type(value[0])
                if first is dict:
                    for item in value:
                        _walk_dict(item, counts)
                elif first not in _SCALARS and _plan(first) is not None:
                    for item in value:
                        _walk(item, counts)
        elif kind is dict:
            _walk_dict(value, counts)
        elif key in _ERROR_FIELDS:
            _count(counts, value)
        elif kind not in _SCALARS and _plan(kind) is not None:
            _walk(value, counts)


def _walk_value(value: object, counts: dict[int, int]) -> None:
    """A field's value: walked if it is (or is a sequence of) dicts or entities; a list
    of scalars is told by its first item, so replica lists cost nothing."""
    kind = type(value)
    if kind is list or kind is tuple:
        items: Any = value
        if items and _container(items[0]):
            for item in items:
                _walk(item, counts)
    elif _container(value):
        _walk(value, counts)


def _container(value: object) -> bool:
    kind = type(value)
    return kind is dict or (kind not in _SCALARS and _plan(kind) is not None)


_SCALARS: set[type] = {int, str, bool, float, bytes, type(None), ErrorCode}
"""Types that are never walked (others are learnt as ``_NOT_ENTITIES``)."""


def _plan(cls: type) -> _Plan | None:
    """How to walk an entity type (a dataclass, as kio's are), made once per type; None
    for anything else."""
    plan = _PLANS.get(cls)
    if plan is not None or cls in _NOT_ENTITIES:
        return plan
    if not dataclasses.is_dataclass(cls):
        _NOT_ENTITIES.add(cls)
        return None
    fields = [f.name for f in dataclasses.fields(cls)]
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    nested = tuple(name for name in fields if name not in _ERROR_FIELDS
                   and (name not in hints or _may_hold_entities(hints[name])))
    plan = _PLANS[cls] = (tuple(name for name in fields if name in _ERROR_FIELDS), nested)
    return plan


_NOT_ENTITIES: set[type] = set()


def _may_hold_entities(hint: object) -> bool:
    """Whether a field of this type can hold an entity: a dataclass, a tuple of them, or
    an optional of either."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return True
    origin = typing.get_origin(hint)
    if origin in (tuple, list, typing.Union, types.UnionType):
        return any(_may_hold_entities(arg) for arg in typing.get_args(hint)
                   if arg is not Ellipsis)
    return False
