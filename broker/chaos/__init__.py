"""Chaos testing against a consumer group: ``group-broker chaos run``.

- ``broker.chaos.consumer``: the bundled example consumer (aiokafka, kafka-python or confluent-kafka), at-least-once:
  each batch is appended to a file and fsynced before its offsets are committed.
- ``broker.chaos.producer``: records with a known key sequence (``k-000000``, ``k-000001``, ...) at a fixed rate.
- ``broker.chaos.runner``: starts consumers as OS processes, kills and restarts them on a seeded schedule, follows
  the broker's group events through its control API, and reports what was lost, duplicated, and how long the group
  took to notice each disruption and to recover from it. Its parts: ``options`` (the flags), ``launch`` (the
  processes), ``schedule`` (the kills), ``records`` (produced and consumed), ``measure`` (from the events),
  ``protocols`` (how the events read for classic and KIP-848 consumer groups), ``display`` (the live line and the
  final report). ``--group-protocol consumer`` runs confluent consumers with ``group.protocol=consumer``.
- ``broker.chaos.share_consumer``, ``share_run``, ``share_judge`` and ``share_display``: ``--group-protocol share``,
  confluent-kafka ``ShareConsumer`` processes in one KIP-932 share group under SIGKILL and SIGSTOP, and the verdict
  on every record's deliveries (a pure function of what the workers wrote).
- ``broker.chaos.eos_worker`` and ``broker.chaos.exactly_once``: ``--exactly-once``, transactional
  consume-transform-produce workers (confluent-kafka) in place of the consumers, and the check that the output
  topic, read read_committed, holds every input exactly once.

The client libraries are not dependencies of the broker: each process imports only the one it was asked for.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any

CLIENTS = ("aiokafka", "kafka-python", "confluent")

# client name -> (module to import, package to pip install)
_LIBRARIES = {
    "aiokafka": ("aiokafka", "aiokafka"),
    "kafka-python": ("kafka", "kafka-python"),
    "confluent": ("confluent_kafka", "confluent-kafka"),
}


class MissingLibrary(Exception):
    """The chosen client library is not installed; the message is one line naming the pip package."""


def missing_library_message(client: str) -> str:
    module, package = _LIBRARIES[client]
    return f"the {client} client library (module {module!r}) is not installed: pip install {package}"


def library_available(client: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(_LIBRARIES[client][0]) is not None


def load(client: str, submodule: str = "") -> ModuleType:
    """Import the client library (or one of its submodules) lazily; MissingLibrary when it is not installed.

    The libraries are untyped (or typed only in part), so they are used through ``ModuleType`` attributes (Any).
    """
    module = _LIBRARIES[client][0]
    try:
        return importlib.import_module(f"{module}.{submodule}" if submodule else module)
    except ModuleNotFoundError:
        if not library_available(client):
            raise MissingLibrary(missing_library_message(client)) from None
        raise


def fail_missing(error: MissingLibrary, program: str) -> int:
    print(f"{program}: error: {error}", file=sys.stderr)
    return 2


def run_client(
    client: str,
    with_aiokafka: Callable[[], Coroutine[Any, Any, None]],
    with_kafka_python: Callable[[threading.Event], None],
    with_confluent: Callable[[threading.Event], None],
) -> None:
    """Run the chosen library's loop: aiokafka's on asyncio, the others on this thread until SIGTERM sets the event."""
    if client == "aiokafka":
        asyncio.run(with_aiokafka())
        return
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    (with_kafka_python if client == "kafka-python" else with_confluent)(stopping)
