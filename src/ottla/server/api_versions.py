"""ApiVersions: the APIs and version ranges a listener serves, and the node's features.

Both kinds of listener answer it, each from its own table, so a node advertises exactly
what it implements where it is asked.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from ottla.common.features import KRAFT_VERSION, SUPPORTED_FEATURES
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, ApiTable, RequestContext

SOFTWARE_PATTERN = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


class HasImage(Protocol):
    """Any role's services: the finalized features come from the metadata image."""

    @property
    def image(self) -> MetadataImage: ...

    def kraft_version(self) -> int:
        """The metadata quorum's, which is not in the image (Kafka's KRaftVersion)."""
        ...


ADVERTISED_MIN_VERSIONS = {ApiKey.PRODUCE: 0}
"""Versions advertised below what is served (KAFKA-18659): librdkafka before the fix of
its issue 4956 sends gzip, snappy and lz4 batches uncompressed unless a broker lists
Produce from version 0. Clients pick the highest version both sides know, so nobody
sends 0-2; a request that does is an unsupported version, and its connection closes,
as Kafka 4 does."""


def api_keys(table: ApiTable[Any]) -> list[dict[str, int]]:
    return [{"api_key": key, "min_version": ADVERTISED_MIN_VERSIONS.get(key, low),
             "max_version": high}
            for key, low, high in table.versions()]


def unsupported_version_response(table: ApiTable[Any]) -> dict[str, Any]:
    """What a client that sent a too-new ApiVersions gets (in the v0 schema)."""
    return {"error_code": ErrorCode.unsupported_version, "api_keys": api_keys(table),
            "throttle_time": 0}


def api_versions(table: ApiTable[Any]) -> ApiSpec[HasImage]:
    """The ApiVersions handler of ``table`` (which it then belongs to)."""

    def handle_api_versions(services: HasImage, ctx: RequestContext, req: Any
                            ) -> dict[str, Any]:
        if ctx.api_version >= 3 and not (
                SOFTWARE_PATTERN.match(req.client_software_name or "")
                and SOFTWARE_PATTERN.match(req.client_software_version or "")):
            # As Kafka: the error alone, no APIs, no features.
            return {"error_code": ErrorCode.invalid_request, "api_keys": [],
                    "throttle_time": 0, "supported_features": [],
                    "finalized_features_epoch": -1, "finalized_features": [],
                    "zk_migration_ready": False}
        image = services.image
        finalized = dict(image.features)
        kraft_version = services.kraft_version()
        if kraft_version > 0:  # as Kafka's, level 0 is not listed
            finalized[KRAFT_VERSION] = kraft_version
        return {
            "error_code": ErrorCode.none,
            "api_keys": api_keys(table),
            "throttle_time": 0,
            # Below v4 a feature whose range starts at 0 is left out: Java clients
            # before 3.9 throw on it (Kafka's KAFKA-17492 fix).
            "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                                   for n, (lo, hi) in SUPPORTED_FEATURES.items()
                                   if lo > 0 or ctx.api_version >= 4],
            "finalized_features_epoch": image.offset,
            "finalized_features": [{"name": n, "min_version_level": level,
                                    "max_version_level": level}
                                   for n, level in sorted(finalized.items())],
            "zk_migration_ready": False,
        }
    return ApiSpec(ApiKey.API_VERSIONS, 0, 4, handle_api_versions)
