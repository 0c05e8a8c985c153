"""Entry point of the ``ottla`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from ottla.cli import (
        acls,
        chaos,
        client_metrics,
        configs,
        console,
        consumer_groups,
        delegation_tokens,
        dev_cluster,
        dump_log,
        features,
        leader_election,
        log_dirs,
        metadata_quorum,
        pipeline,
        reassign_partitions,
        server,
        share_groups,
        storage,
        topics,
        transactions,
        web_console,
    )

    parser = argparse.ArgumentParser(
        prog="ottla", description="Ottla: a Kafka-compatible event-streaming platform.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    server.add_parser(sub)
    storage.add_parser(sub)
    topics.add_parser(sub)
    configs.add_parser(sub)
    client_metrics.add_parser(sub)
    acls.add_parser(sub)
    delegation_tokens.add_parser(sub)
    console.add_producer_parser(sub)
    console.add_consumer_parser(sub)
    dump_log.add_parser(sub)
    consumer_groups.add_parser(sub)
    share_groups.add_parser(sub)
    console.add_share_consumer_parser(sub)
    log_dirs.add_parser(sub)
    features.add_parser(sub)
    leader_election.add_parser(sub)
    metadata_quorum.add_parser(sub)
    pipeline.add_parser(sub)
    dev_cluster.add_parser(sub)
    reassign_partitions.add_parser(sub)
    transactions.add_parser(sub)
    web_console.add_parser(sub)
    chaos.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
