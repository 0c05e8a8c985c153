"""``subscribePattern`` read as Java's ``Pattern`` and applied as Spark's Kafka source
applies it (found in the name, internal topics left out). tests/spark/test_subscribe_pattern.py
checks the same translation against the JVM's own ``Pattern``."""

from __future__ import annotations

import pytest

from ottla.spark.java_regex import JavaRegexError, compile_java_regex, finds, translate
from ottla.spark.options import OptionError, parse_source

TOPICS = ["orders", "orders-eu", "old-orders", "ORDERS", "orders.v2", "x-1"]


def selected(pattern: str) -> list[str]:
    return [t for t in TOPICS if finds(pattern, t)]


@pytest.mark.parametrize(("pattern", "topics"), [
    ("orders", ["orders", "orders-eu", "old-orders", "orders.v2"]),  # found, not whole
    ("^orders$", ["orders"]),
    (r"(?<name>ord)ers-\k<name>", []),  # Java's named groups
    (r"^(?<o>o)rders$", ["orders"]),
    (r"\Qorders.v2\E", ["orders.v2"]),  # quoting
    (r"^\p{Lower}+$", ["orders"]),  # POSIX classes
    (r"^\p{Lu}+$", ["ORDERS"]),  # Unicode categories
    (r"^[\p{Alpha}-]+$", ["orders", "orders-eu", "old-orders", "ORDERS"]),
    (r"^\P{Lower}+$", ["ORDERS"]),
    (r"^orders\z", ["orders"]),
    (r"^\0157rders$", ["orders"]),  # Java's octal: \0 and up to three digits
    (r"^\x{6f}rders$", ["orders"]),
    (r"^(?i)orders$", ["orders", "ORDERS"]),  # flags after ^, as Java allows
    (r"^old-(?i)ORDERS|^ORDERS$", ["orders", "old-orders", "ORDERS"]),  # (?i) holds on
    (r"^o.++s$", []),  # possessive: the same in Python 3.11+
])
def test_java_syntax_selects_what_spark_selects(pattern: str, topics: list[str]) -> None:
    assert selected(pattern) == topics


@pytest.mark.parametrize(("pattern", "reason"), [
    ("[a-z&&[^o]]+", "intersection"),  # Python would read '&', '[', '^' as characters
    ("[[a-z]]", "nested character class"),
    (r"[\P{Lower}]", "inside a character class"),
    (r"\p{InGreek}", "no exact equivalent"),
    ("(?x) orders", "COMMENTS"),  # Java ignores white space in classes, Python does not
    ("o{,2}", "repetition"),  # an error in Java, {0,2} in Python
    (r"\h", "bad escape"),  # Java-only classes Python lacks
])
def test_what_python_would_read_differently_is_refused(pattern: str, reason: str) -> None:
    with pytest.raises(JavaRegexError, match=reason):
        compile_java_regex(pattern)
    with pytest.raises(OptionError, match="cannot be matched as Java's Pattern"):
        parse_source({"kafka.bootstrap.servers": "x", "subscribePattern": pattern},
                     streaming=False)


def test_translation_is_plain_python() -> None:
    assert translate(r"(?<n>a)\k<n>") == "(?P<n>a)(?P=n)"
    assert translate(r"a(?i)b|c") == "a(?i:b)|(?i:c)"
    assert translate(r"\Q.*\E") == r"\.\*"


def test_internal_topics_are_left_out_as_spark_leaves_them_out() -> None:
    options = parse_source({"kafka.bootstrap.servers": "x", "subscribePattern": "offsets"},
                           streaming=False)
    assert options.matches("offsets-eu")
    assert not options.matches("__consumer_offsets")
