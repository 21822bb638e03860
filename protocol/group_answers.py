"""JoinGroup and SyncGroup answers, encoded by hand.

Forming a group answers every member twice or three times (KIP-394's MEMBER_ID_REQUIRED, the join, the sync), and
kio's generic writers walk each field with type checks: for a large formation they cost more than the coordinator.
These two bodies are simple (a few fixed fields, strings, bytes, one array), so they are written here directly and
handed to ``codec.encode_response`` as ``HandEncoded``. Which fields a version carries, and whether it is flexible
(KIP-482: compact strings, bytes and arrays, a tagged-field section per structure), is read from kio's schemas, so
the two cannot disagree; tests check the bytes against kio's for every version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from kio.serial.errors import OutOfBoundValue

from protocol.apis import ApiKey
from protocol.codec import has_field, nested, response_schema
from protocol.varint import encode_uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_THROTTLE_ERROR = struct.Struct(">ih")  # throttle_time_ms (always 0 here), error_code
_NO_TAGS = b"\x00"
_MAX_LEGACY_STRING = 2**15 - 1  # an int16 length


class JoinMember(Protocol):
    """What a JoinGroup answer says of each member (the leader's answer lists them all)."""

    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...
    @property
    def metadata(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class _Layout:
    flexible: bool
    throttle: bool
    protocol_type: bool
    skip_assignment: bool
    instance_id: bool  # in each member (JoinGroup) or unused (SyncGroup)


@cache
def _join_layout(version: int) -> _Layout:
    schema = response_schema(ApiKey.JOIN_GROUP, version)
    member = nested(schema, "JoinGroupResponseMember")
    return _Layout(
        schema.__flexible__,
        has_field(schema, "throttle_time"),
        has_field(schema, "protocol_type"),
        has_field(schema, "skip_assignment"),
        has_field(member, "group_instance_id"),
    )


@cache
def _sync_layout(version: int) -> _Layout:
    schema = response_schema(ApiKey.SYNC_GROUP, version)
    return _Layout(
        schema.__flexible__, has_field(schema, "throttle_time"), has_field(schema, "protocol_type"), False, False
    )


def _string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string: compact (uvarint length + 1, 0 for null) when flexible, else int16 length (-1)."""
    if value is None:
        return _NO_TAGS if flexible else b"\xff\xff"
    raw = value.encode()
    if flexible:
        return encode_uvarint(len(raw) + 1) + raw
    if len(raw) > _MAX_LEGACY_STRING:
        # As kio's writer (and Kafka's: "field is too long to be serialized"): the connection closes with this.
        raise OutOfBoundValue(f"String is too long for legacy string format ({len(raw)} > {_MAX_LEGACY_STRING})")
    return _INT16.pack(len(raw)) + raw


def _bytes(value: bytes, flexible: bool) -> bytes:
    return (encode_uvarint(len(value) + 1) if flexible else _INT32.pack(len(value))) + value


def join_body(
    version: int,
    error: int,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    skip_assignment: bool,
    member_id: str,
    members: Sequence[JoinMember],
) -> bytes:
    """JoinGroupResponse v0-v9, after the response header: fields in the schema's order, those of ``version``."""
    layout = _join_layout(version)
    flexible = layout.flexible
    parts = [_THROTTLE_ERROR.pack(0, error) if layout.throttle else _INT16.pack(error), _INT32.pack(generation_id)]
    if layout.protocol_type:
        parts.append(_string(protocol_type, flexible))
    parts.append(_string(protocol_name, flexible))
    parts.append(_string(leader, flexible))
    if layout.skip_assignment:
        parts.append(b"\x01" if skip_assignment else b"\x00")
    parts.append(_string(member_id, flexible))
    parts.append(encode_uvarint(len(members) + 1) if flexible else _INT32.pack(len(members)))
    for member in members:
        parts.append(_string(member.member_id, flexible))
        if layout.instance_id:
            parts.append(_string(member.group_instance_id, flexible))
        parts.append(_bytes(member.metadata, flexible))
        if flexible:
            parts.append(_NO_TAGS)
    if flexible:
        parts.append(_NO_TAGS)
    return b"".join(parts)


def sync_body(
    version: int, error: int, protocol_type: str | None, protocol_name: str | None, assignment: bytes
) -> bytes:
    """SyncGroupResponse v0-v5, after the response header."""
    layout = _sync_layout(version)
    flexible = layout.flexible
    head = _THROTTLE_ERROR.pack(0, error) if layout.throttle else _INT16.pack(error)
    if layout.protocol_type:
        head += _string(protocol_type, flexible) + _string(protocol_name, flexible)
    body = head + _bytes(assignment, flexible)
    return body + _NO_TAGS if flexible else body
