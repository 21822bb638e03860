"""The live fuzz campaign: a broker process, many connections sending mutated frames (valid ones interleaved), a
well-behaved consumer beside them, and afterwards the checks of issue 14.

Each fuzz connection sends a burst of frames (most mutated, some valid, now and then a lie at the stream level:
a size prefix larger than what follows, a negative or oversized one, a frame trickled a byte at a time), then a
valid ApiVersions whose answer says the broker has read everything before it (answers come in order), then hangs
up. Every frame carries a client id of its own (``f<round>.<connection>.<n>``): a log line that names a client id names
the frame, so a traceback in the log comes with its reproducer.

Afterwards: the process is alive (deaths are counted, with the frames last sent, and the broker restarted); the
log holds no internal error ("request failed", "timer action failed", "Fatal error", "Traceback", any
error-level record); the good consumer got every answer; RSS is back near where it started.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import random
import re
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.fuzz.mutate import apply, random_mutations
from benchmarks.fuzz.requests import build_request, encode, pick_api
from benchmarks.fuzz.wire import BrokerProcess, GoodConsumer, request
from protocol.apis import ApiKey

SENTINEL = 0x7FFF0000  # the correlation id of the closing ApiVersions of each burst
_INTERNAL = re.compile(r"Traceback|Fatal error|Exception in callback|request failed|timer action failed")


@dataclass
class Options:
    frames: int = 200_000
    seed: int = 14
    connections: int = 32
    mutate: float = 0.75  # the share of frames that are mutated
    burst: int = 12  # frames per connection before it hangs up, at most
    memory_mb: int = 4096  # RLIMIT_AS of the broker process
    wait: float = 2.0  # how long a burst waits for its closing answer
    log_dir: Path = Path("fuzz-logs")
    extra: tuple[str, ...] = ("--storage-max-bytes", "16777216")  # stored records are not what RSS should show
    settle: float = 3.0  # after the run, before the last RSS reading
    rounds: int = 1  # the whole run again against the same broker: a leak grows each round, warm-up does not


@dataclass
class Finding:
    kind: str  # "death", "internal error"
    detail: str
    frames: list[str]  # hex of the frames that may have caused it (with size prefix)


@dataclass
class Report:
    frames_sent: int = 0
    mutated_sent: int = 0
    stream_lies: int = 0
    bytes_sent: int = 0
    answers: int = 0
    connections: int = 0
    closed_by_broker: int = 0
    burst_timeouts: int = 0
    deaths: int = 0
    internal_errors: int = 0
    close_reasons: collections.Counter[str] = field(default_factory=collections.Counter)
    rss_start_kb: int = 0
    rss_peak_kb: int = 0
    rss_end_kb: int = 0
    rss_rounds_kb: list[int] = field(default_factory=list)  # RSS after each round, settled
    good_cycles: int = 0
    good_answers: int = 0
    good_failures: list[str] = field(default_factory=list)
    good_p99_ms: float = 0.0
    good_max_ms: float = 0.0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["close_reasons"] = dict(self.close_reasons.most_common())
        data["findings"] = [finding.__dict__ for finding in self.findings]
        return data


class Campaign:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.report = Report()
        self.broker = BrokerProcess(options.log_dir, options.memory_mb, options.extra)
        self.sent: dict[str, bytes] = {}  # client id -> the frame it was sent with
        self.recent: collections.deque[str] = collections.deque(maxlen=64)  # client ids, newest last
        self._remaining = options.frames
        self._reserved = 0  # frames taken by bursts under way
        self._restarting: asyncio.Lock | None = None
        self._sentinel = encode(request(ApiKey.API_VERSIONS, 0), SENTINEL, "sentinel").sized()

    async def run(self) -> Report:
        options = self.options
        # A write racing the broker's hang-up is expected here, thousands of times: asyncio need not say so.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        options.log_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.broker.start()
        self._restarting = asyncio.Lock()
        good = GoodConsumer(self.broker.port)
        await good.cycle(heartbeats=2)  # the broker has answered everything once: this is its resting RSS
        self.report.rss_start_kb = self.report.rss_peak_kb = self.broker.rss_kb()
        for round_ in range(options.rounds):
            self._remaining = options.frames
            done = asyncio.Event()
            watcher = asyncio.create_task(self._watch(done))
            consumer = asyncio.create_task(self._good(good, done))
            try:
                await asyncio.gather(*(self._fuzz(index, round_) for index in range(options.connections)))
            finally:
                done.set()
                await asyncio.gather(watcher, consumer)
            await asyncio.sleep(options.settle)
            await good.cycle(heartbeats=3)  # after the run, a good client is still answered
            self.report.rss_rounds_kb.append(self.broker.rss_kb())
        self.report.rss_end_kb = self.report.rss_rounds_kb[-1]
        if not self.broker.alive:
            self._death()
        self.broker.stop()
        self.report.seconds = time.monotonic() - started
        self.report.good_cycles, self.report.good_answers = good.cycles, good.answered
        self.report.good_failures = good.failures
        self.report.good_p99_ms = good.percentile(0.99) * 1000
        self.report.good_max_ms = max(good.latencies, default=0.0) * 1000
        self._read_logs()
        return self.report

    # -- the fuzz connections ----------------------------------------------------------------------------------

    def _take(self, count: int) -> int:
        count = min(count, self._remaining)
        self._remaining -= count
        self._reserved += count
        return count

    async def _fuzz(self, index: int, round_: int) -> None:
        r = random.Random((self.options.seed * 1_000 + round_) * 1_000_003 + index)
        sequence = 0
        while self._remaining > 0 or self._reserved > 0:
            burst = self._take(r.randint(1, self.options.burst))
            if not burst:  # others hold the rest: some of it may come back
                await asyncio.sleep(0.01)
                continue
            frames: list[tuple[str, bytes, bool]] = []
            for _ in range(burst):
                sequence += 1
                client_id = f"f{round_}.{index}.{sequence}"
                frames.append((client_id, *self._frame(r, client_id, sequence)))
            # Valid frames first: the broker hangs up at the first frame it cannot read, so a mutated frame
            # ahead of valid ones would hide them; mutated frames that it can read still come before the rest.
            frames.sort(key=lambda entry: entry[2])
            await self._burst(r, frames)

    def _frame(self, r: random.Random, client_id: str, correlation_id: int) -> tuple[bytes, bool]:
        api, version = pick_api(r)
        valid = encode(build_request(r, api, version), correlation_id, client_id)
        mutated = r.random() < self.options.mutate
        payload = apply(valid, random_mutations(r)) if mutated else valid.payload
        return struct.pack(">i", len(payload)) + payload, mutated

    async def _burst(self, r: random.Random, frames: list[tuple[str, bytes, bool]]) -> None:
        """Sends the frames on a new connection until the broker hangs up; the frames it did not get go back to
        the budget, so that ``--frames`` counts frames written to a broker that was reading."""
        written: list[str] = []
        try:
            await self._send(r, frames, written)
        finally:
            self._reserved -= len(frames)
            self._remaining += len(frames) - len(written)

    async def _send(self, r: random.Random, frames: list[tuple[str, bytes, bool]], written: list[str]) -> None:
        await self._wait_alive()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.broker.port)
        except OSError:
            return
        self.report.connections += 1
        answers = asyncio.create_task(self._read(reader))
        try:
            for client_id, data, mutated in frames:
                if answers.done():  # the broker hung up: the rest of the burst would go nowhere
                    break
                self.sent[client_id] = data
                self.recent.append(client_id)
                lie = r.random() < 0.003
                if lie:
                    self.report.stream_lies += 1
                    data = _stream_lie(r, data)
                if r.random() < 0.005:  # trickled: one byte per write
                    for byte in range(len(data)):
                        writer.write(data[byte : byte + 1])
                        await writer.drain()
                else:
                    writer.write(data)
                self.report.frames_sent += 1
                written.append(client_id)
                self.report.mutated_sent += mutated
                self.report.bytes_sent += len(data)
                if lie:  # nothing after it is read as sent: see what the broker does, then hang up
                    await asyncio.wait_for(asyncio.shield(answers), 0.2)
            if answers.done():
                return
            writer.write(self._sentinel)
            await asyncio.wait_for(writer.drain(), self.options.wait)
            await asyncio.wait_for(asyncio.shield(answers), self.options.wait)
        except (OSError, TimeoutError):
            pass
        finally:
            if not answers.done():
                self.report.burst_timeouts += 1
                answers.cancel()
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()
            with contextlib.suppress(asyncio.CancelledError):
                await answers

    async def _read(self, reader: asyncio.StreamReader) -> None:
        """Reads answers until the sentinel's (or the broker hangs up)."""
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                self.report.answers += 1
                if frame[:4] == SENTINEL.to_bytes(4, "big"):
                    return
        except (asyncio.IncompleteReadError, OSError):
            self.report.closed_by_broker += 1

    # -- the broker's health -----------------------------------------------------------------------------------

    async def _wait_alive(self) -> None:
        assert self._restarting is not None
        if self.broker.alive:
            return
        async with self._restarting:
            if not self.broker.alive:
                self._death()
                await asyncio.to_thread(self.broker.start)

    def _death(self) -> None:
        self.report.deaths += 1
        frames = [self.sent[client_id].hex() for client_id in list(self.recent)[-8:]]
        self.report.findings.append(Finding("death", f"broker {self.broker.exit_status}", frames))

    async def _watch(self, done: asyncio.Event) -> None:
        while not done.is_set():
            self.report.rss_peak_kb = max(self.report.rss_peak_kb, self.broker.rss_kb())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.25)

    async def _good(self, good: GoodConsumer, done: asyncio.Event) -> None:
        while not done.is_set():
            await self._wait_alive()
            good.port = self.broker.port
            await good.cycle()

    def _read_logs(self) -> None:
        for path in self.broker.logs:
            self.report.logs.append(str(path))
            for line in path.read_text(errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if isinstance(record, dict):
                    if record.get("event") == "closing connection":
                        self.report.close_reasons[_reason_class(str(record.get("reason", "")))] += 1
                    if record.get("level") in ("error", "critical") or "exception" in record:
                        self._internal(str(record.get("event")), record)
                elif _INTERNAL.search(line):
                    self._internal(line.strip()[:200], {})

    def _internal(self, detail: str, record: dict[str, Any]) -> None:
        self.report.internal_errors += 1
        if len(self.report.findings) >= 50:
            return
        client_id = str(record.get("client_id", ""))
        frame = self.sent.get(client_id)
        exception = str(record.get("exception", "")).strip().splitlines()
        text = f"{detail} (client {client_id or '?'}, {record.get('api', '')}): {exception[-1] if exception else ''}"
        self.report.findings.append(Finding("internal error", text, [frame.hex()] if frame else []))


def _stream_lie(r: random.Random, data: bytes) -> bytes:
    """A size prefix that lies: more than follows (the broker waits for bytes that never come), negative, or
    past socket.request.max.bytes; or bytes that are not a frame at all."""
    choice = r.randrange(4)
    if choice == 0:
        return struct.pack(">i", len(data) + r.randint(1, 1000)) + data[4:]
    if choice == 1:
        return struct.pack(">i", -r.randint(1, 2**31)) + data[4:]
    if choice == 2:
        return struct.pack(">i", r.choice((2**31 - 1, 104_857_601, 2**30))) + data[4:]
    return r.randbytes(r.randint(1, 64))


_NUMBER = re.compile(r"-?\d+")
_API = re.compile(r"\b[A-Z][A-Z_]+ v-?\d+")


def _reason_class(reason: str) -> str:
    """A close reason with its particulars taken out, so that reasons of one kind count together."""
    text = _NUMBER.sub("N", _API.sub("API vN", reason))
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return "".join(c if c.isprintable() else "?" for c in text[:90])


def run(options: Options) -> Report:
    return asyncio.run(Campaign(options).run())
