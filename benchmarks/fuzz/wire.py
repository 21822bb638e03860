"""The campaign's side of the wire: the broker process under test, and a well-behaved consumer beside the fuzz.

``BrokerProcess`` runs ``python -m broker serve`` on a port it picks (``--port 0``, read back from the "broker
listening" log line), under ``RLIMIT_AS`` so that a memory bomb kills the broker rather than the machine, and
reads its RSS from /proc. ``GoodConsumer`` does what a real consumer does, over and over, while the fuzz runs: join
(with KIP-394's member id round trip), sync, heartbeats, leave; every answer it waits for is timed and checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import resource
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from benchmarks.fuzz.requests import assignment, encode, subscription
from protocol.apis import ApiKey
from protocol.codec import build, nested

ROOT = Path(__file__).resolve().parents[2]
MEMBER_ID_REQUIRED = 79


class BrokerProcess:
    """One broker process; ``start`` again after it died starts a new one (with a new log file)."""

    def __init__(self, log_dir: Path, memory_mb: int, extra: tuple[str, ...] = ()) -> None:
        self.log_dir = log_dir
        self.memory_mb = memory_mb
        self.extra = extra
        self.logs: list[Path] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._log: IO[bytes] | None = None

    def start(self, timeout: float = 20.0) -> None:
        log_path = self.log_dir / f"broker-{len(self.logs)}.log"
        self.logs.append(log_path)
        self._log = log_path.open("wb")
        limit = self.memory_mb * 1024 * 1024

        def limit_memory() -> None:  # in the child, before exec: a bomb fails there, not on this machine
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "broker",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--log-format",
                "json",
                "--admin-port",
                "-1",
                "--group-initial-rebalance-delay-ms",
                "0",
                "--group-min-session-timeout-ms",
                "1000",
                "--topic",
                "topic:3",
                *self.extra,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=limit_memory if self.memory_mb > 0 else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the broker exited with {self.process.returncode}: {log_path.read_text()[-2000:]}")
            for line in log_path.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if record.get("event") == "broker listening":
                        self.port = int(record["port"])
                        return
            time.sleep(0.05)
        raise TimeoutError(f"the broker did not listen within {timeout} s")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def exit_status(self) -> str:
        code = self.process.returncode if self.process is not None else None
        return "running" if code is None else f"signal {-code}" if code < 0 else f"exit {code}"

    def rss_kb(self) -> int:
        if not self.alive or self.process is None:
            return 0
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


# -- a raw client -------------------------------------------------------------------------------------------------


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._correlation = 0

    @classmethod
    async def open(cls, port: int, client_id: str) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, client_id)

    async def call(self, request: Any, timeout: float) -> Any:
        self._correlation += 1
        self.writer.write(encode(request, self._correlation, self.client_id).sized())
        await self.writer.drain()
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
        frame = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        api, version = int(request.__api_key__), int(request.__version__)
        schema = load_response_schema(api, version)
        header, offset = entity_reader(schema.__header_schema__)(frame, 0)
        body, consumed = entity_reader(schema)(frame, offset)
        if header.correlation_id != self._correlation or offset + consumed != len(frame):
            raise ValueError(f"answer to {api} v{version} does not parse exactly")
        return body

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


def request(api: int, version: int, /, **values: Any) -> Any:
    return build(load_request_schema(api, version), **values)


@dataclass
class GoodConsumer:
    """A consumer that behaves, beside the fuzz: every answer must come, parse, and carry no error."""

    port: int
    name: str = "good"
    timeout: float = 5.0
    cycles: int = 0
    answered: int = 0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    async def cycle(self, heartbeats: int = 5, interval: float = 0.05) -> None:
        group = f"{self.name}-{self.cycles}"
        try:
            connection = await Connection.open(self.port, f"{self.name}-consumer")
        except OSError as error:
            self.failures.append(f"connect: {error!r}")
            return
        try:
            await self._cycle(connection, group, heartbeats, interval)
            self.cycles += 1
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
            self.failures.append(f"{group}: {error!r}")
        finally:
            await connection.close()

    async def _timed(self, connection: Connection, body: Any) -> Any:
        started = time.perf_counter()
        answer = await connection.call(body, self.timeout)
        self.latencies.append(time.perf_counter() - started)
        self.answered += 1
        return answer

    async def _cycle(self, connection: Connection, group: str, heartbeats: int, interval: float) -> None:
        versions = await self._timed(
            connection, request(ApiKey.API_VERSIONS, 3, client_software_name="good", client_software_version="1")
        )
        self._expect(versions.error_code, "ApiVersions")
        member_id = ""
        protocol = nested(load_request_schema(ApiKey.JOIN_GROUP, 5), "JoinGroupRequestProtocol")
        for _ in range(2):  # KIP-394: the first JoinGroup only hands out the member id
            joined = await self._timed(
                connection,
                request(
                    ApiKey.JOIN_GROUP,
                    5,
                    group_id=group,
                    session_timeout=_ms(10_000),
                    rebalance_timeout=_ms(10_000),
                    member_id=member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(build(protocol, name="range", metadata=subscription(["topic"])),),
                ),
            )
            member_id = joined.member_id
            if joined.error_code.value != MEMBER_ID_REQUIRED:
                break
        self._expect(joined.error_code, "JoinGroup")
        generation = joined.generation_id
        sync_assignment = nested(load_request_schema(ApiKey.SYNC_GROUP, 3), "SyncGroupRequestAssignment")
        synced = await self._timed(
            connection,
            request(
                ApiKey.SYNC_GROUP,
                3,
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=None,
                assignments=(build(sync_assignment, member_id=member_id, assignment=assignment({"topic": [0, 1, 2]})),),
            ),
        )
        self._expect(synced.error_code, "SyncGroup")
        for _ in range(heartbeats):
            beat = await self._timed(
                connection, request(ApiKey.HEARTBEAT, 4, group_id=group, generation_id=generation, member_id=member_id)
            )
            self._expect(beat.error_code, "Heartbeat")
            await asyncio.sleep(interval)
        identity = nested(load_request_schema(ApiKey.LEAVE_GROUP, 3), "MemberIdentity")
        left = await self._timed(
            connection,
            request(
                ApiKey.LEAVE_GROUP,
                3,
                group_id=group,
                members=(build(identity, member_id=member_id, group_instance_id=None),),
            ),
        )
        self._expect(left.error_code, "LeaveGroup")

    @staticmethod
    def _expect(error_code: Any, api: str) -> None:
        if error_code.value != 0:
            raise ValueError(f"{api} answered {error_code.name}")

    def percentile(self, fraction: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)
