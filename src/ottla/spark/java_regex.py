"""``subscribePattern`` in ``java.util.regex.Pattern`` syntax, matched with Python's ``re``.

Spark's Kafka source compiles the pattern with Java's ``Pattern`` and keeps the topics
it finds in the name (``topicRegex.findFirstIn(name)`` on the Admin path Spark uses by
default since 3.4), leaving out internal topics. Python's ``re`` reads most Java
patterns the same; this module translates the Java-only syntax that has an exact
Python equivalent on topic names (which are ASCII letters, digits, ``.``, ``_``, ``-``)
and refuses what Python would otherwise read differently, so that no pattern selects
other topics here than in Spark:

- translated: ``(?<name>...)`` and ``\\k<name>`` (Python's ``(?P<name>...)`` and
  ``(?P=name)``), ``\\Q...\\E`` quoting, ``\\z``, octal ``\\0nnn``, ``\\x{h...h}``, and
  ``\\p{...}``/``\\P{...}`` for the POSIX, ``java...`` and Unicode classes in ``_CLASSES``
  (exact on topic names);
- refused: nested classes (``[a[b]]``) and intersections (``[a&&[^b]]``), which Python
  reads as literal characters, ``\\P{...}`` inside a class, other ``\\p`` classes, the
  COMMENTS flag ``(?x)`` (Java ignores white space inside classes, Python does not), and
  a ``{`` that is not a repetition (an error in Java, a literal in Python);
- the same in both: possessive quantifiers and atomic groups (Python 3.11+),
  backreferences, lookaround, ``\\w``/``\\d``/``\\s``/``\\b`` (ASCII in Java, Unicode in
  Python: the same on ASCII names), ``$``, ``\\Z`` and ``.`` (no line terminators in names).

Anything else Java has and Python lacks (``\\h``, ``\\R``, ``\\X``, ``\\G``, ``\\e``,
``\\cX``, inline flags in mid-pattern such as ``a(?i)b``) is an error from ``re``, so it
is refused too.
"""

from __future__ import annotations

import functools
import re
import warnings

_LOWER, _UPPER, _DIGIT = "a-z", "A-Z", "0-9"
_ALPHA = _LOWER + _UPPER
_ALNUM = _ALPHA + _DIGIT
_POSIX_PUNCT = r"!-/:-@\[-`{-~"  # Java's \p{Punct}: ASCII punctuation and symbols
_UNICODE_PUNCT = r"!-#%-*,-/:;?@\[-\]_{}"  # the ASCII characters of category P
_SPACE = r" \t\n\x0b\f\r"

_CLASSES: dict[str, str] = {
    # POSIX (US-ASCII), as Java defines them.
    "Lower": _LOWER, "Upper": _UPPER, "ASCII": r"\x00-\x7f", "Alpha": _ALPHA,
    "Digit": _DIGIT, "Alnum": _ALNUM, "Punct": _POSIX_PUNCT, "Graph": "!-~",
    "Print": " -~", "Blank": r" \t", "Cntrl": r"\x00-\x1f\x7f", "XDigit": "0-9a-fA-F",
    "Space": _SPACE,
    # java.lang.Character.
    "javaLowerCase": _LOWER, "javaUpperCase": _UPPER, "javaLetter": _ALPHA,
    "javaDigit": _DIGIT, "javaLetterOrDigit": _ALNUM, "javaAlphabetic": _ALPHA,
    "javaWhitespace": _SPACE + r"\x1c-\x1f",
    # Unicode categories and properties, on the ASCII characters.
    "L": _ALPHA, "IsL": _ALPHA, "Lu": _UPPER, "IsLu": _UPPER, "Ll": _LOWER, "IsLl": _LOWER,
    "N": _DIGIT, "IsN": _DIGIT, "Nd": _DIGIT, "IsNd": _DIGIT, "P": _UNICODE_PUNCT,
    "IsP": _UNICODE_PUNCT, "IsPunctuation": _UNICODE_PUNCT, "IsAlphabetic": _ALPHA,
    "IsLetter": _ALPHA, "IsLowercase": _LOWER, "IsUppercase": _UPPER, "IsDigit": _DIGIT,
    "IsWhite_Space": r"\t-\r ", "IsWhiteSpace": r"\t-\r ", "IsLatin": _ALPHA,
    "InBasicLatin": r"\x00-\x7f", "InBasic_Latin": r"\x00-\x7f",
}
_REPETITION = re.compile(r"\{\d+(?:,\d*)?\}")
_OCTAL = re.compile(r"[0-3]?[0-7]{1,2}")
_FLAGS = re.compile(r"\(\?([idmsuxU]*)(?:-([idmsuxU]*))?([:)])")


def _python_flags(java: str) -> str:
    """Java's inline flags as Python's: d (UNIX_LINES), u (UNICODE_CASE) and U
    (UNICODE_CHARACTER_CLASS) change nothing on ASCII names without line terminators."""
    if "x" in java:
        raise JavaRegexError("the COMMENTS flag (?x)")
    return "".join(sorted(set(java) - set("duU")))


class JavaRegexError(ValueError):
    """A pattern that Python cannot match as Java's ``Pattern`` does, or not at all."""


def _class_name(pattern: str, i: int) -> tuple[str, int]:
    """The name of the ``\\p`` class whose name starts at ``i``, and where it ends."""
    if i < len(pattern) and pattern[i] == "{":
        end = pattern.find("}", i)
        if end < 0:
            raise JavaRegexError("unclosed \\p{...} class")
        return pattern[i + 1:end], end + 1
    if i < len(pattern):
        return pattern[i], i + 1
    raise JavaRegexError("\\p names no class")


def translate(pattern: str) -> str:
    """The Python ``re`` pattern that selects the same topic names as the Java pattern."""
    out: list[str] = []
    scopes: list[list[str]] = [[]]  # per open group: the inline-flag scopes opened in it
    in_class = False
    class_start = 0
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "Q":  # quoted until \E (or the end)
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if e in "pP":
                name, i = _class_name(pattern, i + 2)
                if name not in _CLASSES:
                    raise JavaRegexError(f"\\{e}{{{name}}} has no exact equivalent here")
                chars = _CLASSES[name]
                if not in_class:
                    out.append(f"[{'^' if e == 'P' else ''}{chars}]")
                elif e == "p":
                    out.append(chars)
                else:
                    raise JavaRegexError(f"\\P{{{name}}} inside a character class")
                continue
            if e == "k" and pattern.startswith("<", i + 2) and not in_class:
                end = pattern.find(">", i + 3)
                if end < 0:
                    raise JavaRegexError("unclosed \\k<name>")
                out.append(f"(?P={pattern[i + 3:end]})")
                i = end + 1
                continue
            if e == "z":
                out.append("\\Z")  # Java's end of input is Python's \Z
                i += 2
                continue
            if e == "0":  # Java's octal escape, \0 and up to three digits
                octal = _OCTAL.match(pattern, i + 2)
                if octal is None:
                    raise JavaRegexError("\\0 is not followed by an octal digit")
                out.append(f"\\x{int(octal.group(), 8):02x}")
                i = octal.end()
                continue
            if e == "N" and pattern.startswith("{", i + 2):  # \N{name}: the same in both
                end = pattern.find("}", i + 3)
                end = n - 1 if end < 0 else end
                out.append(pattern[i:end + 1])
                i = end + 1
                continue
            if e == "x" and pattern.startswith("{", i + 2):  # \x{h...h}
                end = pattern.find("}", i + 3)
                try:
                    code = int(pattern[i + 3:end], 16) if end > 0 else -1
                except ValueError:
                    code = -1
                if not 0 <= code <= 0x10FFFF:
                    raise JavaRegexError("a bad \\x{...} escape")
                out.append(f"\\U{code:08x}")
                i = end + 1
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            first = i == class_start
            if c == "]" and not first:
                in_class = False
            elif c == "[":
                raise JavaRegexError("a nested character class (Java's union)")
            elif c == "&" and pattern.startswith("&&", i):
                raise JavaRegexError("a character class intersection (&&)")
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            class_start = i + 1 + (pattern.startswith("^", i + 1))
            out.append(pattern[i:class_start])
            i = class_start
            continue
        if c == "{" and not _REPETITION.match(pattern, i):
            raise JavaRegexError("Java reads '{' as a repetition {n}, {n,} or {n,m}: "
                                 "write \\{ for the character")
        if c == "(":
            flags = _FLAGS.match(pattern, i)
            if flags is not None:
                on, off = _python_flags(flags.group(1)), _python_flags(flags.group(2) or "")
                scope = f"(?{on}-{off}:" if off else f"(?{on}:"
                if flags.group(3) == ":":  # (?flags:X): Python has the same
                    scopes.append([])
                    out.append(scope)
                elif on or off:
                    # Java's (?flags) holds to the end of its group, across alternatives:
                    # a scoped group of its own in each alternative.
                    scopes[-1].append(scope)
                    out.append(scope)
                i = flags.end()
                continue
            scopes.append([])
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                out.append("(?P<")
                i += 3
                continue
        elif c == ")" and len(scopes) > 1:
            out.append(")" * len(scopes.pop()))
        elif c == "|":
            out.append(")" * len(scopes[-1]) + "|" + "".join(scopes[-1]))
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out) + ")" * len(scopes[0])


@functools.lru_cache(maxsize=256)
def compile_java_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` (Java syntax) compiled for ``re``, or JavaRegexError saying why not."""
    translated = translate(pattern)
    try:
        with warnings.catch_warnings():  # "possible set difference": literal in Java too
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(translated)
    except re.error as e:
        raise JavaRegexError(str(e)) from None


def finds(pattern: str, topic: str) -> bool:
    """Whether Spark's Kafka source selects ``topic``: the pattern is found in the name
    (Scala's ``Regex.findFirstIn``), not necessarily the whole of it."""
    return compile_java_regex(pattern).search(topic) is not None
