"""The KIP-848 consumer-group settings (docs/spec/consumer-groups.md section 11): Kafka's names and defaults, each
source (flag, environment, TOML with our names or Kafka's), and a bad combination refusing start with a message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.config import settings
from broker.config.settings import SettingsError
from broker.coordinator.config import INT32_MAX, GroupConfig
from tests.conftest import ROOT

# The spec's test-friendly values, all valid together (section 11).
FRIENDLY = [
    "--group-consumer-min-session-timeout-ms", "6000", "--group-consumer-session-timeout-ms", "6000",
    "--group-consumer-min-heartbeat-interval-ms", "500", "--group-consumer-heartbeat-interval-ms", "500",
]  # fmt: skip


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "broker.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_kafkas() -> None:
    group = settings.parse([], environ={}).group
    assert group.rebalance_protocols == ("classic", "consumer") and group.consumer_protocol_enabled
    assert (group.consumer_session_timeout_ms, group.consumer_min_session_timeout_ms) == (45_000, 45_000)
    assert group.consumer_max_session_timeout_ms == 60_000
    assert (group.consumer_heartbeat_interval_ms, group.consumer_min_heartbeat_interval_ms) == (5_000, 5_000)
    assert group.consumer_max_heartbeat_interval_ms == 15_000
    assert (group.consumer_max_size, group.consumer_assignors) == (INT32_MAX, ("uniform", "range"))
    kafka_names = {o.kafka: o.default_text() for o in settings.OPTIONS if o.kafka}
    assert kafka_names["group.coordinator.rebalance.protocols"] == "classic,consumer"
    assert kafka_names["group.consumer.assignors"] == "uniform,range"


def test_flags() -> None:
    group = settings.parse(
        [*FRIENDLY, "--group-consumer-max-size", "2", "--group-consumer-assignors", "range, uniform",
         "--group-consumer-max-session-timeout-ms", "7000", "--group-consumer-max-heartbeat-interval-ms", "600"],
        environ={},
    ).group  # fmt: skip
    assert (group.consumer_session_timeout_ms, group.consumer_min_session_timeout_ms) == (6000, 6000)
    assert (group.consumer_heartbeat_interval_ms, group.consumer_min_heartbeat_interval_ms) == (500, 500)
    assert (group.consumer_max_session_timeout_ms, group.consumer_max_heartbeat_interval_ms) == (7000, 600)
    assert (group.consumer_max_size, group.consumer_assignors) == (2, ("range", "uniform"))


@pytest.mark.parametrize(
    ("text", "protocols", "enabled"),
    [("classic", ("classic",), False), (" classic , consumer ,", ("classic", "consumer"), True)],
)
def test_rebalance_protocols_turn_the_consumer_protocol_on_and_off(
    text: str, protocols: tuple[str, ...], enabled: bool
) -> None:
    group = settings.parse(["--group-coordinator-rebalance-protocols", text], environ={}).group
    assert (group.rebalance_protocols, group.consumer_protocol_enabled) == (protocols, enabled)


def test_environment() -> None:
    environ = {
        "GROUP_BROKER_GROUP_COORDINATOR_REBALANCE_PROTOCOLS": "classic",
        "GROUP_BROKER_GROUP_CONSUMER_ASSIGNORS": "range",
        "GROUP_BROKER_GROUP_CONSUMER_MAX_SIZE": "3",
        "GROUP_BROKER_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "50000",
    }
    group = settings.parse([], environ=environ).group
    assert (group.rebalance_protocols, group.consumer_assignors) == (("classic",), ("range",))
    assert (group.consumer_max_size, group.consumer_session_timeout_ms) == (3, 50_000)
    # A flag beats the environment.
    flagged = settings.parse(["--group-consumer-max-size", "4"], environ=environ).group
    assert flagged.consumer_max_size == 4


def test_toml_with_kafkas_dotted_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "group.consumer.session.timeout.ms = 6000\n"
        "group.consumer.min.session.timeout.ms = 6000\n"
        '"group.consumer.heartbeat.interval.ms" = 500\n'
        "group.consumer.min.heartbeat.interval.ms = 500\n"
        "group.consumer.max.size = 10\n"
        'group.consumer.assignors = ["range"]\n'
        'group.coordinator.rebalance.protocols = "classic,consumer"\n',
    )
    group = settings.parse(["--config", path], environ={}).group
    assert (group.consumer_session_timeout_ms, group.consumer_min_session_timeout_ms) == (6000, 6000)
    assert (group.consumer_heartbeat_interval_ms, group.consumer_min_heartbeat_interval_ms) == (500, 500)
    assert (group.consumer_max_size, group.consumer_assignors) == (10, ("range",))
    assert group.rebalance_protocols == ("classic", "consumer")


def test_toml_with_our_names(tmp_path: Path) -> None:
    path = write(
        tmp_path, 'group_coordinator_rebalance_protocols = ["classic"]\ngroup_consumer_assignors = "uniform"\n'
    )
    group = settings.parse(["--config", path], environ={}).group
    assert (group.rebalance_protocols, group.consumer_assignors) == (("classic",), ("uniform",))
    assert group == GroupConfig(rebalance_protocols=("classic",), consumer_assignors=("uniform",))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # Each setting named as the flag typed, with its value (issue 26), a default said to be one.
        (
            ["--group-consumer-session-timeout-ms", "1000"],
            r"--group-consumer-session-timeout-ms \(1000\) must lie within its min and max: "
            r"--group-consumer-min-session-timeout-ms \(45000, the default\) and "
            r"--group-consumer-max-session-timeout-ms \(60000, the default\)$",
        ),
        (["--group-consumer-session-timeout-ms", "70000"], r"--group-consumer-session-timeout-ms \(70000\) must lie"),
        (
            ["--group-consumer-heartbeat-interval-ms", "20000"],
            r"--group-consumer-heartbeat-interval-ms \(20000\) must lie within",
        ),
        (
            ["--group-consumer-min-session-timeout-ms", "5000", "--group-consumer-session-timeout-ms", "5000"],
            r"--group-consumer-heartbeat-interval-ms \(5000, the default\) must be lower than "
            r"--group-consumer-session-timeout-ms \(5000\)",
        ),
        (["--group-consumer-min-session-timeout-ms", "0"], "must be at least 1"),
        (["--group-consumer-max-session-timeout-ms", "40000"], r"min-session-timeout-ms \(45000, the default\) exce"),
        (["--group-consumer-max-heartbeat-interval-ms", "4000"], "min-heartbeat-interval-ms .* exceeds"),
        (["--group-consumer-max-size", "0"], r"--group-consumer-max-size \(0\) must be at least 1"),
        (["--group-consumer-assignors", "sticky"], r"--group-consumer-assignors \(sticky\) must list assignors among"),
        (["--group-consumer-assignors", ","], "--group-consumer-assignors .* must list assignors among"),
        (["--group-coordinator-rebalance-protocols", "consumer"], "must list classic"),
        (["--group-coordinator-rebalance-protocols", "classic,streams"], "must list classic"),
    ],
)
def test_a_bad_combination_is_a_settings_error(flags: list[str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings.parse(flags, environ={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("group.consumer.assignors = [1, 2]\n", "group.consumer.assignors: expected a TOML list of strings"),
        ('group_consumer_max_size = "5"\n', "group_consumer_max_size: expected a TOML int, got str"),
        ("group.consumer.session.timeout.ms = 1\n", "group.consumer.session.timeout.ms in "),
        ("group_consumer_asignors = 1\n", "did you mean 'group_consumer_assignors'?"),
    ],
)
def test_bad_toml_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        settings.parse(["--config", path], environ={})
    assert message in str(caught.value)


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(SettingsError, match="GROUP_BROKER_GROUP_CONSUMER_MAX_SIZE='lots'"):
        settings.parse([], environ={"GROUP_BROKER_GROUP_CONSUMER_MAX_SIZE": "lots"})


def test_serve_refuses_to_start_with_a_bad_combination() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--port", "0", "--admin-port", "-1",
         "--group-consumer-heartbeat-interval-ms", "60000"],
        cwd=ROOT, capture_output=True, text=True, timeout=30, env=dict(os.environ),
    )  # fmt: skip
    assert result.returncode == 2
    assert "--group-consumer-heartbeat-interval-ms (60000) must lie within its min and max" in result.stderr
    assert "Traceback" not in result.stderr
