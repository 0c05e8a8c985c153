"""``ottla client-metrics``: kafka-client-metrics.sh (Kafka's ClientMetricsCommand), with
its flags, checks and printed lines. A subscription is a CLIENT_METRICS config resource
(KIP-714; ``common.client_metrics_configs``):

- ``--alter --name N|--generate-name [--metrics M1,M2] [--interval MS] [--match K=V,...]``
  sets the keys given (an empty value deletes the key) with IncrementalAlterConfigs;
- ``--describe [--name N]``: each subscription's keys, defaults included;
- ``--list``: the subscriptions' names (ListConfigResources);
- ``--delete --name N``: deletes every key, and so the subscription.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import TYPE_CHECKING, Any

from ottla.cli.common import connect, read_command_config
from ottla.common.uuids import kafka_uuid_text
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient

CLIENT_METRICS = 16
OP_SET, OP_DELETE = 0, 1
USAGE = "This tool helps to manipulate and describe client metrics configurations."
ACTIONS = ("alter", "delete", "describe", "list")
SELECTORS = ("client_id", "client_instance_id", "client_software_name",
             "client_software_version", "client_source_address", "client_source_port")
INVALID_WITH = {"delete": ("generate_name", "interval", "match", "metrics"),
                "describe": ("generate_name", "interval", "match", "metrics"),
                "list": ("name", "generate_name", "interval", "match", "metrics")}
"""Kafka's checkInvalidArgs: the options each action refuses."""


class CommandError(Exception):
    """What the tool prints as ``Error while executing client metrics command : ...``."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("client-metrics", help="KIP-714 client metrics subscriptions "
                       "(kafka-client-metrics.sh)", description=USAGE)
    p.add_argument("--bootstrap-server", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--command-config",
                   help="Property file containing configs to be passed to Admin Client.")
    for action, text in (("alter", "Alter the configuration for the client metrics resource."),
                         ("delete", "Delete the configuration for the client metrics "
                                    "resource."),
                         ("describe", "List configurations for the client metrics resource."),
                         ("list", "List the client metrics resources.")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--name", help="Name of client metrics configuration resource.")
    p.add_argument("--generate-name", action="store_true",
                   help="Generate a UUID to use as the name.")
    p.add_argument("--interval", help="The metrics push interval in milliseconds.")
    p.add_argument("--match", help="Matching selector 'k1=v1,k2=v2'. The following is a list "
                   "of valid selector names: " + ", ".join(SELECTORS))
    p.add_argument("--metrics", help="Telemetry metric name prefixes 'm1,m2'.")
    p.set_defaults(run=run)


def check_args(args: argparse.Namespace) -> str | None:
    """Kafka's ClientMetricsCommandOptions.checkArgs: the message of what is wrong."""
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        return "Command must include exactly one action: --alter, --delete, --describe or " \
            "--list."
    if not args.bootstrap_server:
        return "--bootstrap-server must be specified."
    action = actions[0]
    for option in INVALID_WITH.get(action, ()):
        value = getattr(args, option)
        if value not in (None, False):
            return f'Option "[{action}]" can\'t be used with option ' \
                f'"[{option.replace("_", "-")}]"'
    has_name = args.name is not None
    if action == "alter" and has_name == args.generate_name:
        return "One of --name or --generate-name must be specified with --alter."
    if action == "delete" and not has_name:
        return "A client metrics resource name must be specified with --delete."
    return None


def _checked(response: Any) -> None:
    for result in response.responses:
        if result.error_code:
            raise CommandError(result.error_message or ErrorCode(result.error_code).name)


def _alter(client: BlockingClient, args: argparse.Namespace, configs: dict[str, str]
           ) -> None:
    ops = [{"name": key, "config_operation": OP_DELETE if value == "" else OP_SET,
            "value": value} for key, value in configs.items()]
    _checked(client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "validate_only": False, "resources": [
            {"resource_type": CLIENT_METRICS, "resource_name": args.name, "configs": ops}]}))


def _configs(client: BlockingClient, name: str) -> list[tuple[str, str | None]]:
    """Every key of the subscription, defaults included (DescribeConfigs)."""
    response = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": CLIENT_METRICS, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    result = response.results[0]
    if result.error_code:
        raise CommandError(result.error_message or ErrorCode(result.error_code).name)
    return [(entry.name, entry.value) for entry in result.configs]


def _names(client: BlockingClient) -> list[str]:
    response = client.request(ApiKey.LIST_CONFIG_RESOURCES, 1,
                              {"resource_types": [CLIENT_METRICS]})
    if response.error_code:
        raise CommandError(ErrorCode(response.error_code).name)
    return [r.resource_name for r in response.config_resources]


def _run(client: BlockingClient, args: argparse.Namespace) -> None:
    if args.alter:
        if args.generate_name:
            args.name = kafka_uuid_text(uuid.uuid4())
        configs: dict[str, str] = {}
        if args.interval is not None:
            configs["interval.ms"] = args.interval
        if args.metrics is not None:
            configs["metrics"] = ",".join(args.metrics.split(","))
        if args.match is not None:
            configs["match"] = ",".join(args.match.split(","))
        _alter(client, args, configs)
        print(f"Altered client metrics config for {args.name}.")
    elif args.delete:
        ops = [{"name": key, "config_operation": OP_DELETE, "value": value}
               for key, value in _configs(client, args.name)]
        _checked(client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "validate_only": False, "resources": [
                {"resource_type": CLIENT_METRICS, "resource_name": args.name,
                 "configs": ops}]}))
        print(f"Deleted client metrics config for {args.name}.")
    elif args.describe:
        names = _names(client)
        if args.name is not None:
            if args.name not in names:
                print(f"The client metric resource {args.name} doesn't exist and doesn't have "
                      "dynamic config.")
                return
            names = [args.name]
        for name in names:
            print(f"Client metrics configs for {name} are:")
            # The Java tool prints the entries of a HashMap: for these three keys, sorted.
            for key, value in sorted(_configs(client, name)):
                print(f"  {key}={value}")
    else:
        print("\n".join(_names(client)))


def run(args: argparse.Namespace) -> int:
    problem = check_args(args)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    try:
        with connect(args.bootstrap_server, "ottla-client-metrics",
                     read_command_config(args.command_config)) as client:
            _run(client, args)
    except (CommandError, ConnectionError) as e:
        print(f"Error while executing client metrics command : {e}")
        return 1
    return 0
