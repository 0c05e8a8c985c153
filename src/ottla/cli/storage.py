"""``ottla storage random-uuid | format``: prepare log directories, as kafka-storage.sh."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ottla.config import ConfigError
from ottla.storage.meta_properties import MetaPropertiesError, format_log_dirs, random_uuid


def add_parser(sub: Any) -> None:
    p = sub.add_parser("storage", help="format log directories",
                       description="Manage the storage of a node (kafka-storage.sh).")
    cmds = p.add_subparsers(dest="storage_command", metavar="COMMAND")
    cmds.required = True
    uuid_p = cmds.add_parser("random-uuid", help="print a new cluster id")
    uuid_p.set_defaults(run=lambda args: print(random_uuid()) or 0)
    fmt = cmds.add_parser("format", help="format the log directories of a node")
    fmt.add_argument("--cluster-id", "-t", required=True, help="the cluster id")
    fmt.add_argument("--config", "-c", required=True, help="the node's server.properties")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true",
                     help="skip directories that are already formatted")
    fmt.add_argument("--standalone", "-s", action="store_true",
                     help="this controller is the only initial voter")
    fmt.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    fmt.set_defaults(run=run_format)


def run_format(args: argparse.Namespace) -> int:
    from ottla.cli.server import load_config

    try:
        config = load_config(args.config, args.override)
    except ConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 1
    dirs = config.all_log_dirs
    try:
        formatted = format_log_dirs(dirs, args.cluster_id, config.node_id,
                                    ignore_formatted=args.ignore_formatted)
    except (MetaPropertiesError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for d in formatted:
        print(f"Formatting {d} with metadata.version 4.0-IV3.")
    if not formatted:
        print("All of the log directories are already formatted.")
    return 0
