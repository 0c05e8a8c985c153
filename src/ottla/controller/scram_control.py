"""SCRAM credentials (KIP-554; Kafka's ScramControlManager): AlterUserScramCredentials
turns a request's upsertions and deletions into UserScramCredentialRecords and
RemoveUserScramCredentialRecords, with Kafka's checks and errors per user.

The client sends the salted password, never the password; the controller derives the
stored and server keys from it, and only those (with the salt and iteration count) go
into the log. A user may be named once per request, whatever the mechanisms: Kafka's
KRaft controller answers DUPLICATE_RESOURCE to a second upsertion or deletion for the
same user, even of another mechanism.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ottla.common.features import METADATA_VERSION, METADATA_VERSION_LEVEL, scram_supported
from ottla.controller.results import ControllerResult, check_user_op
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode
from ottla.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted,
)

DUPLICATE_MESSAGE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """One upsertion of an AlterUserScramCredentials request."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    """One deletion of an AlterUserScramCredentials request."""

    name: str
    mechanism: int


AlterResult = tuple[str, ErrorCode, str | None]
"""(user, error, message): one result per user named in the request."""


def _mechanism(number: int) -> ScramMechanism:
    """Kafka's ``ScramMechanism.fromType``: UNKNOWN for a number it does not know."""
    try:
        return ScramMechanism(number)
    except ValueError:
        return ScramMechanism.UNKNOWN


def _check_name_and_mechanism(name: str, mechanism: ScramMechanism
                              ) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism == ScramMechanism.UNKNOWN:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


class ScramControlManager:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def _check_upsertion(self, upsertion: ScramUpsertion) -> tuple[ErrorCode, str] | None:
        error = _check_name_and_mechanism(upsertion.name, _mechanism(upsertion.mechanism))
        if error is not None:
            return error
        if upsertion.iterations < MIN_ITERATIONS:
            return ErrorCode.unacceptable_credential, "Too few iterations"
        if upsertion.iterations > MAX_ITERATIONS:
            return ErrorCode.unacceptable_credential, "Too many iterations"
        return None

    def _check_deletion(self, deletion: ScramDeletion) -> tuple[ErrorCode, str] | None:
        mechanism = _mechanism(deletion.mechanism)
        error = _check_name_and_mechanism(deletion.name, mechanism)
        if error is not None:
            return error
        if self.image.scram_credential(mechanism, deletion.name) is None:
            return (ErrorCode.resource_not_found,
                    "Attempt to delete a user credential that does not exist")
        return None

    def alter_credentials(self, deletions: Sequence[ScramDeletion],
                          upsertions: Sequence[ScramUpsertion]) -> ControllerResult:
        """AlterUserScramCredentials: the records of every valid alteration, and one
        result per user named (successful deletions, then successful upsertions, then
        the users refused, each in the order first named). The users refused do not stop
        the others, as in Kafka."""
        supported = scram_supported(self.image.features.get(METADATA_VERSION,
                                                            METADATA_VERSION_LEVEL))
        to_delete: dict[str, ScramDeletion] = {}
        to_upsert: dict[str, ScramUpsertion] = {}
        errors: dict[str, tuple[ErrorCode, str]] = {}
        for deletion in deletions:
            name = deletion.name
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None:
                errors[name] = (ErrorCode.duplicate_resource, DUPLICATE_MESSAGE)
            elif not supported:
                errors[name] = (ErrorCode.unsupported_version,
                                "The current metadata.version does not support SCRAM")
            elif (error := self._check_deletion(deletion)) is not None:
                errors[name] = error
            else:
                to_delete[name] = deletion
        for upsertion in upsertions:
            name = upsertion.name
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None or to_upsert.pop(name, None) is not None:
                errors[name] = (ErrorCode.duplicate_resource, DUPLICATE_MESSAGE)
            elif not supported:
                errors[name] = (ErrorCode.unsupported_version,
                                "The current metadata.version does not support SCRAM")
            elif (error := self._check_upsertion(upsertion)) is not None:
                errors[name] = error
            else:
                to_upsert[name] = upsertion
        check_user_op(len(to_delete) + len(to_upsert))
        records: list[Any] = []
        results: list[AlterResult] = []
        for deletion in to_delete.values():
            records.append(r.RemoveUserScramCredentialRecord(name=deletion.name,
                                                             mechanism=deletion.mechanism))
            results.append((deletion.name, ErrorCode.none, None))
        for upsertion in to_upsert.values():
            if not upsertion.salted_password:
                # Kafka's ScramFormatter keys an HMAC with the salted password, and Java
                # refuses an empty key: ApiError.fromThrowable of that exception.
                errors[upsertion.name] = (ErrorCode.unknown_server_error, "Empty key")
                continue
            credential = credential_from_salted(
                ScramMechanism(upsertion.mechanism), upsertion.salted_password,
                upsertion.salt, upsertion.iterations)
            records.append(r.UserScramCredentialRecord(
                name=upsertion.name, mechanism=upsertion.mechanism, salt=credential.salt,
                stored_key=credential.stored_key, server_key=credential.server_key,
                iterations=credential.iterations))
            results.append((upsertion.name, ErrorCode.none, None))
        results.extend((name, code, message) for name, (code, message) in errors.items())
        return ControllerResult(records, results)
