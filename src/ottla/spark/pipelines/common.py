"""Arguments and stream plumbing the pipelines share."""

from __future__ import annotations

import argparse
import re
from typing import Any

_INTERVAL = re.compile(r"^\d+(\.\d+)?\s*(ms|milliseconds?|s|seconds?|minutes?|hours?)$")


def add_source_arguments(parser: argparse.ArgumentParser, topic_help: str) -> None:
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--topic", action="append", default=[], help=topic_help)
    parser.add_argument("--topic-pattern", help="a regex of topics to read instead")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="more source options, e.g. kafka.security.protocol=SSL")


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", help="the query's checkpoint directory")
    parser.add_argument("--trigger", default="availableNow",
                        help="availableNow (read what is there, then stop; the default) or "
                             "a processing-time interval such as '10 seconds'")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--timeout", type=float,
                        help="stop a continuously triggered query after this many seconds")


def source_options(args: argparse.Namespace) -> dict[str, str]:
    if bool(args.topic) == bool(args.topic_pattern):
        raise SystemExit("error: give --topic (repeatable) or --topic-pattern")
    options = {"kafka.bootstrap.servers": args.bootstrap_server}
    if args.topic:
        options["subscribe"] = ",".join(args.topic)
    else:
        options["subscribePattern"] = args.topic_pattern
    if getattr(args, "starting_offsets", None):
        options["startingOffsets"] = args.starting_offsets
    if getattr(args, "max_offsets_per_trigger", None):
        options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"error: --option expects KEY=VALUE, got {item!r}")
        options[key] = value
    return options


def start(writer: Any, args: argparse.Namespace) -> int:
    """Apply ``--trigger``, start the query and wait for it as ``--timeout`` says."""
    if args.trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    elif _INTERVAL.match(args.trigger.strip()):
        writer = writer.trigger(processingTime=args.trigger)
    else:
        raise SystemExit(f"error: --trigger must be availableNow or an interval, "
                         f"got {args.trigger!r}")
    query = writer.start()
    try:
        if args.trigger == "availableNow" or args.timeout is None:
            query.awaitTermination()
        elif not query.awaitTermination(args.timeout):
            query.stop()
    except KeyboardInterrupt:
        query.stop()
    progress = query.recentProgress
    # The property, not p["numInputRows"]: over Spark Connect the key is missing and the
    # property sums the sources.
    rows = sum(p.numInputRows for p in progress)
    print(f"{args.pipeline}: {len(progress)} micro-batches, {rows} input records")
    return 0
