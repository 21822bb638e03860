"""What a server-side assignor is given and returns (Kafka's ``GroupSpec``, ``MemberSubscriptionSpec``,
``SubscribedTopicDescriber`` and ``GroupAssignment``, section 6.1 of ``docs/spec/consumer-groups.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.coordinator.modern.types import Assignment, TopicId


class AssignorError(Exception):
    """The assignor could not compute a target (section 6.6): the heartbeat answers UNKNOWN_SERVER_ERROR."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    # The ids of the topics the member subscribes to that exist (names and resolved regex together).
    topics: frozenset[TopicId]
    # The member's current *target* assignment: the basis of stickiness (not what the member owns).
    target: Assignment


@dataclass(frozen=True, slots=True)
class GroupSpec:
    # Every member, in the group's member order (the order they joined): deterministic iteration.
    members: tuple[MemberSpec, ...]
    # Partition count of every topic any member subscribes to.
    partition_counts: Mapping[TopicId, int]
    # Section 6.3: every member subscribes to the same topics.
    homogeneous: bool


class Assignor(Protocol):
    """A server-side assignor; ``assign`` returns a full target for every member of the spec (an empty mapping for
    a member that gets nothing) and never mutates its input."""

    name: str

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]: ...
