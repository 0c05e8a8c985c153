"""A SparkSession ready for ``format("ottla")``: locally, on a cluster, or over Spark
Connect.

Python workers must import ``ottla`` and ``confluent_kafka``: locally they run this very
interpreter (``PYSPARK_PYTHON`` defaults to it, not to whatever ``python3`` is first on
the PATH; see :func:`worker_python`); on a cluster the ``ottla`` package is shipped as a
zip (``addPyFile`` for the executors, the driver JVM's ``PYTHONPATH`` for the Python
workers that plan streaming reads on the driver) and the executors need
``confluent-kafka`` and ``pyarrow`` installed; over Spark Connect the server's Python
workers need ``ottla`` installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import tempfile
import zipfile
import zipimport
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import ottla

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def register(spark: SparkSession) -> None:
    """Make ``spark.read/readStream/write/writeStream.format("ottla")`` available, with
    the batch save modes of Spark's Kafka sink (the default ErrorIfExists writes; see
    :mod:`ottla.spark.save_mode`)."""
    from ottla.spark.save_mode import install
    from ottla.spark.source import OttlaDataSource

    spark.dataSource.register(OttlaDataSource)
    install(_writer_class(spark))


def _writer_class(spark: SparkSession) -> type:
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter

        return ConnectWriter
    from pyspark.sql.readwriter import DataFrameWriter

    return DataFrameWriter


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def create_session(app_name: str, master: str | None = None,
                   conf: Mapping[str, str] | None = None,
                   remote: str | None = None) -> SparkSession:
    """A session with ``ottla`` registered: a Spark Connect client of ``remote``
    (``sc://host:port``), or else a classic one on ``master`` (default ``local[*]``)."""
    if remote is not None:
        if master is not None:
            raise ValueError("give a Spark master or a Spark Connect remote, not both")
        return _connect(app_name, remote, conf or {})
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    shipped = None
    if is_local(master):
        os.environ.setdefault("PYSPARK_PYTHON", worker_python())
    else:
        shipped = package_zip()
        _driver_pythonpath(shipped)
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    if is_local(master):
        # Spark's 200 shuffle partitions cost a state store each in a stateful query;
        # on one machine a few per core is plenty (--conf overrides it).
        builder = (builder.config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("OTTLA_SPARK_LOG_LEVEL", "WARN"))
    if shipped is not None:
        spark.sparkContext.addPyFile(shipped)
    register(spark)
    return spark


def _connect(app_name: str, remote: str, conf: Mapping[str, str]) -> SparkSession:
    """A Spark Connect session. The server plans and runs everything, so its Python
    workers import ``ottla`` (the data source class is pickled by reference): install
    ``ottla[spark]`` in the server's ``PYSPARK_PYTHON``. Settings of ``conf`` that a
    session may not change (the server's own) are ignored, as PySpark ignores them."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.remote(remote).appName(app_name)
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


_WORKER_LAUNCHER = """\
import os
import sys

# PySpark's zip of sources, which Spark puts first on every Python worker's path.
bundled = {bundled!r}
path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in path if p and os.path.dirname(os.path.realpath(p)) != bundled)
os.execv({python!r}, [{python!r}, *sys.argv[1:]])
"""


def worker_python() -> str:
    """The local Python workers' interpreter: this one, started through a launcher that
    takes the PySpark install's ``python/lib`` zips off their ``PYTHONPATH``.

    Spark puts ``pyspark.zip`` (sources only) first on every Python worker's path, so each
    new worker compiles PySpark again: 0.7 s here, where importing the same PySpark
    installed beside this interpreter, compiled once, takes 0.3 s. Spark starts one such
    worker for every streaming query (the one that plans a Python source on the driver),
    so that is most of a query's start. The launcher only runs locally, where the zip
    and the installed package are the same PySpark; it ``exec``s this interpreter, so
    Spark's worker is that process. Written once per interpreter and PySpark."""
    import pyspark

    bundled = str(Path(pyspark.__file__).resolve().parent / "python" / "lib")
    if not Path(bundled, "pyspark.zip").exists() or any(c.isspace() for c in sys.executable):
        return sys.executable  # no zip to avoid, or a path a #! line cannot hold
    script = _WORKER_LAUNCHER.format(bundled=bundled, python=sys.executable)
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    for directory in _launcher_dirs():
        launcher = directory / f"python-worker-{digest}"
        try:
            if not launcher.exists():
                directory.mkdir(parents=True, exist_ok=True)
                partial = launcher.with_name(f"{launcher.name}.{os.getpid()}")
                partial.write_text(f"#!{sys.executable} -S\n{script}")
                partial.chmod(0o755)
                os.replace(partial, launcher)
        except OSError:
            continue  # not writable: the next place
        # A directory mounted noexec cannot run it (access() says so on Linux).
        if os.access(launcher, os.X_OK):
            return str(launcher)
    return sys.executable  # nowhere to run it from: workers compile the zip


def _launcher_dirs() -> list[Path]:
    """The user's cache (``$XDG_CACHE_HOME/ottla``, else ``~/.cache/ottla``), which no
    cleaner empties under a long-running job's feet as ``/tmp``'s may; then the temp
    directory."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return [Path(cache) / "ottla", Path(tempfile.gettempdir()) / "ottla"]


def _driver_pythonpath(path: str) -> None:
    """Put ``path`` on the ``PYTHONPATH`` that the driver JVM, about to be started from
    this process, passes to its Python workers. ``addPyFile`` reaches every Python worker
    but one: Spark 4.x starts the worker that plans a Python streaming source on the
    driver with its files in a ``streaming_job`` subdirectory, where the zip is not."""
    current = os.environ.get("PYTHONPATH")
    if path not in (current or "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (path, current) if p)


def package_zip(directory: str | None = None) -> str:
    """The ``ottla`` package as a zip for ``--py-files`` / ``addPyFile``: its ``.py``
    files (compiled modules cannot be imported from a zip; the connector runs without
    them), each beside its bytecode for this interpreter, which ``zipimport`` would
    otherwise compile from source in every Python worker Spark starts (half a second of
    each). A worker on another Python version finds the bytecode's magic number wrong and
    compiles the source. Made from the imported package, even one imported from a zip."""
    target = Path(directory or tempfile.mkdtemp(prefix="ottla-pyfiles-")) / "ottla.zip"
    root = Path(ottla.__file__).parent
    loader = ottla.__spec__.loader if ottla.__spec__ else None
    sources: dict[str, bytes] = {}
    if isinstance(loader, zipimport.zipimporter):
        inner = root.relative_to(loader.archive).as_posix() + "/"
        with zipfile.ZipFile(loader.archive) as source:
            for name in source.namelist():
                if name.startswith(inner) and name.endswith(".py"):
                    sources["ottla/" + name[len(inner):]] = source.read(name)
    else:
        for path in root.rglob("*.py"):
            sources[(Path("ottla") / path.relative_to(root)).as_posix()] = path.read_bytes()
    if "ottla/__init__.py" not in sources:
        raise RuntimeError(f"no ottla package found at {root} to zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, source in sorted(sources.items()):
            zf.writestr(name, source)
            zf.writestr(name + "c", _unchecked_pyc(source, name))
    return str(target)


def _unchecked_pyc(source: bytes, name: str) -> bytes:
    """Bytecode as a hash-based, unchecked ``.pyc`` (PEP 552): zipimport takes it as it
    is, with no timestamp to compare against the zip entry's two-second DOS time."""
    code = compile(source, name, "exec", dont_inherit=True)
    flags = 0b01  # hash-based, not checked against the source
    return (importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))
