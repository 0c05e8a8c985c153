"""Kafka's ids (cluster, topic, directory, incarnation): UUIDs, printed as 22 characters
of URL-safe base64."""

from __future__ import annotations

import base64
import uuid


def kafka_uuid_text(value: uuid.UUID) -> str:
    """A UUID as Kafka prints ids: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str | None) -> uuid.UUID:
    """The UUID of a Kafka id (the zero UUID for none)."""
    if not text:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def random_uuid() -> str:
    """A Kafka-style id: a random UUID as 22 characters of URL-safe base64."""
    while True:
        text = kafka_uuid_text(uuid.uuid4())
        if not text.startswith("-"):  # Kafka avoids ids that look like flags
            return text
