"""Kafka 4.4's newest metadata.version on a running Ottla node: ``kafka-features upgrade
--metadata 4.4-IV2`` from 4.0-IV3, and the metadata log it leaves read back by Kafka's own
``kafka-dump-log --cluster-metadata-decoder`` (docs/compatibility.md, "metadata.version
4.1-IV0 to 4.4-IV2")."""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import WireClient, format_node
from tests.kafka_ref.cluster import run_tool
from tests.kafka_tools import require_kafka


def finalized_metadata_version(bootstrap: str) -> int:
    with WireClient(bootstrap, timeout=10) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "test", "client_software_version": "1"})
    return {f.name: f.max_version_level for f in response.finalized_features
            }["metadata.version"]


def metadata_records(data_dir: str) -> list[dict[str, Any]]:
    """Every record of the metadata log's segments as kafka-dump-log decodes it (its
    ``payload`` JSON), after checking the tool read them all without an error."""
    segments = sorted(glob.glob(os.path.join(data_dir, "__cluster_metadata-0", "*.log")))
    done = run_tool("kafka-dump-log", "--cluster-metadata-decoder", "--files",
                    ",".join(segments), check=True)
    assert "Exception" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Error" not in done.stdout, done.stdout
    return [json.loads(payload) for payload in re.findall(r"payload: (\{.*\})$",
                                                          done.stdout, re.MULTILINE)]


def test_kafka_features_upgrades_ottla_to_4_4_iv2_and_kafka_reads_its_records(
        make_ottla) -> None:
    """A node formatted at 4.0-IV3 is upgraded to 4.4-IV2 by Kafka's tool, which prints
    what it prints on Kafka; the broker then reports its (no) cordoned log dirs and, once
    restarted, registers with the 4.3-IV0 record version; kafka-dump-log decodes every
    record, each in the version Kafka 4.4 writes at the level it was written at."""
    require_kafka()
    node = make_ottla(start=False)
    format_node(node, "4.0-IV3")
    node.start()
    assert finalized_metadata_version(node.bootstrap) == 25
    upgraded = run_tool("kafka-features", "--bootstrap-server", node.bootstrap, "upgrade",
                        "--metadata", "4.4-IV2")
    assert (upgraded.returncode, upgraded.stdout) == (
        0, " `metadata` flag is deprecated and may be removed in a future release.\n"
           "metadata.version was upgraded to 33.\n"), upgraded.stderr
    assert finalized_metadata_version(node.bootstrap) == 33
    node.stop()
    node.start()  # answers once unfenced: registered again, a heartbeat since
    node.stop()

    records = metadata_records(node.data_dir)
    levels = [r["data"]["featureLevel"] for r in records
              if r["type"] == "FEATURE_LEVEL_RECORD" and r["data"]["name"] == "metadata.version"]
    assert levels == [25, 33]
    registrations = [r["version"] for r in records if r["type"] == "REGISTER_BROKER_RECORD"]
    assert registrations[0] == 3 and registrations[-1] == 4, registrations
    cordoned = [r for r in records if r["type"] == "BROKER_REGISTRATION_CHANGE_RECORD"
                and "cordonedLogDirs" in r["data"]]
    assert cordoned and all(r["version"] == 3 and r["data"]["cordonedLogDirs"] == []
                            for r in cordoned), cordoned
