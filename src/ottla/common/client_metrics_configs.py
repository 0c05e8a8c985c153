"""Client-metrics subscriptions (KIP-714): the configs of a CLIENT_METRICS resource, as
Kafka's ClientMetricsConfigs defines and validates them.

A subscription is a named config resource (type 16) with three keys, set with
IncrementalAlterConfigs (``kafka-client-metrics.sh --alter``) and kept as ConfigRecords
in the metadata log like any other dynamic config:

- ``metrics``: a list of metric name prefixes the matching clients are asked to push
  (``*`` for all of them, an empty list for none);
- ``interval.ms``: how often they push, 100 ms to an hour (default five minutes);
- ``match``: ``selector=regex`` pairs a client must all match (none: every client), the
  selectors being ``client_instance_id``, ``client_id``, ``client_software_name``,
  ``client_software_version``, ``client_source_address`` and ``client_source_port``.

Kafka 4.4 compiles the regexes with ``java.util.regex`` and matches whole values; here they
are Python's ``re`` with ``fullmatch``, which reads the common syntax the same (Java-only
constructs such as ``\\p{Alpha}`` are refused as illegal patterns).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ottla.common.config import ConfigType

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_SELECTORS = (CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME,
                   CLIENT_SOFTWARE_VERSION, CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT)

ALL_METRICS = "*"
"""A ``metrics`` entry that subscribes to every metric."""
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class ClientMetricsKey:
    type: ConfigType
    default: str
    """As DescribeConfigs renders it (a list joined with commas)."""
    doc: str


KEYS: dict[str, ClientMetricsKey] = {
    METRICS: ClientMetricsKey(ConfigType.LIST, "", "Telemetry metric name prefix list"),
    INTERVAL_MS: ClientMetricsKey(ConfigType.INT, str(INTERVAL_MS_DEFAULT),
                                  "Metrics push interval in milliseconds"),
    MATCH: ClientMetricsKey(ConfigType.LIST, "", "Client match criteria"),
}
"""Kafka's ClientMetricsConfigs ConfigDef."""


class ClientMetricsConfigError(ValueError):
    """A subscription Kafka refuses: ``invalid_request`` for its InvalidRequestException
    (INVALID_REQUEST), else its InvalidConfigurationException or ConfigException
    (INVALID_CONFIG); the message is Kafka's."""

    def __init__(self, message: str, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def parse_list(value: str) -> list[str]:
    """A LIST value as Kafka's ConfigDef parses it: trimmed, split on commas and the
    white space around them, nothing for an empty string (an empty entry stays)."""
    trimmed = value.strip()
    return re.split(r"\s*,\s*", trimmed) if trimmed else []


def parse_interval(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ClientMetricsConfigError(f"Invalid value {value} for configuration "
                                       f"{INTERVAL_MS}: Not a number of type INT") from None


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """Kafka's parseMatchingPatterns: each ``selector=regex`` split on ``=`` (trailing
    empty parts dropped, as Java's ``String.split``), exactly two parts, a known
    selector, a regex that compiles."""
    parsed: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise ClientMetricsConfigError(f"Illegal client matching pattern: {pattern}")
        try:
            parsed[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsConfigError(
                f"Illegal client matching pattern: {pattern}") from None
    return parsed


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate of a subscription's whole new set of configs
    (the controller's check before it writes them)."""
    if not name:
        raise ClientMetricsConfigError("Subscription name can't be empty", invalid_request=True)
    for key in configs:
        if key not in KEYS:
            raise ClientMetricsConfigError(f"Unknown client metrics configuration: {key}",
                                           invalid_request=True)
    if INTERVAL_MS in configs:
        interval = parse_interval(configs[INTERVAL_MS])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 "
                "and 3600000 (1 hour)", invalid_request=True)
    if MATCH in configs:
        parse_match(parse_list(configs[MATCH]))


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscription as the brokers apply it (Kafka's SubscriptionInfo)."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: dict[str, re.Pattern[str]] = field(default_factory=dict)

    @classmethod
    def from_configs(cls, name: str, configs: Mapping[str, str]) -> Subscription:
        """The subscription of a resource's configs (committed, so valid), with Kafka's
        defaults for the keys it does not set."""
        return cls(name, frozenset(parse_list(configs.get(METRICS, ""))),
                   parse_interval(configs.get(INTERVAL_MS, str(INTERVAL_MS_DEFAULT))),
                   parse_match(parse_list(configs.get(MATCH, ""))))

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Kafka's ClientMetricsInstanceMetadata.isMatch: every selector's regex matches
        the client's whole value (a value the client lacks matches nothing)."""
        for selector, pattern in self.match.items():
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True
