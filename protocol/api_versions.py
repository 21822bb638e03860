"""ApiVersions (18) v0-4, the first request of every client, read and answered by hand.

It is the request ``group-broker serve`` must answer first (issue 17: within 150 ms of the process start), and
answering it through kio's generic readers and writers means importing them first (about a quarter of the
start-up's instructions). So a well-formed request of a version we serve, with a valid KIP-511 software name and
version, is read with a few struct calls and answered with bytes built from ``SUPPORTED_VERSIONS`` alone; anything
else (tagged fields, a version newer than ours, a software name Kafka refuses, a short frame) returns None and takes
the generic kio path, which owns every error (``broker/api/api_versions.py``). Tests check both paths give the same
bytes for every version.

Layouts (Kafka's ApiVersionsRequest.json / ApiVersionsResponse.json): v0-2 requests have an empty body after
request header v1; v3-4 carry ClientSoftwareName and ClientSoftwareVersion (compact strings) after request header
v2 (flexible). The response header is always v0 (no tagged fields, KIP-511), and the body is ErrorCode, ApiKeys
(key, min, max), then ThrottleTimeMs from v1; v3+ uses compact arrays with a tag section per key and at the end.
"""

from __future__ import annotations

import re
import struct
from functools import cache

from protocol.apis import SUPPORTED_VERSIONS, ApiKey, advertised_versions
from protocol.varint import encode_uvarint

_API_VERSIONS = int(ApiKey.API_VERSIONS)
MAX_VERSION = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
FLEXIBLE_FROM = 3

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_KEY = struct.Struct(">hhh")
_SIZE_CORRELATION = struct.Struct(">ii")
# KIP-511: what Kafka accepts as ClientSoftwareName / ClientSoftwareVersion (v3+).
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

# (api version, correlation id, raw client id): all the answer depends on.
ApiVersionsRequest = tuple[int, int, bytes]


def decode_api_versions(frame: bytes) -> ApiVersionsRequest | None:
    """The request, or None when the generic path must decide (any doubt at all)."""
    try:
        api_key, version, correlation_id, client_length = _HEADER.unpack_from(frame, 0)
        if api_key != _API_VERSIONS or not 0 <= version <= MAX_VERSION or client_length < -1:
            return None
        end = 10 + max(client_length, 0)
        client_id = frame[10:end]
        if len(client_id) != max(client_length, 0):
            return None
        if version < FLEXIBLE_FROM:
            return (version, correlation_id, client_id) if end == len(frame) else None
        if frame[end]:  # the request header's tagged fields
            return None
        end += 1
        for _ in range(2):  # ClientSoftwareName, ClientSoftwareVersion: one uvarint byte of length + 1
            length = frame[end]
            if not 1 < length < 0x80:
                return None
            start, end = end + 1, end + length
            if end > len(frame) or not SOFTWARE_NAME_VERSION.fullmatch(frame[start:end].decode("ascii")):
                return None
        if frame[end] or end + 1 != len(frame):
            return None
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    return version, correlation_id, client_id


@cache
def _body(version: int, share_groups: bool, cluster: bool = False) -> bytes:
    """The answer's body for ``version``, error none: every key we serve, in key order (the share APIs only when
    share groups are on, the cluster APIs only on several nodes)."""
    keys = advertised_versions(share_groups, cluster)
    if version < FLEXIBLE_FROM:
        body = b"\x00\x00" + struct.pack(">i", len(keys))
        body += b"".join(_KEY.pack(key, low, high) for key, (low, high) in keys)
        return body + (b"\x00\x00\x00\x00" if version >= 1 else b"")  # ThrottleTimeMs 0
    body = b"\x00\x00" + encode_uvarint(len(keys) + 1)
    body += b"".join(_KEY.pack(key, low, high) + b"\x00" for key, (low, high) in keys)
    return body + b"\x00\x00\x00\x00" + b"\x00"  # ThrottleTimeMs 0, no tagged fields


def encode_api_versions_answer(
    version: int, correlation_id: int, share_groups: bool = True, cluster: bool = False
) -> bytes:
    """The whole frame: size, response header v0, body."""
    body = _body(version, share_groups, cluster)
    return _SIZE_CORRELATION.pack(4 + len(body), correlation_id) + body
