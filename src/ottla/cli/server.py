"""``ottla server [server.properties] [--override key=value ...]``: run a node."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import signal
import sys
import time
from typing import Any

from ottla.common.config import ConfigError, load_properties
from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.common.uuids import random_uuid
from ottla.metadata.bootstrap import metadata_version, write_bootstrap
from ottla.server import stack_dump
from ottla.server.listener_security import check_security
from ottla.storage.meta_properties import MetaProperties, MetaPropertiesError, format_log_dirs

log = logging.getLogger("ottla")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("server", help="start a node (broker and/or controller)",
                       description="Start a node. With no config file: a combined broker and "
                                   "controller on 127.0.0.1:9092 with its data in "
                                   "./ottla-data, formatted on first start.")
    p.add_argument("config", nargs="?", help="a server.properties file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (repeatable)")
    p.set_defaults(run=run)


def parse_overrides(overrides: list[str]) -> dict[str, str]:
    props = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return props


def load_config(path: str | None, overrides: list[str]) -> KafkaConfig:
    props: dict[str, str] = dev_defaults() if path is None else {}
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                props.update(load_properties(f.read()))
        except OSError as e:
            raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    props.update(parse_overrides(overrides))
    return KafkaConfig(props)


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")


def run(args: argparse.Namespace) -> int:
    setup_logging()
    try:
        config = load_config(args.config, args.override)
        check_security(config)
    except ConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 1
    if args.config is None:
        dirs = config.all_log_dirs
        try:
            existing = [MetaProperties.read(d) for d in dirs]
            if not any(existing):
                cluster_id = random_uuid()
                format_log_dirs(dirs, cluster_id, config.node_id)
                _, level = metadata_version(None)
                write_bootstrap(config.metadata_log_dir, level, [], int(time.time() * 1000))
                log.info("Formatted %s with cluster id %s", ", ".join(dirs), cluster_id)
            elif not all(existing):
                known = next(m for m in existing if m is not None)
                format_log_dirs(dirs, known.cluster_id, config.node_id, ignore_formatted=True)
        except (MetaPropertiesError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    from ottla.server import allocator

    allocator.tune()
    try:
        import uvloop
        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        runner = asyncio.run
    return runner(serve(config))


async def serve(config: KafkaConfig) -> int:
    from ottla.server.node import Node

    try:
        node = Node(config)
    except ConfigError as e:  # a plugin it could not load (client.quota.callback.class)
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 1
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, node.request_stop)
    stack_dump.install(loop)
    try:
        await node.start()
    except MetaPropertiesError as e:
        print(f"error: {e}", file=sys.stderr)
        await node.stop()
        return 1
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            print(f"error: cannot listen: address already in use ({e})", file=sys.stderr)
        else:
            print(f"error: {e}", file=sys.stderr)
        await node.stop()
        return 1
    listeners = ", ".join(f"{name}://{port}" for name, port in node.bound_ports.items())
    log.info("Ottla node %d started (cluster id %s) on %s", config.node_id, node.cluster_id,
             listeners)
    await node.wait_stopped()
    log.info("Shutting down")
    await node.stop()
    return 2 if node.fault is not None else 0
