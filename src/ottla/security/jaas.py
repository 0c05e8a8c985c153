"""The JAAS configuration strings Kafka takes in ``sasl.jaas.config``, read without a JVM:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Only what Kafka's own login modules use is read: the module class, its control flag and
its options (quoted or bare values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_TOKEN = re.compile(r'\s*(?:(;)|([A-Za-z0-9_.$\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)|'
                    r'([A-Za-z0-9_.$\-]+))', re.S)
_FLAGS = {"required", "requisite", "sufficient", "optional"}


class JaasError(ValueError):
    """A sasl.jaas.config value that cannot be read (Kafka: 'Invalid JAAS config')."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a ``sasl.jaas.config`` value, in order."""
    modules: list[LoginModule] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        class_name, pos = _word(text, pos, "a login module class")
        flag, pos = _word(text, pos, "a control flag")
        if flag.lower() not in _FLAGS:
            raise JaasError(f"Invalid JAAS config: invalid control flag {flag!r}")
        options: dict[str, str] = {}
        while True:
            match = _TOKEN.match(text, pos)
            if match is None:
                raise JaasError("Invalid JAAS config: expected an option or ';' at "
                                f"position {pos}")
            pos = match.end()
            if match.group(1):
                break
            if match.group(4):
                raise JaasError(f"Invalid JAAS config: option {match.group(4)!r} has no value")
            value = match.group(3)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            options[match.group(2)] = value
        modules.append(LoginModule(class_name, flag.lower(), options))
        while pos < end and text[pos].isspace():
            pos += 1
    if not modules:
        raise JaasError("Invalid JAAS config: no login module")
    return modules


def _word(text: str, pos: int, what: str) -> tuple[str, int]:
    match = re.compile(r"\s*([A-Za-z0-9_.$\-]+)").match(text, pos)
    if match is None:
        raise JaasError(f"Invalid JAAS config: expected {what} at position {pos}")
    return match.group(1), match.end()


def plain_users(modules: list[LoginModule]) -> dict[str, str]:
    """PlainLoginModule's ``user_<name>`` options: the users a PLAIN listener accepts."""
    users: dict[str, str] = {}
    for module in modules:
        if module.class_name == PLAIN_LOGIN_MODULE:
            users.update({key[len("user_"):]: value for key, value in module.options.items()
                          if key.startswith("user_")})
    return users


def client_credentials(modules: list[LoginModule]) -> tuple[str, str] | None:
    """(username, password) the first module logs in with, for a node's own connections
    (``sasl.mechanism.inter.broker.protocol``)."""
    for module in modules:
        if "username" in module.options and "password" in module.options:
            return module.options["username"], module.options["password"]
    return None
