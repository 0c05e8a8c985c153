"""A bounds pass over a message body before the native decoder sees it.

``kio``'s native reader reserves room for an array from its declared count before it
reads a single element: a 20-byte request that declares 2^32-2 topics makes it ask for
32 GiB, and a failed allocation in native code aborts the whole process. Kafka's own
generated readers refuse such a count ("Tried to allocate a collection of size N, but
there are only M bytes remaining"); this module does the same, in one pass over the
schema of the message's version, before anything is reserved:

- every array, string and bytes length is checked against the bytes left in the frame
  (an array's count against what its elements need at the least);
- null is refused where the schema does not allow it (a null topic array would reach a
  handler as ``None``);
- tagged fields (KIP-482) must fit the frame; those the schema does not know are skipped,
  as the KIP says a receiver does, by cutting them out of a copy of the frame, because
  ``kio`` refuses tags it does not know;
- the elements of all arrays together are bounded (``MAX_ELEMENTS``), so that decoding
  one frame cannot build more objects than that.

The check of each schema class is generated once as Python source (as Kafka generates
its readers), so the pass costs a few microseconds for the requests clients send.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from ottla.protocol.errors import MalformedRequest
from ottla.protocol.messages import FieldShape, field_shape
from ottla.protocol.varint import encode_unsigned_varint, read_unsigned_varint

MAX_ELEMENTS = 1_000_000
"""Array elements one message may declare in all. The largest requests real clients send
(Metadata or OffsetCommit for tens of thousands of partitions) stay far below it; a frame
of a million tiny elements would take ``kio`` seconds and hundreds of MiB to decode."""

_FIXED = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
          "timedelta_i32": 4, "error_code": 2, "int64": 8, "uint64": 8, "float64": 8,
          "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16}
_VARIABLE = {"string", "bytes", "records"}


class _Pass:
    """What one check run carries: the element budget and the unknown tagged fields found
    (as edits to the frame: start, end and the bytes that replace them)."""

    __slots__ = ("edits", "elements")

    def __init__(self) -> None:
        self.elements = 0
        self.edits: list[tuple[int, int, bytes]] = []


# A compiled check: (buffer, position, end of the region, pass) -> position after it.
Check = Callable[[memoryview, int, int, _Pass], int]


def _fail(message: str) -> MalformedRequest:
    return MalformedRequest(message)


class _Generator:
    """Writes the check of every entity class as Python source: straight-line code per
    field, a loop per array, no call per primitive."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "_uvarint": read_unsigned_varint, "_fail": _fail, "_tagged_fields": _tagged_fields,
            "MAX_ELEMENTS": MAX_ELEMENTS}
        self.names: dict[type, str] = {}
        self.sizes: dict[type, tuple[int, int | None]] = {}
        """Per entity class: (least encoded size, size if always the same)."""
        self.counter = 0

    def entity(self, cls: type) -> str:
        """The name of ``cls``'s check in the namespace, generating it if needed."""
        name = self.names.get(cls)
        if name is not None:
            return name
        self.counter += 1
        name = self.names[cls] = f"e{self.counter}"
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        lines: list[str] = []
        tagged: dict[int, Check] = {}
        least, fixed = (1, None) if flexible else (0, 0)
        for field in dataclasses.fields(cls):
            tag = field.metadata.get("tag")
            if tag is not None:
                tagged[int(tag)] = self.tagged_field(field, flexible)
                continue
            field_least, field_fixed = self.field(field, flexible, lines, "    ")
            least += field_least
            fixed = None if fixed is None or field_fixed is None else fixed + field_fixed
        if flexible:
            tags = f"t{self.counter}_{name}"
            self.namespace[tags] = tagged
            lines += ["    if pos >= end:",
                      "        raise _fail('frame ends before the tagged fields')",
                      "    if buf[pos] == 0:",
                      "        pos += 1",
                      "    else:",
                      f"        pos = _tagged_fields(buf, pos, end, p, {tags})"]
        self.sizes[cls] = (least, fixed)
        self.define(name, lines)
        return name

    def tagged_field(self, field: dataclasses.Field[Any], flexible: bool) -> Check:
        self.counter += 1
        name = f"f{self.counter}"
        lines: list[str] = []
        self.field(field, flexible, lines, "    ")
        self.define(name, lines)
        check: Check = self.namespace[name]
        return check

    def define(self, name: str, lines: list[str]) -> None:
        source = "\n".join([f"def {name}(buf, pos, end, p):", *lines,
                            "    if pos > end:",
                            "        raise _fail('frame ends inside a field')",
                            "    return pos"])
        exec(compile(source, f"<schema_guard {name}>", "exec"), self.namespace)

    def field(self, field: dataclasses.Field[Any], flexible: bool, out: list[str],
              indent: str) -> tuple[int, int | None]:
        """Append the check of one field; its (least size, fixed size or None)."""
        ft = field_shape(field)
        if not ft.array:
            return self.value(ft, flexible, ft.nullable, field.name, out, indent)
        out += self.length("n", flexible, "array", indent)
        out += [f"{indent}if n < 0:",
                *self.null(ft.nullable, f"array {field.name}", indent + "    ", "n"),
                f"{indent}else:"]
        body: list[str] = []
        inner = indent + "        "
        least, fixed = self.value(ft, flexible, ft.element_nullable, field.name, body, inner)
        least = max(least, 1)
        i = indent + "    "
        out += [f"{i}if n * {least} > end - pos:",
                f"{i}    raise _fail(f'array {field.name} declares {{n}} elements, but only "
                f"{{end - pos}} bytes remain')",
                f"{i}p.elements += n",
                f"{i}if p.elements > MAX_ELEMENTS:",
                f"{i}    raise _fail('the message declares more than {MAX_ELEMENTS} array "
                f"elements')"]
        if fixed is not None:
            out.append(f"{i}pos += n * {fixed}")
        else:
            out.append(f"{i}for _ in range(n):")
            out += body
        return (1 if flexible else 4), None

    def value(self, ft: FieldShape, flexible: bool, nullable: bool, name: str,
              out: list[str], indent: str) -> tuple[int, int | None]:
        if ft.entity is not None:
            check = self.entity(ft.entity)
            if not nullable:
                out.append(f"{indent}pos = {check}(buf, pos, end, p)")
                return self.sizes[ft.entity]
            # KIP-893: a nullable struct is a marker byte, -1 (null) or 1, then the struct.
            out.extend([
                f"{indent}if pos >= end:",
                f"{indent}    raise _fail('frame ends before the struct {name}')",
                f"{indent}pos += 1",
                f"{indent}if buf[pos - 1] == 1:",
                f"{indent}    pos = {check}(buf, pos, end, p)",
                f"{indent}elif buf[pos - 1] != 0xff:",
                f"{indent}    raise _fail('struct {name} has no null marker')"])
            return 1, None
        kafka_type = ft.kafka_type
        if kafka_type in _FIXED:
            size = _FIXED[kafka_type]
            out.append(f"{indent}pos += {size}")
            return size, size
        if kafka_type not in _VARIABLE:
            raise TypeError(f"field {name} has a type the guard does not know: {kafka_type}")
        kind = "string" if kafka_type == "string" else "bytes"
        out += self.length("n", flexible, kind, indent)
        out += [f"{indent}if n < 0:",
                *self.null(nullable, name, indent + "    ", "n"),
                f"{indent}else:",
                f"{indent}    pos += n",
                f"{indent}    if pos > end:",
                f"{indent}        raise _fail(f'{name} declares {{n}} bytes, more than the "
                f"frame holds')"]
        return (1 if flexible else 2 if kind == "string" else 4), None

    @staticmethod
    def length(var: str, flexible: bool, kind: str, indent: str) -> list[str]:
        """Read a length (or count) into ``var``: -1 for null."""
        if flexible:
            return [f"{indent}if pos >= end:",
                    f"{indent}    raise _fail('frame ends inside a length')",
                    f"{indent}{var} = buf[pos]",
                    f"{indent}if {var} < 0x80:",
                    f"{indent}    pos += 1",
                    f"{indent}else:",
                    f"{indent}    {var}, pos = _uvarint(buf, pos, end)",
                    f"{indent}{var} -= 1"]
        size = 2 if kind == "string" else 4
        return [f"{indent}if pos + {size} > end:",
                f"{indent}    raise _fail('frame ends inside a length')",
                f"{indent}{var} = int.from_bytes(buf[pos:pos + {size}], 'big', signed=True)",
                f"{indent}pos += {size}"]

    @staticmethod
    def null(allowed: bool, what: str, indent: str, var: str) -> list[str]:
        if allowed:
            return [f"{indent}if {var} != -1:",
                    f"{indent}    raise _fail(f'{what} has a negative length ({{{var}}})')"]
        return [f"{indent}raise _fail(f'{what} is null or has a negative length "
                f"({{{var}}})')"]


def _tagged_fields(buf: memoryview, pos: int, end: int, p: _Pass,
                   known: dict[int, Check]) -> int:
    """Check a tagged-field section; note the unknown fields to be cut out."""
    start = pos
    count, pos = read_unsigned_varint(buf, pos, end)
    if count > end - pos:
        raise _fail(f"{count} tagged fields declared, but only {end - pos} bytes remain")
    kept: list[tuple[int, bytes | memoryview]] = []
    rebuild = False
    for _ in range(count):
        tag, pos = read_unsigned_varint(buf, pos, end)
        size, pos = read_unsigned_varint(buf, pos, end)
        value_end = pos + size
        if value_end > end:
            raise _fail(f"tagged field {tag} declares {size} bytes, more than the frame "
                        f"holds")
        check = known.get(tag)
        if check is None:
            rebuild = True
        else:
            outer, p.edits = p.edits, []
            if check(buf, pos, value_end, p) != value_end:
                raise _fail(f"tagged field {tag} does not fill its {size} bytes")
            inner, p.edits = p.edits, outer
            if inner:  # unknown tags inside a known tagged struct
                rebuild = True
                kept.append((tag, _apply(buf, pos, value_end, inner)))
            else:
                kept.append((tag, buf[pos:value_end]))
        pos = value_end
    if rebuild:
        section = bytearray(encode_unsigned_varint(len(kept)))
        for tag, value in kept:
            section += encode_unsigned_varint(tag) + encode_unsigned_varint(len(value))
            section += value
        p.edits.append((start, pos, bytes(section)))
    return pos


def _apply(buf: memoryview, start: int, end: int, edits: list[tuple[int, int, bytes]]
           ) -> bytes:
    """``buf[start:end]`` with ``edits`` (sorted, not overlapping) applied."""
    out = bytearray()
    pos = start
    for edit_start, edit_end, replacement in sorted(edits):
        out += buf[pos:edit_start]
        out += replacement
        pos = edit_end
    out += buf[pos:end]
    return bytes(out)


def check_body(schema: type, frame: bytes | memoryview, offset: int
               ) -> bytes | memoryview:
    """Check the body of ``schema`` at ``offset`` in ``frame`` against the frame's bounds;
    return the frame, or a copy without the tagged fields the schema does not know.
    Raises ``MalformedRequest`` for a body that lies about its lengths or holds null
    where the schema allows none. Bytes after the body are left alone, as Kafka does."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    p = _Pass()
    _check_of(schema)(buf, offset, len(buf), p)
    if not p.edits:
        return frame
    return _apply(buf, 0, len(buf), p.edits)


_generator = _Generator()


@functools.cache
def _check_of(cls: type) -> Check:
    check: Check = _generator.namespace[_generator.entity(cls)]
    return check
