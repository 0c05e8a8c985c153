"""Resolve the Prometheus JMX exporter's Java agent with Maven into a cache directory outside
the repository, for tests/integration/test_metrics_jmx_exporter.py: a Kafka node run with
``-javaagent:<agent>=PORT:<rules>`` serves its beans as Prometheus metrics, named by
``KAFKA_KRAFT_RULES`` (the exporter project's example rules for KRaft Kafka).

``python -m tests.kafka_ref.install`` (``make kafka-ref``) calls ``install`` after Kafka's
jars, so a fresh machine (``.ci/run``) fails before the tests if the agent cannot be
resolved. It runs ``mvn -q -f tests/kafka_ref/jmx-exporter-pom.xml
dependency:copy-dependencies@jmx-exporter-jars``, which copies the shaded agent jar into
``<home>/jars``; ``<home>`` is ``$OTTLA_JMX_EXPORTER_HOME``, else
``~/.cache/ottla/jmx-exporter-1.0.1``. As for Kafka, a marker records a complete install of
this very pom, and a failure raises ``InstallError`` with Maven's output (never a skip).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.kafka_ref.install import MARKER, MAVEN_TIMEOUT, InstallError, _locked

JMX_EXPORTER_VERSION = "1.0.1"
"""The newest 1.x the registry serves (1.1.0 to 1.6.0 answer 404)."""
POM = Path(__file__).with_name("jmx-exporter-pom.xml")
AGENT_JAR = f"jmx_prometheus_javaagent-{JMX_EXPORTER_VERSION}.jar"
KAFKA_KRAFT_RULES = Path(__file__).with_name("jmx-exporter-kafka-kraft.yml")


def jmx_exporter_home() -> Path:
    """``$OTTLA_JMX_EXPORTER_HOME``, else ``~/.cache/ottla/jmx-exporter-1.0.1``."""
    env = os.environ.get("OTTLA_JMX_EXPORTER_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".cache" / "ottla" / f"jmx-exporter-{JMX_EXPORTER_VERSION}"


def pom_digest() -> str:
    """The pom without comments and layout: an edited comment keeps the install."""
    text = re.sub(r"<!--.*?-->", "", POM.read_text(encoding="utf-8"), flags=re.DOTALL)
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def installed_agent(home: Path | None = None) -> Path | None:
    """The agent jar of a complete install of the current pom in ``<home>``, else None."""
    home = home or jmx_exporter_home()
    try:
        marker = json.loads((home / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    agent = home / "jars" / AGENT_JAR
    if marker.get("pom_sha256") != pom_digest() or not agent.is_file():
        return None
    return agent


def install(home: Path | None = None, force: bool = False) -> Path:
    """Copy the agent into ``<home>/jars`` unless a complete install is there; return its
    path (for ``-javaagent:``). Raises ``InstallError`` without Maven or if it fails."""
    home = (home or jmx_exporter_home()).resolve()
    if not force and (found := installed_agent(home)) is not None:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InstallError("resolving the Prometheus JMX exporter needs Maven (mvn) on PATH "
                           "(apt-get install maven)")
    with _locked(home):
        if not force and (found := installed_agent(home)) is not None:
            return found
        (home / MARKER).unlink(missing_ok=True)
        shutil.rmtree(home / "jars", ignore_errors=True)
        shutil.rmtree(home / "target", ignore_errors=True)
        command = [mvn, "-B", "-q", "-f", str(POM),
                   "dependency:copy-dependencies@jmx-exporter-jars",
                   f"-Dottla.jmx.exporter.home={home}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=MAVEN_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise InstallError(f"Maven did not finish in {MAVEN_TIMEOUT:g} s: "
                               f"{' '.join(command)}") from e
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            raise InstallError(
                f"Maven could not resolve io.prometheus.jmx:jmx_prometheus_javaagent:"
                f"{JMX_EXPORTER_VERSION} (exit code {done.returncode}): "
                f"{' '.join(command)}\n{output[-6000:]}")
        agent = home / "jars" / AGENT_JAR
        if not agent.is_file():
            raise InstallError(f"Maven finished but {home / 'jars'} lacks {AGENT_JAR}")
        (home / MARKER).write_text(json.dumps(
            {"jmx_exporter_version": JMX_EXPORTER_VERSION, "pom_sha256": pom_digest(),
             "jars": [AGENT_JAR]}, indent=1) + "\n", encoding="utf-8")
        shutil.rmtree(home / "target", ignore_errors=True)
        return agent
