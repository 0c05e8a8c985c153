"""``ottla console``: a web console of any Kafka-compatible cluster (issue 32).

Its own process that reaches the cluster only through Kafka clients (confluent-kafka and
Ottla's wire client), so it works against Apache Kafka as well as Ottla: the cluster and
its KRaft quorum, topics and their configs, a message browser and producer, consumer
groups with their lag and offset resets. It binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import argparse
from typing import Any

from ottla.cli.common import read_command_config


def add_parser(sub: Any) -> None:
    p = sub.add_parser("console", help="a web console of a Kafka-compatible cluster",
                       description="Serve a web console of the cluster at "
                       "--bootstrap-server on http://HOST:PORT/.")
    p.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    p.add_argument("--command-config",
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to serve on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="the port to serve on")
    p.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                   help="a node's Prometheus endpoint (its prometheus.listener, "
                   "http://HOST:PORT/metrics), charted live; once per node")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import signal

    import uvicorn

    from ottla.cli.web_console.app import build_app
    from ottla.cli.web_console.charts import Sampler
    from ottla.cli.web_console.connection import Connection

    connection = Connection(args.bootstrap_server, read_command_config(args.command_config))
    print(f"Ottla console of {args.bootstrap_server} on http://{args.host}:{args.port}/",
          flush=True)
    # uvicorn stops gracefully on SIGTERM, then raises it again for the handler it found:
    # SIGTERM is how the console is stopped, so that one ends it with status 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    app = build_app(connection, Sampler(list(args.metrics_url)))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
