"""``ottla acls``: add, remove and list ACLs (kafka-acls.sh, Kafka 4.x's
``org.apache.kafka.tools.AclCommand``), with its flags, checks and output.

What Kafka prints:

- ``--add``: per resource, ``Acl (pattern=..., entry=...) already exists.`` for each ACL
  the cluster has, then ``Adding ACLs for resource `ResourcePattern(...)`: `` and the new
  entries, one per line after a tab (the first line after a space, as Kafka's);
- ``--remove``: asks ``Are you sure you want to remove ACLs: ... from resource filter
  `...`? (y/n)`` (or ``... delete all ACLs for resource filter `...`? (y/n)``) and reads
  the answer on stdin, unless ``--force``;
- ``--list``: ``Current ACLs for resource `ResourcePattern(...)`:`` and its entries, per
  resource; with ``--principal``, ``ACLs for principal `User:x``` first and only its
  entries.

Kafka iterates Java hash sets; this tool keeps the order of the command line (resources
as Kafka collects them: topics, the cluster, groups, transactional ids, delegation tokens,
users; entries by principal, operation, host, ALLOW before DENY) and lists resources in
the broker's order. ``--command-config`` takes the client properties of a secured
listener (TLS, SASL), as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ottla.cli.common import connect, read_command_config
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.security.acl import (
    ANY_BINDING,
    ANY_ENTRY,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_principal,
)

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient

VERSION = 3
"""DescribeAcls, CreateAcls and DeleteAcls v3 (Kafka 4.x serves 1-3)."""
CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
NL = "\n"

_EXCEPTIONS = {
    ErrorCode.invalid_request: "InvalidRequestException",
    ErrorCode.security_disabled: "SecurityDisabledException",
    ErrorCode.cluster_authorization_failed: "ClusterAuthorizationException",
    ErrorCode.unknown_server_error: "UnknownServerException",
    ErrorCode.policy_violation: "PolicyViolationException",
    ErrorCode.not_controller: "NotControllerException",
}
"""The Java exceptions of the errors the ACL APIs answer, as the admin client raises them."""


class UsageError(Exception):
    """What Kafka's tool refuses with ``printUsageAndExit``: the message, then usage."""


class CommandError(Exception):
    """What Kafka's tool prints as ``Error while executing ACL command: ...``."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "acls", help="add, remove and list ACLs (kafka-acls.sh)",
        description="This tool helps to manage acls on kafka: --add, --remove or --list "
        "ACLs of topics, groups, the cluster, transactional ids, delegation tokens and "
        "users, as kafka-acls.sh.")
    p.add_argument("--bootstrap-server", help="host:port of brokers to connect to")
    p.add_argument("--bootstrap-controller", help="host:port of controllers to connect to")
    p.add_argument("--command-config",
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    p.add_argument("--remove", action="store_true",
                   help="Indicates you are trying to remove ACLs.")
    p.add_argument("--list", action="store_true",
                   help="List ACLs for the specified resource, use --topic <topic> or "
                   "--group <group> or --cluster to specify a resource.")
    p.add_argument("--topic", action="append", help="topic ('*': all topics)")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--group", action="append", help="consumer group ('*': all groups)")
    p.add_argument("--transactional-id", action="append",
                   help="transactional id ('*': all transactional ids)")
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--delegation-token", action="append",
                   help="delegation token ('*': all tokens)")
    p.add_argument("--user-principal", action="append",
                   help="a user principal as a resource (CreateTokens, DescribeTokens)")
    p.add_argument("--resource-pattern-type", default="LITERAL",
                   help="literal or prefixed when adding; any or match also when listing "
                   "or removing ('match': every ACL that applies to the resource)")
    p.add_argument("--operation", action="append",
                   help="operation allowed or denied (default All): Read, Write, Create, "
                   "Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                   "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, "
                   "TwoPhaseCommit, All")
    p.add_argument("--allow-principal", action="append", help="principal in type:name form")
    p.add_argument("--deny-principal", action="append", help="principal in type:name form")
    p.add_argument("--principal", action="append", nargs="?", const=None,
                   help="with --list: only the ACLs of this principal")
    p.add_argument("--allow-host", action="append",
                   help="host the allowed principals may connect from (default *)")
    p.add_argument("--deny-host", action="append",
                   help="host the denied principals are denied from (default *)")
    p.add_argument("--producer", action="store_true",
                   help="ACLs of a producer: WRITE, DESCRIBE and CREATE on the topics")
    p.add_argument("--consumer", action="store_true",
                   help="ACLs of a consumer: READ, DESCRIBE on the topics, READ on the groups")
    p.add_argument("--force", action="store_true",
                   help="Assume Yes to all queries and do not prompt.")
    p.set_defaults(run=run, usage=p.format_usage())


# --- what the command line names -----------------------------------------------------------


def pattern_type(args: argparse.Namespace) -> PatternType:
    """``--resource-pattern-type``, case-insensitive as joptsimple's EnumConverter."""
    value = args.resource_pattern_type
    for member in PatternType:
        if member.name.lower() == value.lower() and member != PatternType.UNKNOWN:
            return member
    raise CommandError(f"Cannot parse argument '{value}' of option resource-pattern-type")


def _dedup(items: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


def resource_filters(args: argparse.Namespace, die_if_none: bool) -> list[ResourcePatternFilter]:
    """``getResourceFilter``: the resources named, in Kafka's order of kinds."""
    pattern = pattern_type(args)
    found = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), pattern)
             for t in args.topic or []]
    if pattern == PatternType.LITERAL and (args.cluster or args.idempotent):
        found.append(CLUSTER_FILTER)
    found += [ResourcePatternFilter(ResourceType.GROUP, g.strip(), pattern)
              for g in args.group or []]
    # Kafka does not trim transactional ids.
    found += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, t, pattern)
              for t in args.transactional_id or []]
    found += [ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, t.strip(), pattern)
              for t in args.delegation_token or []]
    found += [ResourcePatternFilter(ResourceType.USER, u.strip(), pattern)
              for u in args.user_principal or []]
    if not found and die_if_none:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster "
                         "or --group <group> or --delegation-token <Delegation Token ID>")
    return _dedup(found)


def _principals(values: list[str | None] | None) -> list[str]:
    """Principals as ``KafkaPrincipal.toString`` gives them back (``type:name``)."""
    found = []
    for value in values or []:
        if value is None:
            continue
        principal_type, name = parse_principal(value.strip())
        found.append(f"{principal_type}:{name}")
    return _dedup(found)


def _hosts(hosts: list[str] | None, principals: list[str] | None) -> list[str]:
    if hosts:
        return _dedup(h.strip() for h in hosts)
    return [WILDCARD_HOST] if principals else []


def entries(args: argparse.Namespace, operations: list[AclOperation]
            ) -> list[AccessControlEntry]:
    """``getAcl``: every (principal, operation, host) of the allowed principals and
    hosts, then of the denied ones."""
    found = []
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
            (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        names = _principals(principals)
        host_list = _hosts(hosts, principals)
        if names and host_list:
            found += [AccessControlEntry(p, h, op, permission)
                      for p in names for op in operations for h in host_list]
    return _dedup(found)


def _cli_operations(args: argparse.Namespace) -> list[AclOperation]:
    return _dedup(AclOperation.from_name(o.strip()) for o in args.operation or ["All"])


def filter_to_entries(args: argparse.Namespace
                      ) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    """``getResourceFilterToAcls``: the entries for each resource, from the flags or from
    ``--producer`` and ``--consumer``, operations checked against the resource types."""
    result: dict[ResourcePatternFilter, list[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        acls = entries(args, _cli_operations(args))
        result.update((f, acls) for f in resource_filters(args, True))
    if args.producer:
        filters = resource_filters(args, True)
        topic_acls = entries(args, [AclOperation.WRITE, AclOperation.DESCRIBE,
                                    AclOperation.CREATE])
        txn_acls = entries(args, [AclOperation.WRITE, AclOperation.DESCRIBE])
        result.update((f, topic_acls) for f in filters if f.resource_type == ResourceType.TOPIC)
        result.update((f, txn_acls) for f in filters
                      if f.resource_type == ResourceType.TRANSACTIONAL_ID)
        if args.idempotent:
            result[CLUSTER_FILTER] = entries(args, [AclOperation.IDEMPOTENT_WRITE])
    if args.consumer:
        filters = resource_filters(args, True)
        topic_acls = entries(args, [AclOperation.READ, AclOperation.DESCRIBE])
        group_acls = entries(args, [AclOperation.READ])
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                result[f] = _dedup([*result.get(f, []), *topic_acls])
            elif f.resource_type == ResourceType.GROUP:
                result[f] = _dedup([*result.get(f, []), *group_acls])
    for f, acls in result.items():
        valid = SUPPORTED_OPERATIONS.get(f.resource_type, frozenset()) | {AclOperation.ALL}
        if any(acl.operation not in valid for acl in acls):
            names = ", ".join(str(op) for op in sorted(valid))
            raise UsageError(f"ResourceType {f.resource_type} only supports operations "
                             f"[{names}]")
    return result


def pattern_to_entries(args: argparse.Namespace
                       ) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """``getResourceToAcls``: what ``--add`` adds."""
    pattern = pattern_type(args)
    if not pattern.is_specific:
        raise UsageError(f"A '--resource-pattern-type' value of '{pattern}' is not valid "
                         "when adding acls.")
    result = {ResourcePattern(f.resource_type, f.name or "", f.pattern_type): acls
              for f, acls in filter_to_entries(args).items()}
    if any(not acls for acls in result.values()):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when "
                         "trying to add ACLs.")
    return result


def check_args(args: argparse.Namespace) -> None:
    """``AclCommandOptions.checkArgs``."""
    if args.bootstrap_server and args.bootstrap_controller:
        raise UsageError("Only one of --bootstrap-server or --bootstrap-controller must be "
                         "specified")
    if not args.bootstrap_server and not args.bootstrap_controller:
        raise UsageError("One of --bootstrap-server or --bootstrap-controller must be "
                         "specified")
    if [args.add, args.remove, args.list].count(True) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    given = {"list": args.list, "producer": args.producer, "consumer": args.consumer,
             "allow-host": args.allow_host, "allow-principal": args.allow_principal,
             "deny-host": args.deny_host, "deny-principal": args.deny_principal,
             "operation": args.operation}
    for used, invalid in (
            ("list", ("producer", "consumer", "allow-host", "allow-principal", "deny-host",
                      "deny-principal")),
            ("producer", ("operation", "deny-principal", "deny-host")),
            ("consumer", ("operation", "deny-principal", "deny-host"))):
        if given[used]:
            for other in invalid:
                if given[other]:
                    raise UsageError(f'Option "[{used}]" can\'t be used with option '
                                     f'"[{other}]"')
    if args.principal is not None and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or (
            not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no "
                         "--cluster or --transactional-id option should be specified.")


# --- the requests ------------------------------------------------------------------------


def _raise(code: int, message: str | None) -> None:
    error = ErrorCode(code)
    exception = _EXCEPTIONS.get(error)
    text = message or error.name.upper()
    raise CommandError(f"org.apache.kafka.common.errors.{exception}: {text}"
                       if exception else text)


def describe(client: BlockingClient, acl_filter: AclBindingFilter) -> list[AclBinding]:
    response = client.request(ApiKey.DESCRIBE_ACLS, VERSION, {
        "resource_type_filter": acl_filter.resource_type,
        "resource_name_filter": acl_filter.resource_name,
        "pattern_type_filter": acl_filter.pattern_type,
        "principal_filter": acl_filter.principal, "host_filter": acl_filter.host,
        "operation": acl_filter.operation, "permission_type": acl_filter.permission_type})
    if response.error_code:
        _raise(response.error_code, response.error_message)
    return [AclBinding.from_codes(res.resource_type, res.resource_name, res.pattern_type,
                                  acl.principal, acl.host, acl.operation, acl.permission_type)
            for res in response.resources for acl in res.acls]


def create(client: BlockingClient, bindings: list[AclBinding]) -> None:
    response = client.request(ApiKey.CREATE_ACLS, VERSION, {"creations": [
        {"resource_type": b.resource_type, "resource_name": b.resource_name,
         "resource_pattern_type": b.pattern_type, "principal": b.principal, "host": b.host,
         "operation": b.operation, "permission_type": b.permission_type} for b in bindings]})
    for result in response.results:
        if result.error_code:
            _raise(result.error_code, result.error_message)


def delete(client: BlockingClient, filters: list[AclBindingFilter]) -> None:
    response = client.request(ApiKey.DELETE_ACLS, VERSION, {"filters": [
        {"resource_type_filter": f.resource_type, "resource_name_filter": f.resource_name,
         "pattern_type_filter": f.pattern_type, "principal_filter": f.principal,
         "host_filter": f.host, "operation": f.operation,
         "permission_type": f.permission_type} for f in filters]})
    for result in response.filter_results:
        if result.error_code:
            _raise(result.error_code, result.error_message)


# --- the actions -------------------------------------------------------------------------


def _tabbed(items: Iterable[Any]) -> str:
    return NL.join(f"\t{item}" for item in items)


def add_acls(client: BlockingClient, args: argparse.Namespace) -> None:
    for resource, acls in pattern_to_entries(args).items():
        existing = set(describe(client, AclBindingFilter.of(resource.to_filter())))
        to_add = []
        for acl in acls:
            binding = AclBinding.of(resource, acl)
            if binding in existing:
                print(f"Acl {binding} already exists.")
            else:
                to_add.append(binding)
        if to_add:
            print(f"Adding ACLs for resource `{resource}`: {NL} "
                  f"{_tabbed(b.entry for b in to_add)}{NL}")
            create(client, to_add)


def _confirm(args: argparse.Namespace, message: str, read_line: Callable[[], str]) -> bool:
    if args.force:
        return True
    print(message, flush=True)
    return read_line().rstrip("\r\n").lower() == "y"


def remove_acls(client: BlockingClient, args: argparse.Namespace,
                read_line: Callable[[], str] | None = None) -> None:
    """``--remove``, asking on stdin (or ``read_line``) unless ``--force``."""
    if read_line is None:
        read_line = sys.stdin.readline
    for pattern_filter, acls in filter_to_entries(args).items():
        if not acls:
            if _confirm(args, "Are you sure you want to delete all ACLs for resource filter "
                        f"`{pattern_filter}`? (y/n)", read_line):
                delete(client, [AclBindingFilter.of(pattern_filter, ANY_ENTRY)])
        elif _confirm(args, f"Are you sure you want to remove ACLs: {NL} {_tabbed(acls)}{NL}"
                      f" from resource filter `{pattern_filter}`? (y/n)", read_line):
            delete(client, [AclBindingFilter.of(pattern_filter, acl.to_filter())
                            for acl in acls])


def _print_resource_acls(resources: dict[ResourcePattern, list[AccessControlEntry]]) -> None:
    for resource, acls in resources.items():
        print(f"Current ACLs for resource `{resource}`:{NL}{_tabbed(acls)}{NL}")


def list_acls(client: BlockingClient, args: argparse.Namespace) -> None:
    filters = resource_filters(args, False)
    principals = _principals(args.principal)
    bindings = []
    for acl_filter in [AclBindingFilter.of(f) for f in filters] or [ANY_BINDING]:
        bindings += describe(client, acl_filter)
    resources: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        acls = resources.setdefault(binding.pattern, [])
        if binding.entry not in acls:
            acls.append(binding.entry)
    if not principals:
        _print_resource_acls(resources)
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        _print_resource_acls({resource: mine for resource, acls in resources.items()
                              if (mine := [a for a in acls if a.principal == principal])})


def run(args: argparse.Namespace) -> int:
    try:
        check_args(args)
        # What the flags ask for, refused before connecting as Kafka's tool refuses it
        # before its admin client has reached a broker.
        if args.add:
            pattern_to_entries(args)
        elif args.remove:
            filter_to_entries(args)
        else:
            resource_filters(args, False)
            _principals(args.principal)
        bootstrap = args.bootstrap_server or args.bootstrap_controller
        with connect(bootstrap, "ottla-acls", read_command_config(args.command_config)) \
                as client:
            if args.add:
                add_acls(client, args)
            elif args.remove:
                remove_acls(client, args)
            else:
                list_acls(client, args)
        return 0
    except UsageError as e:
        print(e, file=sys.stderr)
        print(args.usage, end="", file=sys.stderr)
        return 1
    except (CommandError, ValueError, ConnectionError, OSError) as e:
        print(f"Error while executing ACL command: {e}")
        return 1
