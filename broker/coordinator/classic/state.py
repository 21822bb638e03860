"""The states of a classic group and the transitions between them (Kafka's ``ClassicGroupState``).

Section 5 of ``docs/spec/group-coordinator.md`` has the full table of triggers; the per-state notes here say what
each state means to the requests that find the group in it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class GroupState(enum.Enum):
    """The value is the state's name on the wire (DescribeGroups, ListGroups), case exact."""

    #: No members, kept for its committed offsets until they expire; also every "simple" group that only commits.
    #: Only a new member's JoinGroup is accepted; the group goes when its last offset does.
    EMPTY = "Empty"
    #: A rebalance is collecting JoinGroups: each is parked until every member has rejoined or the rebalance
    #: timeout runs out. Heartbeats and SyncGroups are told REBALANCE_IN_PROGRESS.
    PREPARING_REBALANCE = "PreparingRebalance"
    #: The join phase is over; the members wait for the leader's SyncGroup, parked until it brings the
    #: assignment. A JoinGroup with changed metadata, a leave or an expiry starts the rebalance over.
    COMPLETING_REBALANCE = "CompletingRebalance"
    #: Every member has its assignment for the current generation; a SyncGroup is answered at once.
    STABLE = "Stable"
    #: The group is being removed (deleted, expired or unloaded); requests that still find it are told
    #: COORDINATOR_NOT_AVAILABLE. The end of every group.
    DEAD = "Dead"


# Short names for the handlers' many state checks.
EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

#: The states each state may be entered from (``ClassicGroupState.validPreviousStates``). Dead follows any state,
#: itself included, so removing a group never fails.
VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    """A transition the table forbids: a coordinator bug, as Kafka's IllegalStateException from
    ``ClassicGroup.assertValidTransition``."""
