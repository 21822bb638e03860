"""The job's own Spark settings (issue 17): quiet and on loopback in local mode, nothing forced on a cluster."""

from __future__ import annotations

from broker.analytics.session import LOOPBACK, session_defaults


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
