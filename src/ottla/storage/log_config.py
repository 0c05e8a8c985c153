"""Topic-level log configs, their Kafka defaults and the broker configs that supply them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ottla.common.topic_configs import TOPIC_CONFIGS


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configs of one partition log."""

    values: Mapping[str, Any]

    @classmethod
    def resolve(cls, overrides: Mapping[str, Any] | None = None,
                defaults: Mapping[str, Any] | None = None) -> LogConfig:
        """Kafka's precedence: topic override, then the broker's synonym, then the default."""
        values = {name: key.default for name, key in TOPIC_CONFIGS.keys.items()}
        values.update(defaults or {})
        values.update(TOPIC_CONFIGS.parse(overrides or {}))
        return cls(values)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def segment_bytes(self) -> int:
        return self.values["segment.bytes"]

    @property
    def segment_ms(self) -> int:
        return self.values["segment.ms"]

    @property
    def segment_index_bytes(self) -> int:
        return self.values["segment.index.bytes"]

    @property
    def index_interval_bytes(self) -> int:
        return self.values["index.interval.bytes"]

    @property
    def max_message_bytes(self) -> int:
        return self.values["max.message.bytes"]

    @property
    def max_decompressed_message_bytes(self) -> int:
        return self.values["max.decompressed.message.bytes"]

    @property
    def flush_messages(self) -> int:
        return self.values["flush.messages"]

    @property
    def flush_ms(self) -> int:
        return self.values["flush.ms"]

    @property
    def log_append_time(self) -> bool:
        return self.values["message.timestamp.type"] == "LogAppendTime"

    @property
    def compact(self) -> bool:
        return "compact" in self.values["cleanup.policy"]

    @property
    def preallocate(self) -> bool:
        return self.values["preallocate"]
