"""The parent side of the guarded worker (benchmarks/fuzz/worker.py): one request at a time, a time limit on each,
a fresh worker after a death or a stall, and a minimizer for what fails.

A worker that dies (kio's native reader aborting on a claimed count under ``RLIMIT_AS``, say) or that does not
answer within ``timeout`` is itself the finding: ``call`` reports it as an error of kind ``died`` (with the signal
and the last lines the worker wrote to stderr, where Rust's "memory allocation of N bytes failed" shows up) or
``stall``, and the next call starts a new worker.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

Result = dict[str, Any]


class Guard:
    def __init__(
        self, memory_mb: int = 1024, timeout: float = 30.0, slow_ms: float = 2000, bloat_mb: int = 256
    ) -> None:
        self.memory_mb = memory_mb
        self.timeout = timeout
        self.slow_ms = slow_ms
        self.bloat_mb = bloat_mb
        self.deaths = 0
        self.stalls = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (kept for the worker's life; closed by close())

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> subprocess.Popen[bytes]:
        self._stderr.seek(0)
        self._stderr.truncate()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.fuzz.worker",
                "--memory-mb",
                str(self.memory_mb),
                "--slow-ms",
                str(self.slow_ms),
                "--bloat-mb",
                str(self.bloat_mb),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        self._process = process
        ready = self._read(process, 60.0)
        if ready is None or "ready" not in ready:
            self._kill()
            raise RuntimeError(f"the fuzz worker did not start: {self._stderr_tail()}")
        return process

    def call(self, message: dict[str, Any]) -> Result:
        process = self._process if self._process is not None and self._process.poll() is None else self._start()
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
        except BrokenPipeError:
            pass
        answer = self._read(process, self.timeout)
        if answer is not None:
            return answer
        if process.poll() is None:
            self.stalls += 1
            self._kill()
            return _finding("stall", f"no answer within {self.timeout:.0f} s")
        self.deaths += 1
        code = process.returncode
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        self._process = None
        return _finding("died", f"the worker {how}: {self._stderr_tail()}")

    def decode(self, frame: bytes) -> Result:
        return self.call({"op": "decode", "frame": frame.hex()})

    def session(self, steps: list[tuple[bytes, int]]) -> Result:
        return self.call({"op": "session", "steps": [[frame.hex(), ms] for frame, ms in steps]})

    def _read(self, process: subprocess.Popen[bytes], timeout: float) -> Result | None:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                return None
        line = process.stdout.readline()
        if not line:
            process.wait()
            return None
        result: Result = json.loads(line)
        return result

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        # Rust says what failed first ("memory allocation of N bytes failed"), then a backtrace.
        said = [line for line in lines if "allocation" in line or "panicked" in line or "Error" in line]
        return " | ".join(said[:2] or lines[-3:]) or "(nothing on stderr)"

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill()
        self._process = None
        self._stderr.close()


def _finding(kind: str, message: str) -> Result:
    return {
        "outcomes": [],
        "error": {"kind": kind, "step": -1, "where": "", "type": "", "message": message, "traceback": ""},
    }


def signature(result: Result) -> tuple[str, str] | None:
    """What makes two failures the same one: their kind and where they happened (None: no failure)."""
    error = result.get("error")
    if not error:
        return None
    return str(error["kind"]), str(error.get("where") or error.get("type") or "")


def minimize_session(
    steps: list[tuple[bytes, int]], fails: Callable[[list[tuple[bytes, int]]], bool], budget: int = 300
) -> list[tuple[bytes, int]]:
    """Fewer steps (each dropped in turn while the session still fails the same way), then the last step's
    frame minimized with the others kept."""
    index = 0
    while index < len(steps) and len(steps) > 1:
        candidate = steps[:index] + steps[index + 1 :]
        if fails(candidate):
            steps = candidate
        else:
            index += 1
    *before, (last, advance) = steps
    small = minimize(last, lambda frame: fails([*before, (frame, advance)]), budget)
    return [*before, (small, advance)]


def minimize(frame: bytes, fails: Callable[[bytes], bool], budget: int = 400) -> bytes:
    """A smaller frame that still fails the same way: delta debugging over byte runs (halves, quarters... single
    bytes), then single bytes set to zero. ``budget`` bounds the calls to ``fails``."""
    calls = 0
    chunk = max(len(frame) // 2, 1)
    while chunk >= 1 and calls < budget:
        start, shrunk = 8, False  # the api key, version and correlation id stay: they choose the schema
        while start < len(frame) and calls < budget:
            candidate = frame[:start] + frame[start + chunk :]
            calls += 1
            if len(candidate) >= 8 and fails(candidate):
                frame, shrunk = candidate, True
            else:
                start += chunk
        if not shrunk:
            chunk //= 2
    for index in range(8, len(frame)):
        if calls >= budget:
            break
        if frame[index]:
            candidate = frame[:index] + b"\x00" + frame[index + 1 :]
            calls += 1
            if fails(candidate):
                frame = candidate
    return frame
