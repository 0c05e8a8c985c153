"""Resolve Apache Kafka 4.4.0's jars with Maven into a cache directory outside the repository.

``python -m tests.kafka_ref.install`` (``make kafka-ref``) runs
``mvn -q -f tests/kafka_ref/pom.xml dependency:copy-dependencies@kafka-libs``, which copies
Kafka's broker, tools, Streams, Connect and clients with their runtime dependencies into
``<home>/libs``: a directory that is a classpath (``java -cp '<home>/libs/*'``). ``<home>`` is
``$OTTLA_KAFKA_HOME``, else ``~/.cache/ottla/kafka-4.4.0``. A marker file records a complete
install of this very pom, so a second run costs nothing and an edited pom installs afresh.
Maven's own local repository (``~/.m2``, or ``-Dmaven.repo.local`` in ``MAVEN_OPTS``) caches the
downloads as usual. A failure raises ``InstallError`` (the command exits 1) with Maven's
output: a test that needs Kafka fails with the reason, it never skips. ``main`` then
resolves Spark's Kafka connector as well (``tests.kafka_ref.spark_kafka``), for the test that
runs Spark's ``format("kafka")`` against Ottla, and the Prometheus JMX exporter's Java agent
(``tests.kafka_ref.jmx_exporter``), for the test that scrapes Kafka and Ottla side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

KAFKA_VERSION = "4.4.0"
POM = Path(__file__).with_name("pom.xml")
MARKER = ".installed"
"""In ``<home>``: written last, after every jar was copied and checked."""

# Jars without which the nodes, the tools or the logging cannot work: a resolution that
# lacks one (a changed pom, a dependency the registry dropped) fails here, not in a test.
REQUIRED_JARS = (
    f"kafka_2.13-{KAFKA_VERSION}.jar",
    f"kafka-server-{KAFKA_VERSION}.jar",
    f"kafka-tools-{KAFKA_VERSION}.jar",
    f"kafka-streams-{KAFKA_VERSION}.jar",
    f"kafka-clients-{KAFKA_VERSION}.jar",
    f"connect-runtime-{KAFKA_VERSION}.jar",
    f"connect-json-{KAFKA_VERSION}.jar",
    "log4j-core-", "log4j-slf4j-impl-", "slf4j-api-", "scala-library-",
)
MAVEN_TIMEOUT = 1800.0
"""Seconds: a cold resolution downloads about 125 MB of jars."""


class InstallError(RuntimeError):
    """Kafka could not be installed; the message says why and what to do."""


def kafka_home() -> Path:
    """Where Kafka is installed: ``$OTTLA_KAFKA_HOME``, else ``~/.cache/ottla/kafka-4.4.0``."""
    env = os.environ.get("OTTLA_KAFKA_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".cache" / "ottla" / f"kafka-{KAFKA_VERSION}"


def pom_digest() -> str:
    """The pom's content without its comments and layout: an edited comment keeps the
    install (and the JVMs running from it) as it is."""
    text = re.sub(r"<!--.*?-->", "", POM.read_text(encoding="utf-8"), flags=re.DOTALL)
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def installed_libs(home: Path | None = None) -> Path | None:
    """``<home>/libs`` if a complete install of the current pom is there, else None."""
    home = home or kafka_home()
    try:
        marker = json.loads((home / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    libs = home / "libs"
    if marker.get("pom_sha256") != pom_digest() or not all(
            (libs / jar).is_file() for jar in marker.get("jars", ())):
        return None
    return libs


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One installer at a time per home (two test runs may start together)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _missing(libs: Path) -> list[str]:
    names = [p.name for p in libs.glob("*.jar")] if libs.is_dir() else []
    return [need for need in REQUIRED_JARS
            if not any(n == need or (need.endswith("-") and n.startswith(need))
                       for n in names)]


def install(home: Path | None = None, force: bool = False) -> Path:
    """Install Kafka's jars into ``<home>/libs`` unless a complete install is there; return
    that directory. Raises ``InstallError`` if Java or Maven is missing or Maven fails."""
    home = (home or kafka_home()).resolve()
    if not force and (found := installed_libs(home)) is not None:
        return found
    if shutil.which("java") is None:
        raise InstallError("Apache Kafka needs Java 17+ on PATH "
                           "(apt-get install openjdk-17-jre-headless)")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InstallError("installing Apache Kafka needs Maven (mvn) on PATH "
                           "(apt-get install maven)")
    with _locked(home):
        if not force and (found := installed_libs(home)) is not None:
            return found  # another process installed it while this one waited
        (home / MARKER).unlink(missing_ok=True)
        libs = home / "libs"
        # A fresh directory: jars of an older resolution would sit on the classpath too,
        # and a class-data archive of them would only be ignored (cluster.NODE_ARCHIVE).
        shutil.rmtree(libs, ignore_errors=True)
        for archive in home.glob("*.jsa*"):
            archive.unlink()
        shutil.rmtree(home / "target", ignore_errors=True)
        command = [mvn, "-B", "-q", "-f", str(POM),
                   "dependency:copy-dependencies@kafka-libs", f"-Dottla.kafka.home={home}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=MAVEN_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise InstallError(f"Maven did not finish in {MAVEN_TIMEOUT:g} s: "
                               f"{' '.join(command)}") from e
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            raise InstallError(
                f"Maven could not resolve Apache Kafka {KAFKA_VERSION} (exit code "
                f"{done.returncode}): {' '.join(command)}\n{output[-6000:]}")
        if missing := _missing(libs):
            raise InstallError(f"Maven finished but {libs} lacks {', '.join(missing)}")
        jars = sorted(p.name for p in libs.glob("*.jar"))
        (home / MARKER).write_text(json.dumps(
            {"kafka_version": KAFKA_VERSION, "pom_sha256": pom_digest(), "jars": jars},
            indent=1) + "\n", encoding="utf-8")
        shutil.rmtree(home / "target", ignore_errors=True)
        return libs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.kafka_ref.install",
        description=f"Install Apache Kafka {KAFKA_VERSION}'s jars with Maven "
                    "(into $OTTLA_KAFKA_HOME/libs, default ~/.cache/ottla/kafka-4.4.0/libs).")
    parser.add_argument("--home", type=Path, help="install here instead of the default")
    parser.add_argument("--force", action="store_true", help="resolve and copy again")
    parser.add_argument("--spark-kafka-home", type=Path,
                        help="install Spark's Kafka connector here instead of the default")
    parser.add_argument("--jmx-exporter-home", type=Path,
                        help="install the Prometheus JMX exporter here instead of the default")
    args = parser.parse_args(argv)
    from tests.kafka_ref import jmx_exporter, spark_kafka  # they import this module

    start = time.monotonic()
    try:
        libs = install(args.home, force=args.force)
        jars = list(libs.glob("*.jar"))
        size = sum(p.stat().st_size for p in jars)
        print(f"Apache Kafka {KAFKA_VERSION}: {len(jars)} jars ({size / 2**20:.0f} MiB) in "
              f"{libs} ({time.monotonic() - start:.1f} s)")
        start = time.monotonic()
        connector = spark_kafka.install(args.spark_kafka_home, force=args.force)
        print(f"Spark's Kafka connector {spark_kafka.SPARK_KAFKA_VERSION}: {len(connector)} "
              f"jars in {connector[0].parent} ({time.monotonic() - start:.1f} s)")
        start = time.monotonic()
        agent = jmx_exporter.install(args.jmx_exporter_home, force=args.force)
        print(f"Prometheus JMX exporter {jmx_exporter.JMX_EXPORTER_VERSION}: {agent} "
              f"({time.monotonic() - start:.1f} s)")
    except (InstallError, spark_kafka.InstallError) as e:  # two classes under ``-m``
        print(f"kafka-ref: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
