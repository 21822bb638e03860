"""The explicit Spark schemas: the event log's format (versions 1 and 2, docs/events.md) and the job's tables.

The format's names (its version, the events, the fields every record has and those each event needs) are
``broker/events/names.py``'s, shared with the broker that writes them; this module only types the fields for Spark.

The input is read with this schema instead of letting Spark infer one: inference would scan everything first, and
would give a field the type of whatever it happened to see (``members`` is an int in ``rebalance_started`` and a
list in ``join_completed``). Fields the analysis does not need, or whose JSON type differs between events, are
declared as strings: Spark then keeps their raw JSON text, so no value of theirs can make a line unreadable. A
field the analysis needs with the wrong JSON type makes the line ``malformed`` (docs/analytics.md).
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

#: Where Spark puts the text of a line it could not read with the schema.
CORRUPT = "_corrupt"

_PARTITIONS = MapType(StringType(), ArrayType(IntegerType()))  # topic -> partitions
_ASSIGNMENTS = MapType(StringType(), _PARTITIONS)  # member -> topic -> partitions
_MOVE = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("from", StringType()),
        StructField("to", StringType()),
    ]
)


#: ``broker_started.loaded``: what the data directory held (docs/events.md, "Broker restarts"); empty for a
#: memory-only broker. Every count is an int; one of another JSON type makes the line malformed.
LOADED_KEYS = (
    "topics",
    "groups",
    "offsets",
    "transactions",
    "records",
    "journal_entries",
    "journal_bytes",
    "torn_tail_bytes",
)
_LOADED = StructType([StructField(key, LongType()) for key in LOADED_KEYS])


def _fields(*pairs: tuple[str, DataType]) -> list[StructField]:
    return [StructField(name, kind, nullable=True) for name, kind in pairs]


#: One line of the event log: the union of every documented event's fields.
EVENT_SCHEMA = StructType(
    _fields(
        # every record
        ("v", IntegerType()),
        ("seq", LongType()),
        ("ts_ms", LongType()),
        ("run_id", StringType()),
        ("event", StringType()),
        ("group_id", StringType()),
        # members
        ("member_id", StringType()),
        ("new_member_id", StringType()),
        ("group_instance_id", StringType()),
        ("client_id", StringType()),
        ("client_host", StringType()),
        ("protocol_type", StringType()),
        ("session_timeout_ms", IntegerType()),
        ("rebalance_timeout_ms", IntegerType()),
        ("since_last_heartbeat_ms", LongType()),
        ("cause", StringType()),
        ("reason", StringType()),
        ("protocols", StringType()),  # raw JSON: not needed
        ("state", StringType()),
        # rebalances
        ("generation_id", IntegerType()),
        ("previous_state", StringType()),
        # raw JSON: an int in rebalance_started and target_assignment_computed, a list of ids in join_completed
        ("members", StringType()),
        ("protocol", StringType()),
        ("leader", StringType()),
        ("assignments", _ASSIGNMENTS),
        ("moved", ArrayType(_MOVE)),
        ("unowned", IntegerType()),
        ("rebalance_ms", LongType()),
        ("rebalance_protocol", StringType()),
        ("assignment_bytes", StringType()),  # raw JSON: not needed
        # state_changed
        ("from", StringType()),
        ("to", StringType()),
        # referee_violation
        ("kind", StringType()),
        ("topic", StringType()),
        ("partition", IntegerType()),
        # offsets_committed (debug), offsets_deleted
        ("offsets", StringType()),  # raw JSON: a list of [topic, partition, offset] ([topic, partition])
        # version 2: consumer groups (KIP-848); every one of their records has group_type "consumer"
        ("group_type", StringType()),
        ("group_epoch", IntegerType()),
        ("assignment_epoch", IntegerType()),
        ("member_epoch", IntegerType()),
        ("previous_epoch", IntegerType()),
        ("assignor", StringType()),
        ("assigned", _PARTITIONS),
        ("pending_revocation", _PARTITIONS),
        ("timer", StringType()),
        ("timeout_ms", LongType()),
        ("subscribed_topic_names", StringType()),  # raw JSON: not needed
        ("subscribed_topic_regex", StringType()),
        ("server_assignor", StringType()),
        # added within version 2: disturbances (fault_rule_added, fault_rule_removed, chaos_action)
        ("action", StringType()),
        ("signal", StringType()),
        ("pid", LongType()),
        ("note", StringType()),
        ("rule_id", StringType()),
        ("match", StringType()),  # raw JSON: the object of what a fault rule matches, shown as it is
        ("error", StringType()),
        ("delay_ms", LongType()),
        # added within version 2 (issue 27): broker restarts (broker_started, broker_stopped), group_id ""
        ("data_dir", StringType()),
        ("clean_shutdown", BooleanType()),
        ("loaded", _LOADED),
        ("load_ms", DoubleType()),
        ("clean", BooleanType()),
        ("detected_at_start", BooleanType()),
        # added within version 2 (issue 28): the records of share groups (KIP-932; records_acquired,
        # records_acknowledged, records_released, records_archived: ``topic`` and ``partition`` above, and
        # ``offsets``, raw JSON above too: ``[first, last]`` runs here, ``[topic, partition, offset]`` lists in
        # offsets_committed, parsed for the share records only: ``tables/share.py``)
        ("ranges", ArrayType(ArrayType(LongType()))),  # records_acquired: [first, last, delivery count]
        ("records", LongType()),
        ("redelivered", LongType()),
        ("lock_duration_ms", LongType()),
        ("accepted", LongType()),
        ("rejected", LongType()),
        ("delivery_count", IntegerType()),
        # added within version 2 (issue 29): the cluster events of ``serve --nodes N`` (node_stopped, node_started,
        # leader_moved, coordinator_unloaded, coordinator_loaded), group_id "": ``topic``, ``partition`` and
        # ``cause`` above; ``epoch``, ``previous`` and ``partitions`` raw JSON (``partitions`` is a transaction's
        # map of topics too), cast where read (``tables/cluster.py``)
        ("node_id", IntegerType()),
        ("mode", StringType()),
        ("epoch", StringType()),
        ("previous", StringType()),
        ("partitions", StringType()),
        ("load_delay_ms", LongType()),
        ("duration_ms", DoubleType()),
        (CORRUPT, StringType()),
    )
)

#: String fields nothing in the analysis reads. A string field takes any JSON value (its raw text), so it can never
#: make a line unreadable: leaving these out of what ``read.classify`` parses changes no row and no line's kind,
#: and spares copying their text (``protocols``, ``offsets``, ...): about half the parsing time (issue 17).
UNREAD = frozenset(
    {
        "protocol_type",
        "reason",
        "protocols",
        "previous_state",
        "leader",
        "assignment_bytes",
        "from",
        "kind",
        "subscribed_topic_names",
        "subscribed_topic_regex",
        "server_assignor",
    }
)
assert all(f.dataType == StringType() for f in EVENT_SCHEMA.fields if f.name in UNREAD)

#: What the reader parses: the event schema less the unread strings.
PARSED_SCHEMA = StructType([f for f in EVENT_SCHEMA.fields if f.name not in UNREAD])

# -- the tables the job writes (docs/analytics.md); the report and the generator rely on these names and types

REBALANCES = StructType(
    _fields(
        ("group_id", StringType()),
        ("run_id", StringType()),
        ("generation", IntegerType()),
        ("previous_generation", IntegerType()),
        ("cause", StringType()),
        ("trigger_member", StringType()),
        ("restarts", IntegerType()),
        ("start_ms", LongType()),
        ("end_ms", LongType()),
        ("duration_ms", LongType()),
        ("outcome", StringType()),
        ("members_before", IntegerType()),
        ("members_after", IntegerType()),
        ("partitions_moved", IntegerType()),
        ("partitions_unowned", IntegerType()),
        ("unowned_partition_seconds", DoubleType()),
        ("protocol", StringType()),
        ("rebalance_protocol", StringType()),
        ("broker_rebalance_ms", LongType()),
        ("partitions", IntegerType()),
        ("revocations", IntegerType()),
    )
)

MEMBERS = StructType(
    _fields(
        ("group_id", StringType()),
        ("run_id", StringType()),
        ("member_id", StringType()),
        ("client_id", StringType()),
        ("group_instance_id", StringType()),
        ("client_host", StringType()),
        ("joined_ms", LongType()),
        ("ended_ms", LongType()),
        ("duration_ms", LongType()),
        ("end", StringType()),
        ("end_cause", StringType()),
        ("since_last_heartbeat_ms", LongType()),
        ("session_timeout_ms", IntegerType()),
    )
)

OWNERSHIP = StructType(
    _fields(
        ("group_id", StringType()),
        ("run_id", StringType()),
        ("topic", StringType()),
        ("partition", IntegerType()),
        ("member_id", StringType()),
        ("generation", IntegerType()),
        ("start_ms", LongType()),
        ("end_ms", LongType()),
        ("duration_ms", LongType()),
        ("end", StringType()),
    )
)

_PERCENTILES = ("p50", "p95", "p99", "max")

SUMMARY = StructType(
    _fields(
        ("scope", StringType()),
        ("group_id", StringType()),
        ("rebalances", LongType()),
        *((f"rebalance_ms_{p}", DoubleType()) for p in _PERCENTILES),
        *((f"detection_ms_{p}", DoubleType()) for p in _PERCENTILES),
        *((f"unowned_ps_{p}", DoubleType()) for p in _PERCENTILES),
        ("unowned_partition_seconds", DoubleType()),
        ("causes", MapType(StringType(), LongType())),
        ("expirations", LongType()),
        ("eager", LongType()),
        ("cooperative", LongType()),
        ("consumer", LongType()),
        # issue 26: formation apart in the counts (``tables/formation.py``)
        ("formations", LongType()),
        ("no_protocol", LongType()),
        ("formation_unowned_partition_seconds", DoubleType()),
        # issue 27: the broker restarts (``tables/restarts.py``): overall, all of them; per group, those it lived
        # through (it had members when the broker stopped)
        ("broker_restarts", LongType()),
    )
)

DISTURBANCES = StructType(
    _fields(
        ("group_id", StringType()),
        ("run_id", StringType()),
        ("seq", LongType()),
        ("ts_ms", LongType()),
        ("event", StringType()),
        ("action", StringType()),
        ("signal", StringType()),
        ("client_id", StringType()),
        ("member_id", StringType()),
        ("pid", LongType()),
        ("rule_id", StringType()),
        ("label", StringType()),
        ("detail", StringType()),
        ("window_ms", LongType()),
        ("member_end", StringType()),
        ("member_end_ms", LongType()),
        ("rebalance_generation", IntegerType()),
        ("rebalance_start_ms", LongType()),
        ("rebalance_cause", StringType()),
        ("rebalance_outcome", StringType()),
        ("rebalance_duration_ms", LongType()),
        ("detected_ms", LongType()),
        # issue 27: a broker restart's (``tables/restarts.py``); null on every other disturbance
        ("clean", BooleanType()),
        ("load_ms", DoubleType()),
        ("loaded_groups", LongType()),
        ("loaded_offsets", LongType()),
        ("loaded_records", LongType()),
        ("data_dir", StringType()),
        ("previous_run_id", StringType()),
    )
)

# issue 29: node stops and starts and coordinator moves (``tables/cluster.py``); one row per (disturbance, group,
# member alive at it)
BROKER_DISTURBANCES = StructType(
    _fields(
        ("group_id", StringType()),
        ("run_id", StringType()),
        ("seq", LongType()),
        ("ts_ms", LongType()),
        ("event", StringType()),
        ("cause", StringType()),
        ("mode", StringType()),
        ("node_id", IntegerType()),
        ("previous_node", IntegerType()),
        ("partition", IntegerType()),
        ("epoch", IntegerType()),
        ("load_delay_ms", LongType()),
        ("load_ms", DoubleType()),
        ("member_id", StringType()),
        ("client_id", StringType()),
        ("next_commit_ms", LongType()),
        ("member_end_ms", LongType()),
        ("all_committed_ms", LongType()),
        ("commits_logged", BooleanType()),
    )
)

# issue 28: share groups (``tables/share.py``); one row per share-partition of a (group, run)
SHARE_DELIVERIES = StructType(
    _fields(
        ("group_id", StringType()),
        ("run_id", StringType()),
        ("topic", StringType()),
        ("partition", IntegerType()),
        ("members", LongType()),
        ("acquisitions", LongType()),
        ("deliveries", LongType()),
        ("records", LongType()),
        ("redeliveries", LongType()),
        ("redeliveries_release", LongType()),
        ("redeliveries_lock_expired", LongType()),
        ("redeliveries_session_closed", LongType()),
        ("redeliveries_unknown", LongType()),
        ("released_release", LongType()),
        ("released_lock_expired", LongType()),
        ("released_session_closed", LongType()),
        ("lock_expiries", LongType()),
        ("archived", LongType()),
        ("accepted", LongType()),
        ("rejected", LongType()),
        ("acknowledged", LongType()),
        ("in_flight_at_end", LongType()),
        ("max_delivery_count", IntegerType()),
        ("first_ms", LongType()),
        ("last_ms", LongType()),
    )
)

SHARE_IN_FLIGHT = StructType(
    _fields(
        ("group_id", StringType()),
        ("run_id", StringType()),
        ("topic", StringType()),
        ("partition", IntegerType()),
        ("end", StringType()),
        ("deliveries", LongType()),
        *((f"in_flight_ms_{p}", DoubleType()) for p in _PERCENTILES),
    )
)

INPUT = StructType(
    _fields(
        ("kind", StringType()),
        ("count", LongType()),
        ("examples", ArrayType(StringType())),
    )
)

#: The kinds of the input report, in the order it lists them. ``lines`` is the sum of all the others.
INPUT_KINDS = (
    "lines",
    "parsed",
    "malformed",
    "unknown_event",
    "newer_version",
    "unknown_version",
    "missing_field",
    "duplicate",
)

TABLE_SCHEMAS: dict[str, StructType] = {
    "input": INPUT,
    "rebalances": REBALANCES,
    "members": MEMBERS,
    "ownership": OWNERSHIP,
    "summary": SUMMARY,
    "disturbances": DISTURBANCES,
    "broker_disturbances": BROKER_DISTURBANCES,
    "share_deliveries": SHARE_DELIVERIES,
    "share_in_flight": SHARE_IN_FLIGHT,
}
