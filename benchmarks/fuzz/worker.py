"""The guarded fuzz worker: ``python -m benchmarks.fuzz.worker --memory-mb N``, driven by ``guard.Guard``.

It reads one JSON request a line on stdin and answers one JSON line on stdout. Under ``RLIMIT_AS`` (its address
space at start plus ``--memory-mb``) a huge allocation fails here, in this process: a MemoryError that is reported,
or, from kio's native reader, an abort that the parent sees as this process dying. Either way the process that
runs hypothesis, or the campaign, lives on and reports the frame.

Requests:
- ``{"op": "decode", "frame": HEX}``: ``protocol.codec.decode_request`` (the heartbeat fast path too, and they
  must agree). Allowed: a request, or ProtocolError (the connection would close with that reason).
- ``{"op": "session", "steps": [[HEX, ADVANCE_MS], ...]}``: each frame decoded, dispatched and its answer
  encoded as ``broker/server/pipeline.py`` does it, against a fresh broker state on a manual clock moved by
  ADVANCE_MS after each step; parked answers (a Deferred) are checked once they complete.

An answer is ``{"outcomes": [...], "error": null}`` or with ``error``: ``{"kind", "step", "where", "type",
"message", "traceback"}``. Kinds: ``exception`` (decode raised something other than ProtocolError),
``handler`` (a handler raised: the connection's "request failed"), ``encode`` (the answer does not encode),
``roundtrip`` (it does not decode back with kio, or leaves trailing bytes), ``logged`` (an error logged, as
"timer action failed"), ``slow`` (one step held the loop longer than ``--slow-ms``), ``bloat`` (peak RSS grew by
more than ``--bloat-mb`` in one step), ``unanswered`` (a parked request still parked after every timer ran),
``disagree`` (the Heartbeat fast path and kio read one frame differently).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import sys
import traceback
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from time import perf_counter
from typing import Any, TextIO

import structlog

ROOT = Path(__file__).resolve().parents[2]
# The last step of a session: every timer a fuzzed request can arm (an int32 of milliseconds at most) has run.
FINAL_ADVANCE_MS = 2**31 + 60_000


class Report(Exception):
    """A finding: ends the session with this error."""

    def __init__(self, kind: str, message: str, error: BaseException | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.error = error


def _where(error: BaseException) -> tuple[str, str]:
    """The innermost frame in the project's code (else the innermost at all), and the traceback's last lines."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if f.filename.startswith(str(ROOT)) and "benchmarks" not in f.filename]
    text = "\n".join("".join(traceback.format_exception(error)).splitlines()[-12:])
    if not (ours or frames):
        return "?", text
    frame = (ours or frames)[-1]
    path = Path(frame.filename)
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else frame.filename
    return f"{name}:{frame.lineno} in {frame.name}", text


class Captured:
    """structlog events at error level or with an exception, kept for the session to report."""

    def __init__(self) -> None:
        self.errors: list[dict[str, Any]] = []

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        if method in ("error", "exception", "critical") or event.get("exc_info"):
            info = event.get("exc_info")
            error = sys.exc_info()[1] if info is True else info if isinstance(info, BaseException) else None
            self.errors.append({"event": event.get("event"), "error": error})
        raise structlog.DropEvent


class Worker:
    def __init__(self, slow_ms: float, bloat_mb: int) -> None:
        # Imported here, after the parent asked for a worker: the module's docstring and ROOT cost nothing.
        from broker.api import base
        from broker.api.base import NO_RESPONSE, ApiContext, BrokerIdentity, Call, CloseConnection
        from broker.api.dispatch import HANDLERS
        from broker.coordinator.client import Client
        from protocol.codec import decode_request

        self.slow = slow_ms / 1000
        self.bloat_kb = bloat_mb * 1024
        self.captured = Captured()
        structlog.configure(processors=[self.captured], cache_logger_on_first_use=False)
        self._handlers = HANDLERS
        self._no_response = NO_RESPONSE
        self._close = CloseConnection
        self._call = Call
        self._context = ApiContext
        self._identity = BrokerIdentity(1, "127.0.0.1", 9092, "fuzz-cluster")
        self._client = Client
        self._decode = decode_request
        # What a handler may raise, as broker/server/pipeline.py allows it: InvalidRequest carries the error
        # answer Kafka's KafkaApis.handleError sends (getErrorResponse).
        self._invalid: type[Exception] = getattr(base, "InvalidRequest", Report)

    # -- decode ------------------------------------------------------------------------------------------------

    def decode(self, frame: bytes) -> dict[str, Any]:
        from protocol.apis import SUPPORTED_VERSIONS, ApiKey
        from protocol.errors import ProtocolError
        from protocol.heartbeat import decode_heartbeat

        request: Any = None
        try:
            request = self._decode(frame)
        except ProtocolError as error:
            outcome = ["closed", f"{type(error).__name__}: {error}"]
        except Exception as error:
            return self._error("exception", 0, error)
        else:
            outcome = ["request", f"{request.api_key} v{request.api_version}"]
        heartbeat = decode_heartbeat(frame, SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1])
        if heartbeat is None:
            return {"outcomes": [outcome], "error": None}
        # The fast path answers what it reads: kio must read the same request from the same bytes. The connection
        # decodes the raw client id itself and sends a frame whose client id is not UTF-8 the generic way
        # (RequestPipeline._learn_client_id), so such a frame is the generic path's alone.
        version, correlation_id, client_id, group_id, generation_id, member_id, instance_id = heartbeat
        try:
            client_text = client_id.decode()
        except UnicodeDecodeError:
            return {"outcomes": [outcome], "error": None}
        fast = (version, correlation_id, client_text, group_id, generation_id, member_id, instance_id)
        seen: tuple[Any, ...] = tuple(outcome)
        if request is not None and request.api_key == ApiKey.HEARTBEAT:
            body = request.body
            seen = (request.api_version, request.correlation_id, request.client_id, body.group_id,
                    body.generation_id, body.member_id, getattr(body, "group_instance_id", None))  # fmt: skip
        if seen == fast:
            return {"outcomes": [outcome], "error": None}
        result = self._error("disagree", 0, None, f"fast path {fast!r}, kio {seen!r}")
        result["error"]["where"] = "protocol/heartbeat.py"
        result["outcomes"] = [outcome]
        return result

    # -- sessions ----------------------------------------------------------------------------------------------

    def session(self, steps: list[tuple[bytes, int]]) -> dict[str, Any]:
        from broker.config.settings import Settings
        from broker.coordinator.config import GroupConfig
        from broker.coordinator.coordinator import GroupCoordinator
        from broker.server.broker import BrokerServer
        from broker.timing.clock import ManualClock
        from broker.timing.deferred import Deferred

        clock = ManualClock()
        settings = Settings(
            host="127.0.0.1",
            port=0,
            cluster_id="fuzz-cluster",
            group=GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000),
            topics=(("topic", 3),),
            admin_port=-1,
            log_retention_check_interval_ms=2**30,  # the final advance need not run the check 7,000 times
        )
        server = BrokerServer(settings, clock=clock)
        clock.attach(server.purgatory)
        counter = itertools.count(1)
        # Member ids "<client id>-u1", "-u2"...: the request generator's pool names them.
        server.coordinator = GroupCoordinator(
            settings.group,
            clock,
            server.purgatory,
            new_uuid=lambda: f"u{next(counter)}",
            events=server.events,
            partition_count=server._partition_count,
        )
        api = self._context(server.coordinator, server.topics, self._identity, server.fetches)
        outcomes: list[Any] = []
        parked: list[tuple[Any, Any, int]] = []
        self.captured.errors.clear()
        step = 0
        try:
            for step, (frame, advance) in enumerate(steps):
                started = perf_counter()
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                outcomes.append(self._one(api, frame, parked, step, Deferred))
                clock.advance(max(advance, 0))
                self._answered(parked)
                self._check(step, started, rss)
            step = len(steps)
            clock.advance(FINAL_ADVANCE_MS)
            self._answered(parked)
            self._check(step, perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, slow=False)
            if parked:
                request, _, at = parked[0]
                raise Report(
                    "unanswered",
                    f"{len(parked)} parked answers never completed, the first from step {at} "
                    f"({request.api_key} v{request.api_version})",
                )
        except Report as report:
            result = self._error(report.kind, step, report.error, str(report))
            result["outcomes"] = outcomes
            return result
        except Exception as error:
            result = self._error("timer", step, error)
            result["outcomes"] = outcomes
            return result
        finally:
            server.events.close()
        return {"outcomes": outcomes, "error": None}

    def _one(self, api: Any, frame: bytes, parked: list[tuple[Any, Any, int]], step: int, deferred: Any) -> Any:
        from protocol.errors import ProtocolError

        try:
            request = self._decode(frame)
        except ProtocolError as error:
            return ["closed", f"{type(error).__name__}: {error}"]
        except Exception as error:
            raise Report("exception", f"decode_request raised {error!r}", error) from error
        try:
            if request.body is None:  # an ApiVersions newer than ours: the connection answers v0
                from broker.api.api_versions import unsupported_version_response

                answer = unsupported_version_response()
            else:
                handler = self._handlers[request.api_key]
                answer = handler(api, self._call(request.api_version, self._client("fuzz", "/127.0.0.1")), request.body)
        except self._invalid as invalid:
            answer = invalid.answer  # type: ignore[attr-defined]
        except Exception as error:
            raise Report(
                "handler", f"the {request.api_key} v{request.api_version} handler raised {error!r}", error
            ) from error
        if isinstance(answer, deferred):
            if not answer.done:
                parked.append((request, answer, step))
                return ["parked", f"{request.api_key} v{request.api_version}"]
            answer = answer.value
        if isinstance(answer, self._close):
            return ["closed", answer.reason]
        if answer is self._no_response:
            return ["no answer", f"{request.api_key} v{request.api_version}"]
        self._roundtrip(request, answer)
        return ["answer", f"{request.api_key} v{request.api_version}"]

    def _answered(self, parked: list[tuple[Any, Any, int]]) -> None:
        for entry in [entry for entry in parked if entry[1].done]:
            parked.remove(entry)
            self._roundtrip(entry[0], entry[1].value)

    def _roundtrip(self, request: Any, answer: Any) -> None:
        """The answer encodes, and kio reads it back whole: header, body, no trailing bytes."""
        from kio.serial import entity_reader

        from protocol.apis import ApiKey
        from protocol.codec import encode_response, response_schema

        version = 0 if request.body is None else request.api_version
        name = f"{request.api_key} v{version}"
        try:
            data = encode_response(request.api_key, version, request.correlation_id, answer)
        except Exception as error:
            raise Report("encode", f"the {name} answer does not encode: {error!r}", error) from error
        try:
            schema = response_schema(request.api_key, version)
            header_cls = (
                response_schema(ApiKey.API_VERSIONS, 0).__header_schema__
                if request.api_key == ApiKey.API_VERSIONS
                else schema.__header_schema__
            )
            payload = data[4:]
            header, offset = entity_reader(header_cls)(payload, 0)
            _, consumed = entity_reader(schema)(payload, offset)
        except Exception as error:
            raise Report("roundtrip", f"the {name} answer does not decode back: {error!r}", error) from error
        if int.from_bytes(data[:4], "big") != len(payload) or offset + consumed != len(payload):
            raise Report("roundtrip", f"the {name} answer has {len(payload) - offset - consumed} trailing bytes")
        if header.correlation_id != request.correlation_id:
            raise Report("roundtrip", f"the {name} answer carries correlation id {header.correlation_id}")

    def _check(self, step: int, started: float, rss_kb: int, slow: bool = True) -> None:
        if self.captured.errors:
            first = self.captured.errors[0]
            raise Report("logged", f"logged an error: {first['event']}", first["error"])
        elapsed = perf_counter() - started
        if slow and elapsed > self.slow:
            raise Report("slow", f"step {step} held the loop {elapsed * 1000:.0f} ms")
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_kb
        if grown > self.bloat_kb:
            raise Report("bloat", f"step {step} grew peak RSS by {grown // 1024} MB")

    @staticmethod
    def _error(kind: str, step: int, error: BaseException | None, message: str | None = None) -> dict[str, Any]:
        where, text = _where(error) if error is not None else ("", "")
        return {
            "outcomes": [],
            "error": {
                "kind": kind,
                "step": step,
                "where": where,
                "type": type(error).__name__ if error is not None else "",
                "message": message or repr(error),
                "traceback": text,
            },
        }


def _address_space_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz.worker")
    parser.add_argument("--memory-mb", type=int, default=1024, help="address space allowed beyond the start's")
    parser.add_argument("--slow-ms", type=float, default=2000, help="a step longer than this is a finding")
    parser.add_argument("--bloat-mb", type=int, default=256, help="a step growing peak RSS more is a finding")
    args = parser.parse_args()
    # Answers go to the parent on a private copy of stdout; anything printed by mistake lands on stderr.
    out: TextIO = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    worker = Worker(args.slow_ms, args.bloat_mb)
    worker.session([])  # imports, kio's schema caches and the broker's state built once before the limit
    limit = (_address_space_kb() + args.memory_mb * 1024) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    print(json.dumps({"ready": os.getpid()}), file=out, flush=True)
    for line in sys.stdin:
        message = json.loads(line)
        if message["op"] == "decode":
            answer = worker.decode(bytes.fromhex(message["frame"]))
        elif message["op"] == "session":
            answer = worker.session([(bytes.fromhex(frame), int(ms)) for frame, ms in message["steps"]])
        else:
            answer = {"error": {"kind": "protocol", "message": f"unknown op {message['op']!r}"}}
        print(json.dumps(answer), file=out, flush=True)


if __name__ == "__main__":
    main()
