"""The event format's names: its version, the events, the fields every record has (docs/events.md).

One place for them, imported by whoever emits (the coordinator), reads (the analytics job, the chaos runner, the
test tooling) or counts (the control API's metrics). Nothing heavy here: the Spark schema that reads a log is
built from these names in ``broker/analytics/schema.py``.
"""

from __future__ import annotations

#: The format version written in every record's ``v``. Add events and fields freely within a version; renaming or
#: removing one raises it.
FORMAT_VERSION = 2

GROUP_CREATED = "group_created"
MEMBER_JOINED = "member_joined"
MEMBER_REJOINED = "member_rejoined"
MEMBER_LEFT = "member_left"
MEMBER_EXPIRED = "member_expired"
MEMBER_FENCED = "member_fenced"
REBALANCE_STARTED = "rebalance_started"
JOIN_COMPLETED = "join_completed"
SYNC_COMPLETED = "sync_completed"
REFEREE_VIOLATION = "referee_violation"
# A referee_violation's ``kind``: the same words for both referees (classic/referee.py, modern/consumer/referee.py).
DOUBLE_OWNER = "double_owner"
UNOWNED = "unowned"
UNKNOWN_MEMBER = "unknown_member"
STATE_CHANGED = "state_changed"
GROUP_EMPTIED = "group_emptied"
GROUP_DELETED = "group_deleted"
OFFSETS_EXPIRED = "offsets_expired"
OFFSETS_COMMITTED = "offsets_committed"
# Added within version 2: OffsetDelete removed some of a group's committed offsets (an admin action).
OFFSETS_DELETED = "offsets_deleted"
# Version 2: KIP-848 consumer groups (docs/events.md, "Consumer groups").
GROUP_EPOCH_BUMPED = "group_epoch_bumped"
TARGET_ASSIGNMENT_COMPUTED = "target_assignment_computed"
MEMBER_RECONCILED = "member_reconciled"
# Added within version 2: the transaction coordinator (docs/events.md, "Transactions"); group_id is "".
TRANSACTION_STARTED = "transaction_started"
TRANSACTION_COMMITTED = "transaction_committed"
TRANSACTION_ABORTED = "transaction_aborted"
TRANSACTION_TIMED_OUT = "transaction_timed_out"
TRANSACTION_FENCED = "transaction_fenced"
#: The events that end a transaction, by outcome (the control API's metrics count them).
TRANSACTION_ENDINGS = {
    TRANSACTION_COMMITTED: "committed",
    TRANSACTION_ABORTED: "aborted",
    TRANSACTION_TIMED_OUT: "timed_out",
    TRANSACTION_FENCED: "fenced",
}
TRANSACTION_EVENTS = frozenset({TRANSACTION_STARTED, *TRANSACTION_ENDINGS})
# Added within version 2: disturbances (docs/events.md, "Disturbances"). The broker emits the fault rules' own
# (group_id the rule's group, "" for a rule of every group); chaos_action is what a chaos runner tells the broker
# it is about to do (POST /v1/events: a kill the broker cannot see).
FAULT_RULE_ADDED = "fault_rule_added"
FAULT_RULE_REMOVED = "fault_rule_removed"
CHAOS_ACTION = "chaos_action"
DISTURBANCE_EVENTS = frozenset({FAULT_RULE_ADDED, FAULT_RULE_REMOVED, CHAOS_ACTION})
# Added within version 2 (issue 27): the broker's own start and stop (docs/events.md, "Broker restarts"). A killed
# broker cannot say it stopped: the next start on the same data directory does, with ``clean`` false.
BROKER_STARTED = "broker_started"
BROKER_STOPPED = "broker_stopped"
BROKER_EVENTS = frozenset({BROKER_STARTED, BROKER_STOPPED})
# Added within version 2 (issue 28): KIP-932 share groups (docs/events.md, "Share groups"). Their group events
# (group_created, state_changed, group_epoch_bumped, member_left, ...) are the consumer groups' with group_type
# "share"; these are their own: a member's join and the records' life (acquired under a lock, acknowledged, released
# with its cause, archived) and the share sessions.
SHARE_MEMBER_JOINED = "share_member_joined"
RECORDS_ACQUIRED = "records_acquired"
RECORDS_ACKNOWLEDGED = "records_acknowledged"
RECORDS_RELEASED = "records_released"
RECORDS_ARCHIVED = "records_archived"
SHARE_SESSION_OPENED = "share_session_opened"
SHARE_SESSION_CLOSED = "share_session_closed"
#: records_released's ``cause``.
RELEASE_CAUSES = ("release", "lock_expired", "session_closed")
SHARE_EVENTS = frozenset(
    {
        SHARE_MEMBER_JOINED,
        RECORDS_ACQUIRED,
        RECORDS_ACKNOWLEDGED,
        RECORDS_RELEASED,
        RECORDS_ARCHIVED,
        SHARE_SESSION_OPENED,
        SHARE_SESSION_CLOSED,
    }
)

# Added within version 2 (issue 29): a multi-node broker's own chaos (docs/events.md, "Cluster"): a node stopped or
# started, a partition's leader moved (with its new epoch), a coordinator partition unloaded on one node and loaded
# on another. Their group_id is "".
NODE_STOPPED = "node_stopped"
NODE_STARTED = "node_started"
LEADER_MOVED = "leader_moved"
COORDINATOR_UNLOADED = "coordinator_unloaded"
COORDINATOR_LOADED = "coordinator_loaded"
CLUSTER_EVENTS = frozenset({NODE_STOPPED, NODE_STARTED, LEADER_MOVED, COORDINATOR_UNLOADED, COORDINATOR_LOADED})

# Added within version 2 (issue 30): security (docs/events.md, "Security"). authorization_denied: a request the
# authorizer refused (principal, API, resource and operation; the group's id when the resource is a group, else "").
AUTHORIZATION_DENIED = "authorization_denied"
SECURITY_EVENTS = frozenset({AUTHORIZATION_DENIED})
# Added within version 2 (issue 30): SASL logins on a SASL listener (docs/events.md, "Authentication"), emitted by
# broker/security/sasl/authenticator.py with listener, peer, mechanism and user (never a password or a token);
# group_id is "".
AUTHENTICATION_SUCCEEDED = "authentication_succeeded"
AUTHENTICATION_FAILED = "authentication_failed"
SESSION_EXPIRED = "session_expired"
REAUTHENTICATED = "reauthenticated"
AUTHENTICATION_EVENTS = frozenset({AUTHENTICATION_SUCCEEDED, AUTHENTICATION_FAILED, SESSION_EXPIRED, REAUTHENTICATED})

#: Every event of this format version. A reader counts others as unknown and skips them: a broker may add events
#: within a version.
EVENTS = frozenset(
    {
        BROKER_STARTED,
        BROKER_STOPPED,
        GROUP_CREATED,
        MEMBER_JOINED,
        MEMBER_REJOINED,
        MEMBER_LEFT,
        MEMBER_EXPIRED,
        MEMBER_FENCED,
        REBALANCE_STARTED,
        JOIN_COMPLETED,
        SYNC_COMPLETED,
        REFEREE_VIOLATION,
        STATE_CHANGED,
        GROUP_EMPTIED,
        GROUP_DELETED,
        OFFSETS_EXPIRED,
        OFFSETS_COMMITTED,
        OFFSETS_DELETED,
        GROUP_EPOCH_BUMPED,
        TARGET_ASSIGNMENT_COMPUTED,
        MEMBER_RECONCILED,
        *TRANSACTION_EVENTS,
        *DISTURBANCE_EVENTS,
        *SHARE_EVENTS,
        *CLUSTER_EVENTS,
        *SECURITY_EVENTS,
        *AUTHENTICATION_EVENTS,
    }
)

#: Fields every record has (docs/events.md, "Every record").
COMMON = ("v", "seq", "ts_ms", "run_id", "event", "group_id")

#: Fields without which an event cannot be placed in a rebalance window.
REQUIRED: dict[str, tuple[str, ...]] = {
    MEMBER_JOINED: ("member_id",),
    MEMBER_LEFT: ("member_id",),
    MEMBER_EXPIRED: ("member_id",),
    MEMBER_FENCED: ("member_id", "new_member_id"),
    JOIN_COMPLETED: ("generation_id", "state"),
    SYNC_COMPLETED: ("generation_id",),
    STATE_CHANGED: ("to",),
    GROUP_EPOCH_BUMPED: ("group_epoch",),
    TARGET_ASSIGNMENT_COMPUTED: ("assignment_epoch",),
    MEMBER_RECONCILED: ("member_id", "member_epoch"),
    FAULT_RULE_ADDED: ("rule_id", "action"),
    FAULT_RULE_REMOVED: ("rule_id",),
    CHAOS_ACTION: ("action",),
    SHARE_MEMBER_JOINED: ("member_id",),
    # The records_* events of share groups place no rebalance window, so none of their fields is required here.
}
