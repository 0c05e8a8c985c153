"""A broker's cordoned log dirs (KIP-1066, the part of Kafka's DynamicLogConfig and
BrokerServer that follows ``cordoned.log.dirs``).

A cordoned log dir keeps its replicas but takes no new ones while another dir of the
broker can (the log manager's choice of dir), refuses replicas moved into it, and is
reported in the broker's heartbeats, so that the controller places no new replica on a
broker whose every dir is cordoned. The config is per broker and dynamic: before a broker
forwards an update of its own configs it checks the new value as Kafka's ``KafkaConfig``
does (``validate``); once the ConfigRecord is committed ``update`` applies it and the
next heartbeat, sent at once, carries it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping

from ottla.common.config import ConfigError
from ottla.common.server_config import (
    BROKER_CONFIGS,
    KafkaConfig,
    cordoned_log_dirs_error,
    resolve_cordoned_log_dirs,
)
from ottla.metadata.image import MetadataImage
from ottla.storage.log_manager import LogManager

log = logging.getLogger(__name__)

CORDONED_LOG_DIRS = "cordoned.log.dirs"


class CordonedLogDirs:
    def __init__(self, config: KafkaConfig, image: Callable[[], MetadataImage],
                 log_manager: LogManager) -> None:
        self.config = config
        self.image = image
        self.log_manager = log_manager
        self.on_change: Callable[[], None] = lambda: None
        """Called after the cordoned set changed (the lifecycle heartbeats at once)."""
        self._apply(config[CORDONED_LOG_DIRS])

    def _apply(self, value: list[str]) -> bool:
        cordoned = frozenset(os.path.abspath(d) for d in
                             resolve_cordoned_log_dirs(value, self.config.log_dirs))
        changed = cordoned != self.log_manager.cordoned_dirs
        self.log_manager.cordoned_dirs = cordoned
        return changed

    def _current(self) -> list[str] | None:
        """The value in force: this broker's dynamic config, else server.properties (the
        key is per broker: there is no cluster default); None for a dynamic value it
        cannot take, which leaves the one in force (as Kafka's broker does)."""
        raw = self.image().broker_configs(self.config.node_id).get(CORDONED_LOG_DIRS)
        if raw is None:
            return list(self.config[CORDONED_LOG_DIRS])
        try:
            return list(BROKER_CONFIGS[CORDONED_LOG_DIRS].parse(raw))
        except ConfigError as e:
            log.error("Dynamic %s of %d could not be applied: %s", CORDONED_LOG_DIRS,
                      self.config.node_id, e)
            return None

    def validate(self, per_broker: Mapping[str, str | None]) -> None:
        """Raise ``ConfigError`` (Kafka's message) if this broker's proposed dynamic
        configs set a ``cordoned.log.dirs`` it could not take."""
        raw = per_broker.get(CORDONED_LOG_DIRS)
        if raw is None:
            return
        value = BROKER_CONFIGS[CORDONED_LOG_DIRS].parse(raw)
        error = cordoned_log_dirs_error(value, self.config.log_dirs)
        if error is not None:
            raise ConfigError(f"requirement failed: {error}")

    def update(self) -> None:
        """Follow the committed dynamic config."""
        value = self._current()
        if value is not None and self._apply(value):
            self.on_change()

    def directory_ids(self) -> list[uuid.UUID]:
        """The ids of the cordoned dirs, as the heartbeat names them."""
        ids = (self.log_manager.directory_id(d) for d in sorted(self.log_manager.cordoned_dirs))
        return [d for d in ids if d is not None]
