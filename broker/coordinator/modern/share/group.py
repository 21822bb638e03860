"""A share group: members, epochs and the target assignment (Kafka's ``ShareGroup``, sections 3.1 and 3.3 of
``docs/spec/share-groups.md``).

It answers the ``Group`` protocol (``coordinator/group.py``) as Kafka's ``ShareGroup`` does: it takes no committed
offsets (OffsetCommit, OffsetFetch, OffsetDelete and TxnOffsetCommit are GROUP_ID_NOT_FOUND "Group X is not a consumer
group.", section 2.6), goes only when Empty, and is never removed by offsets retention: its progress is the
share-partitions' start offsets, not committed offsets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType

from kio.schema.errors import ErrorCode

from broker.coordinator.group import OffsetExpiration
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import ListedGroup
from broker.coordinator.modern.share.member import ShareMember
from broker.coordinator.modern.share.state import ShareGroupState
from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, Assignment, TopicId
from broker.coordinator.offset_store import CommittedOffset, Key

__all__ = ["SHARE_PROTOCOL_TYPE", "ShareGroup"]

#: ListGroups' ProtocolType of a share group (section 2.6).
SHARE_PROTOCOL_TYPE = "share"

_NO_OFFSETS: Mapping[Key, CommittedOffset] = MappingProxyType({})


class ShareGroup:
    group_type = GroupType.SHARE
    # Offsets retention never deletes it (``offsets/manager.py``): it has no committed offsets to lose.
    kept_without_offsets = True

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.created_ms = now_ms
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.targets: dict[str, Assignment] = {}  # member id -> target assignment
        self.subscribed: Counter[str] = Counter()  # topic name -> members subscribing
        # Section 4.3 step 4: the subscribed topics' ids and partition counts when the target was last computed.
        self.subscription_metadata: dict[str, tuple[TopicId, int]] = {}
        self.metadata_version = -1
        self.state_timestamp_ms = now_ms

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def offsets(self) -> Mapping[Key, CommittedOffset]:
        return _NO_OFFSETS

    def is_dead(self) -> bool:
        return False

    def is_empty(self) -> bool:
        return not self.members

    def target_of(self, member_id: str) -> Assignment:
        return self.targets.get(member_id, EMPTY_ASSIGNMENT)

    def add_member(self, member: ShareMember) -> None:
        self.members[member.member_id] = member
        self.subscribed.update(member.subscribed_topic_names)

    def remove_member(self, member_id: str) -> ShareMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.subscribed.subtract(member.subscribed_topic_names)
            self.subscribed += Counter()  # drop the topics no member subscribes to any more
            self.targets.pop(member_id, None)
        return member

    def resubscribe(self, member: ShareMember, names: tuple[str, ...]) -> None:
        self.subscribed.subtract(member.subscribed_topic_names)
        member.subscribed_topic_names = names
        self.subscribed.update(names)
        self.subscribed += Counter()

    # -- the Group protocol ----------------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode | None:
        return ErrorCode.group_id_not_found  # ShareGroup.validateOffsetCommit

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode | None:
        return ErrorCode.group_id_not_found

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        return ErrorCode.group_id_not_found

    def validate_offset_delete(self) -> ErrorCode | None:
        return ErrorCode.group_id_not_found

    def validate_delete_group(self) -> ErrorCode | None:
        return None if self.is_empty() else ErrorCode.non_empty_group  # section 10.4

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed

    def offset_expiration(self) -> OffsetExpiration | None:
        return None

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, SHARE_PROTOCOL_TYPE, self.state.value, GroupType.SHARE)
