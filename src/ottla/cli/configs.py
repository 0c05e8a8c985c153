"""``ottla configs``: describe and alter the dynamic configs of topics, brokers and groups
(kafka-configs.sh), with Kafka's flags and output."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from ottla.cli.common import client_config, connect, fail
from ottla.protocol.api import ApiKey

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient

TIMEOUT = 30.0
ENTITY_TYPES = ("topics", "brokers", "groups")
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
                       "(or the cluster default) or a group.")
    p.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    p.add_argument("--entity-type", required=True, choices=ENTITY_TYPES)
    p.add_argument("--entity-name", help="topic, broker id or group id")
    p.add_argument("--entity-default", action="store_true",
                   help="the cluster-wide default of brokers")
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

    extra: dict[str, Any] = {}
    if args.command_config:
        from ottla.common.config import load_properties

        with open(args.command_config, encoding="utf-8") as f:
            extra.update(load_properties(f.read()))
    return AdminClient(client_config(args.bootstrap_server, extra))


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


def _describe(admin: Any, client: BlockingClient, args: argparse.Namespace) -> int:
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
        for entry in _entries(client, entity_type, name, describe_all=args.all):
            synonyms = ", ".join(f"{SOURCE_NAMES.get(int(s.source), 'UNKNOWN')}:{s.name}="
                                 f"{_value(s.value)}" for s in entry.synonyms)
            print(f"  {entry.name}={_value(entry.value)} "
                  f"sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return 0


def _alter(client: BlockingClient, args: argparse.Namespace) -> int:
    entity_type, name = args.entity_type, "" if args.entity_default else args.entity_name
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


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    if args.entity_default and (args.entity_type != "brokers" or args.entity_name):
        return fail("--entity-default applies to --entity-type brokers, without --entity-name")
    if args.entity_type == "brokers" and args.entity_name is not None and \
            not args.entity_name.isdigit():
        return fail("The entity name for brokers must be a valid integer broker id, found: "
                    f"{args.entity_name}")
    if args.alter:
        if args.entity_name is None and not args.entity_default:
            return fail("an entity name must be specified with --alter")
        if not args.add_config and not args.delete_config:
            return fail("At least one of --add-config or --delete-config must be specified "
                        "with --alter")
    try:
        with connect(args.bootstrap_server, "ottla-configs") as client:
            if args.describe:
                return _describe(_admin(args), client, args)
            return _alter(client, args)
    except (ValueError, ConfigsError, ConnectionError) as e:
        return fail(str(e))
    except KafkaException as e:
        err = e.args[0] if e.args else e
        return fail(getattr(err, "str", lambda: str(err))())
