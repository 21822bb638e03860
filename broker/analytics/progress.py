"""The job's progress lines on stderr: each step as it starts, and the running Spark stages while one takes long."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from broker.analytics.arguments import PROGRAM

STATUS_EVERY_S = 5.0

Progress = Callable[[str], None]


def stderr_progress() -> Progress:
    """Progress lines on stderr, each with the seconds since the job started."""
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"{PROGRAM} [{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def quiet(_message: str) -> None:
    return None


class StatusReporter:
    """Reports the running Spark stages every few seconds while a step takes long, from a daemon thread."""

    def __init__(self, spark: SparkSession, progress: Progress, every_s: float = STATUS_EVERY_S) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.progress = progress
        self.every_s = every_s
        self.step = "starting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="analyze-status", daemon=True)

    def __enter__(self) -> StatusReporter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * self.every_s)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                stages = [self.tracker.getStageInfo(s) for s in self.tracker.getActiveStageIds()]
            except Exception:  # the JVM is going away at the end of a run: nothing left to report
                return
            running = [s for s in stages if s is not None]
            if running:
                parts = ", ".join(f"stage {s.stageId} {s.numCompletedTasks}/{s.numTasks} tasks" for s in running)
                self.progress(f"  ... {self.step}: {parts}")

    def say(self, message: str) -> None:
        """Pass a progress line on, remembering it as the step the stage reports belong to."""
        if not message.startswith(" "):
            self.step = message.split(";")[0]
        self.progress(message)
