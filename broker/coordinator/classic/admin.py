"""DescribeGroups over classic groups (section 14.1 of ``docs/spec/group-coordinator.md``). ListGroups and
DeleteGroups ask every group type alike (``Group.listed``, ``Group.validate_delete_group``), OffsetDelete is an
offsets matter (``offsets/manager.py``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.state import STABLE
from broker.coordinator.messages import DescribedMember, GroupDescription

E = ErrorCode


def describe(groups: ClassicGroups, group_id: str) -> GroupDescription:
    group = groups.live(group_id)
    if group is None:
        return GroupDescription(group_id)
    # Member metadata is only meaningful once a protocol is chosen for good (Kafka: Stable only).
    protocol = group.protocol_name if group.is_in(STABLE) else None
    members = tuple(
        DescribedMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.metadata(protocol) if protocol is not None else b"",
            m.assignment,
        )
        for m in group.members.values()
    )
    return GroupDescription(group_id, E.none, group.state.value, group.protocol_type or "", protocol or "", members)
