"""The ``ottla`` data source on a Spark standalone cluster: a master and two workers
started from the PySpark install, so the executors are JVMs of their own with Python
workers of their own. Their Python (``PYSPARK_PYTHON``) has the connector's dependencies
but not ottla, which reaches them only the way docs/spark.md says: the zip that
``ottla pipeline run --master spark://...`` ships, or ``spark-submit --py-files``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ottla.spark.session import package_zip
from tests.helpers import wait_until
from tests.spark.cluster import (
    SPARK_HOME,
    SparkProcess,
    StandaloneCluster,
    alive,
    conf_args,
    executor_of,
    read_file_sink,
    result_line,
    spark_env,
)
from tests.spark.kafka import create_topics, produce
from tests.spark.test_exactly_once import read_topic

JOB = Path(__file__).with_name("cluster_job.py")
APP_TIMEOUT = 180


@pytest.fixture
def cluster(spark_cluster: StandaloneCluster) -> Iterator[StandaloneCluster]:
    """The session's cluster, once the previous test's application has left it (an
    application holds both workers' cores while it runs)."""
    wait_until(spark_cluster.idle, 60, 0.2, "the previous application to release the cluster")
    yield spark_cluster


def run_app(name: str, args: list[str], env: dict[str, str], log: Path,
            on_start: Callable[[SparkProcess], None] | None = None) -> str:
    """Run a driver (``ottla pipeline run`` or ``spark-submit``) to its end (``on_start``
    runs beside it meanwhile); its output. Whatever of it is still running afterwards (or
    on failure) is killed."""
    app = SparkProcess(name, args, env, log).start()
    try:
        if on_start is not None:
            on_start(app)
        code = app.wait(APP_TIMEOUT)
    finally:
        app.stop()
    output = log.read_text(errors="replace")
    assert code == 0, f"{name} exited with {code}:\n{output[-6000:]}"
    return output


def test_archive_pipeline_runs_on_the_cluster(cluster, executor_python, broker, topic,
                                              tmp_path):
    """``ottla pipeline run archive --master spark://...`` ships the ottla package itself:
    the executors' Python has no ottla, and the Parquet files hold every record once."""
    create_topics(broker.bootstrap, [topic], 2)
    acked = produce(broker.bootstrap, (
        {"topic": topic, "partition": i % 2, "key": b"k%d" % (i % 7), "value": b"v%05d" % i,
         "headers": [("n", b"%d" % i)] if i % 3 == 0 else None}
        for i in range(2000)))
    output_dir = tmp_path / "archive"
    output = run_app(
        "ottla pipeline run archive",
        [sys.executable, "-m", "ottla", "pipeline", "run", "archive",
         "--master", cluster.url, *conf_args(cluster.app_conf()),
         "--bootstrap-server", broker.bootstrap, "--topic", topic,
         "--output", str(output_dir), "--max-offsets-per-trigger", "800"],
        spark_env(tmp_path / "conf", PYSPARK_PYTHON=executor_python), tmp_path / "driver.log")

    assert "archive: 3 micro-batches, 2000 input records" in output
    rows = read_file_sink(output_dir)
    assert sorted((r["topic"], r["partition"], r["offset"], r["key"], r["value"],
                   tuple((h["key"], h["value"]) for h in r["headers"]))
                  for r in rows) == sorted(acked)
    assert "ottla-archive" in [app["name"] for app in cluster.state()["completedapps"]]


def test_a_spark_submit_job_with_the_package_in_py_files(cluster, executor_python, broker,
                                                        topic, tmp_path):
    """A user's job, ``spark-submit --py-files ottla.zip``: its driver and executors
    import ottla from the zip; it reads a topic and writes another, default save mode."""
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topics(broker.bootstrap, [source, sink], 2)
    produce(broker.bootstrap, ({"topic": source, "partition": i % 2, "value": b"value-%d" % i}
                               for i in range(1000)))
    ottla_zip = package_zip(str(tmp_path))  # as docs/spark.md tells users to make it
    output = run_app(
        "spark-submit batch",
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.url,
         "--py-files", ottla_zip, *conf_args(cluster.app_conf()), str(JOB), "batch",
         "--bootstrap", broker.bootstrap, "--source", source, "--sink", sink],
        spark_env(tmp_path / "conf", PYSPARK_PYTHON=executor_python), tmp_path / "driver.log")

    assert result_line(output, "written") == {"written": sink}
    assert sorted(read_topic(broker.bootstrap, sink, "read_uncommitted", 2)) == sorted(
        b"VALUE-%d" % i for i in range(1000))


def test_package_zip_from_a_package_imported_from_the_zip(tmp_path):
    """A job whose ottla came from ``--py-files`` can ship ottla again (as
    ``create_session`` on a cluster does): the zip is rebuilt from the zipped package."""
    first = package_zip(str(tmp_path))
    (tmp_path / "again").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", "import ottla, sys\n"
         "from ottla.spark.session import package_zip\n"
         "print(ottla.__file__, package_zip(sys.argv[1]))", str(tmp_path / "again")],
        env={**os.environ, "PYTHONPATH": first}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    imported_from, second = done.stdout.split()
    # From the bytecode shipped beside each source: nothing compiled in the worker.
    assert imported_from == f"{first}/ottla/__init__.pyc"
    with zipfile.ZipFile(first) as a, zipfile.ZipFile(second) as b:
        assert sorted(b.namelist()) == sorted(a.namelist())
        names = set(a.namelist())
        assert "ottla/spark/source.py" in names
        assert all(n + "c" in names for n in names if n.endswith(".py"))


def task_ends(events: Path) -> list[dict[str, Any]]:
    [log] = [p for p in events.iterdir() if p.name.startswith("app-")]
    ends = []
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event["Event"] == "SparkListenerTaskEnd":
            ends.append(event)
    return ends


def test_a_killed_executor_is_retried_and_the_file_sink_stays_exactly_once(
        cluster, executor_python, broker, topic, tmp_path):
    """kill -9 of the executor JVM running a task of a streaming query's second
    micro-batch: Spark runs the task again (on the other executor or a new one) and the
    Parquet output holds every input record exactly once."""
    create_topics(broker.bootstrap, [topic], 2)
    expected = [b"%05d" % i for i in range(12_000)]
    produce(broker.bootstrap, ({"topic": topic, "partition": i % 2, "value": v}
                               for i, v in enumerate(expected)))
    gate, events, output_dir = tmp_path / "gate", tmp_path / "events", tmp_path / "out"
    gate.mkdir()
    events.mkdir()
    (gate / "armed").touch()
    ottla_zip = package_zip(str(tmp_path))
    conf = {**cluster.app_conf(), "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(), "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false"}
    killed: dict[str, int] = {}

    def kill_the_held_executor(app: SparkProcess) -> None:
        try:
            wait_until(lambda: (gate / "held").exists() or app.proc.poll() is not None,
                       120, 0.05, "a task of micro-batch 1 to be held")
            app.check_running()
            worker = json.loads((gate / "held").read_text())["pid"]
            executor = executor_of(worker)
            assert executor in cluster.executors(), (worker, executor, cluster.executors())
            os.kill(executor, signal.SIGKILL)
            wait_until(lambda: not alive(executor), 10, 0.02, "the executor to die")
            killed.update(worker=worker, executor=executor)
        finally:
            (gate / "release").touch()

    # The zip on PYTHONPATH too: the driver's Python worker that plans a streaming read
    # does not get --py-files (docs/spark.md).
    output = run_app(
        "spark-submit stream",
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.url,
         "--py-files", ottla_zip, *conf_args(conf), str(JOB), "stream",
         "--bootstrap", broker.bootstrap, "--source", topic, "--output", str(output_dir),
         "--checkpoint", str(tmp_path / "checkpoint"), "--max-offsets-per-trigger", "4000",
         "--gate", str(gate), "--hold-batch", "1"],
        spark_env(tmp_path / "conf", PYSPARK_PYTHON=executor_python, PYTHONPATH=ottla_zip),
        tmp_path / "driver.log", on_start=kill_the_held_executor)

    assert killed, "no executor was killed"
    assert result_line(output, "batches") == {"batches": 3, "rows": 12_000}
    values = Counter(bytes(r["value"]) for r in read_file_sink(output_dir))
    duplicated = {v: n for v, n in values.items() if n > 1}
    missing = set(expected) - set(values)
    assert not duplicated and not missing, (
        f"{len(duplicated)} values written more than once (e.g. {list(duplicated)[:5]}), "
        f"{len(missing)} missing (e.g. {sorted(missing)[:5]})")
    assert sum(values.values()) == len(expected)

    # Spark saw the task fail with its executor and ran it again, successfully.
    ends = task_ends(events)
    lost = [(e["Stage ID"], e["Task Info"]["Index"]) for e in ends
            if e["Task End Reason"]["Reason"] == "ExecutorLostFailure"]
    assert lost, "no task failed with the killed executor"
    succeeded = {(e["Stage ID"], e["Task Info"]["Index"]) for e in ends
                 if e["Task End Reason"]["Reason"] == "Success"}
    assert set(lost) <= succeeded, (lost, sorted(succeeded))
    # The held Python worker, orphaned by the kill, is gone too.
    wait_until(lambda: not alive(killed["worker"]), 30, 0.1, "the held Python worker to exit")
