"""A broker inside the test process.

``EmbeddedBroker`` runs ``BrokerServer`` on its own event loop in a daemon thread. A thread rather than the
test's loop: synchronous clients (kafka-python, confluent-kafka) block the test's thread while they wait for the
broker, and an asyncio test's clients (aiokafka) need the broker to answer while their own loop is busy.

It is a ``BrokerControl`` (``control.py``) on its own control API: the waits and rebalance checks go through the
broker's real HTTP API, as they would against a broker in another process or container::

    with run_broker(topics={"orders": 3}) as broker:
        ...  # consumers on broker.bootstrap
        broker.wait_for("orders-app", state="Stable", members=2)
        with broker.no_rebalance("orders-app"):
            ...
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self, TypeVar

from broker.config.settings import Settings, host_port, reachable_host
from broker.control.client import ControlClient
from broker.coordinator.config import GroupConfig
from broker.server.settings import ClusterConfig
from broker.testing.control import BrokerControl

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

R = TypeVar("R")

# Kafka's own integration tests run with these: no 3 s wait before the first generation, short sessions allowed.
# KIP-848 consumer groups (the broker sets their timers, docs/spec/consumer-groups.md section 7): a 500 ms heartbeat
# interval, so members learn of a new target quickly, a 10 s session, and bounds low enough for a 1 s session.
# KIP-932 share groups likewise (docs/spec/share-groups.md section 11), and a record lock may be as short as Kafka
# allows (1 s, ``share_record_lock_duration_ms``); it stays 30 s unless a test shortens it.
TEST_GROUP_CONFIG: dict[str, Any] = {
    "initial_rebalance_delay_ms": 0,
    "min_session_timeout_ms": 1000,
    "consumer_session_timeout_ms": 10_000,
    "consumer_min_session_timeout_ms": 1000,
    "consumer_heartbeat_interval_ms": 500,
    "consumer_min_heartbeat_interval_ms": 100,
    "share_session_timeout_ms": 10_000,
    "share_min_session_timeout_ms": 1000,
    "share_heartbeat_interval_ms": 500,
    "share_min_heartbeat_interval_ms": 100,
    "share_min_record_lock_duration_ms": 1000,
}


def embedded_settings(**overrides: Any) -> Settings:
    """Settings for a broker inside a test: 127.0.0.1, ephemeral Kafka and control ports, test-friendly groups.

    ``overrides`` are ``broker.config.settings.Settings`` fields. Three conveniences: ``group`` may be a dict, merged
    into the test-friendly ``GroupConfig`` (a ``GroupConfig`` is taken as it is), ``topics`` may be a
    ``{name: partitions}`` dict, and the fields of ``ClusterConfig`` may be given by name (``nodes=3``,
    ``coordinator_load_delay_ms=...``; or ``cluster`` as a dict of them).
    """
    overrides = _cluster_fields(overrides)
    known = {field.name for field in dataclasses.fields(Settings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"unknown broker setting(s) {unknown}; the settings are the fields of "
            f"broker.config.settings.Settings: {sorted(known)}"
        )
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "admin_host": "127.0.0.1",
        "admin_port": 0,
        "auto_create_topics": True,
        **overrides,
        "group": _group_config(overrides.get("group")),
    }
    topics = values.get("topics")
    if isinstance(topics, Mapping):
        values["topics"] = tuple(topics.items())
    elif topics is not None:
        values["topics"] = tuple(tuple(topic) for topic in topics)
    return Settings(**values)


def _cluster_fields(overrides: dict[str, Any]) -> dict[str, Any]:
    """``nodes=3`` (any ``ClusterConfig`` field by name) and ``cluster={...}`` into ``cluster=ClusterConfig(...)``."""
    names = {field.name for field in dataclasses.fields(ClusterConfig)}
    given = {name: overrides[name] for name in names & set(overrides)}
    cluster = overrides.get("cluster")
    if not given and not isinstance(cluster, Mapping):
        return overrides
    if isinstance(cluster, Mapping):
        unknown = sorted(set(cluster) - names)
        if unknown:
            raise ValueError(f"unknown cluster setting(s) {unknown}; the fields of ClusterConfig are {sorted(names)}")
        given = {**cluster, **given}
    elif isinstance(cluster, ClusterConfig):
        given = {**{name: getattr(cluster, name) for name in names}, **given}
    rest = {name: value for name, value in overrides.items() if name not in names}
    return {**rest, "cluster": ClusterConfig(**given)}


def _group_config(value: object) -> GroupConfig:
    if value is None:
        return GroupConfig(**TEST_GROUP_CONFIG)
    if isinstance(value, GroupConfig):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"the group setting is a GroupConfig or a dict of its fields, got {value!r}")
    known = {field.name for field in dataclasses.fields(GroupConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"unknown group setting(s) {unknown}; the fields of GroupConfig are {sorted(known)}")
    return GroupConfig(**(TEST_GROUP_CONFIG | dict(value)))


class EmbeddedBroker(BrokerControl):
    """A broker on its own event loop in a daemon thread of this process. ``with`` starts and stops it."""

    def __init__(self, settings: Settings | None = None, start_timeout: float = 30.0) -> None:
        super().__init__()
        self.settings = settings if settings is not None else embedded_settings()
        if self.settings.admin_port < 0:
            raise ValueError("an embedded broker needs its control API: admin_port must be 0 (any free port) or a port")
        self.start_timeout = start_timeout
        #: The broker itself. It belongs to the broker's thread: read it there (``call``), not from the test.
        self.server: BrokerServer | None = None
        self.port = 0
        self.bootstrap = ""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._abandon = False  # the next stop is a kill (``restart``)

    def __repr__(self) -> str:
        if self._client is None:
            return "EmbeddedBroker(not running)"
        return f"EmbeddedBroker(bootstrap={self.bootstrap!r}, admin_url={self.admin_url!r})"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Self:
        """Start the broker and return once its Kafka listener and control API both accept connections."""
        if self._thread is not None:
            raise RuntimeError("the broker is already running")
        nodes = self.settings.cluster.nodes
        if nodes > 1 and not self.settings.listeners and self.settings.port == 0:
            # Node i listens on the port + i (serve --nodes): a free run of ports, so that restart() and a
            # started node come back where they were.
            self.settings = dataclasses.replace(self.settings, port=_free_run(self.settings.host, nodes))
        self._failure = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="group-broker", daemon=True)
        self._thread.start()
        if not ready.wait(self.start_timeout):
            raise RuntimeError(f"the broker did not start within {self.start_timeout:g} s")
        if self._failure is not None or self.server is None:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"the broker failed to start: {self._failure}") from self._failure
        server = self.server
        self.port = server.port
        # server.port is the first listener's: the one clients should bootstrap from; with several nodes, each
        # node's port on it (a client that bootstraps after a node stopped still finds a running one).
        host = reachable_host(self.settings.bind_endpoints()[0].host)
        endpoints = next(iter(server.node_endpoints.values()), {}) if self.settings.cluster.nodes > 1 else {}
        ports = [port for _node, (_host, port) in sorted(endpoints.items())] or [server.port]
        self.bootstrap = ",".join(host_port(host, port) for port in ports)
        control = server.control
        assert control is not None  # the embedded broker always runs its control API
        self._client = ControlClient(f"http://{host_port(reachable_host(control.host), control.port)}")
        return self

    def stop(self) -> None:
        """Stop the broker as its own shutdown does (parked requests answered, connections closed)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._loop is not None and self._stopping is not None and thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopping.set)
        thread.join(self.start_timeout)
        self._client = None
        self.server = None
        self._loop = None
        if thread.is_alive():
            raise RuntimeError(f"the broker did not stop within {self.start_timeout:g} s")
        if self._failure is not None:
            raise RuntimeError(f"the broker failed while stopping: {self._failure}") from self._failure

    def restart(self, *, graceful: bool = False) -> Self:
        """Stop the broker and start it again on the same Kafka and control ports (issue 27). By default as a
        SIGKILL would: connections dropped unanswered and the data directory left without its clean-shutdown
        marker (``BrokerServer.abandon``), so the start recovers it; ``graceful=True`` stops it as ``stop`` does.
        With ``data_dir`` set, groups, offsets and records come back; without, it starts empty, as Kafka would
        not (the memory-only broker's restart is amnesia)."""
        server = self.server
        if server is None or server.control is None:
            raise RuntimeError("the broker is not running")
        port, admin_port = server.port, server.control.port
        if not graceful:
            self._abandon = True
        self.stop()
        # The same ports: a client's bootstrap and the control URL stay right (listeners name theirs).
        self.settings = dataclasses.replace(self.settings, port=port, admin_port=admin_port)
        return self.start()

    def call(self, function: Callable[[], R], timeout: float = 10.0) -> R:
        """Run ``function`` on the broker's loop and return its result: the safe way to read ``server``."""
        if self._loop is None or self._thread is None:
            raise RuntimeError("the broker is not running")

        async def run() -> R:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def _group_ids(self) -> list[str]:
        # Every group with buffered events, deleted ones too, which the control API no longer lists.
        return self.call(lambda: list(self.server.events.rings) if self.server is not None else [])

    def _run(self, ready: threading.Event) -> None:
        try:
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                runner.run(self._serve(ready))
        except BaseException as error:  # reported by start() or stop(), in the test's thread
            self._failure = error
        finally:
            ready.set()

    async def _serve(self, ready: threading.Event) -> None:
        from broker.server.broker import BrokerServer

        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = BrokerServer(self.settings)
        await server.start()
        self.server = server
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            abandon, self._abandon = self._abandon, False
            await (server.abandon() if abandon else server.stop())


def _free_run(host: str, count: int, attempts: int = 100) -> int:
    """A port P with P .. P + count - 1 all free on ``host`` (as free as a probe can tell)."""
    for _ in range(attempts):
        with socket.socket() as first:
            first.bind((host, 0))
            base = int(first.getsockname()[1])
            if base + count > 65536:
                continue
            probes: list[socket.socket] = []
            try:
                for port in range(base + 1, base + count):
                    probe = socket.socket()
                    probes.append(probe)
                    probe.bind((host, port))
            except OSError:
                continue
            finally:
                for probe in probes:
                    probe.close()
        return base
    raise RuntimeError(f"no run of {count} free ports on {host}")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; this keeps odd platforms working
        return asyncio.new_event_loop
    return uvloop.new_event_loop


@contextmanager
def run_broker(settings: Settings | None = None, **overrides: Any) -> Iterator[EmbeddedBroker]:
    """A running EmbeddedBroker for the block: ``settings`` as given, or ``embedded_settings(**overrides)``."""
    if settings is not None and overrides:
        raise TypeError("pass either settings or overrides, not both")
    with EmbeddedBroker(settings if settings is not None else embedded_settings(**overrides)) as broker:
        yield broker
