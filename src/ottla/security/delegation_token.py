"""Delegation tokens (KIP-48): what a token is, its HMAC, the SCRAM credential it gives and
who may see it, shared by the controller that issues tokens, the brokers that describe
them and the listeners that authenticate with them.

A token's id and HMAC are its credentials: a client authenticates with SASL/SCRAM and the
extension ``tokenauth=true``, the token id as the user name and the HMAC, in base64, as
the password, and becomes the token's owner. The HMAC is HmacSHA512 of the token id keyed
with ``delegation.token.secret.key``, which every node must share: brokers derive the
HMAC again rather than keep it, as Kafka's ``DelegationTokenManager`` does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ottla.common.principal import Principal
from ottla.security.acl import parse_principal
from ottla.security.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_password,
)

ERROR_TIMESTAMP = -1
"""Kafka's ``DelegationTokenManager.ErrorTimestamp``: the expiry answered with an error."""


def principal(text: str) -> Principal:
    """A principal as records and Kafka's ``KafkaPrincipal.toString`` write it
    (``User:alice``)."""
    principal_type, name = parse_principal(text)
    return Principal(principal_type, name)


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """One token (Kafka's ``TokenInformation``), as a DelegationTokenRecord carries it."""

    token_id: str
    owner: Principal
    requester: Principal
    renewers: tuple[Principal, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, who: Principal) -> bool:
        """Who may renew and expire the token, and always describe it."""
        return who == self.owner or who in self.renewers

    def expired(self, now_ms: int) -> bool:
        """Past its expiry or its maximum lifetime: not renewable, and swept away."""
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms


def token_hmac(token_id: str, secret_key: str) -> bytes:
    """Kafka's ``createHmac``: HmacSHA512 of the token id (UTF-8) keyed with the secret."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def hmac_password(token_hmac_bytes: bytes) -> str:
    """The password a client authenticates with: the HMAC in base64 (Kafka's
    ``DelegationToken.hmacAsBase64String``, what kafka-delegation-tokens prints)."""
    return base64.b64encode(token_hmac_bytes).decode()


def describable(requester: Principal, owners: Sequence[Principal] | None,
                token: TokenInformation, authorize_token: Callable[[str], bool],
                authorize_owner: Callable[[Principal], bool]) -> bool:
    """Kafka's ``DelegationTokenManager.filterToken``: whether DescribeDelegationToken
    shows ``token``. Owners named (None: all) keep the tokens they own or renew; the
    requester sees its own and those it renews, and others' with DESCRIBE on the token
    or DESCRIBE_TOKENS on the owner."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    return (token.owner_or_renewer(requester) or authorize_token(token.token_id)
            or authorize_owner(token.owner))


class TokenCredentials:
    """The SCRAM credentials tokens give (Kafka's ``DelegationTokenCache``): derived from
    the token's HMAC with the fewest iterations SCRAM allows, on first use, then kept
    while the token lives. A node without the secret key has none."""

    def __init__(self, secret_key: str | None) -> None:
        self.secret_key = secret_key or None
        self._credentials: dict[tuple[str, ScramMechanism], ScramCredential] = {}

    def credential(self, mechanism: ScramMechanism, token: TokenInformation,
                   live: Callable[[], Iterable[str]]) -> ScramCredential | None:
        """The credential of ``token`` for ``mechanism``; ``live`` gives the ids of the
        tokens that still exist, so that the credentials of removed ones are dropped."""
        if self.secret_key is None:
            return None
        key = (token.token_id, mechanism)
        found = self._credentials.get(key)
        if found is None:
            if len(self._credentials) >= 64:
                alive = set(live())
                self._credentials = {k: v for k, v in self._credentials.items()
                                     if k[0] in alive}
            password = hmac_password(token_hmac(token.token_id, self.secret_key))
            found = credential_from_password(mechanism, password, iterations=MIN_ITERATIONS)
            self._credentials[key] = found
        return found
