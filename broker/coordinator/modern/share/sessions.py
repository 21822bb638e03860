"""Share sessions (Kafka's ``ShareSessionCache`` and ``ShareSessionContext``, section 7 of
``docs/spec/share-groups.md``).

A session is keyed by (group id, member id) on this broker: the partitions the member fetches here and an epoch
(``ShareRequestMetadata``: 0 opens, -1 closes, ``next_epoch`` wraps from Integer.MAX_VALUE to 1). The cache holds at
most ``group.share.max.share.sessions`` and remembers, per connection, the session it opened last (SSC's
``connectionIdToSessionMap``: one entry a connection, overwritten by the next session it opens, forgotten when that
session ends otherwise), so that a closed connection ends that session at once (``ClientConnectionDisconnectListener``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.coordinator.modern.types import TopicId

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessions", "next_epoch"]

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_INT32_MAX = 2**31 - 1

SessionKey = tuple[str, str]  # (group id, member id)
PartitionKey = tuple[TopicId, int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT32_MAX else epoch + 1


@dataclass(slots=True, eq=False)
class ShareSession:
    group_id: str
    member_id: str
    connection: int
    epoch: int = 1
    partitions: dict[PartitionKey, None] = field(default_factory=dict)  # in the order they were added
    rotation: int = 0  # where the next fetch starts, so that MaxRecords is shared fairly (section 8.2)

    @property
    def key(self) -> SessionKey:
        return (self.group_id, self.member_id)


class ShareSessions:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sessions: dict[SessionKey, ShareSession] = {}
        self.by_connection: dict[int, SessionKey] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def full(self) -> bool:
        return len(self.sessions) >= self.limit

    def open(self, group_id: str, member_id: str, connection: int) -> ShareSession:
        session = ShareSession(group_id, member_id, connection)
        self.sessions[session.key] = session
        self.by_connection[connection] = session.key
        return session

    def remove(self, session: ShareSession) -> None:
        if self.sessions.get(session.key) is session:
            del self.sessions[session.key]
        if self.by_connection.get(session.connection) == session.key:
            del self.by_connection[session.connection]  # Kafka marks the entry stale: the disconnect ends nothing

    def of_connection(self, connection: int) -> list[ShareSession]:
        """The session ``connection`` opened last, if it is still there (what its disconnect ends)."""
        key = self.by_connection.pop(connection, None)
        found = None if key is None else self.sessions.get(key)
        return [found] if found is not None and found.connection == connection else []

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.group_id == group_id]
