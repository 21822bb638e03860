"""Test tooling: a broker inside the test process (``embedded``) and the pytest plugin (``pytest_plugin``).

The plugin module is loaded by pytest in every run wherever this package is installed, and importing it imports
this package first, so nothing heavy may load here: the public names below are resolved on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.testing.embedded import (
        AsyncControl,
        BrokerControl,
        EmbeddedBroker,
        Fault,
        RebalanceCheck,
        WaitTimeout,
        embedded_settings,
        run_broker,
    )

__all__ = [
    "AsyncControl",
    "BrokerControl",
    "EmbeddedBroker",
    "Fault",
    "RebalanceCheck",
    "WaitTimeout",
    "embedded_settings",
    "run_broker",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("broker.testing.embedded"), name)
    raise AttributeError(f"module 'broker.testing' has no attribute {name!r}")
