"""What a real node answers to ApiVersions on each listener, held against Apache Kafka
4.4's own table (tests/kafka_versions.py, written from Kafka's sources): every API and
feature Ottla advertises has Kafka's range, or is listed, with its reason, where Ottla
serves less."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ottla.protocol.errors import ErrorCode
from tests.helpers import OttlaProcess, WireClient
from tests.kafka_versions import (
    BROKER_APIS,
    CONTROLLER_APIS,
    FINALIZED_DIFFERENCES,
    NARROWER_BROKER,
    NARROWER_CONTROLLER,
    NARROWER_FEATURES,
    SUPPORTED_FEATURES,
    default_levels,
    range_differences,
)


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    node = OttlaProcess(str(tmp_path_factory.mktemp("api-versions") / "data")).start()
    yield node
    assert node.stop() == 0, node.log()


def ask(address: str):
    with WireClient(address) as client:
        response = client.api_versions()
    assert response.error_code == ErrorCode.none
    return response


@pytest.mark.parametrize("listener", ["broker", "controller"])
def test_each_listener_advertises_kafka_44s_ranges_or_a_listed_narrower_one(
        node: OttlaProcess, listener: str) -> None:
    address, kafka, narrower = {
        "broker": (node.bootstrap, BROKER_APIS, NARROWER_BROKER),
        "controller": (node.controller, CONTROLLER_APIS, NARROWER_CONTROLLER)}[listener]
    advertised = {k.api_key: (k.min_version, k.max_version) for k in ask(address).api_keys}
    assert not range_differences(advertised, kafka, narrower)


@pytest.mark.parametrize("listener", ["broker", "controller"])
def test_supported_features_are_kafka_44s_or_listed_narrower(node: OttlaProcess,
                                                            listener: str) -> None:
    response = ask(node.bootstrap if listener == "broker" else node.controller)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert not range_differences(supported, SUPPORTED_FEATURES, NARROWER_FEATURES,
                                 every_one=True)


def test_a_new_cluster_finalizes_kafkas_defaults_for_its_metadata_version(
        node: OttlaProcess) -> None:
    """A newly formatted node finalizes the levels Kafka 4.4 gives a cluster formatted at
    the same metadata.version, except where FINALIZED_DIFFERENCES says; and every finalized
    level is within what the node says it supports."""
    response = ask(node.bootstrap)
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    assert all(f.min_version_level == f.max_version_level
               for f in response.finalized_features)
    metadata_version = finalized.pop("metadata.version")
    assert metadata_version == SUPPORTED_FEATURES["metadata.version"][1]  # Kafka's newest
    expected = default_levels(metadata_version)
    for name, (level, _) in FINALIZED_DIFFERENCES.items():
        assert expected.get(name) != level, f"{name} is no difference at {level}"
        expected.pop(name, None)
        if level is not None:
            expected[name] = level
    assert finalized == expected
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    for name, level in {**finalized, "metadata.version": metadata_version}.items():
        low, high = supported[name]
        assert low <= level <= high, (name, level, (low, high))
