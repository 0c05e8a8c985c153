"""How the console's message browser shows a record's bytes: UTF-8 text as it is, JSON
pretty-printed, anything else (binary, control characters) in hex; and the JSON lines
it downloads (headers as [name, value] pairs: Kafka allows a name twice)."""

from __future__ import annotations

import json

from ottla.cli.web_console.messages import Record, Shown, show


def test_text_json_and_binary_are_told_apart() -> None:
    assert show(None) is None
    assert show(b"") == Shown("text", "")
    assert show("grüße, world".encode()) == Shown("text", "grüße, world")
    assert show(b'{"b": [1, 2], "a": {"x": null}}') == Shown(
        "json", '{\n  "b": [\n    1,\n    2\n  ],\n  "a": {\n    "x": null\n  }\n}')
    assert show(b"[1,2]") == Shown("json", "[\n  1,\n  2\n]")
    assert show(b"{not json") == Shown("text", "{not json")
    assert show(b"\x00\x01\xfe\xff") == Shown("hex", "00 01 fe ff")
    assert show(b"\xc3\x28") == Shown("hex", "c3 28")  # invalid UTF-8
    assert show(b"a\x07b") == Shown("hex", "61 07 62")  # a control character
    assert show(b"line one\nline two\t.") == Shown("text", "line one\nline two\t.")


def test_a_json_line_keeps_each_field_as_the_record_had_it() -> None:
    record = Record(2, 41, 1700000000000, show(b"k"), show(b'{"a": [1, 2]}'),
                    [("trace", show(b"abc")), ("bin", show(b"\x00"))])
    assert json.loads(record.json_line("orders")) == {
        "topic": "orders", "partition": 2, "offset": 41, "timestamp": 1700000000000,
        "key": "k", "value": '{"a":[1,2]}', "headers": [["trace", "abc"], ["bin", "00"]]}
    assert record.matches("abc") and record.matches('"a"') and not record.matches("zzz")


def test_a_timeout_is_a_503_whichever_client_bound_ends_first() -> None:
    """A page waits on the future and librdkafka on its request timeout, both 5 s: either
    ending is the cluster not answering (503, so the page adds the client's last error,
    such as a failed authentication), while an error the broker sent is the request's
    (400)."""
    import pytest
    from confluent_kafka import KafkaError, KafkaException

    from ottla.cli.web_console.connection import ConsoleError, failing

    for raised, status, text in (
            (KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                       "Failed while waiting for controller")), 503,
             "Failed while waiting for controller"),
            (TimeoutError(), 503, "did not answer within 5 s"),
            (KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS,
                                       "Topic 'a' already exists.")), 400,
             "Topic 'a' already exists.")):
        with pytest.raises(ConsoleError) as caught, failing("The page"):
            raise raised
        assert caught.value.status == status and text in str(caught.value), caught.value
