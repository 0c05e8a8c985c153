"""The share-group tools' own logic: kafka-share-groups.sh's argument checks, its columns
and assignment strings, and the console share consumer's config and record format."""

from __future__ import annotations

import argparse
from typing import Any

from ottla.cli.console import format_record, share_consumer_config
from ottla.cli.main import build_parser
from ottla.cli.share_groups import _row, assignment_text, check_args


def parsed(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["share-groups", "--bootstrap-server", "b:9092", *args])


def test_misuses_get_kafkas_messages() -> None:
    assert check_args(parsed("--list")) is None
    assert check_args(parsed("--describe")) == \
        "Option [describe] takes one of these options: [all-groups], [group]"
    assert check_args(parsed("--describe", "--group", "g", "--members", "--state")) == \
        "Option [describe] takes at most one of these options: [members], [offsets], [state]"
    assert check_args(parsed("--describe", "--group", "g", "--state", "Empty")) == \
        "Option [describe] does not take a value for [state]"
    assert check_args(parsed("--delete", "--group", "g", "--topic", "t")) == \
        "Option [delete] does not take the option: [topic]"
    assert check_args(parsed("--delete-offsets", "--group", "g")) == \
        "Option [delete-offsets] takes the following options: [group], [topic]"
    reset = ("--reset-offsets", "--group", "g", "--topic", "t")
    assert check_args(parsed(*reset, "--to-earliest")) == \
        "Option [reset-offsets] takes the option: [execute] or [dry-run]"
    assert check_args(parsed(*reset, "--to-earliest", "--execute", "--dry-run")) == \
        "Option [reset-offsets] only accepts one of [execute] and [dry-run]"
    assert check_args(parsed(*reset, "--execute")) == ("Option [reset-offsets] takes one of "
                                                       "these options: [to-datetime], "
                                                       "[to-earliest], [to-latest]")
    assert check_args(parsed("--reset-offsets", "--group", "g", "--to-latest",
                             "--dry-run")) == \
        "Option [reset-offsets] takes one of these options: [all-topics], [topic]"
    assert check_args(parsed(*reset, "--to-latest", "--dry-run")) is None


def test_columns_and_assignments_as_kafka_prints_them() -> None:
    assert _row(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], [15, 15, 10, 13]) == \
        "GROUP           TOPIC           PARTITION  START-OFFSET  LAG"
    assert assignment_text({"b": [2, 0], "a": [1], "c": []}) == "a:1;b:0,2"


class Record:
    def __init__(self, delivery: int | None) -> None:
        self._delivery = delivery

    def timestamp(self) -> tuple[int, int]:
        return 1, 1000

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 7

    def delivery_count(self) -> int | None:
        return self._delivery

    def leader_epoch(self) -> int | None:
        return None

    def headers(self) -> list[Any]:
        return []

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v"


def test_the_delivery_count_and_epoch_as_the_default_formatter_prints_them() -> None:
    props = {"print.offset": "true", "print.delivery": "true", "print.epoch": "true",
             "print.key": "true"}
    assert format_record(Record(2), props) == "Offset:7\tDelivery:2\tEpoch:NOT_PRESENT\tk\tv"
    assert format_record(Record(None), {"print.delivery": "true"}) == "Delivery:NOT_PRESENT\tv"


def test_the_share_consumer_is_explicit_and_its_group_named_once() -> None:
    def config(*args: str) -> Any:
        return share_consumer_config(build_parser().parse_args(
            ["console-share-consumer", "--bootstrap-server", "b:9092", "--topic", "t",
             *args]))
    conf = config()
    assert (conf["group.id"], conf["client.id"], conf["share.acknowledgement.mode"]) == \
        ("console-share-consumer", "console-share-consumer", "explicit")
    assert config("--group", "g", "--command-property", "group.id=g")["group.id"] == "g"
    assert "do not match. Detected group ids: 'g', 'h'" in config(
        "--group", "g", "--consumer-property", "group.id=h")
