"""DescribeGroups, ListGroups and DeleteGroups over classic groups (sections 14.1-14.3 of
``docs/spec/group-coordinator.md``). OffsetDelete is an offsets matter: ``offsets.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.state import DEAD, EMPTY, STABLE
from broker.coordinator.messages import DescribedMember, GroupDescription, ListedGroup

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


def list_groups(groups: ClassicGroups, states: Iterable[str], types: Iterable[str]) -> tuple[ListedGroup, ...]:
    """ListGroups' filters (KIP-518 states, KIP-848 types) are case-insensitive."""
    wanted_states = {s.strip().lower() for s in states}
    wanted_types = {t.strip().lower() for t in types}
    if wanted_types and "classic" not in wanted_types:
        return ()
    return tuple(
        ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
        for g in groups.groups.values()
        if not g.is_in(DEAD) and (not wanted_states or g.state.value.lower() in wanted_states)
    )


def delete_group(groups: ClassicGroups, group_id: str) -> ErrorCode:
    """Only an Empty group may go: members must leave first."""
    group = groups.live(group_id)
    if group is None:
        return E.group_id_not_found
    if not group.is_in(EMPTY):
        return E.non_empty_group
    groups.delete(group, "deleted by DeleteGroups")
    return E.none
