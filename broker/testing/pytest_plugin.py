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


def pytest_configure(config: pytest.Config) -> None:
    _scope(config)  # a bad ini value fails the run at once, not at the first test that uses the broker


def _scope(config: pytest.Config) -> Scope:
    value = str(config.getoption(_OPTION) or config.getini(_OPTION)).strip()
    if value not in SCOPES:
        raise pytest.UsageError(f"{_OPTION} = {value!r} is not a fixture scope: use one of {', '.join(SCOPES)}")
    return value


def _broker_scope(fixture_name: str, config: pytest.Config) -> Scope:
    return _scope(config)


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
def group_broker(group_broker_settings: dict[str, Any]) -> Iterator[EmbeddedBroker]:
    """A broker on 127.0.0.1 with test-friendly group timers: ``bootstrap``, ``admin_url`` and control calls
    (``wait_for``, ``kick``, ``fault``, ``events``, ``no_rebalance``, ...). Shared as --group-broker-scope says."""
    broker = _start(group_broker_settings)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def group_broker_factory(group_broker_settings: dict[str, Any]) -> Iterator[Callable[..., EmbeddedBroker]]:
    """Start more brokers: ``group_broker_factory(**overrides)`` (over group_broker_settings); all stop after
    the test."""
    with ExitStack() as started:

        def start(**overrides: Any) -> EmbeddedBroker:
            broker = _start({**group_broker_settings, **overrides})
            started.callback(broker.stop)
            return broker

        yield start
