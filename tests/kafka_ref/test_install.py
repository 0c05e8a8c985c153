"""The installer's contract without the network: a complete install is found without Maven,
and a Maven that fails, or none at all, is an error that says why (never a skip)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.kafka_ref import install as installer
from tests.kafka_ref import jmx_exporter


def fake_install(home: Path) -> None:
    """What a complete install leaves: the jars and the marker of the current pom."""
    libs = home / "libs"
    libs.mkdir(parents=True)
    jars = [j for j in installer.REQUIRED_JARS if j.endswith(".jar")] + [
        "log4j-core-2.25.5.jar", "log4j-slf4j-impl-2.25.5.jar", "slf4j-api-1.7.36.jar",
        "scala-library-2.13.18.jar"]
    for jar in jars:
        (libs / jar).write_bytes(b"")
    (home / installer.MARKER).write_text(json.dumps(
        {"pom_sha256": installer.pom_digest(), "jars": jars}))


def fake_mvn(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text("#!/bin/sh\n" + script)
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)


def test_a_complete_install_is_found_without_running_maven(tmp_path, monkeypatch) -> None:
    fake_install(tmp_path / "home")
    monkeypatch.setenv("OTTLA_KAFKA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", "/nonexistent")  # no mvn, no java: neither is needed
    assert installer.install() == (tmp_path / "home" / "libs").resolve()


def test_an_install_of_another_pom_or_with_a_jar_gone_is_not_complete(tmp_path) -> None:
    home = tmp_path / "home"
    fake_install(home)
    assert installer.installed_libs(home) == home / "libs"
    (home / "libs" / f"kafka-tools-{installer.KAFKA_VERSION}.jar").unlink()
    assert installer.installed_libs(home) is None
    marker = json.loads((home / installer.MARKER).read_text())
    (home / installer.MARKER).write_text(json.dumps({**marker, "pom_sha256": "0" * 64}))
    assert installer.installed_libs(home) is None


def test_a_failing_maven_fails_the_install_with_its_output(tmp_path, monkeypatch) -> None:
    fake_mvn(tmp_path / "bin", 'echo "[ERROR] Could not resolve dependencies (test)"\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(installer.InstallError, match=r"(?s)exit code 1.*Could not resolve"):
        installer.install(tmp_path / "home")
    assert installer.installed_libs(tmp_path / "home") is None
    assert installer.main(["--home", str(tmp_path / "home")]) == 1


def test_maven_that_copies_too_little_fails_the_install(tmp_path, monkeypatch) -> None:
    fake_mvn(tmp_path / "bin", 'mkdir -p "${6#-Dottla.kafka.home=}/libs"\nexit 0\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(installer.InstallError, match=r"lacks kafka_2\.13-4\.4\.0\.jar"):
        installer.install(tmp_path / "home")


def test_no_maven_is_an_error_that_says_how_to_get_it(tmp_path, monkeypatch) -> None:
    java = tmp_path / "bin" / "java"
    fake_mvn(tmp_path / "bin", "exit 0\n")
    (tmp_path / "bin" / "mvn").rename(java)  # a java on PATH, and no mvn
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(installer.InstallError, match=r"needs Maven \(mvn\).*apt-get install"):
        installer.install(tmp_path / "home")


def test_the_jmx_exporter_agent_installs_from_its_pom_or_fails_with_mavens_reason(
        tmp_path, monkeypatch) -> None:
    fake_mvn(tmp_path / "bin", 'echo "[ERROR] Could not find artifact (test)"\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(installer.InstallError, match=r"(?s)jmx_prometheus_javaagent.*"
                                                     r"Could not find artifact"):
        jmx_exporter.install(tmp_path / "home")
    # What a complete install leaves is found without Maven.
    home = tmp_path / "home"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / jmx_exporter.AGENT_JAR).write_bytes(b"")
    (home / installer.MARKER).write_text(json.dumps({"pom_sha256": jmx_exporter.pom_digest()}))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert jmx_exporter.install(home) == home.resolve() / "jars" / jmx_exporter.AGENT_JAR
