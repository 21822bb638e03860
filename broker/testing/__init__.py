"""Test tooling: a broker inside the test process (``embedded``), assertions on a broker's groups through its
control API (``control``, with ``share`` for share groups), and the pytest plugin (``pytest_plugin``).

The plugin module is loaded by pytest in every run wherever this package is installed, and importing it imports
this package first, so nothing heavy may load here: the public names below are resolved on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.testing.control import AsyncControl, BrokerControl, Fault, RebalanceCheck, WaitTimeout
    from broker.testing.embedded import EmbeddedBroker, embedded_settings, run_broker
    from broker.testing.share import ArchiveCheck, Archived, Redelivery, RedeliveryCheck

# public name -> the module that defines it
_MODULES = {
    "ArchiveCheck": "broker.testing.share",
    "Archived": "broker.testing.share",
    "AsyncControl": "broker.testing.control",
    "BrokerControl": "broker.testing.control",
    "Fault": "broker.testing.control",
    "RebalanceCheck": "broker.testing.control",
    "Redelivery": "broker.testing.share",
    "RedeliveryCheck": "broker.testing.share",
    "WaitTimeout": "broker.testing.control",
    "EmbeddedBroker": "broker.testing.embedded",
    "embedded_settings": "broker.testing.embedded",
    "run_broker": "broker.testing.embedded",
}

__all__ = [
    "ArchiveCheck",
    "Archived",
    "AsyncControl",
    "BrokerControl",
    "EmbeddedBroker",
    "Fault",
    "RebalanceCheck",
    "Redelivery",
    "RedeliveryCheck",
    "WaitTimeout",
    "embedded_settings",
    "run_broker",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'broker.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
