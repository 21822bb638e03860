"""Kafka's invariants of the classic group coordinator, checked against a simulated world after every step.

Each check names the rule it enforces and where Kafka states it; a broken one raises ``InvariantViolation`` with
what was seen, and the schedule that led there is printed by the test as a replay.

* one generation's JoinGroup answers agree on the leader and the protocol (``completeClassicGroupJoin`` answers
  every member from one ``initNextGeneration``);
* a SyncGroup answered NONE carries the assignment the generation's leader sent for that member, and a Stable
  group's members hold the current generation's assignment and no other (no member in two generations at once);
* a parked JoinGroup or SyncGroup is held by a member the group still has, in the state that parks it, with the
  deadline armed that will answer it, and none waits past ``PATIENCE_MS``; after a quiet period none is left;
* no timer is armed for a member, a group or a phase that is gone (``timing/keys.py``), and each phase's timer is
  armed while the phase lasts;
* state changes only along ``VALID_PREVIOUS_STATES`` (``ClassicGroupState.validPreviousStates``), each one is
  announced (``state_changed``), and generation ids only grow;
* a group's bookkeeping agrees with its members (awaiting joins, ``supportedProtocols`` counting each member once
  per name: what defect 7 broke), and committed offsets stay readable;
* nothing raised: no timer action, no coordinator operation.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.changes import Change, jsonable
from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.state import VALID_PREVIOUS_STATES, GroupState
from broker.timing.keys import OFFSETS_EXPIRATION, heartbeat_key

if TYPE_CHECKING:
    from tests.simulation.world import SimClient, World

E = ErrorCode
S = GroupState
_STATES = {state.value: state for state in GroupState}


def fail(world: World, where: str, problem: str) -> None:
    from tests.simulation.world import InvariantViolation

    raise InvariantViolation(f"{where}: {problem}")


def check_transition(world: World, group_id: str, source: str, target: str) -> None:
    """Called from the event stream, inside the coordinator: record, do not raise (the caller would catch it)."""
    previous = world.last_state.get(group_id)
    if previous is not None and previous != source:
        world.violations.append(f"group {group_id}: state_changed from {source}, but it was {previous}")
    if _STATES[source] not in VALID_PREVIOUS_STATES[_STATES[target]]:
        world.violations.append(f"group {group_id}: {source} -> {target} is not a valid transition")


def check_heartbeat(world: World, client: SimClient, error: ErrorCode) -> None:
    """A Heartbeat is answered NONE only for a member of the current generation, outside PreparingRebalance."""
    if error is not E.none:
        return
    group = world.coordinator.groups.get(client.group_id)
    ok = (
        group is not None
        and client.member_id in group.members
        and group.generation_id == client.generation
        and group.state in (S.COMPLETING_REBALANCE, S.STABLE)
    )
    if not ok:
        world.violations.append(f"Heartbeat of {client.member_id} (generation {client.generation}) answered NONE")


def check(world: World, where: str) -> None:
    if world.violations:
        fail(world, where, "; ".join(world.violations))
    if world.purgatory.failures or world.coordinator.failed_operations:
        fail(
            world,
            where,
            f"{world.purgatory.failures} timer actions and "
            f"{world.coordinator.failed_operations} coordinator operations raised",
        )
    now = world.clock.now_ms()
    for group_id, group in world.coordinator.groups.items():
        incarnation = world.incarnation.get(group_id, 0)
        _check_group(world, where, group, incarnation)
        _check_generation_grows(world, where, group, incarnation)
    _check_join_answers(world, where)
    _check_assignments(world, where)
    _check_parked(world, where, now)
    _check_timers(world, where)
    _check_offsets(world, where)


def check_quiet(world: World) -> None:
    """After a quiet period longer than every timeout: nothing parked, every group Empty, only the sweep armed."""
    where = "after the quiet period"
    waiting = [p for p in world.parked if not p.answer.done]
    if waiting:
        fail(world, where, f"{len(waiting)} parked requests never answered: {[(p.kind, p.group_id) for p in waiting]}")
    for group_id, group in world.coordinator.groups.items():
        if group.members or group.pending_members or not group.is_in(S.EMPTY):
            fail(world, where, f"group {group_id} is {group.state.value} with members {list(group.members)}")
    armed = {key for key in world.purgatory.keys() if key != OFFSETS_EXPIRATION}  # noqa: SIM118 (not a dict)
    if armed:
        fail(world, where, f"timers still armed: {sorted(map(repr, armed))}")


# -- the checks ----------------------------------------------------------------------------------------------------


def _check_group(world: World, where: str, group: ClassicGroup, incarnation: int) -> None:
    gid = group.group_id
    announced = world.last_state.get(gid)
    if announced != group.state.value:
        fail(world, where, f"group {gid} is {group.state.value} but the last state_changed said {announced}")
    members = group.members
    awaiting = sum(1 for m in members.values() if m.join_answer is not None)
    if group.awaiting_join_count != awaiting:
        fail(world, where, f"group {gid} counts {group.awaiting_join_count} awaiting joins, members show {awaiting}")
    supported = Counter(name for m in members.values() for name in {name for name, _ in m.protocols})
    if Counter(group.supported_protocols) != supported:
        fail(world, where, f"group {gid} supportedProtocols {dict(group.supported_protocols)}, members {supported}")
    if (group.leader_id is None) != (not members) or (group.leader_id is not None and group.leader_id not in members):
        fail(world, where, f"group {gid} leader {group.leader_id!r} among {list(members)}")
    static = {m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id is not None}
    if group.static_members != static:
        fail(world, where, f"group {gid} static members {group.static_members}, members say {static}")
    if group.pending_members & members.keys():
        fail(world, where, f"group {gid} has members that are still pending: {group.pending_members & members.keys()}")
    if group.state in (S.COMPLETING_REBALANCE, S.STABLE):
        if not members:
            fail(world, where, f"group {gid} is {group.state.value} without members")
        name = group.protocol_name
        if name is None or any(name not in {n for n, _ in m.protocols} for m in members.values()):
            fail(world, where, f"group {gid} protocol {name!r} is not supported by every member")
    if group.is_in(S.EMPTY) and members:
        fail(world, where, f"group {gid} is Empty with members {list(members)}")


def _check_generation_grows(world: World, where: str, group: ClassicGroup, incarnation: int) -> None:
    key = (group.group_id, incarnation)
    before = world.generations.get(key, 0)
    if group.generation_id < before:
        fail(world, where, f"group {group.group_id} generation went back from {before} to {group.generation_id}")
    world.generations[key] = group.generation_id


def _check_join_answers(world: World, where: str) -> None:
    """One generation, one leader and one protocol, in every JoinGroup answer given for it."""
    for answer in world.join_answers:
        result = answer.result
        if result.error is not E.none:
            continue
        key = (answer.group_id, answer.incarnation, result.generation_id)
        seen = (world.resolve(result.leader), result.protocol_type, result.protocol_name)
        first = world.generation_view.setdefault(key, seen)
        first = (world.resolve(first[0]), first[1], first[2])
        if first != seen:
            fail(world, where, f"generation {key} answered with leader/protocol {seen}, and earlier {first}")
        if result.protocol_name is None or not result.leader:
            fail(world, where, f"generation {key} answered NONE without a protocol or a leader: {result}")
        group = world.coordinator.groups.get(answer.group_id)
        same_group = group is not None and world.incarnation.get(answer.group_id) == answer.incarnation
        if same_group and group is not None and result.generation_id > group.generation_id:
            fail(world, where, f"JoinGroup answered generation {result.generation_id} > {group.generation_id}")
    world.join_answers.clear()


def _check_assignments(world: World, where: str) -> None:
    """What the leader sent is what the group stores and what each member is told, for its generation only."""
    for key in world.newly_stored:
        just_stored = world.stored_assignments[key]
        candidates = [{m: sent.get(m, b"") for m in just_stored} for sent in world.sent_assignments.get(key, [])]
        if just_stored not in candidates:
            fail(world, where, f"{key} stored {just_stored}; its leader sent {world.sent_assignments.get(key)}")
    world.newly_stored.clear()
    for group_id, group in world.coordinator.groups.items():
        if not group.is_in(S.STABLE):
            continue
        key = (group_id, world.incarnation.get(group_id, 0), group.generation_id)
        current = world.stored_assignments.get(key)
        if current is None:
            fail(world, where, f"group {group_id} is Stable in {key} without a stored assignment")
            return
        # Each member holds exactly its generation's assignment (a replaced static member keeps its old id's).
        by_current = {world.resolve(m): a for m, a in current.items()}
        for member_id, member in group.members.items():
            if by_current.get(world.resolve(member_id)) != member.assignment:
                fail(world, where, f"member {member_id} of {key} holds {member.assignment!r}, not {by_current}")
    for answer in world.sync_answers:
        result = answer.result
        if result.error is not E.none:
            continue
        key = (answer.group_id, answer.incarnation, answer.generation)
        told = world.stored_assignments.get(key)
        if told is None:
            fail(world, where, f"SyncGroup of {answer.member_id} answered NONE for {key}, never stored")
            return
        expected = {world.resolve(m): a for m, a in told.items()}.get(world.resolve(answer.member_id))
        if result.assignment != expected:
            fail(world, where, f"SyncGroup of {answer.member_id} for {key} got {result.assignment!r}, not {expected!r}")
        view = world.generation_view.get(key)
        if view is not None and (result.protocol_type, result.protocol_name) != view[1:]:
            fail(world, where, f"SyncGroup for {key} named {result.protocol_type}/{result.protocol_name}, not {view}")
    world.sync_answers.clear()


def _check_parked(world: World, where: str, now: int) -> None:
    """A parked request is held by its member, in the state that parks it, with the deadline armed that ends it."""
    keys = world.purgatory.keys()
    still = []
    for parked in world.parked:
        if parked.answer.done:
            continue
        still.append(parked)
        if now - parked.since_ms > world_patience():
            fail(world, where, f"a {parked.kind} of group {parked.group_id} parked for {now - parked.since_ms} ms")
        group = world.coordinator.groups.get(parked.group_id)
        if group is None:
            fail(world, where, f"a parked {parked.kind} outlived its group {parked.group_id}")
            return
        if parked.kind == "join":
            held = any(m.join_answer is parked.answer for m in group.members.values())
            phase_ok = group.is_in(S.PREPARING_REBALANCE) and group.join_key in keys
        else:
            held = any(m.sync_answer is parked.answer for m in group.members.values())
            phase_ok = group.is_in(S.COMPLETING_REBALANCE) and group.sync_key in keys
        if not held:
            fail(world, where, f"a parked {parked.kind} of group {parked.group_id} is held by no member")
        if not phase_ok:
            fail(world, where, f"a {parked.kind} is parked in {group.state.value} with no deadline to end it")
    world.parked[:] = still


def world_patience() -> int:
    from tests.simulation.world import PATIENCE_MS

    return PATIENCE_MS


def _check_timers(world: World, where: str) -> None:
    """Every armed key belongs to something that still exists; every phase and member that needs one has one."""
    groups = world.coordinator.groups
    for key in list(world.purgatory.keys()):
        if key == OFFSETS_EXPIRATION:
            continue
        assert isinstance(key, tuple)
        kind, group_id = key[0], key[1]
        group = groups.get(group_id)
        if kind == "heartbeat" and key[2] in world.renamed:
            continue  # Kafka leaves a replaced static member's old id to expire without effect (test 53)
        if group is None or group.is_in(S.DEAD):
            fail(world, where, f"timer {key!r} armed for a group that is gone")
            return
        if kind == "heartbeat":
            member_id = key[2]
            if member_id not in group.members and member_id not in group.pending_members:
                fail(world, where, f"timer {key!r} armed for a member the group no longer has")
        elif kind == "join" and not group.is_in(S.PREPARING_REBALANCE):
            fail(world, where, f"join deadline armed in {group.state.value}")
        elif kind == "sync" and group.state not in (S.COMPLETING_REBALANCE, S.STABLE):
            fail(world, where, f"sync deadline armed in {group.state.value}")
    keys = world.purgatory.keys()
    for group_id, group in groups.items():
        if group.is_in(S.PREPARING_REBALANCE) and group.join_key not in keys:
            fail(world, where, f"group {group_id} is rebalancing with no deadline to end it")
        if group.is_in(S.COMPLETING_REBALANCE) and group.sync_key not in keys:
            fail(world, where, f"group {group_id} waits for SyncGroups with no deadline")
        for member_id in group.pending_members:
            if heartbeat_key(group_id, member_id) not in keys:
                fail(world, where, f"pending member {member_id} of {group_id} can never expire")
        for member in group.members.values():
            if member.heartbeat_key not in keys and member.join_answer is None and member.sync_answer is None:
                fail(world, where, f"member {member.member_id} of {group_id} has no session timer and nothing parked")


def _check_offsets(world: World, where: str) -> None:
    for group_id, expected in world.offsets.items():
        fetched = world.coordinator.fetch_offsets(group_id, None)
        got = {(topic, p.partition): p.offset for topic, partitions in fetched.topics for p in partitions}
        if got != expected:
            fail(world, where, f"group {group_id} offsets read {got}, committed {expected}")


def _canonical(changes: Iterable[Change]) -> list[tuple[str, str, str]]:
    return sorted(
        (change.kind, json.dumps(list(change.key)), json.dumps(jsonable(change.value), sort_keys=True))
        for change in changes
    )


def check_replay(world: World, where: str) -> None:
    """Issue 27: what the coordinator put is what its state holds, and replaying it into a fresh coordinator
    (GroupMetadataManager.replay, onLoaded) gives that state back: every group Stable or Empty at its stored
    generation with its members, every committed and pending offset."""
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.timing.clock import ManualClock
    from broker.timing.purgatory import Purgatory

    stored = _canonical(world.changes.changes())
    live = _canonical(world.coordinator.durable_records())
    missing = sorted(set(live) - set(stored))
    if missing:
        fail(world, where, f"the live state holds records never written: {missing[:3]}")
    settled = {(kind, key) for kind, key, _ in live}
    stale = [r for r in stored if r[0] != "classic.group" and (r[0], r[1]) not in settled]
    if stale:
        fail(world, where, f"records written that the state no longer holds: {stale[:3]}")
    clock = ManualClock(world.clock.now_ms())
    fresh = GroupCoordinator(world.config, clock, Purgatory(clock), log=world.coordinator.log)
    fresh.load(world.changes.changes())
    replayed = _canonical(fresh.durable_records())
    if replayed != stored:
        fail(world, where, f"replay differs: {sorted(set(replayed) ^ set(stored))[:3]}")
