"""``ottla storage random-uuid | format``: prepare log directories, as kafka-storage.sh."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import Any

from ottla.common.config import ConfigError
from ottla.common.features import METADATA_VERSION, SUPPORTED_FEATURES, default_feature_levels
from ottla.common.uuids import random_uuid
from ottla.metadata.bootstrap import InitialVoter, metadata_version, write_bootstrap
from ottla.storage.meta_properties import MetaProperties, MetaPropertiesError, format_log_dirs


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
    voters = fmt.add_mutually_exclusive_group()
    voters.add_argument("--standalone", "-s", action="store_true",
                        help="this controller is the only initial voter (dynamic quorum)")
    voters.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIRID,...",
                        help="the initial voters of a dynamic quorum")
    voters.add_argument("--no-initial-controllers", "-N", action="store_true",
                        help="this controller joins an existing dynamic quorum")
    fmt.add_argument("--release-version", "-r", metavar="VERSION",
                     help="the metadata.version to start with: a release such as 3.9 "
                          "or a version such as 3.7-IV4 (default: the latest)")
    fmt.add_argument("--feature", "-f", action="append", default=[], metavar="NAME=LEVEL",
                     help="start a feature at this level instead of the release's "
                          "default, e.g. transaction.version=1")
    fmt.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    fmt.set_defaults(run=run_format)


def run_format(args: argparse.Namespace) -> int:
    from ottla.cli.server import load_config

    try:
        config = load_config(args.config, args.override)
    except ConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 1
    try:
        version, level = metadata_version(args.release_version)
        features = feature_levels(args.feature, level)
        initial = initial_voters(args, config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    dirs = config.all_log_dirs
    try:
        formatted = format_log_dirs(dirs, args.cluster_id, config.node_id,
                                    ignore_formatted=args.ignore_formatted)
        if config.metadata_log_dir in formatted:
            if initial and initial[0].directory_id == "":
                initial = [replace(initial[0], directory_id=directory_id(
                    config.metadata_log_dir))]
            write_bootstrap(config.metadata_log_dir, level, initial,
                            int(time.time() * 1000), features)
    except (MetaPropertiesError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for d in formatted:
        kind = "metadata directory" if d == config.metadata_log_dir else "data directory"
        print(f"Formatting {kind} {d} with metadata.version {version}.")
    if not formatted:
        print("All of the log directories are already formatted.")
    return 0


def feature_levels(given: list[str], metadata_level: int) -> dict[str, int]:
    """The release's default feature levels with ``--feature NAME=LEVEL`` applied, each
    checked against what this software supports (as kafka-storage.sh refuses)."""
    levels = default_feature_levels(metadata_level)
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not value.strip().isdigit():
            raise ValueError(f"--feature {text!r}: expected NAME=LEVEL")
        if name == METADATA_VERSION:
            raise ValueError("set metadata.version with --release-version")
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None:
            raise ValueError(f"unknown feature {name!r}; known: "
                             f"{', '.join(sorted(set(SUPPORTED_FEATURES) - {METADATA_VERSION}))}")
        level = int(value)
        if level != 0 and not supported[0] <= level <= supported[1]:
            raise ValueError(f"{name} level {level} is outside the supported range "
                             f"{supported[0]}-{supported[1]}")
        levels[name] = level
    return levels


def initial_voters(args: argparse.Namespace, config: Any) -> list[InitialVoter]:
    """The voters the bootstrap snapshot names, validated as kafka-storage.sh does."""
    dynamic_flag = args.standalone or args.initial_controllers or args.no_initial_controllers
    is_controller = "controller" in config.roles
    if config["controller.quorum.voters"]:
        if dynamic_flag:
            raise ValueError("--standalone, --initial-controllers and --no-initial-controllers "
                             "are for a dynamic quorum; this node sets controller.quorum.voters")
        return []
    if is_controller and not dynamic_flag:
        raise ValueError("because controller.quorum.voters is not set on this controller, "
                         "give one of --standalone, --initial-controllers or "
                         "--no-initial-controllers")
    if dynamic_flag and not is_controller:
        raise ValueError("--standalone, --initial-controllers and --no-initial-controllers "
                         "apply to controllers only")
    if args.initial_controllers:
        voters = [InitialVoter.parse(v) for v in args.initial_controllers.split(",") if v]
        if config.node_id not in {v.node_id for v in voters}:
            raise ValueError(f"--initial-controllers does not name this node "
                             f"({config.node_id})")
        return voters
    if args.standalone:
        names = set(config.controller_listener_names)
        listeners = [ln for ln in config.listeners if ln.name in names]
        if not listeners:
            raise ValueError("--standalone needs a controller listener in listeners")
        host = listeners[0].host or "localhost"
        return [InitialVoter(config.node_id, host, listeners[0].port, "")]
    return []


def directory_id(log_dir: str) -> str:
    meta = MetaProperties.read(log_dir)
    assert meta is not None
    return meta.directory_id
