"""Delegation tokens on the controller (KIP-48 in KRaft, KIP-900; Kafka's
DelegationTokenControlManager): CreateDelegationToken, RenewDelegationToken and
ExpireDelegationToken become DelegationTokenRecords and RemoveDelegationTokenRecords, and
the active controller sweeps expired tokens away every
``delegation.token.expiry.check.interval.ms``.

Tokens are enabled only with ``delegation.token.secret.key``: the token's HMAC, its
password, is HmacSHA512 of its id keyed with that secret. A token lives until its expiry
(``delegation.token.expiry.time.ms`` after it is issued or renewed) and can be renewed up
to its maximum lifetime (``delegation.token.max.lifetime.ms``, or less if the request
asks). Only its owner and renewers may renew or expire it; the request names the token
by its HMAC. Who may ask at all (not a token-authenticated connection, not PLAINTEXT) is
the handler's to check, as Kafka's ControllerApis does.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ottla.common.features import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    delegation_tokens_supported,
)
from ottla.common.principal import Principal
from ottla.common.uuids import kafka_uuid_text
from ottla.controller.results import ControllerResult
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage, token_record
from ottla.protocol.errors import ErrorCode
from ottla.security.delegation_token import TokenInformation, token_hmac

DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000
"""``delegation.token.max.lifetime.ms``'s default: 7 days."""
DEFAULT_EXPIRY_TIME_MS = 24 * 60 * 60 * 1000
"""``delegation.token.expiry.time.ms``'s default: 1 day."""
LONG_MAX = 2**63 - 1


def _sum(now_ms: int, duration_ms: int) -> int:
    """Kafka's ``sum``: a timestamp that saturates rather than overflows a long."""
    return LONG_MAX if now_ms > LONG_MAX - duration_ms else now_ms + duration_ms


@dataclass(frozen=True, slots=True)
class CreatedToken:
    """CreateDelegationToken's answer: the token, or an error with zero timestamps."""

    error: ErrorCode
    owner: Principal
    requester: Principal
    issue_timestamp: int = 0
    expiry_timestamp: int = 0
    max_timestamp: int = 0
    token_id: str = ""
    hmac: bytes = b""


@dataclass(frozen=True, slots=True)
class TokenExpiry:
    """RenewDelegationToken's and ExpireDelegationToken's answer."""

    error: ErrorCode
    expiry_timestamp: int = 0


class DelegationTokenControlManager:
    def __init__(self, image: MetadataImage, rng: random.Random, secret_key: str | None,
                 max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS,
                 expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS) -> None:
        self.image = image
        self.rng = rng
        self.secret_key = secret_key or None
        """None (tokens disabled) when ``delegation.token.secret.key`` is unset or empty."""
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self._hmacs: dict[str, bytes] = {}
        """Each token id's HMAC, computed once (a pure function of the id and the key,
        so it needs no history on the timeline)."""

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None

    def _supported(self) -> bool:
        return delegation_tokens_supported(
            self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL))

    def _refusal(self) -> ErrorCode | None:
        if not self.enabled:
            return ErrorCode.delegation_token_auth_disabled
        if not self._supported():
            return ErrorCode.unsupported_version
        return None

    def hmac(self, token_id: str) -> bytes:
        assert self.secret_key is not None
        found = self._hmacs.get(token_id)
        if found is None:
            found = self._hmacs[token_id] = token_hmac(token_id, self.secret_key)
        return found

    def _token_by_hmac(self, hmac: bytes) -> TokenInformation | None:
        """Kafka's ``tokenCache.tokenForHmac``: the token whose HMAC this is."""
        for token_id, token in self.image.delegation_tokens.items():
            if self.hmac(token_id) == hmac:
                return token
        if len(self._hmacs) > 2 * len(self.image.delegation_tokens) + 64:
            self._hmacs = {k: v for k, v in self._hmacs.items()
                           if k in self.image.delegation_tokens}
        return None

    def _new_token_id(self) -> str:
        """Kafka's ``Uuid.randomUuid().toString()``: 22 characters of URL-safe base64,
        never one that starts with ``-`` or that a live token has."""
        while True:
            value = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            text = kafka_uuid_text(value)
            if not text.startswith("-") and text not in self.image.delegation_tokens:
                return text

    def create_token(self, requester: Principal, owner: Principal | None,
                     renewers: Sequence[Principal], max_lifetime_ms: int, now_ms: int
                     ) -> ControllerResult:
        """CreateDelegationToken: a token owned by ``owner`` (the requester without one),
        renewable by ``renewers`` (users only), living at most the configured maximum
        lifetime or ``max_lifetime_ms`` if that is positive and shorter."""
        owner = owner or requester
        refused = self._refusal()
        if refused is None and any(p.type != "User" for p in renewers):
            refused = ErrorCode.invalid_principal_type
        if refused is not None:
            return ControllerResult([], CreatedToken(refused, owner, requester))
        lifetime = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_timestamp = _sum(now_ms, lifetime)
        expiry = min(max_timestamp, _sum(now_ms, self.expiry_time_ms))
        token = TokenInformation(self._new_token_id(), owner, requester, tuple(renewers),
                                 now_ms, max_timestamp, expiry)
        return ControllerResult([token_record(token)], CreatedToken(
            ErrorCode.none, owner, requester, now_ms, expiry, max_timestamp, token.token_id,
            self.hmac(token.token_id)))

    def renew_token(self, principal: Principal, hmac: bytes, renew_period_ms: int,
                    now_ms: int) -> ControllerResult:
        """RenewDelegationToken: the token expires ``renew_period_ms`` from now (the
        configured expiry time if that is not positive or is shorter), never after its
        maximum lifetime."""
        refused = self._refusal()
        if refused is not None:
            return ControllerResult([], TokenExpiry(refused))
        token = self._token_by_hmac(hmac)
        if token is None:
            return ControllerResult([], TokenExpiry(ErrorCode.delegation_token_not_found))
        if token.expired(now_ms):
            return ControllerResult([], TokenExpiry(ErrorCode.delegation_token_expired))
        if not token.owner_or_renewer(principal):
            return ControllerResult([],
                                    TokenExpiry(ErrorCode.delegation_token_owner_mismatch))
        period = self.expiry_time_ms
        if renew_period_ms > 0:
            period = min(period, renew_period_ms)
        expiry = min(token.max_timestamp, now_ms + period)
        return self._expire_at(token, expiry)

    def expire_token(self, principal: Principal, hmac: bytes, expiry_period_ms: int,
                     now_ms: int) -> ControllerResult:
        """ExpireDelegationToken: a negative period removes the token now; otherwise it
        expires that long from now (never after its maximum lifetime). Unlike renewing,
        ownership is checked before expiry."""
        refused = self._refusal()
        if refused is not None:
            return ControllerResult([], TokenExpiry(refused))
        token = self._token_by_hmac(hmac)
        if token is None:
            return ControllerResult([], TokenExpiry(ErrorCode.delegation_token_not_found))
        if not token.owner_or_renewer(principal):
            return ControllerResult([],
                                    TokenExpiry(ErrorCode.delegation_token_owner_mismatch))
        if expiry_period_ms < 0:
            return ControllerResult([r.RemoveDelegationTokenRecord(token_id=token.token_id)],
                                    TokenExpiry(ErrorCode.none, now_ms))
        if token.expired(now_ms):
            return ControllerResult([], TokenExpiry(ErrorCode.delegation_token_expired))
        return self._expire_at(token, min(token.max_timestamp,
                                          _sum(now_ms, expiry_period_ms)))

    @staticmethod
    def _expire_at(token: TokenInformation, expiry: int) -> ControllerResult:
        renewed = TokenInformation(token.token_id, token.owner, token.requester,
                                   token.renewers, token.issue_timestamp,
                                   token.max_timestamp, expiry)
        return ControllerResult([token_record(renewed)],
                                TokenExpiry(ErrorCode.none, expiry))

    def sweep_expired_tokens(self, now_ms: int) -> ControllerResult:
        """The periodic sweep: a RemoveDelegationTokenRecord for each token past its
        expiry or maximum lifetime; the response is their ids."""
        if not self.enabled or not self._supported():
            return ControllerResult([], [])
        expired = sorted(t.token_id for t in self.image.delegation_tokens.values()
                         if t.expired(now_ms))
        records: list[Any] = [r.RemoveDelegationTokenRecord(token_id=t) for t in expired]
        return ControllerResult(records, expired)
