"""Request decoding and response encoding, with kio's generated schemas.

A frame is: request header (v1, or v2 for flexible versions) then the body.
Responses are: response header (v0, or v1 for flexible versions; ApiVersions
always v0) then the body. Readers and writers are looked up once per
(api, version) and cached.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from protocol.apis import SUPPORTED_VERSIONS, ApiKey, api_name
from protocol.bounds import Checker, check_request, checker, plan_of
from protocol.errors import MalformedRequest, UnknownApiKey, UnsupportedApiVersion

_HEADER_PREFIX = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
_SIZE_CORRELATION = struct.Struct(">ii")


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any  # the kio request dataclass of this api and version; None for an unsupported ApiVersions


@dataclass(slots=True, frozen=True)
class HandEncoded:
    """A response body written by hand (``protocol/group_answers.py``), where any other goes through kio's writer.

    ``encode`` runs in ``encode_response``, when the connection sends the answer, not when a handler or a parked
    answer's completion builds it: an answer that cannot be encoded (a string too long) then ends its connection
    the way kio's ``OutOfBoundValue`` does, and never raises inside the coordinator.
    """

    encode: Callable[[], bytes | list[bytes]]  # a list: the body's pieces, joined once with the header


# kio's schema index and its readers and writers are imported by the first request that needs them, each of the
# cached functions below: `serve` answers its first ApiVersions before they load (protocol/api_versions.py).


@cache
def _request_readers(api_key: int, api_version: int) -> tuple[Checker, Any, Any]:
    from kio.index import load_request_schema
    from kio.serial import entity_reader

    schema: Any = load_request_schema(api_key, api_version)
    header = schema.__header_schema__
    return checker(plan_of(header), plan_of(schema)), entity_reader(header), entity_reader(schema)


@cache
def response_schema(api_key: int, api_version: int) -> Any:
    from kio.index import load_response_schema

    return load_response_schema(api_key, api_version)


@cache
def _response_writer(api_key: int, api_version: int) -> tuple[Any, bool]:
    from kio.serial import entity_writer

    schema = response_schema(api_key, api_version)
    flexible_header = api_key != ApiKey.API_VERSIONS and schema.__header_schema__.__version__ >= 1
    return entity_writer(schema), flexible_header


def decode_request(frame: bytes) -> Request:
    """Decode one frame; raises ProtocolError when Kafka would close the connection."""
    if len(frame) < _HEADER_PREFIX.size:
        raise MalformedRequest(f"frame of {len(frame)} bytes is too short for a request header")
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
    supported = SUPPORTED_VERSIONS.get(api_key)
    if supported is None:
        raise UnknownApiKey(f"unsupported api key {api_key}")
    low, high = supported
    if not low <= api_version <= high:
        if api_key == ApiKey.API_VERSIONS and api_version > high:
            # Kafka answers a too-new ApiVersions with a v0 error body instead of closing.
            return Request(api_key, api_version, correlation_id, peek_client_id(frame), None)
        raise UnsupportedApiVersion(f"{api_name(api_key)} v{api_version} is outside the supported range {low}-{high}")
    check, header_reader, body_reader = _request_readers(api_key, api_version)
    try:
        # kio's native reader trusts the lengths it reads (an array's claimed count is allocated up front) and
        # refuses tagged fields its schema does not name: every length is checked first, unknown tags cut out.
        frame = check_request(frame, check)
    except MalformedRequest as error:
        raise MalformedRequest(f"{api_name(api_key)} v{api_version} body does not decode: {error}") from None
    try:
        header, offset = header_reader(frame, 0)
        body, _ = body_reader(frame, offset)
    except Exception as error:  # whatever the reader trips on (bad UTF-8, say), the bytes are the client's fault
        raise MalformedRequest(f"{api_name(api_key)} v{api_version} body does not decode: {error!r}") from error
    return Request(api_key, api_version, correlation_id, header.client_id or "", body)


def peek_client_id(frame: bytes) -> str:
    try:
        (length,) = struct.unpack_from(">h", frame, 8)
        if length <= 0 or 10 + length > len(frame):
            return ""  # null, empty, or cut off: not a client id
        return frame[10 : 10 + length].decode()
    except (struct.error, UnicodeDecodeError):
        return ""


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """A complete frame (size prefix, response header, body) ready for the socket."""
    writer, flexible_header = _response_writer(api_key, api_version)
    if type(body) is HandEncoded:
        raw = body.encode()
        if type(raw) is list:  # large answers (ShareFetch's records): one copy of the pieces, header included
            size = sum(map(len, raw))
            if flexible_header:
                return b"".join([_SIZE_CORRELATION.pack(5 + size, correlation_id), b"\x00", *raw])
            return b"".join([_SIZE_CORRELATION.pack(4 + size, correlation_id), *raw])
        assert isinstance(raw, bytes)
        if flexible_header:  # response header v1: the correlation id, then no tagged fields
            return _SIZE_CORRELATION.pack(5 + len(raw), correlation_id) + b"\x00" + raw
        return _SIZE_CORRELATION.pack(4 + len(raw), correlation_id) + raw
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    buffer.write(_CORRELATION.pack(correlation_id))
    if flexible_header:
        buffer.write(b"\x00")  # no tagged fields
    writer(buffer, body)
    data = buffer.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def build(cls: type, /, **values: Any) -> Any:
    """Instantiate a versioned kio entity from the fields it has; the rest are dropped.

    This is how one code path answers every version: fields a version does not
    carry (ignorable in Kafka's terms) are simply left out.
    """
    names = _field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)


def nested(cls: type, name: str) -> Any:
    """A nested entity class defined beside ``cls`` in kio's generated module."""
    import sys

    return getattr(sys.modules[cls.__module__], name)
