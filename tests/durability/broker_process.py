"""A broker process on a data directory, killed with SIGKILL and started again on the same ports (issue 27)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import free_port


class BrokerProcess:
    def __init__(self, data_dir: Path | None, *extra: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.admin_port = free_port()
        self.extra = extra
        self.process: subprocess.Popen[str] | None = None
        self.log = (data_dir.parent if data_dir else Path("/tmp")) / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        argv = [
            sys.executable, "-m", "broker", "serve", "--port", str(self.port), "--admin-port", str(self.admin_port),
            "--group-initial-rebalance-delay-ms", "0", *self.extra,
        ]  # fmt: skip
        if self.data_dir is not None:
            argv += ["--data-dir", str(self.data_dir)]
        return argv

    def start(self, timeout: float = 30) -> float:
        """Start it and wait for /readyz; the seconds it took."""
        started = time.monotonic()
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, text=True)
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise AssertionError(f"broker exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/readyz", timeout=1) as answer:
                    if answer.status == 200:
                        return time.monotonic() - started
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"broker not ready in {timeout}s: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}{path}", timeout=10) as answer:
            return json.load(answer)
