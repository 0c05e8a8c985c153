"""Kafka's ``ClientQuotaCallback`` (KIP-257, ``client.quota.callback.class``): a plugin that
decides, per request, under which metric tags a client is measured and what quota bounds
those tags, instead of the built-in lookup of the user and client-id quotas.

Ottla is Python, so the plugin is a Python class, named ``package.module.ClassName`` (or
``package.module:ClassName``) and importable by the node; a Java class name cannot be
imported and stops the node at start with Kafka's config error ("Invalid value ... for
configuration client.quota.callback.class: Class ... could not be found."). The class has
Kafka's interface in Python's naming (``ClientQuotaCallback`` below); the node makes one
instance, calls its ``configure`` (if it has one) with the node's configuration as given,
and shares it between the produce, fetch, request and controller-mutation managers, as
Kafka's QuotaFactory does:

- ``quota_metric_tags(quota_type, principal, client_id)``: the tags a request's client
  is measured under; clients given the same tags share one measured rate. The principal
  is the request's user as ``User:<name>`` (the managers key clients by user name; every
  principal Ottla's listeners make is a User). Any map, as in Kafka: Kafka's own two
  tags, ``user`` and ``client-id`` (either, both, or none: one rate for everyone), or
  keys of the callback's own (a tenant...), which the quota metrics then carry as labels.
- ``quota_limit(quota_type, metric_tags)``: the quota of those tags (bytes per second,
  percent of a thread, partition mutations per second), None for none.
- ``update_quota`` and ``remove_quota``: the user and client-id quotas of the metadata
  log as they change (``ClientQuotaEntity``), given to the callback, which may use them or
  not; after each the managers ask ``quota_limit`` again for every client they measure.
- ``quota_reset_required(quota_type)``: asked as each request is recorded; True makes the
  managers ask ``quota_limit`` again for every client first.
- ``update_cluster_metadata(cluster)`` (optional, as Kafka's default method): the
  cluster's topics, partitions and brokers (``Cluster``) on each broker, at start and
  whenever they change; True makes every manager ask ``quota_limit`` again.
- ``close()``: when the node stops.

With a callback every request is measured (Kafka's ``CUSTOM_QUOTAS``), whether or not
any quota is in the metadata log. The callback runs on the node's event loop with every
request: it must not block.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from ottla.common.config import ConfigError
from ottla.common.principal import Principal

CONFIG = "client.quota.callback.class"
USER_TAG = "user"
CLIENT_ID_TAG = "client-id"
DEFAULT_NAME = "<default>"
"""The name Kafka gives a default user or client-id entity."""


class ClientQuotaType(Enum):
    PRODUCE = "PRODUCE"
    FETCH = "FETCH"
    REQUEST = "REQUEST"
    CONTROLLER_MUTATION = "CONTROLLER_MUTATION"


class ConfigEntityType(Enum):
    USER = "USER"
    CLIENT_ID = "CLIENT_ID"
    DEFAULT_USER = "DEFAULT_USER"
    DEFAULT_CLIENT_ID = "DEFAULT_CLIENT_ID"


@dataclass(frozen=True, slots=True)
class ConfigEntity:
    name: str
    """The user or client id; ``<default>`` for a default entity."""
    entity_type: ConfigEntityType


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """A quota's entity, as Kafka's ``ClientQuotaEntity``: its user and client-id parts."""

    config_entities: tuple[ConfigEntity, ...]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    """The leader's broker id, -1 for none."""
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Cluster:
    """What Kafka's ``Cluster`` tells a callback: the cluster id, the live brokers and
    every topic's partitions."""

    cluster_id: str
    brokers: frozenset[int]
    topics: Mapping[str, tuple[PartitionInfo, ...]]

    def partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self.topics.get(topic, ())


class ClientQuotaCallback(Protocol):
    """Kafka's ``org.apache.kafka.server.quota.ClientQuotaCallback`` in Python's naming."""

    def quota_metric_tags(self, quota_type: ClientQuotaType, principal: Principal,
                          client_id: str) -> Mapping[str, str]: ...

    def quota_limit(self, quota_type: ClientQuotaType, metric_tags: Mapping[str, str]
                    ) -> float | None: ...

    def update_quota(self, quota_type: ClientQuotaType, entity: ClientQuotaEntity,
                     new_value: float) -> None: ...

    def remove_quota(self, quota_type: ClientQuotaType, entity: ClientQuotaEntity) -> None: ...

    def quota_reset_required(self, quota_type: ClientQuotaType) -> bool: ...

    def update_cluster_metadata(self, cluster: Cluster) -> bool:
        """Optional, as Kafka's default method (which returns False)."""
        ...

    def close(self) -> None: ...


METHODS = ("quota_metric_tags", "quota_limit", "update_quota", "remove_quota",
           "quota_reset_required", "close")
"""What a callback class must have (``update_cluster_metadata`` may be left out)."""


def _invalid(value: str, reason: str) -> ConfigError:
    """Kafka's ``ConfigException(name, value, message)`` wording."""
    return ConfigError(f"Invalid value {value} for configuration {CONFIG}: {reason}")


def load_callback(configs: Mapping[str, Any]) -> ClientQuotaCallback | None:
    """The callback ``client.quota.callback.class`` names in ``configs`` (a node's
    configuration as given), made and configured; None when the key is not set.
    ``ConfigError`` when the class cannot be imported or is no callback."""
    value = configs.get(CONFIG)
    if value is None or not str(value).strip():
        return None
    path = str(value).strip()
    module_name, sep, class_name = path.partition(":")
    if not sep:
        module_name, _, class_name = path.rpartition(".")
    try:
        if not module_name or not class_name:
            raise ImportError(path)
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        raise _invalid(path, f"Class {path} could not be found. Ottla takes a Python "
                             f"class here (package.module.ClassName), not a Java one."
                       ) from None
    if not isinstance(cls, type):
        raise _invalid(path, f"{path} is not a class")
    missing = [name for name in METHODS if not callable(getattr(cls, name, None))]
    if missing:
        raise _invalid(path, f"Class {path} is not a ClientQuotaCallback: it has no "
                             f"{', '.join(missing)}")
    callback = cls()
    configure = getattr(callback, "configure", None)
    if callable(configure):
        configure(dict(configs))
    return callback
