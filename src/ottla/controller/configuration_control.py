"""Dynamic configs of topics and brokers (Kafka's ConfigurationControlManager):
AlterConfigs replaces a resource's set, IncrementalAlterConfigs sets, deletes, appends to
and subtracts from it; both validate every value before writing a ConfigRecord."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ottla.common.config import ConfigError
from ottla.common.server_config import BROKER_CONFIGS, DYNAMIC_BROKER_KEYS
from ottla.common.topic_configs import TOPIC_CONFIGS
from ottla.controller.results import ControllerError, ControllerResult, check_user_op
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.errors import ErrorCode

# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _validate_dynamic_broker_config(name: str, value: str | None) -> None:
    """Whether AlterConfigs may set broker key ``name`` to ``value`` at run time."""
    if name not in BROKER_CONFIGS:
        raise ControllerError(ErrorCode.invalid_config, f"Unknown broker config name: {name}")
    if name not in DYNAMIC_BROKER_KEYS:
        raise ControllerError(ErrorCode.invalid_request,
                              f"Cannot update these configs dynamically: {{{name}}}")
    if value is not None:
        BROKER_CONFIGS[name].parse(value)


class ConfigurationControlManager:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def _check_resource(self, resource_type: int, name: str) -> None:
        if resource_type == ConfigResourceType.TOPIC:
            if name not in self.image.topics_by_name:
                raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                      f"Topic {name} does not exist.")
        elif resource_type == ConfigResourceType.BROKER:
            if name and (not name.isdigit() or int(name) not in self.image.brokers):
                raise ControllerError(ErrorCode.invalid_request,
                                      f"Unexpected broker id {name}")
        else:
            raise ControllerError(ErrorCode.invalid_request,
                                  f"Unsupported resource type {resource_type}")

    def _validate_config(self, resource_type: int, name: str, value: str | None) -> None:
        try:
            if resource_type == ConfigResourceType.TOPIC:
                if name not in TOPIC_CONFIGS:
                    raise ControllerError(ErrorCode.invalid_config,
                                          f"Unknown topic config name: {name}")
                if value is not None:
                    TOPIC_CONFIGS[name].parse(value)
            else:
                _validate_dynamic_broker_config(name, value)
        except ConfigError as e:
            raise ControllerError(ErrorCode.invalid_config, str(e)) from None

    def alter_configs(self, resources: Sequence[tuple[int, str, dict[str, str | None]]],
                      validate_only: bool = False) -> ControllerResult:
        """Legacy AlterConfigs: each resource's dynamic configs become exactly the given set."""

        def target(resource_type: int, name: str, current: dict[str, str]
                   ) -> Mapping[str, str | None]:
            configs = dict(resources_by_key[(resource_type, name)])
            for key, value in configs.items():
                self._validate_config(resource_type, key, value)
            return configs
        resources_by_key = {(t, n): c for t, n, c in resources}
        return self._alter([(t, n) for t, n, _ in resources], target, validate_only)

    def incremental_alter_configs(
            self, resources: Sequence[tuple[int, str, list[tuple[str, int, str | None]]]],
            validate_only: bool = False) -> ControllerResult:
        """IncrementalAlterConfigs: set, delete, append to or subtract from single keys."""

        def target(resource_type: int, name: str, current: dict[str, str]
                   ) -> Mapping[str, str | None]:
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
                    new[key] = self._list_op(resource_type, name, key, op, value, current)
                else:
                    raise ControllerError(ErrorCode.invalid_request,
                                          f"Unknown alter config operation {op}")
                self._validate_config(resource_type, key, new.get(key))
            return new
        ops_by_key = {(t, n): ops for t, n, ops in resources}
        return self._alter([(t, n) for t, n, _ in resources], target, validate_only)

    def _alter(self, resources: list[tuple[int, str]],
               target: Callable[[int, str, dict[str, str]], Mapping[str, str | None]],
               validate_only: bool) -> ControllerResult:
        """ConfigRecords that take each resource from its dynamic configs to ``target``'s
        (a key set to None or left out is deleted); the result per resource."""
        records: list[Any] = []
        results = []
        for resource_type, name in resources:
            try:
                self._check_resource(resource_type, name)
                current = dict(self.image.configs.get((resource_type, name), {}))
                new = target(resource_type, name, current)
                changes = [(k, v) for k, v in new.items() if current.get(k) != v]
                changes += [(k, None) for k in current if k not in new]
                if not validate_only:
                    records.extend(r.ConfigRecord(resource_type=resource_type, resource_name=name,
                                                  name=k, value=v) for k, v in changes)
                results.append((resource_type, name, ErrorCode.none, None))
            except ControllerError as e:
                results.append((resource_type, name, e.code, e.message))
        check_user_op(len(records))
        return ControllerResult(records, results)

    def _list_op(self, resource_type: int, name: str, key: str, op: int, value: str | None,
                 current: Mapping[str, str]) -> str:
        if resource_type != ConfigResourceType.TOPIC or key not in TOPIC_CONFIGS or \
                TOPIC_CONFIGS[key].type.name != "LIST":
            raise ControllerError(ErrorCode.invalid_config,
                                  f"Config value append is not allowed for config key: {key}")
        existing = current.get(key)
        items = ([v.strip() for v in existing.split(",") if v.strip()] if existing is not None
                 else list(TOPIC_CONFIGS[key].default))
        values = [v.strip() for v in (value or "").split(",") if v.strip()]
        if op == OP_APPEND:
            items += [v for v in values if v not in items]
        else:
            items = [v for v in items if v not in values]
        return ",".join(items)
