"""Dynamic configs of topics, brokers, groups and client-metrics subscriptions (Kafka's
ConfigurationControlManager, with
the broker-side checks of its ConfigAdminManager and DynamicBrokerConfig): AlterConfigs
replaces a resource's set, IncrementalAlterConfigs sets, deletes, appends to and subtracts
from it; both validate every value before writing a ConfigRecord."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ottla.common import client_metrics_configs
from ottla.common.client_metrics_configs import ClientMetricsConfigError
from ottla.common.config import ConfigError, ConfigType
from ottla.common.features import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    cordoned_log_dirs_supported,
)
from ottla.common.group_configs import validate_group_configs
from ottla.common.kafka_broker_configs import (
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    LISTENER_ONLY_SECURITY_CONFIGS,
)
from ottla.common.server_config import BROKER_CONFIGS, DYNAMIC_BROKER_KEYS, PER_BROKER_KEYS
from ottla.common.topic_configs import TOPIC_CONFIGS
from ottla.controller.results import ControllerError, ControllerResult, check_user_op
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.errors import ErrorCode

CORDONED_LOG_DIRS = "cordoned.log.dirs"
_COMMA = re.compile(r"\s*,\s*")
"""Kafka's ``ConfigDef.COMMA_WITH_WHITESPACE``."""

# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

_LISTENER_CONFIG = re.compile(r"^listener\.name\.[^.]*\.(.*)$")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _java_int(text: str) -> int | None:
    """``Integer.valueOf``: an optional sign and ASCII digits within 32 bits."""
    if not _JAVA_INT.fullmatch(text) or not -2**31 <= int(text) < 2**31:
        return None
    return int(text)


def _java_set(names: Sequence[str]) -> str:
    """A set of names as Kafka 4.4's (Java) DynamicBrokerConfig.checkInvalidProps writes
    it; in the request's order (a Java HashSet's order for more than one)."""
    return "[" + ", ".join(names) + "]"


def _listener_base(name: str) -> str | None:
    match = _LISTENER_CONFIG.match(name)
    return match.group(1) if match else None


def validate_dynamic_broker_configs(props: Mapping[str, str | None], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: whether a broker's (``per_broker``) or the
    cluster default's dynamic configs may become ``props``. Keys Kafka does not know are
    custom configs (for plugins) and pass, as in Kafka; a known key that is not dynamic, a
    security key without its listener prefix, a bad value or a per-broker key at cluster
    level fail with INVALID_REQUEST and Kafka's message."""
    names = [n for n in props]
    non_dynamic = [n for n in names if n in BROKER_CONFIGS and n not in DYNAMIC_BROKER_KEYS]
    if non_dynamic:
        raise ControllerError(ErrorCode.invalid_request,
                              f"Cannot update these configs dynamically: {_java_set(non_dynamic)}")
    security = [n for n in names if n in LISTENER_ONLY_SECURITY_CONFIGS]
    if security:
        raise ControllerError(
            ErrorCode.invalid_request, "These security configs can be dynamically updated only "
            f"per-listener using the listener prefix: {_java_set(security)}")
    for name, value in props.items():
        base = _listener_base(name) or name
        if value is not None and base in DYNAMIC_BROKER_KEYS:
            try:
                BROKER_CONFIGS[base].parse(value)
            except ConfigError as e:
                raise ControllerError(ErrorCode.invalid_request, str(e)) from None
    if not per_broker:
        per_broker_names = [n for n in names if n in PER_BROKER_KEYS or (
            _listener_base(n) is not None and
            _listener_base(n) not in CLUSTER_LEVEL_LISTENER_CONFIGS)]
        if per_broker_names:
            raise ControllerError(
                ErrorCode.invalid_request, "Cannot update these configs at default cluster "
                f"level, broker id must be specified: {_java_set(per_broker_names)}")


def list_default(resource_type: int, key: str) -> str | None:
    """The default of a LIST-typed config as Kafka renders it, for APPEND and SUBTRACT on a
    key without a value yet; raises if the key is unknown or not a list."""
    if resource_type == ConfigResourceType.TOPIC:
        definition = TOPIC_CONFIGS.keys.get(key)
    elif resource_type == ConfigResourceType.BROKER:
        definition = BROKER_CONFIGS.keys.get(_listener_base(key) or key)
    elif resource_type == ConfigResourceType.CLIENT_METRICS:
        client_metrics = client_metrics_configs.KEYS.get(key)
        if client_metrics is None or client_metrics.type != ConfigType.LIST:
            raise KeyError(key)
        return client_metrics.default
    else:
        definition = None
    if definition is None or definition.type != ConfigType.LIST:
        raise KeyError(key)
    return definition.render(definition.default)


class ConfigurationControlManager:
    def __init__(self, image: MetadataImage,
                 broker_config: Callable[[str], Any] | None = None,
                 quorum_node_ids: Sequence[int] = ()) -> None:
        self.image = image
        self.broker_config = broker_config or (lambda name: BROKER_CONFIGS[name].default)
        """The controller's static broker configs: the group bounds come from them."""
        self.quorum_node_ids = frozenset(quorum_node_ids)
        """``controller.quorum.voters``' ids: nodes a BROKER resource may name too."""

    def _check_resource(self, resource_type: int, name: str) -> None:
        if resource_type == ConfigResourceType.TOPIC:
            if name not in self.image.topics_by_name:
                raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                      f"Topic {name} does not exist.")
        elif resource_type == ConfigResourceType.BROKER:
            if name:
                self._check_node(name)
        elif resource_type == ConfigResourceType.GROUP:
            if not name:
                raise ControllerError(ErrorCode.invalid_request,
                                      "Default group resources are not allowed.")
        elif resource_type == ConfigResourceType.CLIENT_METRICS:
            pass  # any name; an empty one is refused with the configs (Kafka's order)
        else:
            raise ControllerError(ErrorCode.invalid_request,
                                  f"Unsupported resource type {resource_type}")

    def _check_node(self, name: str) -> None:
        """Kafka's ControllerConfigurationValidator, then its existence checker: a
        node id, of a broker or of a controller (for its controller listeners' TLS),
        registered or a voter of controller.quorum.voters."""
        node = _java_int(name)
        if node is None:
            raise ControllerError(ErrorCode.invalid_request,
                                  "Unable to parse broker name as a base 10 number.")
        if node < 0:
            raise ControllerError(ErrorCode.invalid_request, "Invalid negative broker ID.")
        if node not in self.image.brokers and node not in self.quorum_node_ids and \
                node not in self.image.controllers:
            raise ControllerError(ErrorCode.broker_id_not_registered,
                                  f"No node with id {node} found.")

    def _validate_resource(self, resource_type: int, name: str,
                           configs: Mapping[str, str | None]) -> None:
        """The whole new set of a resource's dynamic configs, as Kafka validates it."""
        try:
            if resource_type == ConfigResourceType.TOPIC:
                for key, value in configs.items():
                    if key not in TOPIC_CONFIGS:
                        raise ControllerError(ErrorCode.invalid_config,
                                              f"Unknown topic config name: {key}")
                    if value is not None:
                        TOPIC_CONFIGS[key].parse(value)
            elif resource_type == ConfigResourceType.BROKER:
                validate_dynamic_broker_configs(configs, per_broker=bool(name))
            elif resource_type == ConfigResourceType.GROUP:
                nulls = [k for k, v in configs.items() if v is None]
                if nulls:
                    raise ConfigError("Null value not supported for group configs: " +
                                      ",".join(nulls))
                validate_group_configs({k: v for k, v in configs.items() if v is not None},
                                       self.broker_config)
            elif resource_type == ConfigResourceType.CLIENT_METRICS:
                client_metrics_configs.validate(
                    name, {k: v for k, v in configs.items() if v is not None})
        except ConfigError as e:
            raise ControllerError(ErrorCode.invalid_config, str(e)) from None
        except ClientMetricsConfigError as e:
            raise ControllerError(ErrorCode.invalid_request if e.invalid_request
                                  else ErrorCode.invalid_config, str(e)) from None

    def _check_cordoned_log_dirs(self, changes: Sequence[tuple[str, str | None]],
                                 current: Mapping[str, str], forwarded: bool) -> None:
        """What Kafka's controller checks of a broker's ``cordoned.log.dirs`` (KIP-1066):
        no change before metadata.version 4.3-IV0; and, sent to the controller directly
        (not forwarded by the broker, which checked it against its log dirs), a value
        naming only dirs the current one names."""
        for key, value in changes:
            if key != CORDONED_LOG_DIRS:
                continue
            level = self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)
            if not cordoned_log_dirs_supported(level):
                raise ControllerError(
                    ErrorCode.invalid_config, f"The {CORDONED_LOG_DIRS} configuration value "
                    "cannot be set because it requires metadata.version >= 4.3-IV0")
            if forwarded or value is None or not value.strip():
                continue
            existing = current.get(CORDONED_LOG_DIRS)
            allowed = set() if existing is None else set(_COMMA.split(existing.strip()))
            if not set(_COMMA.split(value.strip())) <= allowed:
                raise ControllerError(
                    ErrorCode.invalid_config, f"When updating {CORDONED_LOG_DIRS} via "
                    "controllers,  the new value must be a subset of the current "
                    "configuration value.")

    def alter_configs(self, resources: Sequence[tuple[int, str, dict[str, str | None]]],
                      validate_only: bool = False, forwarded: bool = True) -> ControllerResult:
        """Legacy AlterConfigs: each resource's dynamic configs become exactly the given set."""

        def target(resource_type: int, name: str, current: dict[str, str]
                   ) -> tuple[Mapping[str, str | None], set[str]]:
            configs = dict(resources_by_key[(resource_type, name)])
            self._validate_resource(resource_type, name, configs)
            return configs, set(configs)
        resources_by_key = {(t, n): c for t, n, c in resources}
        return self._alter([(t, n) for t, n, _ in resources], target, validate_only,
                           forwarded)

    def incremental_alter_configs(
            self, resources: Sequence[tuple[int, str, list[tuple[str, int, str | None]]]],
            validate_only: bool = False, forwarded: bool = True) -> ControllerResult:
        """IncrementalAlterConfigs: set, delete, append to or subtract from single keys."""

        def target(resource_type: int, name: str, current: dict[str, str]
                   ) -> tuple[Mapping[str, str | None], set[str]]:
            ops = ops_by_key[(resource_type, name)]
            keys = [key for key, _, _ in ops]
            if len(set(keys)) != len(keys):
                raise ControllerError(ErrorCode.invalid_request,
                                      "Error due to duplicate config keys")
            new: dict[str, str | None] = dict(current)
            for key, op, value in ops:
                if op == OP_SET:
                    new[key] = value
                elif op == OP_DELETE:
                    new.pop(key, None)
                elif op in (OP_APPEND, OP_SUBTRACT):
                    new[key] = self._list_op(resource_type, key, op, value, new)
                else:
                    raise ControllerError(ErrorCode.invalid_request,
                                          f"Unknown alter config operation {op}")
            self._validate_resource(resource_type, name, new)
            return new, set(keys)
        ops_by_key = {(t, n): ops for t, n, ops in resources}
        return self._alter([(t, n) for t, n, _ in resources], target, validate_only,
                           forwarded)

    def _alter(self, resources: list[tuple[int, str]],
               target: Callable[[int, str, dict[str, str]],
                                tuple[Mapping[str, str | None], set[str]]],
               validate_only: bool, forwarded: bool) -> ControllerResult:
        """ConfigRecords that take each resource from its dynamic configs to ``target``'s
        (a key set to None or left out is deleted); the result per resource. A BROKER
        resource's keys the request names get a record even when their value does not
        change (Kafka's KAFKA-14136): the broker reloads a keystore file set again."""
        records: list[Any] = []
        results = []
        for resource_type, name in resources:
            try:
                self._check_resource(resource_type, name)
                current = dict(self.image.configs.get((resource_type, name), {}))
                new, named = target(resource_type, name, current)
                again = named if resource_type == ConfigResourceType.BROKER else set()
                changes = [(k, v) for k, v in new.items() if current.get(k) != v or k in again]
                changes += [(k, None) for k in current if k not in new]
                changes += [(k, None) for k in sorted(again - set(new) - set(current))]
                if resource_type == ConfigResourceType.BROKER:
                    self._check_cordoned_log_dirs(changes, current, forwarded)
                if not validate_only:
                    records.extend(r.ConfigRecord(resource_type=resource_type, resource_name=name,
                                                  name=k, value=v) for k, v in changes)
                results.append((resource_type, name, ErrorCode.none, None))
            except ControllerError as e:
                results.append((resource_type, name, e.code, e.message))
        check_user_op(len(records))
        return ControllerResult(records, results)

    def _list_op(self, resource_type: int, key: str, op: int, value: str | None,
                 current: Mapping[str, str | None]) -> str:
        """APPEND or SUBTRACT on a LIST-typed key, as Kafka does: the current value (else the
        default) split on commas; APPEND adds the values not there yet, SUBTRACT removes one
        occurrence of each."""
        try:
            default = list_default(resource_type, key)
        except KeyError:
            if resource_type == ConfigResourceType.BROKER:
                # ConfigAdminManager.prepareIncrementalConfigs on the receiving broker.
                if (_listener_base(key) or key) not in BROKER_CONFIGS:
                    raise ControllerError(ErrorCode.invalid_config,
                                          f"Unknown config name: {key}") from None
                verb = "append" if op == OP_APPEND else "subtract"
                raise ControllerError(
                    ErrorCode.invalid_config,
                    f"Config value {verb} is not allowed for config key: {key}") from None
            raise ControllerError(ErrorCode.invalid_config,
                                  f"Can't {_OP_NAMES[op]} to key {key} because its type is "
                                  "not LIST.") from None
        existing = current.get(key)
        if existing is None:
            existing = default
        items = [v for v in (existing or "").split(",") if v]
        for item in (value or "").split(","):
            if op == OP_APPEND:
                if item not in items:
                    items.append(item)
            elif item in items:
                items.remove(item)
        return ",".join(items)
