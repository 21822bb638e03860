"""The control API's socket (broker/server/control_listener.py): bound at start-up, aiohttp loaded at its first
connection, prometheus_client at the first scrape (issue 17: idle RSS < 40 MB). Real sockets, a real broker."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

import broker.server.control_listener as listener_module
from broker.server.broker import BrokerServer
from tests.conftest import broker_settings

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

# A serve process with the real argv: once its state is built it reports which libraries are loaded, then again
# after an HTTP request, then after a scrape of /metrics.
PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.argv = ["group-broker", "serve", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0",
                "--log-level", "warning"]
    import broker.cli.main as cli

    def loaded():
        return {name: name in sys.modules for name in ("aiohttp", "prometheus_client", "broker.control.app")}

    async def get(port, path):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n".encode())
        answer = await reader.read()
        writer.close()
        return answer.split(b" ", 2)[1].decode()

    class Done(Exception):
        pass

    serve = cli._serve

    async def probe_serve(config):
        import broker.server.broker as server
        start = server.BrokerServer.start

        async def started(self):
            await start(self)
            report = {"idle": loaded()}
            report["healthz"] = await get(self.control.port, "/healthz")
            report["after_http"] = loaded()
            report["metrics"] = await get(self.control.port, "/metrics")
            report["after_scrape"] = loaded()
            print(json.dumps(report))
            raise Done

        server.BrokerServer.start = started
        return await serve(config)

    cli._serve = probe_serve
    try:
        cli.main()
    except Done:
        pass
    """
)


def test_an_idle_broker_has_loaded_neither_aiohttp_nor_prometheus_client() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(done.stdout)
    assert report["idle"] == {"aiohttp": False, "prometheus_client": False, "broker.control.app": False}
    assert report["healthz"] == "200"
    assert report["after_http"] == {"aiohttp": True, "prometheus_client": False, "broker.control.app": True}
    assert report["metrics"] == "200"
    assert report["after_scrape"]["prometheus_client"] is True


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(broker_settings(admin_port=0))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def _port(server: BrokerServer) -> int:
    assert server.control is not None
    return server.control.port


async def _answers(reader: asyncio.StreamReader) -> list[bytes]:
    """The status codes of every HTTP answer until the server closes (bodies carry no status line)."""
    return re.findall(rb"HTTP/1\.1 (\d{3}) ", await asyncio.wait_for(reader.read(), 10))


async def test_a_request_sent_in_pieces_before_the_api_loads_is_answered(server: BrokerServer) -> None:
    assert server.control is not None and server.control.api is None
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    for piece in (HEALTHZ[:5], HEALTHZ[5:20], HEALTHZ[20:]):
        writer.write(piece)
        await writer.drain()
    writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")  # pipelined behind it
    assert await _answers(reader) == [b"200", b"200"]
    writer.close()
    assert server.control.api is not None


async def test_end_of_file_before_the_api_loads_is_handled_as_aiohttp_handles_it(server: BrokerServer) -> None:
    """A request then a half-close: aiohttp closes such a connection without answering (its protocol's
    eof_received lets the transport close); a connection waiting for the load gets the same, and so does the
    next one, served by aiohttp straight away."""
    outcomes = []
    for _ in range(2):
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
        writer.write(HEALTHZ)
        writer.write_eof()
        outcomes.append(await _answers(reader))
        writer.close()
    assert outcomes[0] == outcomes[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert await _answers(reader) == [b"200"]  # and the API goes on serving
    writer.close()


async def test_many_first_connections_and_one_that_leaves_early(server: BrokerServer) -> None:
    leaver = await asyncio.open_connection("127.0.0.1", _port(server))
    staying = [await asyncio.open_connection("127.0.0.1", _port(server)) for _ in range(5)]
    leaver[1].close()
    for _, writer in staying:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    for reader, writer in staying:
        assert await _answers(reader) == [b"200"]
        writer.close()


async def test_a_failed_load_closes_the_waiting_connections_and_the_next_one_loads_again(
    server: BrokerServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(listener_module, "_APP_MODULE", "broker.control.no_such_module")
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    writer.write(HEALTHZ)
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(reader.readexactly(1), 10)
    writer.close()
    monkeypatch.undo()
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert await _answers(reader) == [b"200"]
    writer.close()
    # Kafka never stopped answering meanwhile.
    kafka_reader, kafka_writer = await asyncio.open_connection("127.0.0.1", server.port)
    kafka_writer.write(b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x07\x00\x02ab")  # ApiVersions v0
    size = int.from_bytes(await asyncio.wait_for(kafka_reader.readexactly(4), 10), "big")
    assert (await kafka_reader.readexactly(size))[:6] == b"\x00\x00\x00\x07\x00\x00"
    kafka_writer.close()


async def test_stop_closes_connections_that_wait_for_the_api(
    server: BrokerServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = threading.Event()
    real = listener_module.importlib.import_module

    def slow_import(name: str) -> Any:
        held.wait(10)
        return real(name)

    monkeypatch.setattr(listener_module, "importlib", SimpleNamespace(import_module=slow_import))
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    writer.write(HEALTHZ)
    await asyncio.sleep(0.05)
    threading.Timer(0.2, held.set).start()
    await server.stop()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, never answered
    writer.close()


async def test_the_control_port_accepts_before_the_state_is_built(held_imports: threading.Event) -> None:
    """A script that waited for the Kafka port finds the control API there too (issue 18: no connection refused
    while the broker starts); /readyz says "starting" until the state is built."""
    server = BrokerServer(broker_settings(admin_port=0), load_in_background=True)
    starting = asyncio.create_task(server.start())
    try:
        while server.control is None:
            await asyncio.sleep(0.001)
        assert not server.ready
        reader, writer = await asyncio.open_connection("127.0.0.1", server.control.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = await asyncio.wait_for(reader.readuntil(b'{"status": "starting"}'), 10)
        assert re.findall(rb"HTTP/1\.1 (\d{3}) ", data) == [b"200", b"503"]
        held_imports.set()
        await starting
        assert server.ready
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert await _answers(reader) == [b"200"]
        writer.close()
    finally:
        held_imports.set()
        if not starting.done():
            await starting
        await server.stop()


async def test_a_large_request_sent_before_the_api_loads_is_read_to_the_end(server: BrokerServer) -> None:
    """Past _HELD_BYTES the waiting connection stops reading; handed over, aiohttp reads the rest and answers
    (the whole body read, it is no JSON: 400)."""
    body = b"x" * (listener_module._HELD_BYTES * 3)
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(server))
    head = f"POST /v1/faults HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    writer.write(head.encode() + b"Connection: close\r\n\r\n")
    sending = asyncio.ensure_future(_send_all(writer, body))
    assert await _answers(reader) == [b"400"]
    assert sending.done()  # every byte went out: the server read them all
    sending.cancel()
    writer.close()


async def _send_all(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        writer.write(data)
        await writer.drain()
    except ConnectionError:
        pass  # the server may answer and close before it has read everything
