"""The fuzzer's starting point is sound: for every API and version the broker serves, the generated request is
valid (the broker decodes it, and kio reads back the same request), and the writes it notes cover the frame
exactly, so the mutations aim at real field boundaries."""

from __future__ import annotations

import random

import pytest
from kio.index import load_request_schema
from kio.serial import entity_reader

from benchmarks.fuzz.requests import ALL_VERSIONS, build_request, encode
from protocol.apis import api_name
from protocol.codec import decode_request


@pytest.mark.parametrize(("api_key", "version"), ALL_VERSIONS, ids=[f"{api_name(a)}-v{v}" for a, v in ALL_VERSIONS])
def test_generated_requests_are_valid_and_their_writes_cover_the_frame(api_key: int, version: int) -> None:
    r = random.Random(api_key * 100 + version)
    for correlation_id in range(20):
        body = build_request(r, api_key, version)
        frame = encode(body, correlation_id)
        request = decode_request(frame.payload)
        assert (request.api_key, request.api_version, request.correlation_id) == (api_key, version, correlation_id)
        assert request.client_id == "fuzz"
        schema = load_request_schema(api_key, version)
        _, offset = entity_reader(schema.__header_schema__)(frame.payload, 0)
        again, size = entity_reader(schema)(frame.payload, offset)
        assert offset + size == len(frame.payload)
        assert encode(again, correlation_id).payload == frame.payload
        position = 0
        for start, length in frame.tokens:
            assert start == position
            position += length
        assert position == len(frame.payload)
