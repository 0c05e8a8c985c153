"""Resolve Spark's own Kafka connector (``format("kafka")``) with Maven into a cache
directory outside the repository, for tests/integration/test_spark_kafka_connector.py.

``python -m tests.kafka_ref.install`` (``make kafka-ref``) calls ``install`` after Kafka's
jars, so a fresh machine (``.ci/run``) has both before the tests and fails if either cannot
be resolved. It runs ``mvn -q -f tests/kafka_ref/spark-kafka-pom.xml
dependency:copy-dependencies@spark-kafka-jars``, which copies the connector 4.2.0, its token
provider, its kafka-clients (3.9.x) and commons-pool2 into ``<home>/jars``: the ``spark.jars``
to add to PySpark's own. ``<home>`` is ``$OTTLA_SPARK_KAFKA_HOME``, else
``~/.cache/ottla/spark-sql-kafka-4.2.0``. As for Kafka, a marker records a complete install
of this very pom, and a failure raises ``InstallError`` with Maven's output (never a skip).
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

SPARK_KAFKA_VERSION = "4.2.0"
"""Not PySpark's 4.3.0: the registry serves no 4.3.0 of the connector (docs/kafka-ref.md)."""
POM = Path(__file__).with_name("spark-kafka-pom.xml")
REQUIRED_JARS = (
    f"spark-sql-kafka-0-10_2.13-{SPARK_KAFKA_VERSION}.jar",
    f"spark-token-provider-kafka-0-10_2.13-{SPARK_KAFKA_VERSION}.jar",
    "kafka-clients-3.9.", "commons-pool2-",
)


def spark_kafka_home() -> Path:
    """``$OTTLA_SPARK_KAFKA_HOME``, else ``~/.cache/ottla/spark-sql-kafka-4.2.0``."""
    env = os.environ.get("OTTLA_SPARK_KAFKA_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".cache" / "ottla" / f"spark-sql-kafka-{SPARK_KAFKA_VERSION}"


def pom_digest() -> str:
    """The pom without comments and layout: an edited comment keeps the install."""
    text = re.sub(r"<!--.*?-->", "", POM.read_text(encoding="utf-8"), flags=re.DOTALL)
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def installed_jars(home: Path | None = None) -> list[Path] | None:
    """The jars of a complete install of the current pom in ``<home>``, else None."""
    home = home or spark_kafka_home()
    try:
        marker = json.loads((home / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    jars = [home / "jars" / name for name in marker.get("jars", ())]
    if marker.get("pom_sha256") != pom_digest() or not jars or not all(
            j.is_file() for j in jars):
        return None
    return jars


def _missing(names: list[str]) -> list[str]:
    return [need for need in REQUIRED_JARS
            if not any(n == need or (not need.endswith(".jar") and n.startswith(need))
                       for n in names)]


def install(home: Path | None = None, force: bool = False) -> list[Path]:
    """Copy the connector's jars into ``<home>/jars`` unless a complete install is there;
    return them (for ``spark.jars``). Raises ``InstallError`` without Maven or if it fails."""
    home = (home or spark_kafka_home()).resolve()
    if not force and (found := installed_jars(home)) is not None:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InstallError("resolving Spark's Kafka connector needs Maven (mvn) on PATH "
                           "(apt-get install maven)")
    with _locked(home):
        if not force and (found := installed_jars(home)) is not None:
            return found
        (home / MARKER).unlink(missing_ok=True)
        shutil.rmtree(home / "jars", ignore_errors=True)
        shutil.rmtree(home / "target", ignore_errors=True)
        command = [mvn, "-B", "-q", "-f", str(POM),
                   "dependency:copy-dependencies@spark-kafka-jars",
                   f"-Dottla.spark.kafka.home={home}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=MAVEN_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise InstallError(f"Maven did not finish in {MAVEN_TIMEOUT:g} s: "
                               f"{' '.join(command)}") from e
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            raise InstallError(
                f"Maven could not resolve org.apache.spark:spark-sql-kafka-0-10_2.13:"
                f"{SPARK_KAFKA_VERSION} (exit code {done.returncode}): "
                f"{' '.join(command)}\n{output[-6000:]}")
        names = sorted(p.name for p in (home / "jars").glob("*.jar"))
        if missing := _missing(names):
            raise InstallError(f"Maven finished but {home / 'jars'} lacks {', '.join(missing)}")
        (home / MARKER).write_text(json.dumps(
            {"spark_kafka_version": SPARK_KAFKA_VERSION, "pom_sha256": pom_digest(),
             "jars": names}, indent=1) + "\n", encoding="utf-8")
        shutil.rmtree(home / "target", ignore_errors=True)
        return [home / "jars" / n for n in names]
