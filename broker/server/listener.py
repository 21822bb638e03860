"""What the broker server keeps per listener, and the stand-in for its state while that loads (issue 17)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import uuid

    from broker.api.base import ApiContext
    from broker.storage.partition_log import PartitionLog
    from broker.storage.topics import TopicRegistry


class Loading(Protocol):
    """The broker server as its stand-ins see it (server/broker.py)."""

    def finish_loading(self) -> None: ...


class Listener:
    """One of Kafka's listeners: a name, the port it bound, and the API context that advertises its address."""

    __slots__ = ("api", "name", "port")

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        self.api: ApiContext


def log_of(topics: TopicRegistry, topic_id: uuid.UUID, partition: int) -> PartitionLog | None:
    topic = topics.by_id(topic_id)
    return None if topic is None else topic.log(partition)


class Pending:
    """Stands for a part of the state (``coordinator``, ``topics``, ...) while its modules load in the background:
    the first use finishes the loading on the spot (the loop waits for the rest of the imports, as it did before
    issue 17 for all of them) and goes to the real object. Only a request that comes during the first tens of
    milliseconds of a ``serve`` process meets one."""

    __slots__ = ("_name", "_server")

    def __init__(self, server: Loading, name: str) -> None:
        self._server = server
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        self._server.finish_loading()
        return getattr(getattr(self._server, self._name), attribute)
