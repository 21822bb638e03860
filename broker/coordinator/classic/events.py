"""The group events the coordinator emits, one method per event: names and payloads in one place.

The names are those of ``broker/events/names.py`` and the payloads are the contract of ``docs/events.md``: add
fields freely, rename or remove none without raising the format version. Callers say what happened; this module
says how it is written down. Field order is kept stable, as the log lines show it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.member import Member
from broker.coordinator.classic.referee import Verdict, Violation
from broker.coordinator.messages import JoinRequest
from broker.events import names
from broker.events.hub import GroupEvents


class Cause(NamedTuple):
    """Why a rebalance started: a stable name for counting, the member that set it off, and words for people."""

    name: str
    member_id: str | None
    reason: str


class GroupEventLog:
    """Writes each group event into the hub (``GroupEvents``), which decides where records go."""

    __slots__ = ("_hub",)

    def __init__(self, hub: GroupEvents) -> None:
        self._hub = hub

    @property
    def wants_debug(self) -> bool:
        """False when debug events would be dropped anyway, so a caller can skip gathering their fields."""
        return self._hub.wants_debug

    def _emit(self, event: str, group: ClassicGroup, fields: dict[str, Any], *, debug: bool = False) -> None:
        self._hub.emit(event, group.group_id, fields, debug=debug)

    # -- the group ------------------------------------------------------------------------------------

    def group_created(self, group: ClassicGroup) -> None:
        self._emit(names.GROUP_CREATED, group, {})

    def group_deleted(self, group: ClassicGroup, reason: str) -> None:
        self._emit(names.GROUP_DELETED, group, {"reason": reason})

    def state_changed(self, group: ClassicGroup) -> None:
        fields = {"from": group.previous_state.value, "to": group.state.value, "generation_id": group.generation_id}
        self._emit(names.STATE_CHANGED, group, fields)

    # -- members --------------------------------------------------------------------------------------

    def member_joined(self, group: ClassicGroup, member_id: str, request: JoinRequest) -> None:
        fields = {
            "member_id": member_id,
            "group_instance_id": request.group_instance_id,
            "client_id": request.client.client_id,
            "client_host": request.client.host,
            "protocol_type": request.protocol_type,
            "protocols": [name for name, _ in request.protocols],
            "session_timeout_ms": request.session_timeout_ms,
            "rebalance_timeout_ms": request.rebalance_timeout_ms,
            "reason": request.reason,
        }
        self._emit(names.MEMBER_JOINED, group, fields)

    def member_rejoined(self, group: ClassicGroup, member: Member, request: JoinRequest) -> None:
        fields = {
            "member_id": member.member_id,
            "protocols": [name for name, _ in request.protocols],
            "state": group.state.value,
            "reason": request.reason,
        }
        self._emit(names.MEMBER_REJOINED, group, fields)

    def member_fenced(
        self, group: ClassicGroup, old_member_id: str, member: Member, cause: str, reason: str | None
    ) -> None:
        """``member`` already carries its new id; ``old_member_id`` is the one fenced from now on."""
        fields = {
            "member_id": old_member_id,
            "new_member_id": member.member_id,
            "group_instance_id": member.group_instance_id,
            "client_id": member.client_id,
            "cause": cause,
            "reason": reason,
        }
        self._emit(names.MEMBER_FENCED, group, fields)

    def member_left(self, group: ClassicGroup, member: Member, cause: str, reason: str) -> None:
        self._emit(names.MEMBER_LEFT, group, {**_who(member), "cause": cause, "reason": reason})

    def member_expired(self, group: ClassicGroup, member: Member, since_last_heartbeat_ms: int, cause: str) -> None:
        fields = {
            **_who(member),
            "since_last_heartbeat_ms": since_last_heartbeat_ms,
            "session_timeout_ms": member.session_timeout_ms,
            "cause": cause,
        }
        self._emit(names.MEMBER_EXPIRED, group, fields)

    # -- rebalances -----------------------------------------------------------------------------------

    def rebalance_started(self, group: ClassicGroup, cause: Cause) -> None:
        fields = {
            "generation_id": group.generation_id,
            "previous_state": group.previous_state.value,
            "members": len(group.members),
            "cause": cause.name,
            "member_id": cause.member_id,
            "reason": cause.reason,
        }
        self._emit(names.REBALANCE_STARTED, group, fields)

    def join_completed(self, group: ClassicGroup) -> None:
        fields = {
            "generation_id": group.generation_id,
            "state": group.state.value,
            "protocol_type": group.protocol_type,
            "protocol": group.protocol_name,
            "leader": group.leader_id,
            "members": list(group.members),
        }
        self._emit(names.JOIN_COMPLETED, group, fields)

    def group_emptied(self, group: ClassicGroup) -> None:
        self._emit(names.GROUP_EMPTIED, group, {"generation_id": group.generation_id})

    def sync_completed(
        self, group: ClassicGroup, verdict: Verdict | None, cooperative: bool, rebalance_ms: int
    ) -> None:
        """The generation's assignment, as the referee judged it (None: not the consumer protocol)."""
        fields: dict[str, Any] = {
            "generation_id": group.generation_id,
            "protocol": group.protocol_name,
            "assignments": None,
            "moved": None,
            "unowned": None,
            "rebalance_ms": rebalance_ms,
            "rebalance_protocol": None,
            "assignment_bytes": {m.member_id: len(m.assignment) for m in group.members.values()},
        }
        if verdict is not None:
            fields["assignments"] = verdict.assignments
            fields["moved"] = [
                {"topic": move.topic, "partition": move.partition, "from": move.from_member, "to": move.to_member}
                for move in verdict.moved
            ]
            fields["unowned"] = verdict.unowned
            fields["rebalance_protocol"] = "cooperative" if cooperative else "eager"
        self._emit(names.SYNC_COMPLETED, group, fields)

    def referee_violation(self, group: ClassicGroup, violation: Violation) -> None:
        fields = {
            "generation_id": group.generation_id,
            "kind": violation.kind,
            "topic": violation.topic,
            "partition": violation.partition,
            "members": list(violation.members),
        }
        self._emit(names.REFEREE_VIOLATION, group, fields)

    # -- offsets --------------------------------------------------------------------------------------

    def offsets_committed(
        self, group: ClassicGroup, member_id: str, generation_id: int, offsets: Iterable[tuple[str, int, int]]
    ) -> None:
        """A debug event: every commit, as (topic, partition, offset)."""
        fields = {
            "member_id": member_id,
            "generation_id": generation_id,
            "offsets": [list(committed) for committed in offsets],
        }
        self._emit(names.OFFSETS_COMMITTED, group, fields, debug=True)

    def offsets_deleted(self, group: ClassicGroup, deleted: Iterable[tuple[str, int]]) -> None:
        """OffsetDelete's tombstones, as (topic, partition)."""
        self._emit(names.OFFSETS_DELETED, group, {"offsets": [list(key) for key in deleted]})

    def offsets_expired(self, group: ClassicGroup) -> None:
        self._emit(names.OFFSETS_EXPIRED, group, {})


def _who(member: Member) -> dict[str, Any]:
    return {"member_id": member.member_id, "group_instance_id": member.group_instance_id, "client_id": member.client_id}
