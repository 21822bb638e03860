"""A group's offsets as ``kafka-consumer-groups.sh --describe`` prints them: Kafka's columns, "-" for none.

Read from ``GET /v1/groups/{group}``'s ``offsets`` (docs/control-api.yaml, ``PartitionOffsets``); shared by
``describe`` and ``watch``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from broker.cli.format import table

OFFSET_HEADERS = [
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID",
]  # fmt: skip


def dash(value: object) -> str:
    """Kafka's tool prints "-" where there is no value."""
    return "-" if value is None or value == "" else str(value)


def offset_rows(group: Mapping[str, Any]) -> list[list[str]]:
    rows: Sequence[Mapping[str, Any]] = group.get("offsets") or []
    return [
        [
            str(group["group_id"]),
            str(row["topic"]),
            str(row["partition"]),
            dash(row["committed_offset"]),
            dash(row["log_end_offset"]),
            dash(row["lag"]),
            dash(row["member_id"]),
            dash(row["host"]),
            dash(row["client_id"]),
        ]
        for row in rows
    ]


def offsets_table(group: Mapping[str, Any]) -> str:
    """The table, or Kafka's own line for a group with nothing to show."""
    rows = offset_rows(group)
    if not rows:
        return f"Consumer group '{group['group_id']}' has no active members and no committed offsets."
    return table(OFFSET_HEADERS, rows)


def offsets_section(group: Mapping[str, Any]) -> list[str]:
    """``describe``'s last section: a heading with the total lag, then the table."""
    if not group.get("offsets"):
        return ["Offsets: none"]
    return [f"Offsets (total lag {group.get('lag', 0)}):", offsets_table(group)]
