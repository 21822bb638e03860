"""The Spark session the job and the report run in, and the settings chosen for the input's size.

Local defaults (every core, a driver memory that follows the input, UTC) unless ``spark-submit`` or the caller
says otherwise: under ``spark-submit`` the JVM is already running with its own settings, and only what the job
needs on top (no console progress bar, UTC) is added.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from broker.analytics.arguments import PROGRAM

DEFAULT_MASTER = "local[*]"
#: Input bytes per shuffle partition: windows sort a partition's events in one task, so a few tens of MiB each.
BYTES_PER_PARTITION = 32 * 1024 * 1024
MAX_PARTITIONS = 2000
#: Local mode runs everything in the driver's JVM; pyspark's default (1g) spills early. Only applied when the
#: job starts that JVM itself (not under spark-submit) and nobody set it: at least this, more for larger input.
LOCAL_DRIVER_MEMORY = "2g"
GIB = 1024**3
#: Where the driver listens in local mode (everything runs in its one JVM).
LOOPBACK = "127.0.0.1"
#: Up to this much input (about 19,000 events) the job's time is the JVM's start and warm-up, and Catalyst
#: planning and compiling plans for a few rows: the settings below trade peak speed for less of that (issue 17).
SMALL_INPUT_BYTES = 8 * 1024 * 1024
#: A driver JVM the job starts for a small input: the client compiler only (C2 compiles for seconds what runs
#: for milliseconds here) and the serial collector (no GC threads competing for the cores with the tasks).
QUICK_START_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
#: Session settings for a small input: no whole-stage code generation and interpreted expressions (Janino
#: compiling a stage's Java costs more than running it over a few hundred rows), and no adaptive execution
#: (re-planning after every shuffle stage of a few kilobytes). None changes a result.
SMALL_INPUT_SQL = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}


def under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def local_input_bytes(inputs: Sequence[str]) -> int:
    """The size of the local files among ``inputs`` (paths, globs, directories); other URIs count nothing."""
    total = 0
    for pattern in inputs:
        if "://" in pattern and not pattern.startswith("file:"):
            continue
        for path in glob.glob(pattern.removeprefix("file://").removeprefix("file:")):
            total += (
                sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
                if os.path.isdir(path)
                else os.path.getsize(path)
            )
    return total


def local_driver_memory(inputs: Sequence[str]) -> str:
    """Twice the local input, within [2g, half of this machine's memory]: the 10M-event benchmark (4.4 GB of
    JSON) ran out of heap parsing at 4g and finished at 8g. Inputs that are not local files count nothing."""
    total = local_input_bytes(inputs)
    try:
        half_ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        half_ram = 2 * GIB
    return f"{max(2, min(math.ceil(2 * total / GIB), half_ram // GIB))}g"


def session_defaults(
    master: str | None,
    conf: Mapping[str, str],
    submitted: bool,
    driver_memory: str = LOCAL_DRIVER_MEMORY,
    small: bool = False,
    java_options: str = "",
) -> dict[str, str]:
    """The settings the job adds unless ``conf`` gives its own: quiet (no progress bar, no UI) and local;
    ``small`` (a small input, ``SMALL_INPUT_BYTES``): a driver JVM that starts quickly, in local mode, where
    ``java_options`` (the class archive's, ``archive.py``) are added too."""
    defaults = {
        "spark.ui.showConsoleProgress": "false",  # the job prints its own progress lines
        "spark.sql.session.timeZone": "UTC",
        # The plans of the table windows are wide: without this Spark warns that it truncated one (issue 17).
        "spark.sql.debug.maxToStringFields": "1000",
    }
    if submitted:
        return defaults
    defaults["spark.driver.memory"] = driver_memory
    # A batch job on one machine: no web UI on port 4040 (nobody watches it; ``--conf spark.ui.enabled=true``
    # brings it back), and in local mode the driver on loopback, not on whatever the host name resolves to.
    defaults["spark.ui.enabled"] = "false"
    if (master or conf.get("spark.master") or DEFAULT_MASTER).startswith("local"):
        defaults["spark.driver.bindAddress"] = LOOPBACK
        defaults["spark.driver.host"] = LOOPBACK
        options = " ".join(o for o in (QUICK_START_JAVA_OPTIONS if small else "", java_options) if o)
        if options:
            defaults["spark.driver.extraJavaOptions"] = options
    return defaults


def small_input_settings(total_bytes: int, conf: Mapping[str, str]) -> dict[str, str]:
    """The session settings for an input of ``total_bytes`` that ``conf`` does not set itself."""
    if total_bytes > SMALL_INPUT_BYTES:
        return {}
    return {key: value for key, value in SMALL_INPUT_SQL.items() if key not in conf}


def build_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    driver_memory: str = LOCAL_DRIVER_MEMORY,
    small: bool = False,
    java_options: str = "",
) -> SparkSession:
    """A session with local defaults, unless spark-submit or ``master``/``conf`` say otherwise."""
    conf = dict(conf or {})
    builder = SparkSession.builder.appName(PROGRAM)
    submitted = under_spark_submit()
    if master is not None:
        builder = builder.master(master)
    elif not submitted and "spark.master" not in conf:
        builder = builder.master(DEFAULT_MASTER)
    defaults = session_defaults(master, conf, submitted, driver_memory, small, java_options)
    if "spark.driver.bindAddress" in defaults and not {"spark.driver.bindAddress", "spark.driver.host"} & set(conf):
        # Spark's Utils reads this before any setting: without it, a host name that resolves to 127.0.0.1 makes
        # it warn twice and pick another interface's address. Only for a JVM this process starts.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    for key, value in {**defaults, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(conf.get("spark.log.level", "WARN"))
    return spark


def shuffle_partitions_for(total_bytes: int, parallelism: int) -> int:
    """Enough partitions that each holds ~32 MiB of input, at least one per core, and a multiple of the cores:
    the events keep these partitions (``job._materialise``), so every table's stages run in full rounds."""
    wanted = max(math.ceil(total_bytes / BYTES_PER_PARTITION), parallelism, 1)
    cores = max(parallelism, 1)
    return min(MAX_PARTITIONS, math.ceil(wanted / cores) * cores)
