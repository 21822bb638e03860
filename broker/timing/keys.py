"""Every keyed timer in the broker, in one place.

A ``Purgatory`` holds at most one deadline per key: scheduling a key again replaces its deadline, cancelling it
removes it. So a key says which timers exclude each other, as the keys of Kafka's ``DelayedOperationPurgatory``
and the new coordinator's ``CoordinatorTimer`` do. Keys are plain tuples (hashable, cheap, readable in a debugger);
their first element names the kind, so two kinds can never collide.
"""

from __future__ import annotations

HeartbeatKey = tuple[str, str, str]
GroupKey = tuple[str, str]


def heartbeat_key(group_id: str, member_id: str) -> HeartbeatKey:
    """A member's session (or a KIP-394 pending member's wait for its second JoinGroup): Kafka's heartbeat key."""
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> GroupKey:
    """A group's join phase: the initial rebalance delay, then the rebalance timeout (DelayedJoin)."""
    return ("join", group_id)


def sync_key(group_id: str) -> GroupKey:
    """A group's sync phase: how long the members wait for the leader's SyncGroup (the pending-sync timeout)."""
    return ("sync", group_id)


def consumer_session_key(group_id: str, member_id: str) -> HeartbeatKey:
    """A consumer-group member's session (KIP-848: GroupMetadataManager's ``consumer-group-session-timeout``)."""
    return ("consumer-session", group_id, member_id)


def consumer_rebalance_key(group_id: str, member_id: str) -> HeartbeatKey:
    """A consumer-group member's revocation deadline (KIP-848: ``consumer-group-rebalance-timeout``)."""
    return ("consumer-rebalance", group_id, member_id)


#: The periodic sweep of expired committed offsets (offsets.retention.check.interval.ms).
OFFSETS_EXPIRATION = ("offsets-expiration",)

#: The periodic sweep of partition logs past their retention (log.retention.check.interval.ms).
LOG_RETENTION = ("log-retention",)

#: The broker's look at how many connections closed since the last one: after a burst, freed memory goes back to
#: the OS (``malloc_trim``; issue 17).
MALLOC_TRIM = ("malloc-trim",)


def delayed_fetch_key(fetch_number: int) -> tuple[str, int]:
    """A parked Fetch's max_wait_ms (DelayedFetch); fetches are numbered as they park."""
    return ("delayed-fetch", fetch_number)


#: The transaction coordinator's periodic timeout scan (transaction.abort.timed.out.transaction.cleanup.interval.ms).
TXN_ABORT_TIMED_OUT = ("txn-abort-timed-out",)

#: The transaction coordinator's periodic transactional-id expiration scan
#: (transaction.remove.expired.transaction.cleanup.interval.ms).
TXN_ID_EXPIRATION = ("txn-id-expiration",)


def txn_completion_key(transactional_id: str) -> tuple[str, str]:
    """A transaction held in Prepare* before its markers are written (the TC's completion-delay test knob)."""
    return ("txn-completion", transactional_id)

#: ``--fsync interval``: the next fsync of what the data directory wrote since the last one (issue 27).
DATA_DIR_FSYNC = ("data-dir-fsync",)


def share_session_key(group_id: str, member_id: str) -> HeartbeatKey:
    """A share-group member's session (KIP-932: GroupMetadataManager's ``share-group-session-timeout``)."""
    return ("share-session", group_id, member_id)


def share_lock_key(acquisition: int) -> tuple[str, int]:
    """The acquisition lock of the records one ShareFetch acquired (SharePartition's acquisition lock timer);
    acquisitions are numbered as they are made."""
    return ("share-lock", acquisition)


def share_fetch_key(fetch_number: int) -> tuple[str, int]:
    """A parked ShareFetch's MaxWaitMs (DelayedShareFetch)."""
    return ("share-fetch", fetch_number)


def coordinator_load_key(partition: int) -> tuple[str, int]:
    """A ``__consumer_offsets`` partition loading on its new leader under a load delay (issue 29): when it ends,
    its groups' members get their fresh sessions (GroupMetadataManager.onLoaded; coordinator/moves.py)."""
    return ("coordinator-load", partition)


def coordinator_loaded_key(topic: str, partition: int) -> tuple[str, str, int]:
    """The end of an internal partition's load delay on its new leader, when ``coordinator_loaded`` is said
    (server/nodes.py)."""
    return ("coordinator-loaded", topic, partition)
