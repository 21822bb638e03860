"""The bounded pre-pass: every length in a request frame checked before kio's native reader sees it.

Kafka's generated readers (``MessageDataGenerator`` in Kafka's ``generator`` module) check each length as they
read: an array longer than the bytes remaining ("Tried to allocate a collection of size N, but there are only M
bytes remaining."), a null where the field is not nullable in that version ("non-nullable field X was serialized as
null"), a compact string longer than 0x7fff ("string field X had invalid length N"). Any of these closes the
connection (the parse fails; ``SocketServer`` hangs up). kio 0.6.5 does not: its native reader reserves room for an
array's claimed count before reading one element (a 22-byte DescribeGroups v5 claiming 2^32-1 groups asks for
34 GB and the process aborts), and it hands a null array to the handlers even where the schema forbids it.

So before kio reads a frame, this walks it once, driven by kio's own schema classes (the same field descriptions
kio reads with): every string, bytes, array and tagged-field length is checked against the bytes that remain, null
is refused where the field is not nullable in that version, and the unknown tagged fields (KIP-482: Kafka skips
them, kio refuses them) are noted so they can be cut out before kio reads the frame. Arrays are held to a tighter
bound than Kafka's: ``count * smallest element`` must fit in what remains (an int32 array claiming 1,000 elements
needs 4,000 bytes), so the largest allocation kio can be asked for is a fraction of the frame, itself capped by
``socket.request.max.bytes``.

Cost: one pass over the frame by a checker generated per API and version (straight-line Python: fixed-width runs
skipped in one step, arrays of fixed-width elements in one multiplication), about 1 us for a JoinGroup and 1.6 us
for an OffsetCommit of 2 topics x 4 partitions, beside kio's 1.3 and 1.8 us. Heartbeat never comes here on its fast
path (protocol/heartbeat.py, bounded by hand: any doubt hands the frame to this path).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any

from protocol.errors import MalformedRequest
from protocol.varint import encode_uvarint

# Encoded sizes of kio's fixed-width field types.
_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip

# Kafka's generated readers refuse a compact string longer than this (a legacy string's int16 cannot say more).
_MAX_STRING = 0x7FFF

# Step opcodes. A step is (opcode, size, name, nullable, inner, prefix): ``size`` is a fixed run's width, or the
# width of a fixed-width array element (0 when the elements must be walked one by one); ``inner`` the element's or
# struct's plan; ``prefix`` how a length is written: 0 a compact uvarint (length + 1), 2 an int16, 4 an int32.
_FIXED, _STRING, _BYTES, _ARRAY, _STRUCT = range(5)
_COMPACT, _INT16_LENGTH, _INT32_LENGTH = 0, 2, 4
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class Plan:
    """One entity's wire layout: its untagged fields in order, how lengths are written (compact in flexible
    versions), its known tags (None: no tag buffer), and the least bytes it can take."""

    __slots__ = ("min_size", "name", "steps", "tags")

    def __init__(self, name: str, steps: tuple[Step, ...], tags: dict[int, Plan] | None) -> None:
        self.name = name
        self.steps = steps
        self.tags = tags
        self.min_size = sum(_min_size(step) for step in steps) + (1 if tags is not None else 0)


Step = tuple[int, int, str, bool, Plan, int]
_NOTHING = Plan("nothing", (), None)  # the ``inner`` of steps that have none


def _min_size(step: Step) -> int:
    op, size, _, nullable, inner, prefix = step
    if op == _FIXED:
        return size
    if op == _STRUCT:
        return 1 if nullable else inner.min_size
    return prefix or 1  # the length prefix alone (an empty string, an empty array)


@cache
def plan_of(cls: type) -> Plan:
    """The plan of a kio entity class (request header or body, or a nested structure), built once."""
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
    steps: list[Step] = []
    tags: dict[int, Plan] = {}
    for f in fields(cls):
        step = _step(cls, f, flexible)
        if "tag" in f.metadata:
            # A known tag's value is walked on its own, within its declared size, with no tag buffer after it.
            tags[int(f.metadata["tag"])] = Plan(f"{cls.__name__}.{f.name}", (step,), None)
        elif step[0] == _FIXED and steps and steps[-1][0] == _FIXED:
            previous = steps[-1]
            steps[-1] = (_FIXED, previous[1] + step[1], f"{previous[2]}..{f.name}", False, _NOTHING, 0)
        else:
            steps.append(step)
    return Plan(cls.__name__, tuple(steps), tags if flexible else None)


def _step(cls: type, f: Any, flexible: bool) -> Step:
    # kio's readers are imported with the first plan, not with this module: `serve` answers its first request
    # before they load (protocol/api_versions.py, issue 17).
    from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

    if cls.__name__ == "RequestHeader" and f.name == "client_id":
        # Always a nullable legacy string, even in the flexible header v2 (see Kafka's RequestHeader.json).
        return (_STRING, 0, f.name, True, _NOTHING, _INT16_LENGTH)
    kind = classify_field(f)
    nullable = is_optional(f)
    array = _COMPACT if flexible else _INT32_LENGTH
    if isinstance(kind, EntityField):
        return (_STRUCT, 0, f.name, nullable, plan_of(kind.type_), 0)
    if isinstance(kind, EntityTupleField):
        inner = plan_of(kind.type_)
        fixed = inner.tags is None and all(s[0] == _FIXED for s in inner.steps)
        return (_ARRAY, inner.min_size if fixed else 0, f.name, nullable, inner, array)
    kafka_type = f.metadata["kafka_type"]
    size = _FIXED_SIZES.get(kafka_type)
    op = _STRING if kafka_type == "string" else _BYTES
    prefix = _COMPACT if flexible else _INT16_LENGTH if op == _STRING else _INT32_LENGTH
    if isinstance(kind, PrimitiveTupleField):
        if size is not None:
            return (_ARRAY, size, f.name, nullable, _NOTHING, array)
        # An array of strings: each element is a string of its own (no tag buffer), walked one by one.
        element = Plan(f"{cls.__name__}.{f.name}[]", ((op, 0, f.name, False, _NOTHING, prefix),), None)
        return (_ARRAY, 0, f.name, nullable, element, array)
    if size is not None:
        return (_FIXED, size, f.name, False, _NOTHING, 0)
    if kafka_type in ("string", "bytes", "records"):
        return (op, 0, f.name, nullable, _NOTHING, prefix)
    raise TypeError(f"{cls.__name__}.{f.name}: no bounds for kafka type {kafka_type!r}")


# -- the checker of a plan, as straight-line Python ----------------------------------------------------------------
#
# A plan becomes one generated function per schema (as ``dataclasses`` generates ``__init__``): every step inlined,
# nested arrays as nested loops, names and sizes as constants. An interpreter over the steps does the same work three
# times slower (3.7 against 1.3 us for an OffsetCommit of 2 topics x 4 partitions), and this runs for every request
# but Heartbeat. Reads past ``len(frame)`` raise IndexError or struct.error: the frame ended early.

# (start, end, replacement): a stretch of the frame kio must read otherwise (a tag buffer without its unknown tags,
# a negative length other than -1 that Kafka reads as null).
Edit = tuple[int, int, bytes]
Checker = Callable[[bytes, int, int, list[Edit]], int]
_NULL_INT16 = b"\xff\xff"
_NULL_INT32 = b"\xff\xff\xff\xff"


def _null(name: str) -> MalformedRequest:
    # Kafka reads any negative length as null (then refuses it here); kio only -1, so the others are rewritten to -1.
    return MalformedRequest(f"non-nullable field {name} was serialized as null")


def _past(name: str, length: int) -> MalformedRequest:
    return MalformedRequest(f"field {name} of {length} bytes ends past the end of the frame")


def _too_many(name: str, count: int, remaining: int) -> MalformedRequest:
    # Kafka's check (count > bytes remaining), tightened by each element's least size: kio reserves room for the
    # claimed count before it reads one element, so a claim must be checked before kio sees it.
    return MalformedRequest(
        f"Tried to allocate a collection of size {count} for field {name}, but there are only "
        f"{max(remaining, 0)} bytes remaining."
    )


def _too_long(name: str, length: int) -> MalformedRequest:
    return MalformedRequest(f"string field {name} had invalid length {length}")


class _Source:
    """The lines of one generated checker and the constants they refer to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}

    def add(self, indent: int, *lines: str) -> None:
        self.lines.extend("    " * indent + line for line in lines)

    def constant(self, value: Any) -> str:
        name = f"_k{len(self.constants)}"
        self.constants[name] = value
        return name

    def entity(self, plan: Plan, indent: int) -> None:
        for step in plan.steps:
            self.step(step, indent)
        if plan.tags is not None:
            known = self.constant({tag: checker(tag_plan) for tag, tag_plan in plan.tags.items()})
            self.add(
                indent,
                "if pos < end and not frame[pos]:  # no tagged fields: the common case",
                "    pos += 1",
                "else:",
                f"    pos = _tagged_fields(frame, pos, end, edits, {known})",
            )

    def step(self, step: Step, indent: int) -> None:
        op, size, name, nullable, inner, prefix = step
        if op == _FIXED:
            self.add(indent, f"pos += {size}", "if pos > end:", f"    raise _past({name!r}, {size})")
            return
        if op == _STRUCT:
            if nullable:  # an int8 marker, -1 for null (KIP-893)
                self.add(indent, "pos += 1", "if frame[pos - 1] != 0xFF:")
                indent += 1
            self.entity(inner, indent)
            return
        # Every other field starts with a length, -1 for null.
        if prefix == _COMPACT:  # stored plus one, so that zero can say null; one byte below 0x80
            self.add(
                indent,
                "length = frame[pos] - 1",
                "pos += 1",
                "if length >= 0x7F:",
                "    length, pos = _uvarint(frame, pos - 1)",
                "    length -= 1",
            )
        elif prefix == _INT16_LENGTH:
            self.add(indent, "length = _int16(frame, pos)[0]", "pos += 2")
        else:
            self.add(indent, "length = _int32(frame, pos)[0]", "pos += 4")
        if not nullable:
            self.add(indent, "if length < 0:", f"    raise _null({name!r})")
        else:
            if prefix != _COMPACT:  # any negative length is null to Kafka; to kio only -1
                null = "_NULL_INT16" if prefix == _INT16_LENGTH else "_NULL_INT32"
                self.add(indent, "if length < -1:", f"    edits.append((pos - {prefix}, pos, {null}))")
            self.add(indent, "if length >= 0:")
            indent += 1
        if op == _ARRAY:
            least = size or inner.min_size or 1
            self.add(indent, f"if length * {least} > end - pos:", f"    raise _too_many({name!r}, length, end - pos)")
            if size:  # fixed-width elements: one step over all of them
                self.add(indent, f"pos += length * {size}")
            else:
                self.add(indent, "for _ in range(length):")
                self.entity(inner, indent + 1)
            return
        if op == _STRING and prefix == _COMPACT:
            self.add(indent, f"if length > {_MAX_STRING}:", f"    raise _too_long({name!r}, length)")
        self.add(indent, "pos += length", "if pos > end:", f"    raise _past({name!r}, length)")


@cache
def checker(*plans: Plan) -> Checker:
    """The generated checker of ``plans`` one after the other (a request's header and body, say):
    (frame, pos, end, edits) -> where the last one ends."""
    source = _Source()
    for plan in plans:
        source.entity(plan, 1)
    text = "\n".join(["def check(frame, pos, end, edits):", *source.lines, "    return pos", ""])
    namespace: dict[str, Any] = {
        "_int16": _INT16.unpack_from,
        "_int32": _INT32.unpack_from,
        "_uvarint": _uvarint,
        "_tagged_fields": _tagged_fields,
        "_null": _null,
        "_past": _past,
        "_too_many": _too_many,
        "_too_long": _too_long,
        "_NULL_INT16": _NULL_INT16,
        "_NULL_INT32": _NULL_INT32,
        **source.constants,
    }
    exec(compile(text, f"<bounds of {' + '.join(plan.name for plan in plans)}>", "exec"), namespace)
    check: Checker = namespace["check"]
    check.__doc__ = text  # the source, for a reader in a debugger
    return check


def _tagged_fields(frame: bytes, pos: int, end: int, edits: list[Edit], known: dict[int, Checker]) -> int:
    """KIP-482's tag buffer: a count, then (tag, size, value) each. A known tag's value must fill its declared size
    exactly, so that kio (which follows the value, as Kafka does) and this walk agree on where the next byte is;
    unknown tags are skipped as Kafka skips them, and the buffer is rewritten without them (kio refuses them)."""
    start = pos
    count, pos = _uvarint(frame, pos)
    if count * 2 > end - pos:  # each entry takes at least a tag byte and a size byte
        raise MalformedRequest(f"{count} tagged fields claimed, but there are only {end - pos} bytes remaining")
    kept: list[bytes] = []
    rewrite = False
    for _ in range(count):
        entry = pos
        tag, pos = _uvarint(frame, pos)
        size, pos = _uvarint(frame, pos)
        value_end = pos + size
        if value_end > end:
            raise MalformedRequest(f"tagged field {tag} of {size} bytes ends past the end of the frame")
        check = known.get(tag)
        if check is None:
            rewrite = True
            pos = value_end
            continue
        inside: list[Edit] = []  # a known struct's own edits: they change the value's size
        if check(frame, pos, value_end, inside) != value_end:
            raise MalformedRequest(f"tagged field {tag} does not fill its {size} bytes")
        if inside:
            value = _edited(frame, pos, value_end, inside)
            kept.append(encode_uvarint(tag) + encode_uvarint(len(value)) + value)
            rewrite = True
        else:
            kept.append(frame[entry:value_end])
        pos = value_end
    if rewrite:
        edits.append((start, pos, encode_uvarint(len(kept)) + b"".join(kept)))
    return pos


def _edited(frame: bytes, start: int, stop: int, edits: list[Edit]) -> bytes:
    """``frame[start:stop]`` with each edit (in the frame's order, none inside another) applied."""
    out = bytearray()
    copied = start
    for edit_start, edit_end, replacement in edits:
        out += frame[copied:edit_start]
        out += replacement
        copied = edit_end
    out += frame[copied:stop]
    return bytes(out)


def _uvarint(frame: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's ``ByteUtils.readUnsignedVarint``)."""
    value = shift = 0
    while shift <= 28:
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise MalformedRequest("unsigned varint longer than 5 bytes")


def check_request(frame: bytes, check: Checker) -> bytes:
    """The frame once every length in it is known to be sound: as it came, or edited as kio must read it (unknown
    tagged fields cut out, a null's negative length written as -1).

    Raises MalformedRequest with Kafka's reason when a length lies, a null is not allowed, or the frame ends early.
    """
    edits: list[Edit] = []
    end = len(frame)
    try:
        check(frame, 0, end, edits)
    except (IndexError, struct.error):
        raise MalformedRequest("the frame ends inside a field") from None
    # Edits are noted as the walk passes them, so in the frame's order (an entity's tag buffer is its last part).
    return _edited(frame, 0, end, edits) if edits else frame
