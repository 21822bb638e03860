"""Unknown tagged fields, skipped the way Kafka skips them.

Flexible versions (KIP-482) let a client add tagged fields a broker does not
know; Kafka ignores them. kio 0.6.5 refuses them instead, so when it does, the
frame is copied without the unknown tags and decoded again. This walks the
frame with kio's own field descriptions and is only used on that rare path.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

from protocol.errors import MalformedRequest

# Encoded sizes of kio's fixed-width field types.
_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip


@cache
def _layout(cls: type) -> tuple[tuple[tuple[str, Any, bool], ...], frozenset[int]]:
    """The untagged fields of a kio entity in wire order as (kind, type, nullable), and its known tags."""
    plain: list[tuple[str, Any, bool]] = []
    tags: set[int] = set()
    for f in fields(cls):
        if "tag" in f.metadata:
            tags.add(int(f.metadata["tag"]))
        elif cls.__name__ == "RequestHeader" and f.name == "client_id":
            plain.append(("primitive", "legacy_string", True))  # always a legacy string, as in Kafka
        else:
            kind = classify_field(f)
            if isinstance(kind, EntityField):
                plain.append(("entity", kind.type_, is_optional(f)))
            elif isinstance(kind, EntityTupleField):
                plain.append(("entity_array", kind.type_, False))
            elif isinstance(kind, PrimitiveTupleField):
                plain.append(("primitive_array", f.metadata["kafka_type"], False))
            else:
                plain.append(("primitive", f.metadata["kafka_type"], False))
    return tuple(plain), frozenset(tags)


class _TagStripper:
    """Copies a request frame, leaving out the tagged fields its schema does not know."""

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.pos = 0
        self.copied_to = 0
        self.out = bytearray()

    def result(self) -> bytes:
        return bytes(self.out + self.frame[self.copied_to :])

    def skip(self, size: int) -> None:
        if size < 0 or self.pos + size > len(self.frame):
            raise MalformedRequest("a length points past the end of the frame")
        self.pos += size

    def uvarint(self) -> int:
        value = shift = 0
        while shift <= 28:
            byte = self.frame[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise MalformedRequest("unsigned varint longer than 5 bytes")

    def signed(self, layout: str) -> int:
        (value,) = struct.unpack_from(layout, self.frame, self.pos)
        self.pos += struct.calcsize(layout)
        return int(value)

    def primitive(self, kafka_type: str, flexible: bool) -> None:
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            self.skip(size)
            return
        if kafka_type == "legacy_string":
            length = self.signed(">h")
        elif kafka_type not in ("string", "bytes", "records"):
            raise MalformedRequest(f"no reader for kafka type {kafka_type!r}")
        elif flexible:
            length = self.uvarint() - 1
        else:
            length = self.signed(">h" if kafka_type == "string" else ">i")
        if length > 0:
            self.skip(length)

    def entity(self, cls: type) -> None:
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        plain, known_tags = _layout(cls)
        for kind, inner, nullable in plain:
            if kind == "primitive":
                self.primitive(inner, flexible)
            elif kind == "entity":
                if not nullable or self.signed(">b") >= 0:
                    self.entity(inner)
            else:
                count = self.uvarint() - 1 if flexible else self.signed(">i")
                for _ in range(count):
                    if kind == "entity_array":
                        self.entity(inner)
                    else:
                        self.primitive(inner, flexible)
        if flexible:
            self.tagged_fields(known_tags)

    def tagged_fields(self, known: frozenset[int]) -> None:
        start = self.pos
        count = self.uvarint()
        kept = []
        for _ in range(count):
            entry = self.pos
            tag = self.uvarint()
            self.skip(self.uvarint())
            if tag in known:
                kept.append(self.frame[entry : self.pos])
        if len(kept) != count:
            self.out += self.frame[self.copied_to : start]
            self.out += _encode_uvarint(len(kept))
            self.out += b"".join(kept)
            self.copied_to = self.pos


def _encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def strip_unknown_tags(frame: bytes, header_cls: type, body_cls: type) -> bytes:
    stripper = _TagStripper(frame)
    stripper.entity(header_cls)
    stripper.entity(body_cls)
    return stripper.result()
