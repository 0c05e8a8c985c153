"""``ottla pipeline``: run the Spark pipelines of ``ottla.spark.pipelines``.

``ottla pipeline run NAME [--master URL | --remote sc://HOST:PORT] [--conf k=v]
[pipeline options]`` starts a SparkSession (``local[*]`` unless ``--master`` says
otherwise; on a cluster the ottla package is shipped to the executors), or a Spark
Connect session of ``--remote`` (or ``$SPARK_REMOTE``), and runs the named pipeline.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ottla.cli.common import parse_properties


def add_parser(sub: Any) -> None:
    from ottla.spark.pipelines import PIPELINES, load

    p = sub.add_parser("pipeline", help="run the Spark pipelines (needs ottla[spark])")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    listing = actions.add_parser("list", help="list the pipelines")
    listing.set_defaults(run=run_list)
    run_p = actions.add_parser("run", help="run a pipeline")
    names = run_p.add_subparsers(dest="pipeline", metavar="NAME")
    names.required = True
    for name in PIPELINES:
        module = load(name)
        q = names.add_parser(name, help=module.HELP, description=module.__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        where = q.add_mutually_exclusive_group()
        where.add_argument("--master", help="Spark master URL (default local[*])")
        where.add_argument("--remote", metavar="sc://HOST:PORT",
                           help="run through a Spark Connect server (default $SPARK_REMOTE "
                                "when --master is not given); its Python must have ottla")
        q.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark configuration property (repeatable)")
        module.add_arguments(q)
        q.set_defaults(run=run_pipeline)


def run_list(args: argparse.Namespace) -> int:
    from ottla.spark.pipelines import PIPELINES, load

    for name in PIPELINES:
        print(f"{name:16} {load(name).HELP}")
    return 0


def run_pipeline(args: argparse.Namespace) -> int:
    try:
        from ottla.spark.session import create_session
    except ImportError as e:
        print(f"Error: the Spark pipelines need PySpark: pip install 'ottla[spark]' ({e})")
        return 1
    from ottla.spark.pipelines import load

    remote = args.remote or (None if args.master else os.environ.get("SPARK_REMOTE"))
    spark = create_session(f"ottla-{args.pipeline}", args.master,
                           parse_properties(args.conf, "--conf"), remote=remote)
    try:
        return int(load(args.pipeline).run(spark, args) or 0)
    finally:
        spark.stop()
