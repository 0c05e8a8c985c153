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

