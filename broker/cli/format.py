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


def generation_text(group: Mapping[str, Any]) -> str:
    """A classic group's generation; a consumer group's group epoch, with its target's when that lags behind."""
    if not is_consumer_group(group):
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


def event_details(event: Mapping[str, Any]) -> str:
    """The event's own fields as ``key=value``, the telling ones first, the bulky ones summarized."""
    fields = {k: v for k, v in event.items() if k not in _EVENT_ENVELOPE and v is not None}
    ordered = [k for k in _EVENT_FIRST if k in fields] + [k for k in fields if k not in _EVENT_FIRST]
    parts = []
    for key in ordered:
        value = fields[key]
        if key in ("assignments", "assignment_bytes") and isinstance(value, dict):
            continue  # per member: describe's member table shows who holds what
        if key in _EVENT_PARTITIONS and isinstance(value, dict):
            parts.append(f"{key}={partitions_text(value)}")
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
