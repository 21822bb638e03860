"""SyncGroup (section 8 of ``docs/spec/group-coordinator.md``; Kafka's ``classicGroupSync``).

In CompletingRebalance every member's SyncGroup is parked until the leader's brings the assignment; storing it
makes the group Stable and answers them all. In Stable a SyncGroup is answered at once with the stored
assignment. Once stored, the assignment referee judges the generation for the event log: it never changes an
answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.group import ClassicGroup, MemberError
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.rebalance import Rebalancer
from broker.coordinator.classic.referee import COOPERATIVE_PROTOCOLS, judge
from broker.coordinator.classic.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE
from broker.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from broker.coordinator.messages import SyncRequest, SyncResult
from broker.timing.deferred import Deferred

E = ErrorCode


class SyncHandler:
    def __init__(
        self, groups: ClassicGroups, rebalancer: Rebalancer, partition_count: Callable[[str], int | None]
    ) -> None:
        self._groups = groups
        self._rebalancer = rebalancer
        # Partitions of a topic, for the assignment referee; None when the topic does not exist.
        self._partition_count = partition_count

    def sync(self, request: SyncRequest) -> Deferred[SyncResult]:
        answer: Deferred[SyncResult] = Deferred()
        if not request.group_id:
            return _answered(answer, E.invalid_group_id)
        group = self._groups.get(request.group_id)
        if group is None or group.is_in(EMPTY):
            return _answered(answer, E.unknown_member_id)
        if group.is_in(DEAD):
            return _answered(answer, E.coordinator_not_available)
        try:
            member = group.validate_member(request.member_id, request.group_instance_id)
        except MemberError as failure:
            return _answered(answer, failure.error)
        if request.generation_id != group.generation_id:
            return _answered(answer, E.illegal_generation)
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            return _answered(answer, E.inconsistent_group_protocol)

        if group.is_in(PREPARING):
            return _answered(answer, E.rebalance_in_progress)
        if group.is_in(COMPLETING):
            member.sync_answer = answer
            self._rebalancer.mark_synced(group, member.member_id)
            if group.is_leader(member.member_id):
                self._store_assignment(group, request.assignments)
            return answer
        # Stable
        self._rebalancer.mark_synced(group, member.member_id)
        answer.complete(SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name))
        return answer

    def _store_assignment(self, group: ClassicGroup, assignments: Iterable[tuple[str, bytes]]) -> None:
        sent = list(assignments)
        by_member = dict(sent)  # duplicate member ids: the last one wins
        missing = [m for m in group.members if m not in by_member]
        if missing:
            self._groups.log.warning(
                "leader left members without an assignment", group_id=group.group_id, members=missing
            )
        for member_id, member in group.members.items():
            member.assignment = by_member.get(member_id, b"")
        # Kafka's storeGroup: the generation's record is written before any member gets its assignment (issue 27),
        # and a store that returns has written it, so the group becomes Stable at once.
        self._groups.store(group)
        self._rebalancer.propagate_assignment(group, E.none)
        self._groups.transition(group, STABLE)
        try:
            self._referee(group, sent)
        except Exception:
            # The referee only reports: a bug in it must not fail a generation whose answers have gone out.
            self._groups.failures += 1
            self._groups.log.exception("assignment referee failed", group_id=group.group_id)

    def _referee(self, group: ClassicGroup, sent: list[tuple[str, bytes]]) -> None:
        """Report the generation's assignment; for the consumer protocol, judge it. Never changes an answer."""
        protocol = group.protocol_name
        cooperative = protocol in COOPERATIVE_PROTOCOLS
        verdict = None
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE and protocol is not None:
            verdict = judge(
                sent,
                {member_id: member.metadata(protocol) for member_id, member in group.members.items()},
                group.assignment_view,
                self._partition_count,
                cooperative=cooperative,
            )
        # Only owners matter to the next generation's "moved": members without partitions are left out.
        group.assignment_view = (
            {member_id: owned for member_id, owned in verdict.assignments.items() if owned}
            if verdict is not None
            else None
        )
        events = self._groups.events
        rebalance_ms = self._groups.clock.now_ms() - group.rebalance_started_ms
        events.sync_completed(group, verdict, cooperative, rebalance_ms)
        if verdict is not None:
            for violation in verdict.violations:
                events.referee_violation(group, violation)


def _answered(answer: Deferred[SyncResult], error: ErrorCode) -> Deferred[SyncResult]:
    answer.complete(SyncResult(error))
    return answer
