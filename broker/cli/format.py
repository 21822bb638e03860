"""Plain-text formatting shared by the one-shot commands (``commands.py``) and the live view (``watch.py``).

Standard library only: every client command imports this, and they must start fast.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from broker.coordinator.group_type import GroupType
from broker.events import names

JSON = dict[str, Any]


def text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def plural(count: object, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def protocol_text(protocol_type: object, protocol: object) -> str:
    if protocol_type is None and protocol is None:
        return "-"
    return f"{text(protocol_type)}/{text(protocol)}"


def is_consumer_group(group: Mapping[str, Any]) -> bool:
    """A KIP-848 consumer group, as opposed to a classic one."""
    return group.get("group_type") == GroupType.CONSUMER


def has_epochs(group: Mapping[str, Any]) -> bool:
    """A group of the KIP-848 protocol family (a consumer group, or a KIP-932 share group): group and member epochs,
    no generation and no leader."""
    return group.get("group_type") in (GroupType.CONSUMER, GroupType.SHARE)


def generation_text(group: Mapping[str, Any]) -> str:
    """A classic group's generation; a consumer or share group's group epoch, with its target's when that lags
    behind."""
    if not has_epochs(group):
        return str(group.get("generation_id"))
    epoch, target = group.get("group_epoch"), group.get("assignment_epoch")
    return str(epoch) if target == epoch else f"{epoch} (target {target})"


def duration(ms: object) -> str:
    """``450ms``, ``12.3s``, ``4m05s``, ``2h03m``."""
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return "-"
    if ms < 1000:
        return f"{int(ms)}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}".removesuffix(".0") + "s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart; the last column is not padded."""
    lines = [list(headers), *([str(cell) for cell in row] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=False)] + line[-1:]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


# -- members ------------------------------------------------------------------------------------------------

MEMBER_HEADERS = ["MEMBER ID", "INSTANCE ID", "CLIENT ID", "HOST", "SESSION TIMEOUT", "LAST HEARTBEAT", "ASSIGNMENT"]


def member_row(member: JSON) -> list[str]:
    member_id = str(member["member_id"])
    flags = [flag for flag, on in (("awaiting join", member.get("awaiting_join")),
                                   ("awaiting sync", member.get("awaiting_sync"))) if on]
    return [
        member_id,
        text(member.get("group_instance_id")),
        text(member.get("client_id")),
        text(member.get("client_host")),
        duration(member.get("session_timeout_ms")),
        f"{duration(member.get('last_heartbeat_age_ms'))} ago",
        assignment_text(member) + (f" ({', '.join(flags)})" if flags else ""),
    ]


def assignment_text(member: JSON) -> str:
    """``topic[0,1,2] other[3]``; "-" for nothing assigned, "?" when the bytes are not the consumer protocol's."""
    assignment = member.get("assignment")
    if assignment is None:
        size = member.get("assignment_bytes")
        return f"? ({size} bytes)" if size else "-"
    return partitions_text(assignment)


def partitions_text(partitions: object) -> str:
    """Partitions by topic (``{"t": [0, 1]}``) as ``t[0,1]``; "-" for none."""
    if not isinstance(partitions, Mapping):
        return "-"
    parts = [f"{topic}[{','.join(str(p) for p in sorted(ps))}]" for topic, ps in sorted(partitions.items()) if ps]
    return " ".join(parts) or "-"


# A consumer group's members (KIP-848): where each one's reconciliation stands.
CONSUMER_MEMBER_HEADERS = [
    "MEMBER ID", "INSTANCE ID", "CLIENT ID", "HOST", "EPOCH", "STATE", "LAST HEARTBEAT", "ASSIGNMENT", "REVOKING",
    "TARGET",
]
_MEMBER_STATES = {"unrevoked_partitions": "revoking", "unreleased_partitions": "waiting"}


def member_state_text(state: object) -> str:
    """``stable``; ``revoking`` (UNREVOKED_PARTITIONS) and ``waiting`` (UNRELEASED_PARTITIONS) said shortly."""
    return _MEMBER_STATES.get(str(state), text(state))


def consumer_member_row(member: JSON) -> list[str]:
    age = member.get("last_heartbeat_age_ms")
    return [
        str(member["member_id"]),
        text(member.get("group_instance_id")),
        text(member.get("client_id")),
        text(member.get("client_host")),
        str(member.get("member_epoch")),
        member_state_text(member.get("state")),
        f"{duration(age)} ago" if age is not None else "-",
        partitions_text(member.get("assignment")),
        partitions_text(member.get("pending_revocation")),
        partitions_text(member.get("target")),
    ]


# -- events -------------------------------------------------------------------------------------------------

# The fields every record has (docs/events.md) stay out of DETAILS: the tables give seq, time, event and group
# their own columns, and v and run_id say nothing about the one event.
# group_type too: it says which kind of group the record is of, which the group's own view shows.
_EVENT_ENVELOPE = frozenset((*names.COMMON, "group_type"))
_EVENT_FIRST = (
    "member_id", "new_member_id", "group_instance_id", "generation_id", "group_epoch", "member_epoch",
    "assignment_epoch", "from", "to", "cause", "state", "transactional_id",
)
# Partitions by topic (a consumer group's member_reconciled, a transaction's events): shown as t[0,1].
_EVENT_PARTITIONS = frozenset({"assigned", "pending_revocation", "partitions"})


def event_time(event: Mapping[str, Any]) -> str:
    ts_ms = event.get("ts_ms")
    if not isinstance(ts_ms, int | float):
        return "-"
    return datetime.datetime.fromtimestamp(ts_ms / 1000).strftime("%H:%M:%S.%f")[:-3]


def offset_range(first: object, last: object) -> str:
    """``7`` for one offset, ``3-9`` for a run."""
    return str(first) if first == last else f"{first}-{last}"


def ranges_text(runs: object) -> str:
    """Offset runs (``[[first, last], ...]``, or ``[[first, last, delivery_count], ...]``) as ``0-4,7``."""
    if not isinstance(runs, list):
        return text(runs)
    return ",".join(offset_range(r[0], r[1]) for r in runs if isinstance(r, list) and len(r) >= 2) or "-"


def delivery_counts_text(runs: object) -> str:
    """The delivery counts of ``records_acquired``'s ranges: one number when they agree, else one per range."""
    counts = [str(r[2]) for r in runs if isinstance(r, list) and len(r) >= 3] if isinstance(runs, list) else []
    return counts[0] if len(set(counts)) == 1 else ",".join(counts) or "-"


# A share-partition event's fields (docs/events.md, "Share groups"), in the order they read best.
_SHARE_FIRST = ("member_id", "cause", "partition", "offsets", "records", "accepted", "rejected", "delivery_count",
                "redelivered", "lock")  # fmt: skip


def share_event_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``records_acquired``, ``records_released``, ``records_archived``, ``records_acknowledged`` as people read them:
    ``partition=jobs-0 offsets=0-4 delivery_count=1 lock=30s`` (the JSON keeps the ranges as they are)."""
    if "topic" not in fields or "partition" not in fields:
        return dict(fields)
    shown = {k: v for k, v in fields.items() if k not in ("topic", "partition", "ranges", "lock_duration_ms")}
    shown["partition"] = f"{fields['topic']}-{fields['partition']}"
    if "ranges" in fields:
        shown["offsets"] = ranges_text(fields["ranges"])
        shown["delivery_count"] = delivery_counts_text(fields["ranges"])
    elif "offsets" in fields:
        shown["offsets"] = ranges_text(fields["offsets"])
    if "lock_duration_ms" in fields:
        shown["lock"] = duration(fields["lock_duration_ms"])
    return {k: shown[k] for k in _SHARE_FIRST if k in shown} | shown


def event_details(event: Mapping[str, Any]) -> str:
    """The event's own fields as ``key=value``, the telling ones first, the bulky ones summarized."""
    fields = {k: v for k, v in event.items() if k not in _EVENT_ENVELOPE and v is not None}
    if event.get("group_type") == GroupType.SHARE:
        fields = share_event_fields(fields)
        first: Sequence[str] = list(dict.fromkeys((*_SHARE_FIRST, *_EVENT_FIRST)))
    else:
        first = _EVENT_FIRST
    ordered = [k for k in first if k in fields] + [k for k in fields if k not in first]
    parts = []
    for key in ordered:
        value = fields[key]
        if key in ("assignments", "assignment_bytes") and isinstance(value, dict):
            continue  # per member: describe's member table shows who holds what
        if key in _EVENT_PARTITIONS and isinstance(value, dict):
            parts.append(f"{key}={partitions_text(value)}")
        elif key == "targets" and isinstance(value, dict):  # a share group's: a partition may have several members
            parts.append(f"targets={';'.join(f'{m}:{partitions_text(t)}' for m, t in sorted(value.items()))}")
        elif key == "moved" and isinstance(value, list):
            parts.append(f"moved={len(value)}")
        elif key == "members" and isinstance(value, list):
            parts.append(f"members={len(value)}")
        elif isinstance(value, list):
            parts.append(f"{key}={','.join(str(v) for v in value)}")
        elif isinstance(value, str):
            parts.append(f"{key}={value if value and not any(c.isspace() for c in value) else json.dumps(value)}")
        elif isinstance(value, bool):
            parts.append(f"{key}={'true' if value else 'false'}")
        elif isinstance(value, int | float):
            parts.append(f"{key}={value}")
        else:
            parts.append(f"{key}={json.dumps(value, separators=(',', ':'))}")
    return " ".join(parts)


def event_row(event: Mapping[str, Any]) -> list[str]:
    return [str(event.get("seq", "-")), event_time(event), str(event.get("event", "?")), event_details(event)]


# -- transactions -------------------------------------------------------------------------------------------

TRANSACTION_HEADERS = ["TRANSACTIONAL ID", "STATE", "PRODUCER", "TV", "TIMEOUT", "OPEN FOR", "PARTITIONS", "GROUPS"]


def transaction_row(txn: JSON) -> list[str]:
    """One transactional id of ``GET /v1/transactions``; PRODUCER is ``pid/epoch``."""
    return [
        str(txn["transactional_id"]),
        text(txn.get("state")),
        f"{txn.get('producer_id')}/{txn.get('producer_epoch')}",
        text(txn.get("transaction_version")),
        duration(txn.get("txn_timeout_ms")),
        duration(txn.get("duration_ms")),
        partitions_text(txn.get("partitions")),
        ",".join(txn.get("groups") or []) or "-",
    ]
