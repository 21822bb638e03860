"""The job's own Spark settings (issue 17): quiet and on loopback in local mode, nothing forced on a cluster."""

from __future__ import annotations

import os
import time
from pathlib import Path

from broker.analytics import archive
from broker.analytics.session import (
    LOOPBACK,
    QUICK_START_JAVA_OPTIONS,
    SMALL_INPUT_BYTES,
    SMALL_INPUT_SQL,
    session_defaults,
    small_input_settings,
)


def test_local_mode_has_no_ui_and_binds_the_driver_to_loopback() -> None:
    defaults = session_defaults(None, {}, submitted=False, driver_memory="3g")
    assert defaults["spark.ui.enabled"] == "false"
    assert defaults["spark.ui.showConsoleProgress"] == "false"
    assert defaults["spark.driver.bindAddress"] == defaults["spark.driver.host"] == LOOPBACK
    assert defaults["spark.driver.memory"] == "3g"
    assert defaults["spark.sql.session.timeZone"] == "UTC"


def test_a_cluster_master_keeps_its_own_addresses() -> None:
    for master, conf in (("spark://head:7077", {}), (None, {"spark.master": "yarn"})):
        defaults = session_defaults(master, conf, submitted=False)
        assert "spark.driver.bindAddress" not in defaults and "spark.driver.host" not in defaults
        assert defaults["spark.ui.enabled"] == "false"


def test_spark_submit_gets_only_what_the_job_needs() -> None:
    defaults = session_defaults(None, {}, submitted=True)
    assert set(defaults) == {
        "spark.ui.showConsoleProgress",
        "spark.sql.session.timeZone",
        "spark.sql.debug.maxToStringFields",
    }


def test_a_small_input_gets_a_quick_starting_driver_and_interpreted_plans() -> None:
    """Issue 17: for a few hundred events the JVM's warm-up and Catalyst's compiling are the job's time."""
    defaults = session_defaults(None, {}, submitted=False, small=True, java_options="-XX:SharedArchiveFile=/a.jsa")
    assert defaults["spark.driver.extraJavaOptions"] == f"{QUICK_START_JAVA_OPTIONS} -XX:SharedArchiveFile=/a.jsa"
    assert "spark.driver.extraJavaOptions" not in session_defaults(None, {}, submitted=False)
    assert "spark.driver.extraJavaOptions" not in session_defaults("spark://head:7077", {}, False, small=True)
    assert "spark.driver.extraJavaOptions" not in session_defaults(None, {}, submitted=True, small=True)
    assert small_input_settings(SMALL_INPUT_BYTES, {}) == SMALL_INPUT_SQL
    assert small_input_settings(SMALL_INPUT_BYTES + 1, {}) == {}
    mine = {"spark.sql.adaptive.enabled": "true"}  # the user's --conf wins
    assert "spark.sql.adaptive.enabled" not in small_input_settings(100, mine)


def java_home(tmp_path: Path) -> dict[str, str]:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    return {"JAVA_HOME": str(tmp_path / "jdk")}


def test_the_class_archive_is_written_once_then_mapped(tmp_path: Path) -> None:
    env = {**java_home(tmp_path), archive.ENV: str(tmp_path / "cache")}
    first = archive.plan(env)
    assert first is not None and first.writing is not None
    assert first.writing.parent == first.path.parent == tmp_path / "cache"
    assert first.writing.name == f"{first.path.name}.{os.getpid()}.tmp"  # renamed only once complete
    assert first.java_options().startswith(f"-XX:ArchiveClassesAtExit={first.writing} ")
    first.path.write_bytes(b"archive")
    later = archive.plan(env)
    assert later == archive.Archive(first.path)
    assert later.java_options().startswith(f"-XX:SharedArchiveFile={first.path} ")
    assert "-Xlog:cds=off" in later.java_options()  # a mismatched archive is ignored without a word


def test_the_class_archive_is_opt_in_and_skipped_where_it_cannot_work(tmp_path: Path) -> None:
    home = java_home(tmp_path)
    assert archive.plan(home) is None  # opt-in: nothing without the variable
    assert archive.plan({**home, archive.ENV: "off"}) is None
    assert archive.plan({archive.ENV: str(tmp_path), "PATH": str(tmp_path / "empty")}) is None  # no java
    assert archive.plan({**home, archive.ENV: str(tmp_path / "with space")}) is None  # Spark splits options
    other = {**home, "XDG_CACHE_HOME": str(tmp_path / "xdg"), archive.ENV: "on"}
    found = archive.plan(other)
    assert found is not None and found.path.parent == tmp_path / "xdg" / "kafka-group-broker"


def test_a_partial_archive_of_a_run_that_is_gone_is_removed(tmp_path: Path) -> None:
    env = {**java_home(tmp_path), archive.ENV: str(tmp_path / "cache")}
    planned = archive.plan(env)
    assert planned is not None
    gone = planned.path.with_name(f"{planned.path.name}.999999999.tmp")  # no such process
    running = planned.path.with_name(f"{planned.path.name}.{os.getpid()}.tmp")
    old = time.time() - 120
    for partial in (gone, running):
        partial.write_bytes(b"half")
        os.utime(partial, (old, old))
    archive.plan(env)
    assert not gone.exists() and running.exists()
