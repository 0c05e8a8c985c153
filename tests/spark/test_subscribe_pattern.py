"""``subscribePattern`` selects the topics Spark's Kafka source selects: the JVM's own
``java.util.regex.Pattern`` (through the session's py4j gateway) is the oracle for every
pattern the translation accepts, and a batch read shows the found-in-the-name rule."""

from __future__ import annotations

from ottla.spark.java_regex import JavaRegexError, compile_java_regex
from tests.spark.kafka import create_topics, produce

NAMES = ["orders", "Orders", "ORDERS", "orders-eu", "old-orders", "orders.v2", "orders_2024",
         "x-1", "ab", "aB", "c", "C", "abd", "cd", "xAy", "a", "B", "abc123", "x.y_z-w"]

PATTERNS = [
    "orders", "^orders$", "orders.*", ".*-eu", "(?i)orders-eu", r"orders\.v\d", r"^\w+$",
    "[a-z]+", "[]a]", "[^]a]", "[a-]", r"[\[]", "[a||z]", "x--y", r"[^\v]+", r"\b\w+\b",
    r"\Bd\B", r"\S+", r"^\p{Lower}+$", r"^\p{Alpha}+$", r"^\P{Lower}+$", r"^[\p{Lower}\d]+$",
    r"^[^\p{Lower}]+$", r"\pL", r"^\p{L}+$", r"^\p{Lu}+$", r"^\p{IsAlphabetic}+$",
    r"^\p{Punct}", r"[\p{Punct}]", r"^\p{javaLowerCase}+$", r"\p{IsLatin}+-\p{IsLatin}+",
    r"\p{Alnum}{6}", r"(?<name>orders)-\k<name>", "(?<n>o)rders", r"\Qorders.v2\E",
    r"\Qorders.v", r"[\Q.-\E]+", r"^[\Qa-z\E]+$", r"^orders\z", r"^orders\Z", "orders++",
    "^o.++s$", "(?>orders)", r"(o)\1", "(?=orders)old", "old-(?=orders)", "(?<=old-)orders",
    "(?<!old-)orders", "(?i)ORDERS", "^(?i:orders)$", "^(?i)[a-z]+$", r"^(?i)\p{Lu}+$",
    r"^(?i)\P{Lower}+$", "(?-i)orders", "(?d)orders", r"(?U)\w", "(?iu)ORDERS", "(?s).",
    "(?m)^orders$", "^a(?i)b|c$", "^(a(?i)b|c)d", "(?i)a|b", "^x(?i:A)y", "^((?i)o)rders$",
    "^(?i)o(?-i)rders$", "^(?:a|(?i)b)$", r"\x6frders", r"\x{6f}rders", r"\u006frders",
    r"\0157rders", r"\0400", r"\N{LATIN SMALL LETTER O}rders", "a{1,2}+", "[{]", r"\{",
    # Refused here (Python would read them otherwise, or lacks them):
    "[[a-z]]", "[a-z&&[^o]]+", r"^[\P{Lower}]+$", r"\p{InGreek}", "(?x) orders", r"\h",
    r"\G", "x{1}{2}",
    # Invalid in Java:
    "o{,2}", "o{2", "[a--z]", r"\0", "(", "[", "*",
]


def java_finds(spark, pattern: str) -> list[bool] | None:
    jvm = spark.sparkContext._jvm
    try:
        regex = jvm.java.util.regex.Pattern.compile(pattern)
    except Exception as e:  # a PatternSyntaxException, as PySpark converts it
        assert "IllegalArgument" in type(e).__name__ or "PatternSyntax" in str(e), repr(e)
        return None
    return [bool(regex.matcher(name).find()) for name in NAMES]


def test_every_accepted_pattern_selects_what_javas_pattern_selects(spark) -> None:
    refused_but_valid = []
    for pattern in PATTERNS:
        java = java_finds(spark, pattern)
        try:
            ours = [compile_java_regex(pattern).search(name) is not None for name in NAMES]
        except JavaRegexError:
            if java is not None:
                refused_but_valid.append(pattern)
            continue
        assert java is not None, f"{pattern!r} is invalid in Java but accepted here"
        assert ours == java, (pattern, [n for n, j, o in zip(NAMES, java, ours) if j != o])
    assert refused_but_valid == ["[[a-z]]", "[a-z&&[^o]]+", r"^[\P{Lower}]+$",
                                 r"\p{InGreek}", "(?x) orders", r"\h", r"\G", "x{1}{2}"]


def test_a_pattern_found_inside_a_name_selects_it(spark, broker, topic) -> None:
    names = [f"{topic}-eu", f"old-{topic}", f"{topic}-us"]
    create_topics(broker.bootstrap, names, 1)
    produce(broker.bootstrap, ({"topic": n, "value": n.encode()} for n in names))
    df = (spark.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribePattern", f"{topic}-(eu|us)").load())
    # As Spark's Kafka source: the pattern need not match the whole name.
    assert sorted(r["topic"] for r in df.select("topic").collect()) == \
        sorted([f"{topic}-eu", f"{topic}-us"])
    df = (spark.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribePattern", topic).load())
    assert sorted(r["topic"] for r in df.select("topic").collect()) == sorted(names)
