"""What a connection needs of the broker, and nothing more: the narrow host in place of ``BrokerServer``.

A connection (broker/server/connection.py) and its request pipeline (pipeline.py) read the settings of their
limits, call the coordinator's hot methods, consult the gates, count what they answered and say when they
come and go. ``BrokerServer`` is one host; a test is another (tests/server/test_pipeline.py). This module imports
neither the broker nor the connection, so that no import cycle runs through them, ``TYPE_CHECKING`` included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kio.schema.errors import ErrorCode

    from broker.config.settings import Settings
    from broker.server.gates import Gate
    from broker.server.stats import RequestStats


class HotCoordinator(Protocol):
    """The group coordinator's calls on the hot path (broker/coordinator/coordinator.py)."""

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode: ...

    def consumer_heartbeat_steady(self, group_id: str, member_id: str, epoch: int, client_id: str) -> int | None: ...

    def share_heartbeat_steady(
        self, group_id: str, member_id: str, epoch: int, client_id: str, client_host: str
    ) -> int | None: ...


class OpenConnection(Protocol):
    """A connection as the broker keeps it: by its peer, hung up when the broker stops."""

    @property
    def peer(self) -> str: ...

    @property
    def reading(self) -> bool: ...

    @property
    def connection_id(self) -> int: ...

    def hang_up(self) -> None: ...

    def abort(self) -> None: ...


class ConnectionHost(Protocol):
    """The broker as a connection sees it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def coordinator(self) -> HotCoordinator: ...

    @property
    def gates(self) -> Sequence[Gate]: ...

    @property
    def request_stats(self) -> RequestStats: ...

    def connection_opened(self, connection: OpenConnection) -> None: ...

    def connection_lost(self, connection: OpenConnection) -> None: ...
