"""Who sent a request (Kafka's KafkaPrincipal): the network layer sets it once a
connection authenticated (``User:ANONYMOUS`` on PLAINTEXT, the certificate's mapped DN on
SSL, the SASL user on SASL listeners); authorization decides on it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    type: str = "User"
    name: str = "ANONYMOUS"

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = Principal()
