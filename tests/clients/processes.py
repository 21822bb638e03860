"""A consumer process (``tests/clients/worker.py``) and the JSON lines it prints, read by a background thread."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.conftest import ROOT


class WorkerProcess:
    def __init__(self, name: str, argv: list[str], stderr_path: Path) -> None:
        self.name = name
        self.stderr_path = stderr_path
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT)
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name=f"reader-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                event = {"event": "unparsed", "line": raw.decode(errors="replace")}
            with self._lock:
                self._events.append(event)

    def events(self, *kinds: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self._events if not kinds or e["event"] in kinds]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None
