"""``ottla delegation-tokens``: create, renew, expire and describe delegation tokens
(kafka-delegation-tokens.sh, Kafka 4.x's ``org.apache.kafka.tools.DelegationTokenCommand``),
with its flags, checks and output.

Token requests are refused on PLAINTEXT listeners, so ``--command-config`` names the
client properties of a SASL (or client-authenticated SSL) listener, as with Kafka's tool.
Dates are printed as Kafka's tool prints them, ``yyyy-MM-dd'T'HH:mm`` in local time; the
renew and expire lines end without a newline, as Kafka's do. Kafka's tool asks
``--describe`` without ``--owner-principal`` for an empty list of owners, which brokers
answer with no token; this one asks for every token the user may see, as its help says.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import struct
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.serial.errors import SerialError

from ottla.cli.common import connect, read_command_config
from ottla.protocol.api import ApiKey, is_flexible
from ottla.protocol.codec import decode_response
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import ms
from ottla.security.acl import parse_principal
from ottla.security.delegation_token import hmac_password

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient

VERSIONS = {ApiKey.CREATE_DELEGATION_TOKEN: 3, ApiKey.RENEW_DELEGATION_TOKEN: 2,
            ApiKey.EXPIRE_DELEGATION_TOKEN: 2, ApiKey.DESCRIBE_DELEGATION_TOKEN: 3}
ROW = "\n{:<15} {:<30} {:<15} {:<15} {:<25} {:<15} {:<15} {:<15}\n"
"""``printToken``'s line: Java's ``%n%-15s ...%n``."""

_EXCEPTIONS = {
    ErrorCode.delegation_token_auth_disabled:
        ("DelegationTokenDisabledException", "Delegation Token feature is not enabled."),
    ErrorCode.delegation_token_not_found:
        ("DelegationTokenNotFoundException", "Delegation Token is not found on server."),
    ErrorCode.delegation_token_owner_mismatch:
        ("DelegationTokenOwnerMismatchException",
         "Specified Principal is not valid Owner/Renewer."),
    ErrorCode.delegation_token_request_not_allowed:
        ("UnsupportedByAuthenticationException",
         "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
         "delegation token authenticated channels."),
    ErrorCode.delegation_token_authorization_failed:
        ("DelegationTokenAuthorizationException", "Delegation Token authorization failed."),
    ErrorCode.delegation_token_expired:
        ("DelegationTokenExpiredException", "Delegation Token is expired."),
    ErrorCode.invalid_principal_type:
        ("InvalidPrincipalTypeException", "Supplied principalType is not supported."),
    ErrorCode.unsupported_version:
        ("UnsupportedVersionException", "The version of API is not supported."),
}
"""The admin client's exception (and Kafka's message) for each error these APIs answer."""


class UsageError(Exception):
    """What Kafka's tool refuses with ``printUsageAndExit``."""


class TokenError(Exception):
    """An error the cluster answered: printed as Kafka's tool prints the exception."""


@dataclass(frozen=True, slots=True)
class _Refused:
    """A response read only as far as its error code: kio refuses the -1 timestamps
    brokers send with some errors (Kafka's ``ErrorTimestamp``)."""

    error_code: int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "delegation-tokens",
        help="create, renew, expire and describe delegation tokens (kafka-delegation-tokens.sh)",
        description="This tool helps to create, renew, expire, or describe delegation tokens.")
    p.add_argument("--bootstrap-server", help="REQUIRED: server(s) to use for bootstrapping.")
    p.add_argument("--command-config",
                   help="REQUIRED: A property file containing configs to be passed to Admin "
                   "Client. Token management operations are allowed in secure mode only.")
    p.add_argument("--create", action="store_true", help="Create a new delegation token.")
    p.add_argument("--renew", action="store_true", help="Renew delegation token.")
    p.add_argument("--expire", action="store_true", help="Expire delegation token.")
    p.add_argument("--describe", action="store_true",
                   help="Describe delegation tokens for the given principals.")
    p.add_argument("--owner-principal", action="append",
                   help="owner is a Kafka principal, in principalType:name format.")
    p.add_argument("--renewer-principal", action="append",
                   help="renewer is a Kafka principal, in principalType:name format.")
    p.add_argument("--max-life-time-period", type=int,
                   help="Max life period for the token in milliseconds (-1: the server's "
                   "delegation.token.max.lifetime.ms).")
    p.add_argument("--renew-time-period", type=int,
                   help="Renew time period in milliseconds (-1: the server's "
                   "delegation.token.expiry.time.ms).")
    p.add_argument("--expiry-time-period", type=int,
                   help="Expiry time period in milliseconds (-1: the token is invalidated "
                   "immediately).")
    p.add_argument("--hmac", help="HMAC of the delegation token")
    p.set_defaults(run=run, usage=p.format_usage())


def check_args(args: argparse.Namespace) -> None:
    """``DelegationTokenCommandOptions.checkArgs``: one action, its required flags, and
    none of the flags another action takes."""
    actions = [a for a in ("create", "renew", "expire", "describe") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --create, --renew, "
                         "--expire or --describe")
    required = {"create": ("max_life_time_period",), "renew": ("hmac", "renew_time_period"),
                "expire": ("hmac", "expiry_time_period"), "describe": ()}[actions[0]]
    for name in ("bootstrap_server", "command_config", *required):
        if getattr(args, name) is None:
            raise UsageError(f"Missing required argument \"[{name.replace('_', '-')}]\"")
    invalid = {"create": ("hmac", "renew_time_period", "expiry_time_period"),
               "renew": ("renewer_principal", "max_life_time_period", "expiry_time_period",
                         "owner_principal"),
               "expire": ("max_life_time_period", "renew_time_period", "owner_principal"),
               "describe": ("renew_time_period", "max_life_time_period", "hmac",
                            "expiry_time_period")}[actions[0]]
    for name in invalid:
        if getattr(args, name) is not None:
            raise UsageError(f"Option \"[{actions[0]}]\" can't be used with option "
                             f"\"[{name.replace('_', '-')}]\"")


def _principals(values: list[str] | None) -> list[tuple[str, str]]:
    return [parse_principal(v.strip()) for v in values or ()]


def _list(principals: list[tuple[str, str]]) -> str:
    """A Java ``List<KafkaPrincipal>`` as ``toString`` prints it."""
    return "[" + ", ".join(f"{t}:{n}" for t, n in principals) + "]"


def _date(timestamp_ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(timestamp_ms / 1000))


def _call(client: BlockingClient, api_key: ApiKey, body: dict[str, Any]) -> Any:
    """The response, or raise ``TokenError`` with the exception Kafka's admin client
    raises for its error."""
    version = VERSIONS[api_key]
    correlation_id = client.send(api_key, version, body)
    frame = client.recv_frame()
    try:
        got, response = decode_response(api_key, version, frame)
    except SerialError:
        position = 4 + (1 if is_flexible(api_key, version) else 0)  # empty tagged fields
        response = _Refused(struct.unpack_from(">h", frame, position)[0])
    else:
        assert got == correlation_id
    if response.error_code != ErrorCode.none:
        code = ErrorCode(response.error_code)
        name, message = _EXCEPTIONS.get(code, ("KafkaException", code.name))
        raise TokenError(f"org.apache.kafka.common.errors.{name}: {message}")
    return response


def _print_tokens(tokens: list[dict[str, Any]]) -> None:
    sys.stdout.write(ROW.format("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS",
                                "ISSUEDATE", "EXPIRYDATE", "MAXDATE"))
    for t in tokens:
        sys.stdout.write(ROW.format(t["token_id"], t["hmac"], t["owner"], t["requester"],
                                    t["renewers"], _date(t["issue"]), _date(t["expiry"]),
                                    _date(t["max"])))


def create_token(client: BlockingClient, args: argparse.Namespace) -> None:
    renewers = _principals(args.renewer_principal)
    owners = _principals(args.owner_principal)
    print(f"Calling create token operation with renewers :{_list(renewers)} , "
          f"max-life-time-period :{args.max_life_time_period}")
    owner_type, owner_name = owners[0] if owners else (None, None)
    created = _call(client, ApiKey.CREATE_DELEGATION_TOKEN, {
        "owner_principal_type": owner_type, "owner_principal_name": owner_name,
        "renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers],
        "max_lifetime": args.max_life_time_period})
    print(f"Created delegation token with tokenId : {created.token_id}")
    _print_tokens([{
        "token_id": created.token_id, "hmac": hmac_password(bytes(created.hmac)),
        "owner": f"{created.principal_type}:{created.principal_name}",
        "requester": f"{created.token_requester_principal_type}:"
                     f"{created.token_requester_principal_name}",
        "renewers": _list(renewers), "issue": ms(created.issue_timestamp),
        "expiry": ms(created.expiry_timestamp), "max": ms(created.max_timestamp)}])


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as e:
        raise TokenError(f"Illegal base64 character in --hmac: {e}") from e


def renew_token(client: BlockingClient, args: argparse.Namespace) -> None:
    print(f"Calling renew token operation with hmac :{args.hmac} , renew-time-period "
          f":{args.renew_time_period}")
    renewed = _call(client, ApiKey.RENEW_DELEGATION_TOKEN, {
        "hmac": _hmac(args.hmac), "renew_period": args.renew_time_period})
    sys.stdout.write("Completed renew operation. New expiry date : "
                     f"{_date(ms(renewed.expiry_timestamp))}")


def expire_token(client: BlockingClient, args: argparse.Namespace) -> None:
    print(f"Calling expire token operation with hmac :{args.hmac} , expire-time-period "
          f":{args.expiry_time_period}")
    expired = _call(client, ApiKey.EXPIRE_DELEGATION_TOKEN, {
        "hmac": _hmac(args.hmac), "expiry_time_period": args.expiry_time_period})
    sys.stdout.write("Completed expire operation. New expiry date : "
                     f"{_date(ms(expired.expiry_timestamp))}")


def describe_tokens(client: BlockingClient, args: argparse.Namespace) -> None:
    owners = _principals(args.owner_principal)
    if owners:
        print(f"Calling describe token operation for owners: {_list(owners)}")
    else:
        print("Calling describe token operation for current user.")
    described = _call(client, ApiKey.DESCRIBE_DELEGATION_TOKEN, {
        "owners": [{"principal_type": t, "principal_name": n} for t, n in owners]
        if owners else None})
    sys.stdout.write(f"Total number of tokens : {len(described.tokens)}")
    _print_tokens([{
        "token_id": t.token_id, "hmac": hmac_password(bytes(t.hmac)),
        "owner": f"{t.principal_type}:{t.principal_name}",
        "requester": f"{t.token_requester_principal_type}:"
                     f"{t.token_requester_principal_name}",
        "renewers": _list([(r.principal_type, r.principal_name) for r in t.renewers]),
        "issue": ms(t.issue_timestamp), "expiry": ms(t.expiry_timestamp),
        "max": ms(t.max_timestamp)} for t in described.tokens])


def run(args: argparse.Namespace) -> int:
    try:
        check_args(args)
        with connect(args.bootstrap_server, "ottla-delegation-tokens",
                     read_command_config(args.command_config)) as client:
            if args.create:
                create_token(client, args)
            elif args.renew:
                renew_token(client, args)
            elif args.expire:
                expire_token(client, args)
            else:
                describe_tokens(client, args)
        return 0
    except UsageError as e:
        print(e, file=sys.stderr)
        print(args.usage, end="", file=sys.stderr)
        return 1
    except (TokenError, ValueError, ConnectionError, OSError) as e:
        print(e, file=sys.stderr)
        return 1
