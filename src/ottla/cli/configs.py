"""``ottla configs``: describe and alter the dynamic configs of topics, brokers and groups,
the SCRAM credentials of users, the client quotas of users and client ids and the
connection quotas of addresses (kafka-configs.sh), with Kafka's flags and output."""

from __future__ import annotations

import argparse
import ipaddress
import re
import secrets
import socket
from typing import TYPE_CHECKING, Any

from ottla.cli import client_quota_configs as quotas_cli
from ottla.cli.client_quota_configs import QuotaConfigsError
from ottla.cli.common import (
    BrokerConnections,
    client_config,
    connect,
    fail,
    read_command_config,
)
from ottla.metadata.client_quotas import IP_QUOTA_KEYS
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.security.scram import DEFAULT_ITERATIONS, MIN_ITERATIONS, ScramMechanism, salted_password

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient

TIMEOUT = 30.0
ENTITY_TYPES = ("topics", "brokers", "groups", "users", "clients", "ips")
QUOTA_ENTITY_TYPES = ("users", "clients")
SCRAM_MECHANISMS = {m.mechanism_name: m for m in ScramMechanism
                    if m != ScramMechanism.UNKNOWN}
QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
                 "controller_mutation_rate")
"""Kafka's client and user quota keys (``QuotaConfig.isClientOrUserQuotaConfig``)."""
# ConfigEntry.ConfigSource names as the Java admin client prints them, by wire id.
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}
_DYNAMIC_SOURCE = {"topics": 1, "brokers": 2, "groups": 8}
_CLUSTER_DEFAULT_SOURCE = 3
"""DYNAMIC_DEFAULT_BROKER_CONFIG: what the cluster default of brokers ("") sets."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe and alter dynamic configs (kafka-configs.sh)",
                       description="Add, delete or describe the configs of a topic, a broker "
                       "(or the cluster default) or a group, the SCRAM credentials of a "
                       "user (--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]', "
                       "--delete-config SCRAM-SHA-256), or the client quotas of a user, a "
                       "client id, both (--entity-type users --entity-name alice "
                       "--entity-type clients --entity-name app) or their defaults "
                       "(--add-config producer_byte_rate=1048576).")
    p.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    p.add_argument("--entity-type", required=True, action="append", dest="entity_types",
                   choices=ENTITY_TYPES, help="repeat for users and clients together")
    p.add_argument("--entity-name", action="append", dest="entity_names",
                   help="topic, broker id, group id, user principal or client id (one for "
                   "each --entity-type, in their order)")
    p.add_argument("--entity-default", action="append_const", const="", dest="entity_names",
                   help="the default entity of its type: the cluster-wide broker configs, "
                   "the default user or client id")
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list configs")
    actions.add_argument("--alter", action="store_true", help="change configs")
    p.add_argument("--all", action="store_true",
                   help="with --describe: all configs, not only the dynamic ones")
    p.add_argument("--add-config", metavar="K=V,K2=[A,B]",
                   help="configs to set; a list value goes in square brackets")
    p.add_argument("--delete-config", metavar="K,K2", help="configs to remove")
    p.add_argument("--command-config", help="a properties file of client configs")
    p.set_defaults(run=run)


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's parseConfigsToBeAdded: split on commas outside square brackets, then on the
    first ``=``; brackets are dropped from values."""
    pairs = re.split(r",(?=[^\]]*(?:\[|$))", text)
    configs: dict[str, str] = {}
    for pair in pairs:
        parts = re.split(r"\s*=\s*(?=[^\]]*(?:\[|$))", pair)
        if len(parts) != 2:
            raise ValueError('Invalid entity config: all configs to be added must be in the '
                             'format "key=val".')
        configs[parts[0].strip()] = re.sub(r"\[?\]?", "", parts[1]).strip()
    return configs


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(args.bootstrap_server,
                                     read_command_config(args.command_config)))


_RESOURCE_TYPES = {"topics": 2, "brokers": 4, "groups": 32}


class ConfigsError(Exception):
    """An error a broker answered for the resource, with its message."""


def _entries(client: BlockingClient, entity_type: str, name: str, *,
             describe_all: bool) -> list[Any]:
    """The resource's configs, sorted by name: all of them, or those set dynamically at the
    resource's own level (as kafka-configs shows them). DescribeConfigs goes over the wire
    directly: the cluster default of brokers has an empty name, which librdkafka refuses."""
    response = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": _RESOURCE_TYPES[entity_type], "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    result = response.results[0]
    if result.error_code:
        raise ConfigsError(result.error_message or f"error {int(result.error_code)}")
    wanted = _CLUSTER_DEFAULT_SOURCE if entity_type == "brokers" and name == "" \
        else _DYNAMIC_SOURCE[entity_type]
    return sorted((e for e in result.configs if describe_all or int(e.config_source) == wanted),
                  key=lambda e: e.name)


def _check(response: Any) -> None:
    for result in response.responses:
        if result.error_code:
            raise ConfigsError(result.error_message or f"error {int(result.error_code)}")


def _value(value: str | None) -> str:
    return "null" if value is None else value


def _client(clients: BrokerConnections, entity_type: str, name: str) -> BlockingClient:
    """Where a resource's configs go: a named broker's to that broker (as Kafka's Admin
    sends a BROKER resource: a broker answers for its own id only), the rest to the
    bootstrap connection."""
    return clients.to_broker(name) if entity_type == "brokers" and name \
        else clients.bootstrap


def _describe(admin: Any, clients: BrokerConnections, args: argparse.Namespace) -> int:
    entity_type = args.entity_type
    if args.entity_default:
        names = [""]
    elif args.entity_name is not None:
        names = [args.entity_name]
    elif entity_type == "topics":
        names = sorted(admin.list_topics(timeout=TIMEOUT).topics)
    elif entity_type == "brokers":
        metadata = admin.list_topics(timeout=TIMEOUT)
        names = [str(b) for b in sorted(metadata.brokers)] + [""]
    else:
        listed = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
        names = sorted(g.group_id for g in listed.valid)
    for name in names:
        if name == "":
            print(f"Default configs for {entity_type} in the cluster are:")
        else:
            kind = "All" if args.all else "Dynamic"
            print(f"{kind} configs for {entity_type[:-1]} {name} are:")
        for entry in _entries(_client(clients, entity_type, name), entity_type, name,
                              describe_all=args.all):
            synonyms = ", ".join(f"{SOURCE_NAMES.get(int(s.source), 'UNKNOWN')}:{s.name}="
                                 f"{_value(s.value)}" for s in entry.synonyms)
            print(f"  {entry.name}={_value(entry.value)} "
                  f"sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return 0


def _alter(clients: BrokerConnections, args: argparse.Namespace) -> int:
    entity_type, name = args.entity_type, "" if args.entity_default else args.entity_name
    client = _client(clients, entity_type, name)
    added = parse_add_config(args.add_config) if args.add_config else {}
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    old = {e.name: e for e in _entries(client, entity_type, name, describe_all=False)}
    invalid = [k for k in deleted if k not in old]
    if invalid:
        return fail(f"Invalid config(s): {','.join(invalid)}")
    resource_type = _RESOURCE_TYPES[entity_type]
    if entity_type == "brokers":
        # kafka-configs replaces a broker's whole dynamic set (legacy AlterConfigs).
        values = {k: e.value for k, e in old.items()}
        values.update(added)
        for key in deleted:
            values.pop(key, None)
        missing = sorted(k for k, v in values.items() if v is None)
        if missing:
            return fail("All sensitive broker config entries must be specified for --alter, "
                        f"missing entries: Set({', '.join(missing)})")
        _check(client.request(ApiKey.ALTER_CONFIGS, 2, {"validate_only": False, "resources": [
            {"resource_type": resource_type, "resource_name": name,
             "configs": [{"name": k, "value": v} for k, v in values.items()]}]}))
    else:
        ops = [{"name": k, "config_operation": 0, "value": v} for k, v in added.items()]
        ops += [{"name": k, "config_operation": 1, "value": None} for k in deleted]
        _check(client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "validate_only": False, "resources": [
                {"resource_type": resource_type, "resource_name": name, "configs": ops}]}))
    if name:
        print(f"Completed updating config for {entity_type[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {entity_type} in the cluster.")
    return 0


# --- users: SCRAM credentials (KIP-554) -----------------------------------------------

_EXCEPTION_NAMES = {ErrorCode.duplicate_resource: "DuplicateResourceException",
                    ErrorCode.resource_not_found: "ResourceNotFoundException",
                    ErrorCode.cluster_authorization_failed: "ClusterAuthorizationException"}


def _exception_name(code: ErrorCode) -> str:
    """The Java exception class kafka-configs names for an error code."""
    return _EXCEPTION_NAMES.get(code) or "".join(
        part.capitalize() for part in code.name.split("_")) + "Exception"


def _describe_users(client: BlockingClient, args: argparse.Namespace) -> int:
    """kafka-configs' SCRAM half of describing users (it describes no credentials for the
    default user). Users without credentials are left out; users are sorted, each
    credential listed by mechanism."""
    if args.entity_default:
        return 0
    users = [{"name": args.entity_name}] if args.entity_name is not None else []
    response = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": users})
    if response.error_code:
        raise ConfigsError(response.error_message or f"error {int(response.error_code)}")
    for result in sorted(response.results, key=lambda res: res.user):
        code = ErrorCode(result.error_code)
        if code == ErrorCode.resource_not_found:
            continue
        if code != ErrorCode.none:
            print(f"Error retrieving SCRAM credential configs for user-principal "
                  f"'{result.user}': {_exception_name(code)}: {result.error_message}")
            continue
        infos = ", ".join(
            f"{_mechanism_name(info.mechanism)}=iterations={info.iterations}"
            for info in sorted(result.credential_infos, key=lambda info: info.mechanism))
        print(f"SCRAM credential configs for user-principal '{result.user}' are {infos}")
    return 0


def _mechanism_name(number: int) -> str:
    try:
        return ScramMechanism(number).mechanism_name
    except ValueError:
        return "UNKNOWN"


_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def scram_upsertion(user: str, mechanism_name: str, value: str) -> dict[str, Any]:
    """An AlterUserScramCredentials upsertion from ``--add-config``'s
    ``SCRAM-SHA-256=[iterations=8192,password=secret]`` (brackets already dropped), with
    kafka-configs' and the Java admin client's checks; the salt is random and only the
    salted password is sent."""
    mechanism = SCRAM_MECHANISMS[mechanism_name]
    match = _CREDENTIAL.fullmatch(value)
    if match is None or match.group(1) == "" or match.group(1) == "-":
        raise ValueError(f"Invalid credential property {mechanism.name}={value}")
    given, password = match.group(1), match.group(2)
    iterations = DEFAULT_ITERATIONS if given is None or given == "-1" else int(given)
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                         f"required for {mechanism.mechanism_name}")
    if not password:
        raise ValueError("Password must not be empty")
    salt = secrets.token_bytes(32)
    return {"name": user, "mechanism": int(mechanism), "iterations": iterations,
            "salt": salt, "salted_password": salted_password(mechanism, password, salt,
                                                             iterations)}


def _entities(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The entity types and names given, in order (a default as an empty name)."""
    if getattr(args, "entity_types", None):  # from the command line
        return list(args.entity_types), list(args.entity_names or [])
    names = [""] if args.entity_default else \
        [args.entity_name] if args.entity_name is not None else []
    return [args.entity_type], names


def _completed(entity_type: str, name: str) -> str:
    if name:
        return f"Completed updating config for {entity_type[:-1]} {name}."
    return f"Completed updating default config for {entity_type} in the cluster."


def _alter_users(client: BlockingClient, args: argparse.Namespace) -> int:
    """Alter the quotas of users, client ids or both, or a user's SCRAM credentials, as
    kafka-configs does. Each SCRAM alteration goes in a request of its own: Kafka's
    controller refuses a request that names a user twice (even for two mechanisms) with
    DUPLICATE_RESOURCE, so kafka-configs.sh itself fails when it sends two at once. The
    SCRAM alterations are not atomic: the first error stops the rest."""
    types, names = _entities(args)
    added = parse_add_config(args.add_config) if args.add_config else {}
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    try:
        quotas_cli.check_keys(types, list(added), deleted, list(SCRAM_MECHANISMS))
    except QuotaConfigsError as e:
        return fail(str(e))
    quotas = [k for k in [*added, *deleted] if k in QUOTA_CONFIGS]
    scram = [k for k in [*added, *deleted] if k in SCRAM_MECHANISMS]
    if scram and "" in names:
        return fail("The use of --entity-default or --user-defaults is not allowed with User "
                    "SCRAM Credentials using --bootstrap-server.")
    if scram and quotas:
        return fail("Cannot alter both quota and SCRAM credential configs simultaneously "
                    "for 'users' using --bootstrap-server.")
    if quotas:
        quotas_cli.alter_quotas(client, types, names, added, deleted)
        print(_completed(types[0], names[0]))
        return 0
    user = names[0]
    alterations: list[dict[str, Any]] = [
        {"deletions": [{"name": user, "mechanism": int(SCRAM_MECHANISMS[k])}], "upsertions": []}
        for k in deleted]
    alterations += [{"deletions": [], "upsertions": [scram_upsertion(user, k, v)]}
                    for k, v in added.items()]
    for body in alterations:
        response = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
        for result in response.results:
            if result.error_code:
                raise ConfigsError(result.error_message or
                                   f"error {int(result.error_code)}")
    print(_completed("users", user))
    return 0


def _describe_quotas(client: BlockingClient, args: argparse.Namespace) -> int:
    """kafka-configs' describing of users or clients: the quotas of the entities the
    types and names select, then, for users alone and no default, their SCRAM
    credentials."""
    types, names = _entities(args)
    quotas_cli.print_quotas(client, types, names)
    if "clients" not in types and "" not in names:
        return _describe_users(client, args)
    return 0


def _valid_ip_entity(name: str) -> bool:
    """Kafka's ``DynamicConfig.Ip.isValidIpEntity``: an address, or a host that resolves."""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except OSError:
        return False


def _describe_ips(client: BlockingClient, args: argparse.Namespace) -> int:
    types, names = _entities(args)
    quotas_cli.print_quotas(client, types, names)
    return 0


def _alter_ips(client: BlockingClient, args: argparse.Namespace) -> int:
    """The connection quota of an address or of the default ip (kafka-configs'
    ``ConfigType.IP`` branch)."""
    types, names = _entities(args)
    added = parse_add_config(args.add_config) if args.add_config else {}
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    unknown = [k for k in [*added, *deleted] if k not in IP_QUOTA_KEYS]
    if unknown:
        return fail("Only connection quota configs can be added for 'ips' using "
                    f"--bootstrap-server. Unexpected config names: {','.join(unknown)}")
    quotas_cli.alter_quotas(client, types, names, added, deleted)
    print(_completed("ips", names[0]))
    return 0


def _check_entities(args: argparse.Namespace) -> str | None:
    """kafka-configs' checks of the entity types and names (``checkArgs``): why not."""
    types, names = _entities(args)
    duplicates = [t for t in dict.fromkeys(types) if types.count(t) > 1]
    if duplicates:
        return f"Duplicate entity type(s) specified: {','.join(duplicates)}"
    if len(types) > 1 and set(types) != set(QUOTA_ENTITY_TYPES):
        return "Only 'users' and 'clients' entity types may be specified together"
    if "brokers" in types:
        for name in names:
            if name and not name.isdigit():
                return ("The entity name for brokers must be a valid integer broker id, "
                        f"found: {name}")
    if "ips" in types:
        for name in names:
            if name and not _valid_ip_entity(name):
                return ("The entity name for ips must be a valid IP or resolvable host, but "
                        f"it is: {name}")
    if args.describe and "" in names and \
            not any(t in types for t in ("users", "clients", "brokers", "ips")):
        return f"--entity-default must not be specified with --describe of {','.join(types)}"
    if args.alter:
        if any(t in types for t in ("users", "clients", "brokers", "ips")):
            if not names:
                return ("An entity-name or default entity must be specified with --alter of "
                        "users, clients, brokers or ips")
        elif not any(names):
            return f"An entity name must be specified with --alter of {','.join(types)}"
        if not args.add_config and not args.delete_config:
            return "At least one of --add-config or --delete-config must be specified with " \
                "--alter"
    return None


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    refused = _check_entities(args)
    if refused is not None:
        return fail(refused)
    types, names = _entities(args)
    args.entity_type = types[0]
    args.entity_name = names[0] if names and names[0] else None
    args.entity_default = bool(names) and names[0] == ""
    try:
        properties = read_command_config(args.command_config)
        with connect(args.bootstrap_server, "ottla-configs", properties) as client:
            if args.entity_type == "ips":
                return _describe_ips(client, args) if args.describe \
                    else _alter_ips(client, args)
            if args.entity_type in QUOTA_ENTITY_TYPES:
                return _describe_quotas(client, args) if args.describe \
                    else _alter_users(client, args)
            with BrokerConnections(client, "ottla-configs", properties) as brokers:
                if args.describe:
                    return _describe(_admin(args), brokers, args)
                return _alter(brokers, args)
    except (ValueError, ConfigsError, QuotaConfigsError, ConnectionError) as e:
        return fail(str(e))
    except KafkaException as e:
        err = e.args[0] if e.args else e
        return fail(getattr(err, "str", lambda: str(err))())
