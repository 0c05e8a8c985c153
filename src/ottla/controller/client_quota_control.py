"""Client quotas (KIP-546; Kafka's ClientQuotaControlManager): AlterClientQuotas turns each
entity's operations into ClientQuotaRecords, with Kafka's checks and errors per entity.

An entity is a user, a client id, both, or an IP address, each named or the default
(``metadata.client_quotas``). Users and client ids take ``producer_byte_rate``,
``consumer_byte_rate`` (whole numbers), ``request_percentage`` and
``controller_mutation_rate``; IP addresses ``connection_creation_rate`` (a whole number
within an int). A value must be finite and above 0. Removing a key an entity does not
have writes nothing, and so does setting a key to the value it has. One entity's error
does not stop the others; the records of the valid ones are written together.

Kafka's quirks are kept: an entity named twice in a request is answered once, "Ignoring
duplicate entity ...", though the first alteration of it is applied; a key named twice in
one alteration is answered the same way. Unlike Kafka, an IP entity must be an address
literal: resolving a host name here would block the controller (Kafka's controller
resolves it, and refuses what it cannot resolve with the same message).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kio.static.primitive import f64

from ottla.common.java import hash_map_order, string_hash
from ottla.controller.results import ControllerResult, check_user_op
from ottla.metadata import records as r
from ottla.metadata.client_quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    entity_str,
)
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode


class QuotaKeyType(Enum):
    """The ConfigDef type Kafka gives a quota key: what values it accepts."""

    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


USER_AND_CLIENT_KEYS = {PRODUCER_BYTE_RATE: QuotaKeyType.LONG,
                        CONSUMER_BYTE_RATE: QuotaKeyType.LONG,
                        REQUEST_PERCENTAGE: QuotaKeyType.DOUBLE,
                        CONTROLLER_MUTATION_RATE: QuotaKeyType.DOUBLE}
"""Kafka's ``QuotaConfig.userAndClientQuotaConfigs``."""
IP_KEYS = {CONNECTION_CREATION_RATE: QuotaKeyType.INT}
"""Kafka's ``QuotaConfig.ipConfigs``."""

LONG_MAX = float(2**63 - 1)
"""``Long.MAX_VALUE`` as the double Java compares a value with."""
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One entry of an AlterClientQuotas request: the entity (its map, as Kafka's
    ``AlterClientQuotasRequest.entries`` builds it) and its operations, each a key and
    the value to set, or None to remove the key."""

    entity: QuotaEntity
    ops: tuple[tuple[str, float | None], ...]


AlterResult = tuple[QuotaEntity, ErrorCode, str | None]
"""(entity, error, message): one result per entity named in the request."""


def _invalid(message: str) -> tuple[ErrorCode, str]:
    return ErrorCode.invalid_request, message


def _check_entity(entity: QuotaEntity) -> tuple[ErrorCode, str] | None:
    """Kafka's ``validateEntity``."""
    if not entity:
        return _invalid("Invalid empty client quota entity")
    for kind, name in entity:
        if kind not in (USER, CLIENT_ID, IP):
            return _invalid(f"Unhandled client quota entity type: {kind}")
        if name == "":
            return _invalid(f"Empty {kind} not supported")
    return None


def is_valid_ip_entity(name: str | None) -> bool:
    """An IP entity's name: the default, or an address literal."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def keys_for_entity(entity: QuotaEntity) -> dict[str, QuotaKeyType] | tuple[ErrorCode, str]:
    """The keys an entity's combination of types takes (Kafka's
    ``configKeysForEntityType``), or the error of a combination it refuses."""
    types = dict(entity)
    has_user, has_client, has_ip = USER in types, CLIENT_ID in types, IP in types
    if has_ip:
        if has_user or has_client:
            # Kafka's message, its missing space included.
            return _invalid("Invalid quota entity combination, IP entity should"
                            "not be combined with User or ClientId")
        if not is_valid_ip_entity(types[IP]):
            return _invalid(f"{types[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS
    if has_user or has_client:
        return USER_AND_CLIENT_KEYS
    return _invalid("Invalid empty client quota entity")


def check_value(keys: dict[str, QuotaKeyType], key: str, value: float
                ) -> tuple[ErrorCode, str] | None:
    """Kafka's ``validateQuotaKeyValue``."""
    kind = keys.get(key)
    if kind is None:
        return _invalid(f"Invalid configuration key {key}")
    if not math.isfinite(value):
        return _invalid(f"Quota {key} must be a finite number")
    if value <= 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    if kind == QuotaKeyType.DOUBLE:
        return None
    if kind == QuotaKeyType.INT and value > INT_MAX:
        return _invalid(f"Proposed value for {key} is too large for an INT.")
    if kind == QuotaKeyType.LONG and value > LONG_MAX:
        return _invalid(f"Proposed value for {key} is too large for a LONG.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return _invalid(f"{key} cannot be a fractional value.")
    return None


def _record_entity(entity: QuotaEntity) -> tuple[r.ClientQuotaEntityData, ...]:
    return tuple(r.ClientQuotaEntityData(entity_type=kind, entity_name=name)
                 for kind, name in entity)


class ClientQuotaControlManager:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def _alter_entity(self, entity: QuotaEntity, ops: dict[str, float | None],
                      records: list[Any]) -> tuple[ErrorCode, str | None]:
        """Kafka's ``alterClientQuotaEntity``: the records of one entity's operations
        (added to ``records`` only if all are valid) and its result. The operations are
        checked in the order Kafka's map of them iterates, so the first error Kafka
        names is the one named here."""
        error = _check_entity(entity)
        if error is not None:
            return error
        keys = keys_for_entity(entity)
        if isinstance(keys, tuple):
            return keys
        current = self.image.client_quotas.get(entity, {})
        mine: list[Any] = []
        for key in hash_map_order(ops, string_hash, len(ops)):
            value = ops[key]
            if value is None:
                if key in current:
                    mine.append(r.ClientQuotaRecord(entity=_record_entity(entity), key=key,
                                                    remove=True))
                continue
            error = check_value(keys, key, value)
            if error is not None:
                return error
            if current.get(key) != value:
                mine.append(r.ClientQuotaRecord(entity=_record_entity(entity), key=key,
                                                value=f64(float(value))))
        records.extend(mine)
        return ErrorCode.none, None

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration],
                            validate_only: bool = False) -> ControllerResult:
        """AlterClientQuotas: the records of every valid alteration (none with
        ``validate_only``), and one result per entity, in the order first named (Kafka's
        ``alterClientQuotas``)."""
        records: list[Any] = []
        results: dict[QuotaEntity, tuple[ErrorCode, str | None]] = {}
        for alteration in alterations:
            entity = alteration.entity
            ops: dict[str, float | None] = {}
            for key, value in alteration.ops:
                if key in ops:
                    results[entity] = _invalid(
                        f"Duplicate quota key {key} not updating quota for this entity "
                        f"{entity_str(entity)}")
                else:
                    ops[key] = value
            if entity in results:
                results[entity] = _invalid(f"Ignoring duplicate entity {entity_str(entity)}")
            else:
                results[entity] = self._alter_entity(entity, ops, records)
        check_user_op(len(records))
        return ControllerResult([] if validate_only else records, [(entity, code, message)
                                          for entity, (code, message) in results.items()])
