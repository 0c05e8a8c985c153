"""Who sent a request (Kafka's KafkaPrincipal): the network layer sets it once a
connection authenticated (``User:ANONYMOUS`` on PLAINTEXT, the certificate's mapped DN on
SSL, the SASL user on SASL listeners); authorization decides on it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Principal:
    type: str = "User"
    name: str = "ANONYMOUS"
    token_authenticated: bool = field(default=False, compare=False)
    """The connection authenticated with a delegation token of this principal (KIP-48):
    such a connection may not create, renew, expire or describe tokens. Not part of the
    principal's identity (Kafka's ``KafkaPrincipal.equals`` ignores it too)."""

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = Principal()


class PrincipalDeserializationError(ValueError):
    """Bytes that are not a serialized principal."""


PRINCIPAL_DATA_VERSION = 0
"""``DefaultPrincipalData``'s only version."""


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def serialize_principal(principal: Principal) -> bytes:
    """Kafka's ``DefaultKafkaPrincipalBuilder.serialize``: a DefaultPrincipalData message
    (type, name, token_authenticated; flexible) after its version as an int16, which is
    how a forwarding broker puts its client's principal in an Envelope."""
    out = bytearray(PRINCIPAL_DATA_VERSION.to_bytes(2, "big"))
    for text in (principal.type, principal.name):
        data = text.encode()
        out += _uvarint(len(data) + 1) + data
    out.append(1 if principal.token_authenticated else 0)
    out.append(0)  # no tagged fields
    return bytes(out)


def deserialize_principal(data: bytes) -> Principal:
    """Kafka's ``DefaultKafkaPrincipalBuilder.deserialize``;
    ``PrincipalDeserializationError`` for anything else."""
    position = 0

    def need(count: int) -> None:
        if position + count > len(data):
            raise PrincipalDeserializationError("truncated principal data")

    def uvarint() -> int:
        nonlocal position
        value = shift = 0
        while True:
            need(1)
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise PrincipalDeserializationError("varint too long")

    def string() -> str:
        nonlocal position
        length = uvarint() - 1
        if length < 0:
            raise PrincipalDeserializationError("null string in principal data")
        need(length)
        try:
            text = bytes(data[position:position + length]).decode()
        except UnicodeDecodeError as e:
            raise PrincipalDeserializationError(str(e)) from None
        position += length
        return text

    need(2)
    version = int.from_bytes(data[:2], "big", signed=True)
    position = 2
    if version != PRINCIPAL_DATA_VERSION:
        raise PrincipalDeserializationError(f"unsupported DefaultPrincipalData version "
                                            f"{version}")
    principal_type, name = string(), string()
    need(1)
    token_authenticated = data[position] != 0
    position += 1
    for _ in range(uvarint()):
        uvarint()
        size = uvarint()
        need(size)
        position += size
    return Principal(principal_type, name, token_authenticated)
