"""``ottla console-producer``, ``ottla console-consumer`` and ``ottla
console-share-consumer``, with Kafka's flags."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any

from ottla.cli.common import client_config, fail, parse_properties


def add_producer_parser(sub: Any) -> None:
    p = sub.add_parser("console-producer", help="produce lines of stdin to a topic",
                       description="Read lines from standard input and produce each as a record.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker")
    p.add_argument("--reader-property", action="append", default=[], metavar="KEY=VALUE",
                   help="synonym of --property")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--producer.config", dest="producer_config")
    p.add_argument("--compression-codec", nargs="?", const="gzip",
                   choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--request-required-acks", default="-1")
    p.add_argument("--sync", action="store_true", help="send each record synchronously")
    p.set_defaults(run=run_producer)


def _split_headers(text: str, props: dict[str, str]) -> list[tuple[str, bytes | None]]:
    headers = []
    for item in text.split(props.get("headers.separator", ",")):
        if not item:
            continue
        key, sep, value = item.partition(props.get("headers.key.separator", ":"))
        null = props.get("null.marker")
        headers.append((key, None if sep == "" or value == null else value.encode()))
    return headers


def run_producer(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    props = {**parse_properties(args.property, "--property"),
             **parse_properties(args.reader_property, "--reader-property")}
    conf: dict[str, Any] = {"acks": args.request_required_acks, "linger.ms": 1000 if not
                            args.sync else 0}
    if args.producer_config:
        from ottla.common.config import load_properties

        with open(args.producer_config, encoding="utf-8") as f:
            conf.update(load_properties(f.read()))
    if args.compression_codec:
        conf["compression.type"] = args.compression_codec
    conf.update(parse_properties(args.producer_property, "--producer-property"))
    producer = Producer(client_config(args.bootstrap_server, conf))
    errors: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    parse_key = props.get("parse.key", "false").lower() == "true"
    parse_headers = props.get("parse.headers", "false").lower() == "true"
    key_sep = props.get("key.separator", "\t")
    header_delim = props.get("headers.delimiter", "\t")
    null_marker = props.get("null.marker")
    try:
        for line in sys.stdin:
            line = line.rstrip("\n")
            headers: list[tuple[str, bytes | None]] = []
            if parse_headers:
                head, sep, line = line.partition(header_delim)
                if not sep:
                    return fail(f"No headers delimiter found on line: {head}")
                headers = _split_headers(head, props)
            key: bytes | None = None
            if parse_key:
                key_text, sep, line = line.partition(key_sep)
                if not sep:
                    return fail(f"No key separator found on line: {key_text}")
                key = None if key_text == null_marker else key_text.encode()
            value = None if line == null_marker else line.encode()
            while True:
                try:
                    producer.produce(args.topic, value=value, key=key, headers=headers or None,
                                     on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
            if args.sync:
                producer.flush()
            producer.poll(0)
    except KafkaException as e:
        return fail(str(e))
    finally:
        remaining = producer.flush(30)
    if remaining:
        errors.append(f"{remaining} records were not delivered")
    if errors:
        return fail("; ".join(sorted(set(errors))))
    return 0


def add_consumer_parser(sub: Any) -> None:
    p = sub.add_parser("console-consumer", help="print the records of a topic",
                       description="Read records from a topic and print them.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", default="latest",
                   help="earliest, latest or a number (with --partition)")
    p.add_argument("--timeout-ms", type=int, help="exit after this long without a record")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="print.key, print.timestamp, print.partition, print.offset, "
                        "print.headers, print.value, key.separator, line.separator, "
                        "headers.separator, null.literal")
    p.add_argument("--formatter-property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--isolation-level", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed"])
    p.set_defaults(run=run_consumer)


def _text(data: bytes | None, null: str) -> str:
    return null if data is None else data.decode("utf-8", "replace")


def format_record(msg: Any, props: dict[str, str]) -> str:
    """One record as Kafka's DefaultMessageFormatter prints it."""
    enabled = {k: props.get(k, "false").lower() == "true" for k in
               ("print.timestamp", "print.partition", "print.offset", "print.delivery",
                "print.epoch", "print.headers", "print.key")}
    sep = props.get("key.separator", "\t")
    null = props.get("null.literal", "null")
    parts = []
    if enabled["print.timestamp"]:
        kind, ts = msg.timestamp()
        label = {1: "CreateTime", 2: "LogAppendTime"}.get(kind, "NO_TIMESTAMP")
        parts.append(f"{label}:{ts}" if kind in (1, 2) else label)
    if enabled["print.partition"]:
        parts.append(f"Partition:{msg.partition()}")
    if enabled["print.offset"]:
        parts.append(f"Offset:{msg.offset()}")
    if enabled["print.delivery"]:  # a share consumer's delivery count
        delivery = getattr(msg, "delivery_count", lambda: None)()
        parts.append(f"Delivery:{'NOT_PRESENT' if delivery is None else delivery}")
    if enabled["print.epoch"]:
        epoch = msg.leader_epoch()
        parts.append(f"Epoch:{'NOT_PRESENT' if epoch is None or epoch < 0 else epoch}")
    if enabled["print.headers"]:
        headers = msg.headers() or []
        parts.append(props.get("headers.separator", ",").join(
            f"{k}:{_text(v, null)}" for k, v in headers) or "NO_HEADERS")
    if enabled["print.key"]:
        parts.append(_text(msg.key(), null))
    if props.get("print.value", "true").lower() == "true":
        parts.append(_text(msg.value(), null))
    return sep.join(parts)


def run_consumer(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

    props = {**parse_properties(args.property, "--property"),
             **parse_properties(args.formatter_property, "--formatter-property")}
    conf: dict[str, Any] = {
        "group.id": f"console-consumer-{uuid.uuid4().int % 100000}",
        "enable.auto.commit": False, "isolation.level": args.isolation_level,
        "enable.partition.eof": False,
    }
    conf.update(parse_properties(args.consumer_property, "--consumer-property"))
    consumer = Consumer(client_config(args.bootstrap_server, conf))
    if args.offset not in ("earliest", "latest") and args.partition is None:
        return fail("The partition is required when offset is specified.")
    start = OFFSET_BEGINNING if args.from_beginning or args.offset == "earliest" else OFFSET_END
    if args.offset not in ("earliest", "latest"):
        try:
            start = int(args.offset)
        except ValueError:
            return fail(f"Invalid offset {args.offset}")
    metadata = consumer.list_topics(args.topic, timeout=30)
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None:
        return fail(f"Unknown topic {args.topic}")
    partitions = [args.partition] if args.partition is not None else sorted(topic.partitions)
    consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
    line_sep = props.get("line.separator", "\n")
    count = 0
    last = time.monotonic()
    try:
        while args.max_messages is None or count < args.max_messages:
            msg = consumer.poll(0.2)
            if msg is None:
                if args.timeout_ms is not None and \
                        (time.monotonic() - last) * 1000 >= args.timeout_ms:
                    break
                continue
            if msg.error():
                print(f"Error: {msg.error()}", file=sys.stderr)
                continue
            last = time.monotonic()
            sys.stdout.write(format_record(msg, props) + line_sep)
            sys.stdout.flush()
            count += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def add_share_consumer_parser(sub: Any) -> None:
    p = sub.add_parser("console-share-consumer",
                       help="print the records of a topic as a share group's member",
                       description="This tool helps to read data from Kafka topics using "
                                   "share groups and outputs it to standard output.")
    p.add_argument("--bootstrap-server", required=True,
                   help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--topic", required=True, help="The topic to consume from.")
    p.add_argument("--group", help="The share group id of the consumer "
                                   "(default: console-share-consumer).")
    p.add_argument("--max-messages", type=int,
                   help="The maximum number of messages to consume before exiting.")
    p.add_argument("--timeout-ms", type=int,
                   help="Exit if no message is available for consumption for this long.")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--reject", action="store_true",
                      help="Messages are rejected as they are consumed.")
    kind.add_argument("--release", action="store_true",
                      help="Messages are released as they are consumed.")
    p.add_argument("--reject-message-on-error", action="store_true",
                   help="Reject a message that cannot be processed instead of halting.")
    p.add_argument("--formatter-property", action="append", default=[], metavar="KEY=VALUE",
                   help="print.timestamp, print.key, print.offset, print.delivery, "
                        "print.epoch, print.partition, print.headers, print.value, "
                        "key.separator, line.separator, headers.separator, null.literal")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="(deprecated) synonym of --formatter-property")
    p.add_argument("--command-property", action="append", default=[], metavar="KEY=VALUE",
                   help="share consumer config properties")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="(deprecated) synonym of --command-property")
    p.add_argument("--command-config", help="a file of share consumer config properties")
    p.add_argument("--consumer-config", help="(deprecated) synonym of --command-config")
    p.set_defaults(run=run_share_consumer)


def share_consumer_config(args: argparse.Namespace) -> dict[str, Any] | str:
    """Kafka's ConsoleShareConsumerOptions: the consumer's config, or the misuse. The group
    may be named by --group and in the properties, but only once; by default it is
    ``console-share-consumer``, as is the client id."""
    from ottla.common.config import load_properties

    conf: dict[str, Any] = {}
    config_file = args.command_config or args.consumer_config
    if config_file:
        with open(config_file, encoding="utf-8") as f:
            conf.update(load_properties(f.read()))
    conf.update(parse_properties(args.consumer_property + args.command_property,
                                 "--command-property"))
    groups = {g for g in (args.group, conf.get("group.id")) if g is not None}
    if len(groups) > 1:
        return ("The group ids provided in different places (directly using '--group', via "
                "'--consumer-property', or via '--consumer-config') do not match. Detected "
                f"group ids: {', '.join(repr(g) for g in sorted(groups))}")
    conf["group.id"] = groups.pop() if groups else "console-share-consumer"
    conf.setdefault("client.id", "console-share-consumer")
    conf["share.acknowledgement.mode"] = "explicit"
    return client_config(args.bootstrap_server, conf)


def run_share_consumer(args: argparse.Namespace) -> int:
    """Kafka's ConsoleShareConsumer: each record printed, then acknowledged (ACCEPT, or
    RELEASE/REJECT with --release/--reject) in explicit mode; records polled beyond
    --max-messages are left unacknowledged and go back when the consumer leaves."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    conf = share_consumer_config(args)
    if isinstance(conf, str):
        return fail(conf)
    props = {**parse_properties(args.property, "--property"),
             **parse_properties(args.formatter_property, "--formatter-property")}
    kind = AcknowledgeType.REJECT if args.reject else \
        AcknowledgeType.RELEASE if args.release else AcknowledgeType.ACCEPT
    line_sep = props.get("line.separator", "\n")
    consumer = ShareConsumer(conf)
    consumer.subscribe([args.topic])
    count = 0
    last = time.monotonic()
    try:
        while args.max_messages is None or count < args.max_messages:
            messages = consumer.poll(0.2) or []
            if not messages:
                if args.timeout_ms is not None and \
                        (time.monotonic() - last) * 1000 >= args.timeout_ms:
                    break
                continue
            last = time.monotonic()
            for msg in messages:
                if msg.error():
                    print(f"Error: {msg.error()}", file=sys.stderr)
                    continue
                if args.max_messages is not None and count >= args.max_messages:
                    break
                count += 1
                try:
                    sys.stdout.write(format_record(msg, props) + line_sep)
                    sys.stdout.flush()
                except (UnicodeError, ValueError) as e:
                    if not args.reject_message_on_error:
                        raise
                    print(f"Error processing message, rejecting this message: {e}",
                          file=sys.stderr)
                    consumer.acknowledge(msg, AcknowledgeType.REJECT)
                    continue
                consumer.acknowledge(msg, kind)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()  # commits the acknowledgements and leaves the group
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
