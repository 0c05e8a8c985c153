"""A broker's TLS listeners under dynamic broker configs (the part of Kafka's
DynamicBrokerConfig that reconfigures its listeners' SslFactory).

Before a broker forwards AlterConfigs or IncrementalAlterConfigs of its own configs to
the controller it checks that every TLS listener could take the proposed keystore and
truststore keys (``validate``; Kafka's ConfigAdminManager.preprocess), so a keystore that
does not load or names another subject is refused there. Once the ConfigRecords are
committed, every record for this broker reconfigures the listeners (``update``): new
keys rebuild them, the same keys rebuild them only if a store's file was modified (Kafka's
``reloadUpdatedFilesWithoutConfigChange``), so setting a keystore location again is how a
certificate renewed in place is taken up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from ottla.common.config import ConfigError
from ottla.common.server_config import KafkaConfig
from ottla.metadata.image import MetadataImage
from ottla.security.ssl_factory import SslFactory, listener_values

log = logging.getLogger(__name__)


class DynamicListenerSsl:
    def __init__(self, config: KafkaConfig, image: Callable[[], MetadataImage],
                 factories: Mapping[str, SslFactory]) -> None:
        self.config = config
        self.image = image
        self.factories = dict(factories)
        """Each TLS listener's SslFactory, by listener name."""

    def _dynamic(self, per_broker: Mapping[str, str | None] | None = None
                 ) -> dict[str, str | None]:
        """The cluster default's dynamic configs under this broker's (or under the
        proposed set of this broker's)."""
        image = self.image()
        if per_broker is None:
            per_broker = image.broker_configs(self.config.node_id)
        return {**image.broker_configs(None), **per_broker}

    def validate(self, per_broker: Mapping[str, str | None]) -> None:
        """Raise ``ConfigError`` (Kafka's message) if a listener could not take this
        broker's proposed dynamic configs."""
        dynamic = self._dynamic(per_broker)
        for name, factory in self.factories.items():
            factory.validate_reconfiguration(listener_values(self.config, name, dynamic))

    def update(self) -> None:
        """Reconfigure every TLS listener from the committed dynamic configs; one that
        cannot take them keeps serving what it had (logged, as Kafka's broker does)."""
        dynamic = self._dynamic()
        for name, factory in self.factories.items():
            try:
                factory.reconfigure(listener_values(self.config, name, dynamic))
            except ConfigError as e:
                log.error("Per-broker configs of %d could not be applied to listener %s: %s",
                          self.config.node_id, name, e)
