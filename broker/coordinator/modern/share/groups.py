"""The share groups of one coordinator and ShareGroupHeartbeat (Kafka's ``GroupMetadataManager.shareGroupHeartbeat``
and its helpers, section 4 of ``docs/spec/share-groups.md``).

Validation runs in Kafka's order (4.1, then 4.3): the static checks with their messages, the group (created by a
join, GROUP_ID_NOT_FOUND for another type), its size, the member and its epoch. A member takes the target on its own
heartbeat (no revocation step); the group epoch moves with the membership, the subscriptions and the subscribed
topics' metadata, and the target is recomputed by the next heartbeat after it moved. Every partition counts as
initialised at once (section 4.5, allowed by section 14), so a first heartbeat already carries the assignment.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from kio.schema.errors import ErrorCode

from broker.changes import NULL_CHANGES, ChangeSink
from broker.coordinator.config import GroupConfig
from broker.coordinator.group_configs import HEARTBEAT_INTERVAL, SESSION_TIMEOUT, GroupConfigs
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import CommitRequest, PartitionErrors
from broker.coordinator.modern.assignors.base import GroupSpec, MemberSpec
from broker.coordinator.modern.assignors.simple import SimpleAssignor
from broker.coordinator.modern.share import durable
from broker.coordinator.modern.share.events import ShareEventLog
from broker.coordinator.modern.share.group import ShareGroup
from broker.coordinator.modern.share.member import ShareMember
from broker.coordinator.modern.share.messages import ShareHeartbeatRequest, ShareHeartbeatResult
from broker.coordinator.modern.share.state import ShareGroupState
from broker.coordinator.modern.types import Assignment, TopicCatalog
from broker.coordinator.registry import GroupRegistry
from broker.timing.clock import Clock
from broker.timing.keys import share_session_key
from broker.timing.purgatory import Purgatory

__all__ = ["ShareGroups"]

E = ErrorCode
_ASSIGNOR = SimpleAssignor()


class ShareGroups:
    def __init__(
        self,
        config: GroupConfig,
        group_configs: GroupConfigs,
        clock: Clock,
        purgatory: Purgatory,
        topics: TopicCatalog,
        events: ShareEventLog,
        log: structlog.typing.FilteringBoundLogger,
        registry: GroupRegistry,
        *,
        changes: ChangeSink = NULL_CHANGES,
    ) -> None:
        self.config = config
        self.group_configs = group_configs
        self.clock = clock
        self.purgatory = purgatory
        self.topics = topics
        self.events = events
        self.log = log
        self.registry = registry
        self.changes = changes
        self.groups = registry.share_groups
        self.failures = 0
        # Called with a group id when the group is deleted: its share-partitions go too (``service.py``).
        self.on_deleted: Callable[[str], None] = lambda group_id: None

    # -- groups (the GroupKeeper protocol) ----------------------------------------------------------------------

    def create(self, group_id: str) -> ShareGroup:
        group = ShareGroup(group_id, self.clock.now_ms())
        self.registry.add_share(group)
        self.events.group_created(group)
        self.store(group, None)
        return group

    def delete(self, group: ShareGroup, why: str) -> None:
        for member_id in list(group.members):
            self.purgatory.cancel(share_session_key(group.group_id, member_id))
        if self.changes.enabled:
            with self.changes.atomic():
                for member_id in group.members:
                    self.changes.delete(durable.MEMBER, (group.group_id, member_id))
                self.changes.delete(durable.GROUP, (group.group_id,))
        self.registry.remove(group)
        self.events.group_deleted(group, why)
        self.on_deleted(group.group_id)

    def delete_group(self, group_id: str, why: str) -> None:
        self.delete(self.registry.share(group_id), why)

    def offsets_committed(self, request: CommitRequest, results: PartitionErrors) -> None:
        """Never called: a share group takes no commits."""

    def offsets_deleted(self, group_id: str, deleted: list[tuple[str, int]]) -> None:
        """Never called: a share group has no committed offsets."""

    def offsets_expired(self, group_id: str) -> None:
        """Never called: a share group has no committed offsets."""

    def unload_all(self) -> None:
        for group in self.groups.values():
            for member_id in group.members:
                self.purgatory.cancel(share_session_key(group.group_id, member_id))
        self.registry.remove_all(GroupType.SHARE)

    def store(self, group: ShareGroup, member: ShareMember | None) -> None:
        changes = self.changes
        if not changes.enabled:
            return
        with changes.atomic():
            changes.put(durable.GROUP, (group.group_id,), durable.group_value(group))
            if member is not None:
                changes.put(durable.MEMBER, (group.group_id, member.member_id), durable.member_value(member))

    # -- timing ---------------------------------------------------------------------------------------------

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_configs.int_value(group_id, SESSION_TIMEOUT)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_configs.int_value(group_id, HEARTBEAT_INTERVAL)

    def arm_session(self, group: ShareGroup, member: ShareMember, timeout_ms: int | None = None) -> None:
        """(Re-)arm the member's session: ``timeout_ms``, or the group's ``share.session.timeout.ms``."""
        if timeout_ms is None:
            timeout_ms = self.session_timeout_ms(group.group_id)
        member.last_heartbeat_ms = self.clock.now_ms()
        session = member.session
        # Every heartbeat moves the deadline: in place while it is armed with the same timeout (the action names it).
        if session is not None and member.session_timeout_ms == timeout_ms and (
            self.purgatory.postpone(session, timeout_ms)
        ):
            return
        group_id, member_id = group.group_id, member.member_id
        member.session = self.purgatory.schedule(
            share_session_key(group_id, member_id), timeout_ms, lambda: self._expire(group_id, member_id, timeout_ms)
        )
        member.session_timeout_ms = timeout_ms

    def _expire(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return
        try:
            self.events.member_expired(group, member, timeout_ms)
            self.fence(group, member, "expired", "the session timed out")
        except Exception:
            self.failures += 1
            self.log.exception("share-group session expiry failed", group_id=group_id, member_id=member_id)

    # -- fencing ---------------------------------------------------------------------------------------------

    def fence(self, group: ShareGroup, member: ShareMember, cause: str, reason: str) -> None:
        """Section 4.2 and 4.4: the member is removed, its target with it, and the group epoch moves by one; the
        records it holds stay locked until its share session ends or the locks expire."""
        self.purgatory.cancel(share_session_key(group.group_id, member.member_id))
        old_state = group.state
        group.remove_member(member.member_id)
        self.events.member_left(group, member, cause, reason)
        self.bump(group, f"member_{cause}", member.member_id)
        self._note_state(group, old_state)
        if self.changes.enabled:
            with self.changes.atomic():
                self.changes.delete(durable.MEMBER, (group.group_id, member.member_id))
                self.store(group, None)

    def bump(self, group: ShareGroup, cause: str, member_id: str | None) -> None:
        group.group_epoch += 1
        self.events.epoch_bumped(group, cause, member_id)

    def _note_state(self, group: ShareGroup, old: ShareGroupState) -> None:
        new = group.state
        if new is not old:
            group.state_timestamp_ms = self.clock.now_ms()
            self.events.state_changed(group, old, new)

    # -- ShareGroupHeartbeat (section 4) ---------------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        invalid = _static_problem(request)
        if invalid is not None:
            return ShareHeartbeatResult(E.invalid_request, invalid)
        if request.member_epoch == -1:
            return self._leave(request)
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        group = self.groups.get(group_id)
        if group is None:
            if self.registry.get(group_id) is not None:
                return ShareHeartbeatResult(E.group_id_not_found, f"Group {group_id} is not a share group.")
            if epoch != 0:
                return ShareHeartbeatResult(E.group_id_not_found, f"Group {group_id} not found.")
        member = None if group is None else group.members.get(member_id)
        if member is None:
            if epoch != 0:
                message = f"Member {member_id} is not a member of group {group_id}."
                return ShareHeartbeatResult(E.unknown_member_id, message)
            if group is not None and len(group.members) >= self.config.share_max_size:
                return ShareHeartbeatResult(
                    E.group_max_size_reached, f"The share group has reached its maximum capacity of "
                    f"{self.config.share_max_size} members."
                )  # fmt: skip
        elif epoch != 0 and epoch not in (member.member_epoch, member.previous_member_epoch):
            return ShareHeartbeatResult(
                E.fenced_member_epoch,
                f"The share group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."
                if epoch < member.member_epoch
                else f"The share group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if group is None:
            group = self.create(group_id)
        old_state = group.state
        changed = False
        if member is None:
            member = ShareMember(member_id, self.clock.now_ms())
            member.client_id, member.client_host = request.client.client_id, request.client.host
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names or ())))
            group.add_member(member)
            self.events.member_joined(group, member)
            changed = True
        elif request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                group.resubscribe(member, names)
                changed = True
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        member.client_id = request.client.client_id
        member.client_host = request.client.host
        if changed:
            self.bump(group, "member_joined" if epoch == 0 else "subscription_changed", member_id)
        if self._metadata_changed(group, force=changed) and not changed:
            self.bump(group, "metadata_changed", None)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        previous_assigned = member.assigned
        self._reconcile(group, member)
        self.arm_session(group, member)
        self._note_state(group, old_state)
        self.store(group, member)
        full = epoch == 0 or request.subscribed_topic_names is not None or member.assigned != previous_assigned
        assignment = (
            tuple((t, tuple(sorted(p))) for t, p in sorted(member.assigned.items())) if full else None
        )
        return ShareHeartbeatResult(
            E.none, None, member_id, member.member_epoch, self.heartbeat_interval_ms(group_id), assignment
        )

    def steady(self, group_id: str, member_id: str, epoch: int, client_id: str, client_host: str) -> int | None:
        """The steady beat without a request object (the connection's hand-decoded hot path: RackId and
        SubscribedTopicNames null, ``epoch`` > 0): the heartbeat interval to answer with, or None when anything at all
        needs ``heartbeat`` (which then decides, and nothing was changed here).

        It answers only what ``heartbeat`` would answer without changing anything but the session: the member at the
        current epoch, the group's target computed at that epoch and taken by the member (its epoch equals the
        assignment epoch, which moves whenever the target does), the topics' metadata unchanged since the target
        (the catalog's version), the same client id and host (``heartbeat`` would store new ones). The stored value
        of the member and the group are then what they were, so nothing is written to the durable changes.
        """
        group = self.groups.get(group_id)
        if group is None:
            return None
        member = group.members.get(member_id)
        if (
            member is None
            or member.member_epoch != epoch
            or group.assignment_epoch != epoch
            or group.group_epoch != epoch
            or group.metadata_version != self.topics.version
            or member.client_id != client_id
            or member.client_host != client_host
        ):
            return None
        configs = self.group_configs
        if group_id in configs.overrides:
            self.arm_session(group, member)
            return self.heartbeat_interval_ms(group_id)
        config = configs.config  # no configs of its own: the broker's settings, as ``GroupConfigs.int_value`` reads
        self.arm_session(group, member, config.share_session_timeout_ms)
        return config.share_heartbeat_interval_ms

    def _leave(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group = self.groups.get(request.group_id)
        if group is None:
            message = (
                f"Group {request.group_id} is not a share group."
                if self.registry.get(request.group_id) is not None
                else f"Group {request.group_id} not found."
            )
            return ShareHeartbeatResult(E.group_id_not_found, message)
        member = group.members.get(request.member_id)
        if member is None:
            return ShareHeartbeatResult(
                E.unknown_member_id, f"Member {request.member_id} is not a member of group {request.group_id}."
            )
        self.fence(group, member, "left", "the member left the group (ShareGroupHeartbeat epoch -1)")
        return ShareHeartbeatResult(E.none, None, request.member_id, -1, 0, None)

    def _metadata_changed(self, group: ShareGroup, *, force: bool) -> bool:
        """Section 4.3 step 4: the subscribed topics' ids and partition counts, recomputed when the catalog moved
        (or, ``force``, the subscriptions did)."""
        version = self.topics.version
        if version == group.metadata_version and not force:
            return False
        group.metadata_version = version
        metadata = {}
        for name in group.subscribed:
            info = self.topics.by_name(name)
            if info is not None:
                metadata[name] = (info.topic_id, info.partitions)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _compute_target(self, group: ShareGroup) -> None:
        self._metadata_changed(group, force=True)
        metadata = group.subscription_metadata
        members = tuple(
            MemberSpec(
                m.member_id,
                None,
                m.rack_id,
                frozenset(metadata[n][0] for n in m.subscribed_topic_names if n in metadata),
                group.target_of(m.member_id),
            )
            for m in group.members.values()
        )
        counts = {topic_id: partitions for topic_id, partitions in metadata.values()}
        homogeneous = len({m.topics for m in members}) <= 1
        group.targets = _ASSIGNOR.assign(GroupSpec(members, counts, homogeneous))
        group.assignment_epoch = group.group_epoch
        self.events.target_computed(group)

    def _reconcile(self, group: ShareGroup, member: ShareMember) -> None:
        """ShareGroupAssignmentBuilder: the member takes its target, restricted to the topics it subscribes to."""
        if member.member_epoch == group.assignment_epoch and member.assigned == self._restricted(group, member):
            return
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
        member.assigned = self._restricted(group, member)
        self.events.member_reconciled(group, member)

    def _restricted(self, group: ShareGroup, member: ShareMember) -> Assignment:
        metadata = group.subscription_metadata
        subscribed = {metadata[n][0] for n in member.subscribed_topic_names if n in metadata}
        return {t: p for t, p in group.target_of(member.member_id).items() if t in subscribed}


def _static_problem(request: ShareHeartbeatRequest) -> str | None:
    """GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid, in its order (section 4.1 item 4)."""
    if not request.member_id.strip():
        return "MemberId can't be empty."
    if not request.group_id.strip():
        return "GroupId can't be empty."
    if request.rack_id is not None and not request.rack_id.strip():
        return "RackId can't be empty."
    if request.member_epoch == 0 and not request.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    if request.member_epoch < -1:
        return "MemberEpoch is invalid."
    return None
