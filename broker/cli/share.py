"""KIP-932 share groups in the client commands: the members, each share-partition's SPSO, SPEO and in-flight counts,
and the record-level view (who holds which offsets, under what lock, delivered how often).

Read from ``GET /v1/groups/{group}`` (``share_partitions``) and ``GET /v1/groups/{group}/share-partitions``
(docs/control-api.yaml, ``SharePartition`` and ``HeldRecords``); shared by ``describe`` (commands.py) and ``watch``.
Standard library only, like ``format.py``: the one-shot commands must start fast.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from broker.cli.format import duration, offset_range, partitions_text, table, text
from broker.coordinator.group_type import GroupType

JSON = dict[str, Any]

SHARE_MEMBER_HEADERS = ["MEMBER ID", "CLIENT ID", "HOST", "EPOCH", "LAST HEARTBEAT", "SUBSCRIBED", "ASSIGNMENT"]
SHARE_PARTITION_HEADERS = [
    "TOPIC", "PARTITION", "SPSO", "SPEO", "LOG-END", "IN-FLIGHT", "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED",
    "DELIVERIES", "REDELIVERIES",
]  # fmt: skip
RECORD_HEADERS = ["TOPIC", "PARTITION", "OFFSETS", "RECORDS", "STATE", "DELIVERY COUNT", "MEMBER", "LOCK LEFT"]


def is_share_group(group: Mapping[str, Any]) -> bool:
    return group.get("group_type") == GroupType.SHARE


def share_member_row(member: JSON) -> list[str]:
    age = member.get("last_heartbeat_age_ms")
    return [
        str(member["member_id"]),
        text(member.get("client_id")),
        text(member.get("client_host")),
        str(member.get("member_epoch")),
        f"{duration(age)} ago" if age is not None else "-",
        ",".join(member.get("subscribed_topic_names") or []) or "-",
        partitions_text(member.get("assignment")),
    ]


def _log_ends(group: Mapping[str, Any]) -> dict[tuple[str, int], object]:
    """The log-end offset of every partition the group's ``offsets`` list (those a member holds or that have one)."""
    return {(str(o["topic"]), int(o["partition"])): o.get("log_end_offset") for o in group.get("offsets") or []}


def share_partition_rows(group: Mapping[str, Any]) -> list[list[str]]:
    ends = _log_ends(group)
    rows: Sequence[Mapping[str, Any]] = group.get("share_partitions") or []
    return [
        [
            str(p["topic"]),
            str(p["partition"]),
            str(p["start_offset"]),
            str(p["end_offset"]),
            text(ends.get((str(p["topic"]), int(p["partition"])))),
            str(p["in_flight"]),
            str(p["available"]),
            str(p["acquired"]),
            str(p["acknowledged"]),
            str(p["archived"]),
            str(p["delivered_total"]),
            str(p["redelivered_total"]),
        ]
        for p in rows
    ]


def record_rows(view: Mapping[str, Any]) -> list[list[str]]:
    """One row per run of in-flight offsets of ``GET /v1/groups/{group}/share-partitions``, by partition and offset."""
    rows: list[list[str]] = []
    for partition in view.get("partitions") or []:
        for run in partition.get("records") or []:
            first, last = run["first_offset"], run["last_offset"]
            left = run.get("lock_expires_in_ms")
            rows.append([
                str(partition["topic"]),
                str(partition["partition"]),
                offset_range(first, last),
                str(int(last) - int(first) + 1),
                str(run["state"]),
                str(run["delivery_count"]),
                text(run.get("member_id")),
                "-" if left is None else duration(left),
            ])  # fmt: skip
    return rows


def share_header(group: Mapping[str, Any]) -> list[tuple[str, str]]:
    """describe's header lines after Type and State: a share group has epochs like a consumer group, no leader."""
    return [
        ("Epoch", f"{group.get('group_epoch')}, target assignment {group.get('assignment_epoch')}"),
        ("Assignor", text(group.get("protocol"))),
    ]


def share_sections(group: Mapping[str, Any], view: Mapping[str, Any] | None) -> list[str]:
    """describe's share sections: the share-partitions, and with ``view`` (``--records``) the in-flight records."""
    rows = share_partition_rows(group)
    lines = [f"Share partitions ({len(rows)}):", table(SHARE_PARTITION_HEADERS, rows)] if rows else [
        "Share partitions: none (no member has fetched yet)"
    ]
    if view is not None:
        lines.append("")
        records = record_rows(view)
        if records:
            lines += [f"In-flight records ({len(records)} {'run' if len(records) == 1 else 'runs'}):",
                      table(RECORD_HEADERS, records)]  # fmt: skip
        else:
            lines.append("In-flight records: none")
    return lines
