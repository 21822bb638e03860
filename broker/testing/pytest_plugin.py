"""pytest plugin: ``group_broker``, a broker inside the test process, shared per session, package, module or test.

pytest loads this module (through the ``pytest11`` entry point) in every run wherever the package is installed,
so it imports nothing but pytest: the broker is imported when a test first asks for it. The user guide is
docs/pytest-plugin.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:
    from broker.testing.embedded import EmbeddedBroker

Scope = Literal["session", "package", "module", "class", "function"]
SCOPES: tuple[Scope, ...] = ("session", "package", "module", "class", "function")
_OPTION = "group_broker_scope"
# KIP-848 consumer groups' timers, which the broker (not the client) sets: option -> (GroupConfig field, its bound).
_CONSUMER_TIMERS = {
    "group_broker_consumer_session_timeout_ms": ("consumer_session_timeout_ms", "consumer_min_session_timeout_ms"),
    "group_broker_consumer_heartbeat_interval_ms": (
        "consumer_heartbeat_interval_ms",
        "consumer_min_heartbeat_interval_ms",
    ),
}
# KIP-932 share groups' record lock and delivery limit (docs/spec/share-groups.md section 11.1), which the broker
# (not the client) sets: option -> (GroupConfig field, lowest, highest value the test broker takes).
_SHARE_SETTINGS = {
    "group_broker_share_record_lock_duration_ms": ("share_record_lock_duration_ms", 1000, 60_000),
    "group_broker_share_delivery_count_limit": ("share_delivery_count_limit", 2, 10),
}

# kafka-python 3.0.12 reads each of its protocol schemas with importlib.resources.read_text, deprecated on Python
# 3.11 and 3.12: a user's test module that imports kafka-python got 218 DeprecationWarnings (issue 18), two per
# schema: its read_text call, and the open_text that read_text calls. This plugin never imports kafka-python; it
# hides those two warnings, from those two places only, so that a user's own deprecations still show.
KAFKA_PYTHON_WARNINGS = (
    r"ignore:read_text is deprecated:DeprecationWarning:kafka\.protocol\.schemas\.load_json",
    r"ignore:open_text is deprecated:DeprecationWarning:importlib\.resources\._legacy",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("group_broker", "kafka-group-broker")
    group.addoption(
        "--group-broker-scope",
        dest=_OPTION,
        choices=SCOPES,
        default=None,
        help="how widely one group_broker is shared (default: the group_broker_scope ini option, else session)",
    )
    parser.addini(_OPTION, f"how widely one group_broker is shared: {', '.join(SCOPES)}", default="session")
    for option, what, kafka in (
        ("group_broker_consumer_session_timeout_ms", "session timeout", "group.consumer.session.timeout.ms"),
        ("group_broker_consumer_heartbeat_interval_ms", "heartbeat interval", "group.consumer.heartbeat.interval.ms"),
    ):
        text = f"the {what} the broker gives KIP-848 consumer-group members, in ms ({kafka})"
        group.addoption("--" + option.replace("_", "-"), dest=option, default=None, help=text)
        parser.addini(option, text, default="")
    for option, text in (
        ("group_broker_share_record_lock_duration_ms",
         "how long a share consumer holds the records it fetched before they are redelivered, in ms, 1000-60000 "
         "(group.share.record.lock.duration.ms)"),
        ("group_broker_share_delivery_count_limit",
         "deliveries of a share-group record before it is archived, 2-10 (group.share.delivery.count.limit)"),
    ):  # fmt: skip
        group.addoption("--" + option.replace("_", "-"), dest=option, default=None, help=text)
        parser.addini(option, text, default="")


def pytest_configure(config: pytest.Config) -> None:
    # Added after the user's own ini lines, so they win over a user's "error" for these two warnings alone.
    for line in KAFKA_PYTHON_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    # Bad values fail the run at once, not at the first test that uses the broker.
    _scope(config)
    _consumer_timers(config)
    _share_settings(config)


def _scope(config: pytest.Config) -> Scope:
    value = str(config.getoption(_OPTION) or config.getini(_OPTION)).strip()
    if value not in SCOPES:
        raise pytest.UsageError(f"{_OPTION} = {value!r} is not a fixture scope: use one of {', '.join(SCOPES)}")
    return value


def _broker_scope(fixture_name: str, config: pytest.Config) -> Scope:
    return _scope(config)


def _consumer_timers(config: pytest.Config) -> dict[str, int]:
    """GroupConfig fields from the consumer-group timer options (the command line over the ini file); each bound is
    lowered to the value, so a 1 s session (or less) is accepted as asked."""
    fields: dict[str, int] = {}
    for option, (field, minimum) in _CONSUMER_TIMERS.items():
        raw = str(config.getoption(option) or config.getini(option) or "").strip()
        if not raw:
            continue
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise pytest.UsageError(f"{option} = {raw!r} is not a positive number of milliseconds")
        fields[field] = value
        fields[minimum] = value
    return fields


def _share_settings(config: pytest.Config) -> dict[str, int]:
    """GroupConfig fields from the share-group options (the command line over the ini file)."""
    fields: dict[str, int] = {}
    for option, (field, lowest, highest) in _SHARE_SETTINGS.items():
        raw = str(config.getoption(option) or config.getini(option) or "").strip()
        if not raw:
            continue
        try:
            value = int(raw)
        except ValueError:
            value = lowest - 1
        if not lowest <= value <= highest:
            raise pytest.UsageError(f"{option} = {raw!r} is not a number within {lowest} and {highest}")
        fields[field] = value
    return fields


def _with_options(overrides: object, config: pytest.Config) -> object:
    """``group_broker_settings`` with the consumer-group timer and share-group options under it: its own ``group``
    entries win, and a ``GroupConfig`` given whole is taken as it is."""
    timers = _consumer_timers(config)
    share = _share_settings(config)
    if not (timers or share) or not isinstance(overrides, dict):
        return overrides
    group = overrides.get("group")
    if group is None:
        group = {}
    if not isinstance(group, dict):
        return overrides
    from broker.testing.embedded import TEST_GROUP_CONFIG

    for field, minimum in _CONSUMER_TIMERS.values():
        if field in timers:
            timers[minimum] = min(timers[minimum], TEST_GROUP_CONFIG[minimum])
    return {**overrides, "group": {**timers, **share, **group}}


@pytest.fixture(scope="session")
def group_broker_settings() -> dict[str, Any]:
    """Overrides of the broker's settings (fields of broker.config.settings.Settings) for group_broker and
    group_broker_factory. Override this fixture, at session scope, in the conftest.py of the tests that share
    the broker."""
    return {}


def _start(overrides: object) -> EmbeddedBroker:
    from broker.testing.embedded import EmbeddedBroker, embedded_settings

    if not isinstance(overrides, dict):
        raise TypeError(f"group_broker_settings must return a dict of broker settings, got {overrides!r}")
    return EmbeddedBroker(embedded_settings(**overrides)).start()


@pytest.fixture(scope=_broker_scope)
def group_broker(group_broker_settings: dict[str, Any], pytestconfig: pytest.Config) -> Iterator[EmbeddedBroker]:
    """A broker on 127.0.0.1 with test-friendly group timers: ``bootstrap``, ``admin_url`` and control calls
    (``wait_for``, ``kick``, ``fault``, ``events``, ``no_rebalance``, ...). Shared as --group-broker-scope says."""
    broker = _start(_with_options(group_broker_settings, pytestconfig))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def group_broker_factory(
    group_broker_settings: dict[str, Any], pytestconfig: pytest.Config
) -> Iterator[Callable[..., EmbeddedBroker]]:
    """Start more brokers: ``group_broker_factory(**overrides)`` (over group_broker_settings); all stop after
    the test."""
    with ExitStack() as started:

        def start(**overrides: Any) -> EmbeddedBroker:
            broker = _start(_with_options({**group_broker_settings, **overrides}, pytestconfig))
            started.callback(broker.stop)
            return broker

        yield start
