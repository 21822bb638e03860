"""Share groups and share-partitions as durable changes (issue 27's contract, ``broker/changes.py``).

Kafka keeps a share group in ``__consumer_offsets`` (ShareGroupMetadata, ShareGroupMemberMetadata, the target and
current assignments) and each share-partition's state in ``__share_group_state`` through the share coordinator
(Write/ReadShareGroupState: the SPSO, the state epoch and the non-AVAILABLE in-flight batches with their delivery
counts, section 3.4 of ``docs/spec/share-groups.md``). Ours are three kinds, each a whole value:

* ``share.group`` (group) -> its epochs;
* ``share.member`` (group, member) -> who the member is, what it subscribes to and is assigned;
* ``share.partition`` (group, topic id, partition) -> SPSO, SPEO + 1 and the in-flight records as runs of
  ``[first, last, state, delivery count]``. Written, as Kafka writes it, after acknowledgements, releases and lock
  expiries, not after acquisitions: an ACQUIRED record comes back AVAILABLE with the delivery count last written
  (acquisitions are not persisted), which is what a restarted Kafka leader reads back.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.coordinator.modern.share.group import ShareGroup
from broker.coordinator.modern.share.inflight import RecordState, Run
from broker.coordinator.modern.share.member import ShareMember
from broker.coordinator.modern.share.partition import SharePartition

GROUP = "share.group"
MEMBER = "share.member"
PARTITION = "share.partition"


def group_value(group: ShareGroup) -> dict[str, Any]:
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch}


def member_value(member: ShareMember) -> dict[str, Any]:
    return {
        "member_epoch": member.member_epoch,
        "previous_member_epoch": member.previous_member_epoch,
        "rack_id": member.rack_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "subscribed_topic_names": list(member.subscribed_topic_names),
        "assigned": {str(t): sorted(p) for t, p in member.assigned.items()},
    }


def rebuild_member(member_id: str, value: dict[str, Any], now_ms: int) -> ShareMember:
    return ShareMember(
        member_id,
        now_ms,
        member_epoch=int(value["member_epoch"]),
        previous_member_epoch=int(value["previous_member_epoch"]),
        rack_id=value.get("rack_id"),
        client_id=str(value.get("client_id", "")),
        client_host=str(value.get("client_host", "")),
        subscribed_topic_names=tuple(value.get("subscribed_topic_names", ())),
        assigned={uuid.UUID(t): frozenset(p) for t, p in value.get("assigned", {}).items()},
    )


def partition_value(share: SharePartition) -> dict[str, Any]:
    runs: list[list[int]] = []
    start = share.start_offset
    for run in share.runs:
        if run.last < start:
            continue  # still locked below a moved log start (6.9): finished whatever comes, as Kafka persists it
        first = max(run.first, start)
        state = RecordState.AVAILABLE if run.state is RecordState.ACQUIRED else run.state
        if runs and runs[-1][1] == first - 1 and runs[-1][2] == state and runs[-1][3] == run.delivery_count:
            runs[-1][1] = run.last
        else:
            runs.append([first, run.last, int(state), run.delivery_count])
    return {"start_offset": share.start_offset, "next_offset": share.next_offset, "records": runs}


def rebuild_partition(share: SharePartition, value: dict[str, Any]) -> None:
    share.start_offset = int(value["start_offset"])
    share.next_offset = int(value["next_offset"])
    share.runs.clear()
    share.available = 0
    for first, last, state, count in value.get("records", ()):
        run = Run(int(first), int(last), RecordState(int(state)), int(count))
        share.runs.append(run)
        if run.state is RecordState.AVAILABLE:
            share.available += run.last - run.first + 1
