"""A raw Kafka protocol client for wire tests: kio encodes requests, kio decodes answers."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from protocol.apis import ApiKey
from protocol.codec import build, nested


class WireClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._correlation = itertools.count(1)

    @classmethod
    async def connect(cls, port: int, client_id: str = "wire-test") -> WireClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, client_id)

    def encode(self, request: Any, correlation_id: int | None = None) -> bytes:
        header_cls = type(request).__header_schema__
        header = header_cls(
            request_api_key=i16(request.__api_key__),
            request_api_version=i16(request.__version__),
            correlation_id=i32(next(self._correlation) if correlation_id is None else correlation_id),
            client_id=self.client_id,
        )
        buffer = io.BytesIO()
        entity_writer(header_cls)(buffer, header)
        entity_writer(type(request))(buffer, request)
        payload = buffer.getvalue()
        return struct.pack(">i", len(payload)) + payload

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self, timeout: float = 5.0) -> bytes:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
        return await asyncio.wait_for(self.reader.readexactly(size), timeout)

    def decode(self, api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
        schema = load_response_schema(api_key, version)
        header_cls = schema.__header_schema__
        if api_key == ApiKey.API_VERSIONS:
            header_cls = load_response_schema(ApiKey.API_VERSIONS, 0).__header_schema__
        header, offset = entity_reader(header_cls)(frame, 0)
        body, consumed = entity_reader(schema)(frame, offset)  # kio returns the byte count, not the end
        assert offset + consumed == len(frame), f"{len(frame) - offset - consumed} trailing bytes in the response"
        return header.correlation_id, body

    async def call(self, request: Any, timeout: float = 5.0) -> Any:
        correlation_id = next(self._correlation)
        await self.send_raw(self.encode(request, correlation_id))
        frame = await self.read_frame(timeout)
        answered, body = self.decode(request.__api_key__, request.__version__, frame)
        assert answered == correlation_id
        return body

    async def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker hangs up (EOF) without sending anything more."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), timeout)
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            await self.writer.wait_closed()


def request_schema(api_key: int, version: int) -> Any:
    return load_request_schema(api_key, version)


# Opens a client connection to the test's broker (the ``connect`` fixture in tests/wire/conftest.py).
Connect = Callable[..., Awaitable[WireClient]]


def request(api: int, version: int, /, **values: Any) -> Any:
    """The request of ``api`` at ``version`` from the fields that version has."""
    return build(load_request_schema(api, version), **values)


def part(api: int, version: int, name: str, /, **values: Any) -> Any:
    """A nested structure ``name`` of that request."""
    return build(nested(load_request_schema(api, version), name), **values)
