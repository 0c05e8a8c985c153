"""A node's TLS under dynamic broker configs (the part of Kafka's DynamicBrokerConfig
that reconfigures the SslFactory of every ListenerReconfigurable channel builder).

Those are, as in Kafka 4.4, the server side of every TLS listener the node binds (a
controller's controller listeners too: its SocketServer is reconfigurable) and the
client side of its own connections: a broker's to other brokers on the inter-broker
listener (replica fetchers, transaction markers) and every node's to the controllers on
the first controller listener. Each takes the ``listener.name.<listener>.ssl.*`` keys of
its listener. Kafka 4.4 leaves its Raft client out (KafkaRaftManager's channel builder is
not registered); Ottla's Raft client shares the controller channel's client side, so a
renewed certificate reaches the quorum's own connections too.

Before a broker forwards AlterConfigs or IncrementalAlterConfigs of its own configs to
the controller it checks that every one of them could take the proposed keystore and
truststore keys (``validate``; Kafka's ConfigAdminManager.preprocess), so a keystore that
does not load or names another subject is refused there; a controller checks nothing
first (Kafka's ControllerApis does not preprocess). Once the ConfigRecords are committed,
every record for this node reconfigures them (``update``): new keys rebuild them, the
same keys rebuild them only if a store's file was modified (Kafka's
``reloadUpdatedFilesWithoutConfigChange``), so setting a keystore location again is how a
certificate renewed in place is taken up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from ottla.common.config import ConfigError
from ottla.common.server_config import KafkaConfig
from ottla.metadata.image import MetadataImage
from ottla.security.ssl_factory import SslFactory, listener_values

log = logging.getLogger(__name__)


class DynamicListenerSsl:
    def __init__(self, config: KafkaConfig, image: Callable[[], MetadataImage],
                 factories: Iterable[SslFactory]) -> None:
        self.config = config
        self.image = image
        self.factories = list(factories)
        """Server sides first (Kafka registers its SocketServer's before its clients')."""

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
        for factory in self.factories:
            factory.validate_reconfiguration(
                listener_values(self.config, factory.listener, dynamic))

    def update(self) -> None:
        """Reconfigure every TLS listener from the committed dynamic configs; one that
        cannot take them keeps serving what it had (logged, as Kafka's broker does)."""
        dynamic = self._dynamic()
        for factory in self.factories:
            try:
                factory.reconfigure(listener_values(self.config, factory.listener, dynamic))
            except ConfigError as e:
                log.error("Per-broker configs of %d could not be applied to listener %s: %s",
                          self.config.node_id, factory.listener, e)
