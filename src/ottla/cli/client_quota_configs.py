"""The client quotas half of ``ottla configs`` (kafka-configs.sh ``--entity-type users``,
``clients``, or both): describe and alter the quotas of a user, a client id, a user's
client id, or the defaults of these, with Kafka 4.4's checks and output.

kafka-configs prints the maps Kafka's admin client fills (Java HashMaps), so entities and
their keys come out in the order those maps iterate; that order is reproduced here
(``common.java``), as is Java's way of printing a double (``1048576.0``, ``1.0E7``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ottla.common.java import (
    double_str,
    hash_map_order,
    hash_set_order,
    int32,
    parse_double,
    string_hash,
)
from ottla.metadata.client_quotas import (
    CLIENT_ID,
    IP,
    USER,
    USER_AND_CLIENT_QUOTA_KEYS,
    MatchType,
    QuotaEntity,
)
from ottla.protocol.api import ApiKey

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient

ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID, "ips": IP}
"""kafka-configs' entity types that name client quota entities, and the entity type
each stands for."""
_DESCRIBED_AS = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}


class QuotaConfigsError(Exception):
    """What kafka-configs fails with: a check of its own or a broker's error message."""


def _filter(types: Sequence[str], names: Sequence[str]) -> list[dict[str, Any]]:
    """kafka-configs' ``getAllClientQuotasConfigs`` components: a name (EXACT), the
    default (DEFAULT, an empty name) or any entity of the type (SPECIFIED) when fewer
    names than types were given."""
    if len(names) > len(types):
        raise QuotaConfigsError("More entity names specified than entity types")
    components = []
    for i, kind in enumerate(types):
        entity_type = ENTITY_TYPES[kind]
        if i >= len(names):
            components.append({"entity_type": entity_type,
                               "match_type": MatchType.SPECIFIED, "match": None})
        elif names[i] == "":
            components.append({"entity_type": entity_type,
                               "match_type": MatchType.DEFAULT, "match": None})
        else:
            components.append({"entity_type": entity_type, "match_type": MatchType.EXACT,
                               "match": names[i]})
    return components


def _entity_hash(entity: QuotaEntity) -> int:
    """``ClientQuotaEntity.hashCode``: ``Objects.hash(entries)``, a map's hash being the
    sum of each entry's key hash XOR value hash (0 for null)."""
    total = sum(string_hash(kind) ^ (string_hash(name) if name is not None else 0)
                for kind, name in entity)
    return int32(31 + total)


def describe_quotas(client: BlockingClient, types: Sequence[str], names: Sequence[str]
                    ) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities a strict filter of ``types`` and ``names`` selects (Kafka's
    ``ClientQuotaFilter.containsOnly``), in the order the Java admin client's map of them
    iterates, each with its quotas in its own map's order."""
    response = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {
        "components": _filter(types, names), "strict": True})
    if response.error_code:
        raise QuotaConfigsError(response.error_message or f"error {int(response.error_code)}")
    found: dict[QuotaEntity, dict[str, float]] = {}
    for entry in response.entries or ():
        entity = tuple((e.entity_type, e.entity_name) for e in entry.entity)
        values = {v.key: float(v.value) for v in entry.values}
        found[entity] = {key: values[key] for key in hash_map_order(values, string_hash,
                                                                    len(values))}
    return [(entity, found[entity])
            for entity in hash_map_order(found, _entity_hash, len(found))]


def quota_line(entity: QuotaEntity, values: dict[str, float]) -> str:
    """kafka-configs' line for one entity: ``Quota configs for user-principal 'alice',
    the default client-id are producer_byte_rate=1024.0``."""
    named = dict(entity)
    parts = []
    for kind in (USER, CLIENT_ID, IP):
        if kind in named:
            name = named[kind]
            parts.append(f"the default {_DESCRIBED_AS[kind]}" if name is None
                         else f"{_DESCRIBED_AS[kind]} '{name}'")
    entries = ", ".join(f"{key}={double_str(value)}" for key, value in values.items())
    return f"Quota configs for {', '.join(parts)} are {entries}"


def print_quotas(client: BlockingClient, types: Sequence[str], names: Sequence[str]) -> None:
    for entity, values in describe_quotas(client, types, names):
        print(quota_line(entity, values))


def check_keys(types: Sequence[str], added: Sequence[str], deleted: Sequence[str],
               scram_mechanisms: Sequence[str]) -> None:
    """kafka-configs' checks of the keys given for users or clients: quota keys only for
    clients (and a user's client ids), quota keys or SCRAM mechanisms for users."""
    def unknown(keys: Sequence[str]) -> list[str]:
        return [k for k in keys if k not in USER_AND_CLIENT_QUOTA_KEYS
                and k not in scram_mechanisms]

    def listed(keys: Sequence[str]) -> str:
        return ",".join(hash_set_order(keys, string_hash))

    if types[0] == "clients" or len(types) == 2:
        bad_added = unknown(added) + [k for k in added if k in scram_mechanisms]
        if bad_added:
            raise QuotaConfigsError("Only quota configs can be added for 'clients' using "
                                    f"--bootstrap-server. Unexpected config names: "
                                    f"{listed(bad_added)}")
        bad_deleted = unknown(deleted) + [k for k in deleted if k in scram_mechanisms]
        if bad_deleted:
            raise QuotaConfigsError("Only quota configs can be deleted for 'clients' using "
                                    f"--bootstrap-server. Unexpected config names: "
                                    f"{listed(bad_deleted)}")
        return
    if unknown(added):
        raise QuotaConfigsError("Only quota and SCRAM credential configs can be added for "
                                "'users' using --bootstrap-server. Unexpected config names: "
                                f"{listed(unknown(added))}")
    if unknown(deleted):
        raise QuotaConfigsError("Only quota and SCRAM credential configs can be deleted for "
                                "'users' using --bootstrap-server. Unexpected config names: "
                                f"{listed(unknown(deleted))}")


def alter_quotas(client: BlockingClient, types: Sequence[str], names: Sequence[str],
                 added: dict[str, str], deleted: Sequence[str]) -> None:
    """kafka-configs' ``alterQuotaConfigs``: the entity's current quotas first (a key to
    delete must be one of them), then one AlterClientQuotas of the keys to set and to
    remove."""
    if len(types) != len(names):
        raise QuotaConfigsError("Exactly one entity name must be specified for every "
                                "entity type")
    current = describe_quotas(client, types, names)
    old = current[0][1] if current else {}
    invalid = [k for k in deleted if k not in old]
    if invalid:
        raise QuotaConfigsError(f"Invalid config(s): {','.join(invalid)}")
    ops = []
    for key, value in added.items():
        try:
            number = parse_double(value)
        except ValueError:
            raise QuotaConfigsError(f"Cannot parse quota configuration value for {key}: "
                                    f"{value}") from None
        ops.append({"key": key, "value": number, "remove": False})
    ops += [{"key": key, "value": 0.0, "remove": True} for key in deleted]
    entity = [{"entity_type": ENTITY_TYPES[kind], "entity_name": name or None}
              for kind, name in zip(types, names, strict=True)]
    response = client.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {
        "entries": [{"entity": entity, "ops": ops}], "validate_only": False})
    for entry in response.entries:
        if entry.error_code:
            raise QuotaConfigsError(entry.error_message or f"error {int(entry.error_code)}")
