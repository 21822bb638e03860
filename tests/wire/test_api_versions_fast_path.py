"""ApiVersions answered by hand (protocol/api_versions.py) against kio's generic path, over real connections.

The fast path is what ``serve`` answers first, before kio's readers load (issue 17); it must give the same bytes
as the generic path for every version, and hand every unusual request to it."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest as V3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as V4
from kio.schema.errors import ErrorCode

import broker.server.pipeline as pipeline_module
from broker.server.broker import BrokerServer
from protocol.api_versions import decode_api_versions, encode_api_versions_answer
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, advertised_versions
from protocol.codec import decode_request
from tests.wire.client import Connect, WireClient

# What a one-node broker lists: every supported API but the cluster ones (protocol/apis.py CLUSTER_APIS).
ONE_NODE = dict(advertised_versions(share_groups=True))


def request(version: int, name: str = "kafka-python", software: str = "2.0.2") -> Any:
    if version >= 3:
        cls = V4 if version == 4 else V3
        return cls(client_software_name=name, client_software_version=software)
    return load_request_schema(ApiKey.API_VERSIONS, version)()


@pytest.fixture
def generic_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The api key of every request that took the generic path (the real decoder, counted)."""
    calls: list[int] = []

    def counted(frame: bytes) -> Any:
        decoded = decode_request(frame)
        calls.append(decoded.api_key)
        return decoded

    monkeypatch.setattr(pipeline_module, "decode_request", counted)
    yield calls


def arm_generic(server: BrokerServer) -> None:
    # Any armed fault rule sends every request the generic way; this one matches nothing.
    server.faults.add({"api": "Heartbeat", "action": "delay", "delay_ms": 1, "client_id": "nobody"})


async def answer(client: WireClient, data: bytes) -> bytes:
    await client.send_raw(data)
    return await client.read_frame()


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] + 1))
@pytest.mark.parametrize("client_id", ["wire-test", ""])
async def test_every_version_is_answered_by_hand_with_the_generic_paths_bytes(
    server: BrokerServer, connect: Connect, generic_calls: list[int], version: int, client_id: str
) -> None:
    client = await connect(client_id)
    data = client.encode(request(version), 77)
    fast = await answer(client, data)
    assert generic_calls == []
    arm_generic(server)
    generic = await answer(client, data)
    assert generic_calls == [ApiKey.API_VERSIONS]
    assert fast == generic
    correlation, body = client.decode(ApiKey.API_VERSIONS, version, fast)
    assert correlation == 77 and body.error_code is ErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == ONE_NODE


async def test_a_null_client_id_is_answered_by_hand(
    server: BrokerServer, connect: Connect, generic_calls: list[int]
) -> None:
    client = await connect()
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 2, 9, -1)  # v2, client id null
    frame = struct.pack(">i", len(payload)) + payload
    fast = await answer(client, frame)
    arm_generic(server)
    assert await answer(client, frame) == fast
    assert generic_calls == [ApiKey.API_VERSIONS]


@pytest.mark.parametrize(
    ("name", "software"),
    [("", "1.0"), ("-bad", "1.0"), ("ok", "1.0-"), ("nämlich", "1.0"), ("a" * 200, "1.0")],
)
async def test_what_the_hand_path_does_not_take_gets_the_generic_answer(
    connect: Connect, generic_calls: list[int], name: str, software: str
) -> None:
    """A software name Kafka refuses (KIP-511), or one of 127+ bytes (a two-byte length): the generic path."""
    client = await connect()
    body = await client.call(request(3, name, software))
    assert generic_calls == [ApiKey.API_VERSIONS]
    valid = len(name) == 200
    assert body.error_code is (ErrorCode.none if valid else ErrorCode.invalid_request)
    assert len(body.api_keys) == (len(ONE_NODE) if valid else 0)


async def test_a_version_newer_than_ours_and_a_tagged_header_take_the_generic_path(
    connect: Connect, generic_calls: list[int]
) -> None:
    client = await connect()
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 5, 1) + b"x" + b"\x00\x02a\x02b\x00"
    newer = await answer(client, struct.pack(">i", len(payload)) + payload)
    _, body = client.decode(ApiKey.API_VERSIONS, 0, newer)
    assert body.error_code is ErrorCode.unsupported_version
    # Request header v2 with an unknown tagged field (tag 7, 1 byte): the bounds pass cuts it, kio answers.
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 6, 1) + b"x" + b"\x01\x07\x01\x00" + b"\x02a\x02b\x00"
    tagged = await answer(client, struct.pack(">i", len(payload)) + payload)
    _, body = client.decode(ApiKey.API_VERSIONS, 3, tagged)
    assert body.error_code is ErrorCode.none
    assert generic_calls == [ApiKey.API_VERSIONS, ApiKey.API_VERSIONS]


async def test_a_fault_rule_on_api_versions_still_applies(server: BrokerServer, connect: Connect) -> None:
    server.faults.add({"api": "ApiVersions", "action": "close", "client_id": "doomed"})
    doomed, spared = await connect("doomed"), await connect("spared")
    await doomed.send_raw(doomed.encode(request(3)))
    assert await doomed.closed_by_peer()
    assert (await spared.call(request(3))).error_code is ErrorCode.none


def test_the_decoder_refuses_every_cut_of_a_good_frame() -> None:
    """Each proper prefix of a valid v3 request (and any trailing byte) is left to the generic path."""
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 1, 2) + b"id" + b"\x00\x03ab\x04123\x00"
    assert decode_api_versions(payload) == (3, 1, b"id")
    for cut in range(len(payload)):
        assert decode_api_versions(payload[:cut]) is None, cut
    assert decode_api_versions(payload + b"\x00") is None
    assert decode_api_versions(struct.pack(">hhih", ApiKey.API_VERSIONS, 0, 1, -2)) is None  # a length below -1
    assert encode_api_versions_answer(0, 1)[4:8] == b"\x00\x00\x00\x01"
