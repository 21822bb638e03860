"""ConsumerGroupHeartbeat (section 4 of ``docs/spec/consumer-groups.md``): join, heartbeat, reconcile and leave.

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` in its order: static validation (4.3), leave (4.4), the
group (4.5), its capacity (4.6), the member and its epoch (4.7), the member's update and the group epoch (4.8),
regular expressions and subscription metadata (4.9, 4.10), the target assignment (4.11), reconciliation (4.12),
the session (4.13) and the answer (4.14). Every check runs before anything is changed, so a refused request
changes nothing (4.15). Steady heartbeats (nothing to report, nothing to move) take a short path first.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResult, TopicIdPartitions
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.reconcile import FencedMemberEpoch, Reconciled, reconcile
from broker.coordinator.modern.consumer.regex import InvalidRegex, validate
from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, Assignment, MemberState, assignment_of

__all__ = ["ConsumerHeartbeatHandler", "HeartbeatError"]

E = ErrorCode
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class HeartbeatError(Exception):
    """A refused heartbeat: the error code and Kafka's message for it (section 4.15)."""

    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_request(request: ConsumerHeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """Section 4.3, in Kafka's order (``throwIfConsumerGroupHeartbeatRequestIsInvalid``)."""
    epoch = request.member_epoch
    invalid = E.invalid_request
    if (request.api_version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and not request.member_id.strip():
        raise HeartbeatError(invalid, "MemberId can't be empty.")
    if not request.group_id.strip():
        raise HeartbeatError(invalid, "GroupId can't be empty.")
    if _blank(request.instance_id):
        raise HeartbeatError(invalid, "InstanceId can't be empty.")
    if _blank(request.rack_id):
        raise HeartbeatError(invalid, "RackId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise HeartbeatError(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise HeartbeatError(invalid, "TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise HeartbeatError(
                invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
            )
    if epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        raise HeartbeatError(invalid, "InstanceId can't be null.")
    if epoch < STATIC_LEAVE_EPOCH:
        raise HeartbeatError(invalid, "MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise HeartbeatError(
            E.unsupported_assignor,
            f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
        )


class ConsumerHeartbeatHandler:
    def __init__(self, groups: ConsumerGroups, classic: ClassicGroups, new_member_id: Callable[[], str]) -> None:
        self._groups = groups
        self._classic = classic
        self._new_member_id = new_member_id

    def heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        steady = self._steady(request)
        if steady is not None:
            return steady
        try:
            validate_request(request, self._groups.config.consumer_assignors)
            result = self._leave(request) if request.member_epoch < 0 else self._join_or_heartbeat(request)
        except HeartbeatError as refused:
            return ConsumerHeartbeatResult(refused.error, refused.message)
        groups = self._groups
        if groups.changes.enabled:  # issue 27: what this heartbeat changed, before its answer goes out
            group = groups.get(request.group_id)
            if group is not None:
                groups.store(group, result.member_id or request.member_id)
        return result

    # -- the hot path --------------------------------------------------------------------------------------

    def _steady(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult | None:
        """A member reconciled to a current target, reporting nothing new: only its session moves (section 7.2)."""
        if (
            request.topic_partitions is not None
            or request.subscribed_topic_names is not None
            or request.subscribed_topic_regex is not None
            or request.rebalance_timeout_ms != -1
            or request.server_assignor is not None
            or request.rack_id is not None
            or request.instance_id is not None
        ):
            return None
        interval = self.steady(request.group_id, request.member_id, request.member_epoch, request.client.client_id)
        if interval is None:
            return None
        return ConsumerHeartbeatResult(E.none, None, request.member_id, request.member_epoch, interval, None)

    def steady(self, group_id: str, member_id: str, epoch: int, client_id: str) -> int | None:
        """The steady beat without a request object (the connection's hand-decoded hot path): the heartbeat
        interval to answer with, or None when anything at all needs the full handling (which then decides)."""
        groups = self._groups
        group = groups.groups.get(group_id)
        if group is None or epoch <= 0:
            return None
        member = group.members.get(member_id)
        if (
            member is None
            or member.member_epoch != epoch
            or member.state is not MemberState.STABLE
            or group.assignment_epoch != epoch
            or group.group_epoch != epoch
            or group.metadata_version != groups.topics.version
            or member.client_id != client_id
        ):
            return None
        groups.extend_session(group, member)
        return groups.config.consumer_heartbeat_interval_ms

    # -- leaving (section 4.4) -----------------------------------------------------------------------------

    def _leave(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        group_id = request.group_id
        group = self._groups.get(group_id)
        if group is None:
            if self._classic.live(group_id) is not None or group_id in self._groups.registry.share_groups:
                raise HeartbeatError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
            raise HeartbeatError(E.group_id_not_found, f"Group {group_id} not found.")
        instance_id = request.instance_id
        if instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise HeartbeatError(
                    E.unknown_member_id, f"Member {request.member_id} is not a member of group {group_id}."
                )
        else:
            holder_id = group.static_members.get(instance_id)
            if holder_id is None:
                raise HeartbeatError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
            if holder_id != request.member_id:
                raise HeartbeatError(
                    E.fenced_instance_id,
                    f"Static member {request.member_id} with instance id {instance_id} is fenced by existing "
                    f"member {holder_id}.",
                )
            member = group.members[holder_id]
            if request.member_epoch == STATIC_LEAVE_EPOCH:
                # GMM consumerGroupStaticMemberGroupLeave: kept, with its partitions and target, for its successor.
                group.set_assignment(member, member.assigned, EMPTY_ASSIGNMENT)
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = STATIC_LEAVE_EPOCH
                group.refresh(member)
                self._groups.events.member_left(group, member, "static_leave", "left temporarily (epoch -2)")
                self._groups.note_state(group)
                return ConsumerHeartbeatResult(E.none, None, member.member_id, STATIC_LEAVE_EPOCH, 0, None)
        self._groups.fence(group, member, "left", "left the group (epoch -1)")
        return ConsumerHeartbeatResult(E.none, None, request.member_id, LEAVE_EPOCH, 0, None)

    # -- joining and heartbeating --------------------------------------------------------------------------

    def _join_or_heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        groups = self._groups
        config = groups.config
        group, created = self._resolve_group(request)
        # 4.6: a full group takes no new member (classic-protocol members would count too).
        if len(group.members) >= config.consumer_max_size and request.member_id not in group.members:
            raise HeartbeatError(
                E.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {config.consumer_max_size} members.",
            )
        member_id = request.member_id or self._new_member_id()
        owned = None if request.topic_partitions is None else assignment_of(request.topic_partitions)
        member, replaced = self._resolve_member(group, request, member_id, owned)
        # 4.9: a regex no member had before is compiled, after the member checks (GMM maybeUpdateRegularExpressions).
        regex = request.subscribed_topic_regex
        if regex and regex not in group.resolved_regexes:
            try:
                validate(regex)
            except InvalidRegex as error:
                raise HeartbeatError(
                    E.invalid_regular_expression,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {error}.",
                ) from None
        # Every check passed: from here on the request is recorded.
        if request.member_epoch == 0 and member.member_epoch == STATIC_LEAVE_EPOCH:
            # A static member re-joining under its own member id after its -2 leave: Kafka's replacement copy
            # starts at epoch 0 with previous epoch 0 (section 4.7).
            member.member_epoch = 0
            member.previous_member_epoch = 0
            group.refresh(member)
        if created:
            self._materialise(group)
        is_new = member.member_id not in group.members
        if replaced is not None:
            target = group.target_of(replaced.member_id)
            groups.fence_silently(group, replaced)
            groups.events.member_fenced(group, replaced, member.member_id, "static member replaced by a new instance")
            group.add_member(member)
            group.targets[member.member_id] = target
        elif is_new:
            group.add_member(member)
        previous_instance_id = member.instance_id
        changed = self._update_member(member, request)
        if member.instance_id is not None:
            # ConsumerGroup.updateMember keeps the instance map with every member write (section 3.1): a new
            # member only learns its instance id from this request, after add_member; a member re-joining under
            # another instance id leaves its old one free.
            if previous_instance_id is not None and previous_instance_id != member.instance_id:
                group.static_members.pop(previous_instance_id, None)
            group.static_members[member.instance_id] = member.member_id
        if is_new:
            groups.events.member_joined(group, member)
        bump = group.group_epoch == 0 or changed
        if groups.refresh_metadata(group, force=bump, describable=request.describable) or bump:
            groups.bump_epoch(group, "subscription_changed" if changed else "metadata_changed", member.member_id)
        if group.group_epoch > group.assignment_epoch:
            groups.compute_target(group)
        assigned_before = member.assigned
        self._reconcile(group, member, owned)
        groups.extend_session(group, member)
        groups.note_state(group)
        full = (
            request.rebalance_timeout_ms != -1
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
            and request.topic_partitions is not None
        )
        assignment = None
        if request.member_epoch == 0 or full or member.assigned != assigned_before:
            assignment = _wire(member.assigned)
        return ConsumerHeartbeatResult(
            E.none, None, member.member_id, member.member_epoch, config.consumer_heartbeat_interval_ms, assignment
        )

    def _resolve_group(self, request: ConsumerHeartbeatRequest) -> tuple[ConsumerGroup, bool]:
        """Section 4.5; a new group is made only if the request succeeds (``_materialise``)."""
        group_id = request.group_id
        group = self._groups.get(group_id)
        if group is not None:
            return group, False
        create = request.member_epoch == 0
        if group_id in self._groups.registry.share_groups:  # one namespace (share-groups.md 2.6)
            raise HeartbeatError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
        classic = self._classic.live(group_id)
        if classic is not None:
            if not create:
                raise HeartbeatError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
            if classic.members:
                # Online migration (section 10.2) is not implemented: as group.consumer.migration.policy=disabled.
                raise HeartbeatError(
                    E.group_id_not_found,
                    f"Cannot upgrade classic group {group_id} to consumer group because online upgrade is disabled.",
                )
        elif not create:
            raise HeartbeatError(E.group_id_not_found, f"Consumer group {group_id} not found.")
        return self._groups.new_group(group_id), True

    def _materialise(self, group: ConsumerGroup) -> None:
        """Register a new group; an Empty classic group of that id is converted, its offsets kept where they are in
        the store (4.5)."""
        classic = self._classic.live(group.group_id)
        if classic is not None:
            self._classic.delete(classic, "converted to a consumer group")
        self._groups.register(group)

    def _resolve_member(
        self, group: ConsumerGroup, request: ConsumerHeartbeatRequest, member_id: str, owned: Assignment | None
    ) -> tuple[ConsumerMember, ConsumerMember | None]:
        """Section 4.7: the member (new, existing, or a static member's replacement) and the one it replaces."""
        epoch = request.member_epoch
        instance_id = request.instance_id
        group_id = group.group_id
        if instance_id is None:
            member = group.members.get(member_id)
            if epoch == 0:
                return (member or ConsumerMember(member_id)), None
            if member is None:
                raise HeartbeatError(E.unknown_member_id, f"Member {member_id} is not a member of group {group_id}.")
            _check_epoch(member, epoch, owned)
            return member, None
        holder_id = group.static_members.get(instance_id)
        if epoch == 0:
            if holder_id is None:
                existing = group.members.get(member_id)
                return (existing or ConsumerMember(member_id)), None
            holder = group.members[holder_id]
            if holder.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    E.unreleased_instance_id,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by {holder_id} member.",
                )
            if holder_id == member_id:
                return holder, None  # re-joining under its own id: reset to epoch 0 once every check passed
            return holder.copy_as(member_id), holder
        if holder_id is None:
            raise HeartbeatError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if holder_id != member_id:
            raise HeartbeatError(
                E.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} is fenced by existing member {holder_id}.",
            )
        member = group.members[holder_id]
        _check_epoch(member, epoch, owned)
        return member, None

    def _update_member(self, member: ConsumerMember, request: ConsumerHeartbeatRequest) -> bool:
        """Section 4.8: apply what the request carries; True when the subscription changed (the epoch moves)."""
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        member.client_id = request.client.client_id
        member.client_host = request.client.host
        changed = False
        if request.subscribed_topic_names is not None:
            names = frozenset(request.subscribed_topic_names)
            changed = names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if (
            request.subscribed_topic_regex is not None
            and request.subscribed_topic_regex != member.subscribed_topic_regex
        ):
            member.subscribed_topic_regex = request.subscribed_topic_regex
            changed = True
        return changed

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        """Section 4.12 and 5: one step toward the target; the rebalance timer follows the member's state."""
        target_epoch = group.assignment_epoch
        rewritten = False
        if not member.is_reconciled_to(target_epoch):
            before = Reconciled(
                member.state,
                member.member_epoch,
                member.previous_member_epoch,
                member.assigned,
                member.pending_revocation,
            )
            try:
                after = reconcile(
                    before,
                    target_epoch,
                    group.target_of(member.member_id),
                    owned,
                    group.owned_by_other(member.member_id),
                )
            except FencedMemberEpoch:
                raise HeartbeatError(
                    E.fenced_member_epoch, "The member must abandon all its partitions and rejoin."
                ) from None
            if after != before:
                group.set_assignment(member, after.assigned, after.pending_revocation)
                member.state = after.state
                member.member_epoch = after.member_epoch
                member.previous_member_epoch = after.previous_member_epoch
                group.refresh(member)
                rewritten = True
                self._groups.events.member_reconciled(group, member, before.member_epoch)
        self._groups.track_revocation(group, member, rewritten)


def _check_epoch(member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
    """GMM throwIfConsumerGroupMemberEpochIsInvalid (section 4.7)."""
    stored = member.member_epoch
    if epoch > stored:
        raise HeartbeatError(
            E.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
            f"coordinator ({stored}). The member must abandon all its partitions and rejoin.",
        )
    # A smaller epoch: the answer that carried the bump was lost. The previous epoch is tolerated, with an
    # ownership report inside what the member is allowed to own.
    if epoch < stored and (
        epoch != member.previous_member_epoch or owned is None or not _within(owned, member.assigned)
    ):
        raise HeartbeatError(
            E.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group "
            f"coordinator ({stored}). The member must abandon all its partitions and rejoin.",
        )


def _within(owned: Assignment, assigned: Assignment) -> bool:
    return all(partitions <= assigned.get(topic_id, frozenset()) for topic_id, partitions in owned.items())


def _wire(assignment: Assignment) -> TopicIdPartitions:
    return tuple((topic_id, tuple(sorted(partitions))) for topic_id, partitions in assignment.items())
