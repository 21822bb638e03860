"""The driver JVM's class-data archive: Spark's classes mapped from one file instead of loaded from its jars.

A JVM the job starts loads, links and verifies some 25,000 classes from pyspark's 280 jars, at start-up and
while it plans the first queries: a good part of a small log's time (issue 17: Spark's start fell from ~6.6 s to
~2.6 s with the archive). JDK 13 and later write the classes a run loaded into an archive when the JVM exits
(``-XX:ArchiveClassesAtExit``, dynamic class-data sharing) and map that archive at the next start
(``-XX:SharedArchiveFile``). So the first ``group-broker analyze`` with a given Java and pyspark writes one (in
17 s after the job here, about 190 MB under the user's cache directory) and later ones map it. The JVM checks
an archive against its own build and class path and ignores, silently here, one that does not match; it is
written under a name of its own and renamed only when the JVM has exited cleanly, so a run cut short or two
first runs at once never leave a half-written archive under the name the next run maps.

It is opt-in: ``GROUP_BROKER_CLASS_ARCHIVE=on`` keeps it under the user's cache directory,
``GROUP_BROKER_CLASS_ARCHIVE=DIR`` in DIR; unset (or ``off``) there is none. Off by default because the tool mostly
runs where every run is a first run (a fresh container, a CI job): there each run would pay the ~17 s of writing
190 MB and never map it. It is only used where the job starts the JVM itself (``group-broker analyze`` in local
mode, without ``spark.driver.extraJavaOptions`` of the user's).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyspark
from pyspark import SparkContext
from pyspark.sql import SparkSession

ENV = "GROUP_BROKER_CLASS_ARCHIVE"
OFF = frozenset({"0", "off", "false", "no"})
ON = frozenset({"1", "on", "true", "yes"})
#: Nothing on the console about the archive: a missing or mismatched one only means a slower start.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: A partial archive older than this is a run that was cut short, whatever its process: removed by the next run.
STALE_S = 24 * 3600
#: How long the JVM may take to exit and write the archive (about 190 MB: 17 s here at a load of 3, 47 s at 7).
EXIT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Archive:
    """Where the archive is (``path``), and where this run's JVM writes it at exit (``writing``: None when
    ``path`` is there and is mapped)."""

    path: Path
    writing: Path | None = None

    def java_options(self) -> str:
        if self.writing is None:
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.writing} {QUIET}"


def java_executable(environ: Mapping[str, str]) -> str | None:
    """The java Spark's launcher runs (``bin/spark-class``): ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = environ.get("JAVA_HOME")
    if home:
        return str(Path(home) / "bin" / "java")
    return shutil.which("java", path=environ.get("PATH", os.defpath))


def plan(environ: Mapping[str, str] | None = None) -> Archive | None:
    """The archive for this Java and this pyspark: to map, to write at exit, or None (turned off, no java, a
    cache directory that cannot be written or whose path has white space, which Spark would split)."""
    env = os.environ if environ is None else environ
    setting = env.get(ENV, "").strip()
    if not setting or setting.lower() in OFF:  # opt-in: see the module's docstring
        return None
    java = java_executable(env)
    if java is None:
        return None
    try:
        real = os.path.realpath(java)
        found = os.stat(real)
    except OSError:
        return None
    # The JVM checks the archive itself; the name only keeps one per Java build and pyspark install apart.
    identity = f"{real}\0{found.st_size}\0{found.st_mtime_ns}\0{pyspark.__version__}\0{pyspark.__file__}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = cache / "kafka-group-broker" if setting.lower() in ON else Path(setting)
    path = base / f"spark-{pyspark.__version__}-{key}.jsa"
    if any(c.isspace() for c in str(path)):
        return None
    if path.is_file():
        return Archive(path)
    try:
        base.mkdir(parents=True, exist_ok=True)
        for partial in base.glob(f"{path.name}.*.tmp"):
            if _abandoned(partial):
                partial.unlink(missing_ok=True)
    except OSError:
        return None
    if not os.access(base, os.W_OK):
        return None
    return Archive(path, path.with_name(f"{path.name}.{os.getpid()}.tmp"))


def _abandoned(partial: Path) -> bool:
    """A partial archive of a run that failed or was cut short: its process is gone (and its JVM had a minute
    to finish writing), or it is a day old."""
    age = time.time() - partial.stat().st_mtime
    pid = partial.suffixes[-2].lstrip(".") if len(partial.suffixes) >= 2 else ""
    if age > STALE_S:
        return True
    if not pid.isdigit() or age < 60:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def keep(archive: Archive, say: Callable[[str], None] | None = None, timeout_s: float = EXIT_TIMEOUT_S) -> bool:
    """At the end of the process whose JVM writes the archive (``atexit``, after the report): stop Spark, let
    the JVM exit (it writes the archive as it does) and put the archive under its name. True when it is there."""
    if archive.writing is None:
        return False
    process = getattr(SparkContext._gateway, "proc", None)
    try:
        if not isinstance(process, subprocess.Popen) or process.stdin is None or process.poll() is not None:
            return False
        if say is not None:
            say(f"keeping the JVM's classes for later runs (once): {archive.path}")
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
        process.stdin.close()  # pyspark's gateway JVM exits at the end of its input
        process.wait(timeout_s)
        if process.returncode == 0 and archive.writing.is_file() and archive.writing.stat().st_size > 0:
            os.replace(archive.writing, archive.path)
            return True
        return False
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        archive.writing.unlink(missing_ok=True)
        # The gateway is gone with its JVM: a later session in this process starts a new one.
        SparkContext._gateway = None
        SparkContext._jvm = None
