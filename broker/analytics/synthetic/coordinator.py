"""The simulated coordinator's rules: what it does on each request and timer, and the events it writes.

The same state machine as ``broker/coordinator/coordinator.py`` (Kafka's ``GroupCoordinator``): a JoinGroup
moves a Stable group to PreparingRebalance (``_prepare``), the rebalance completes when every member has rejoined
or the rebalance timeout ends it (``_complete_join``: members that did not rejoin are removed), the leader's
SyncGroup makes the group Stable (``_sync``), and leaves, session expiries and static members replaced by a new
process (KIP-345) change the membership on the way. What the consumers do around it is the scenario's
(``scenario.SimulatedBroker``, which fills in the two hooks at the end).
"""

from __future__ import annotations

import heapq
import itertools
import random
from pathlib import Path
from typing import Any

from broker.analytics.synthetic.assignment import RangeCache, assign
from broker.analytics.synthetic.lines import LogWriter, js, moved
from broker.analytics.synthetic.world import (
    A_EMPTY_NEXT,
    A_INITIAL_DELAY,
    A_JOIN,
    A_JOIN_DEADLINE,
    A_REJOIN,
    A_SYNC,
    A_SYNC_DEADLINE,
    CLOSE_REASON,
    COMPLETING,
    EMPTY,
    INITIAL_REBALANCE_DELAY_MS,
    P_COMPLETING_RESTART,
    P_STUCK,
    P_SYNC_LAGGARD,
    PREPARING,
    REJOIN_REASON,
    REVOKE_REASON,
    STABLE,
    Group,
    Member,
    Process,
)
from broker.events.names import (
    GROUP_CREATED,
    GROUP_EMPTIED,
    JOIN_COMPLETED,
    MEMBER_EXPIRED,
    MEMBER_FENCED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_REJOINED,
    REBALANCE_STARTED,
    STATE_CHANGED,
    SYNC_COMPLETED,
)

Action = tuple[int, int, Group, int, Any]  # (time, order, group, action, argument)

_heappush = heapq.heappush


class Coordinator(LogWriter):
    """The coordinator's side of the simulation, and the queue of timed actions both sides schedule on."""

    def __init__(self, path: Path, rng: random.Random, start_ms: int) -> None:
        super().__init__(path, rng, start_ms)
        self.heap: list[Action] = []
        self._order = itertools.count().__next__  # ties at one time go first in, first out
        self.created = 0
        self.ranges: RangeCache = {}

    def at(self, t: int, g: Group, action: int, arg: Any = None) -> None:
        _heappush(self.heap, (t, self._order(), g, action, arg))

    # -- the group's state ------------------------------------------------------------------------------

    def _transition(self, g: Group, state: str) -> None:
        g.prev_state = g.state
        g.state = state
        self.emit(STATE_CHANGED, g, f',"from":"{g.prev_state}","to":"{state}","generation_id":{g.gen}')

    def _prepare(self, g: Group, cause: str, member_id: str | None, reason: str) -> None:
        """_prepare_rebalance: PreparingRebalance, and what the clients do about it."""
        previous = g.state
        initial = previous == EMPTY
        self._transition(g, PREPARING)
        who = "null" if member_id is None else f'"{member_id}"'
        self.emit(
            REBALANCE_STARTED,
            g,
            f',"generation_id":{g.gen},"previous_state":"{previous}","members":{len(g.members)},'
            f'"cause":"{cause}","member_id":{who},"reason":"{reason}"',
        )
        g.reb_start = self.now
        g.epoch += 1
        if initial:
            delay = INITIAL_REBALANCE_DELAY_MS
            self.at(self.now + delay, g, A_INITIAL_DELAY, (g.epoch, delay, max(g.rto - delay, 0)))
            return
        # Members parked in SyncGroup hear at once; the others at their next heartbeat.
        low, span = (1, 59) if previous == COMPLETING else (10, g.hb - 10)
        rnd = self.rnd
        heap = self.heap
        order = self._order
        now = self.now
        for m in g.members.values():
            if m.awaiting or not m.alive:
                continue
            if rnd() < P_STUCK and not m.iid:
                m.stuck = True  # still heartbeating, but stuck in processing: it will not rejoin in time
                continue
            _heappush(heap, (now + low + int(rnd() * span), order(), g, A_REJOIN, (m, REJOIN_REASON)))
        if self._all_joined(g):
            self._complete_join(g)
        else:
            self.at(self.now + g.rto, g, A_JOIN_DEADLINE, g.epoch)

    @staticmethod
    def _all_joined(g: Group) -> bool:
        return g.waiting == 0

    def _maybe_complete_join(self, g: Group) -> None:
        if g.waiting == 0 and g.state == PREPARING and g.prev_state != EMPTY:
            self._complete_join(g)

    def _remove(self, g: Group, m: Member) -> None:
        del g.members[m.id]
        if not m.awaiting:
            g.waiting -= 1
        if m.iid is not None:
            g.static_ids.pop(m.iid, None)
        if g.leader == m.id:
            g.leader = next(iter(g.members), None)

    def _complete_join(self, g: Group) -> None:
        rng = self.rng
        g.epoch += 1  # the join deadline of this rebalance is void now
        for m in [m for m in g.members.values() if not m.awaiting]:
            if m.iid is None:
                self._remove(g, m)
                self.emit(
                    MEMBER_LEFT,
                    g,
                    f',"member_id":{m.js},"group_instance_id":null,"client_id":{m.cid_js},'
                    '"cause":"rejoin_timeout","reason":"did not rejoin within the rebalance timeout"',
                )
                # Its next poll finds it is no longer a member; it joins again as a new one.
                self.at(self.now + self.r(1000, 20_000), g, A_JOIN, m.process())
        leader = g.leader
        if leader is not None and not g.members[leader].awaiting:
            leader = next((m.id for m in g.members.values() if m.awaiting), None)
        g.leader = leader
        g.gen += 1
        if not g.members:
            self._transition(g, EMPTY)
            self.emit(
                JOIN_COMPLETED,
                g,
                f',"generation_id":{g.gen},"state":"{EMPTY}","protocol_type":"consumer","protocol":null,'
                '"leader":null,"members":[]',
            )
            self.emit(GROUP_EMPTIED, g, f',"generation_id":{g.gen}')
            g.view = None
            self.at(self.now + self.r(60_000, 3_600_000), g, A_EMPTY_NEXT, g.epoch)
            return
        self._transition(g, COMPLETING)
        members = ",".join(m.js for m in g.members.values())
        self.emit(
            JOIN_COMPLETED,
            g,
            f',"generation_id":{g.gen},"state":"{COMPLETING}","protocol_type":"consumer","protocol":{g.proto_js},'
            f'"leader":"{leader}","members":[{members}]',
        )
        for m in g.members.values():
            m.awaiting = False
            m.stuck = False
        g.waiting = len(g.members)
        compute = self.r(2, 40)
        if rng.random() < P_COMPLETING_RESTART:
            # The leader is slow to compute the assignment, and the group changes meanwhile.
            compute = self.r(300, 3000)
            self._completing_twist(g, self.now + self.r(1, compute))
        self.at(self.now + compute, g, A_SYNC, g.gen)
        if len(g.members) > 1 and rng.random() < P_SYNC_LAGGARD:
            laggard = next(m for m in g.members.values() if m.id != leader)
            self.at(self.now + g.rto, g, A_SYNC_DEADLINE, (g.gen, laggard))

    # -- requests ---------------------------------------------------------------------------------------

    def _uuid(self) -> str:
        x = self.rng.getrandbits(128)
        h = f"{x:032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[x & 3]}{h[17:20]}-{h[20:]}"

    def _join(self, g: Group, process: Process) -> None:
        """A JoinGroup with no member id (after KIP-394's MEMBER_ID_REQUIRED round trip)."""
        if not g.exists:
            g.reset()
            g.exists = True
            self.created += 1
            g.created = self.created
            self.emit(GROUP_CREATED, g, "")
        if process.iid is not None and process.iid in g.static_ids:
            self._replace_static(g, process)
            return
        member_id = f"{process.iid or process.cid}-{self._uuid()}"
        m = Member(member_id, process.iid, process.cid, process.host)
        m.last_hb = self.now
        if g.state == PREPARING and g.prev_state == EMPTY:
            g.new_added = True
        if g.leader is None:
            g.leader = member_id
        g.members[member_id] = m
        if m.iid is not None:
            g.static_ids[m.iid] = member_id
        reason = f"need to re-join with the given member-id: {member_id}" if g.reason else None
        self.emit(
            MEMBER_JOINED,
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},"client_host":{m.host_js},'
            f'"protocol_type":"consumer","protocols":{g.protocols_js},"session_timeout_ms":{g.session},'
            f'"rebalance_timeout_ms":{g.rto},"reason":{js(reason)}',
        )
        if g.state in (STABLE, COMPLETING, EMPTY):
            self._prepare(
                g, "member_joined", member_id, f"new member {member_id} joined ({reason or 'no reason given'})"
            )
        else:
            self._maybe_complete_join(g)

    def _replace_static(self, g: Group, process: Process) -> None:
        """A static member's process came back (same group.instance.id, no member id): the old id is fenced."""
        assert process.iid is not None
        old = g.members[g.static_ids[process.iid]]
        old_id = old.id
        new_id = f"{process.iid}-{self._uuid()}"
        # The member keeps its client id, host and partitions, and moves to the end of the join order.
        del g.members[old_id]
        old.id = new_id
        old.js = f'"{new_id}"'
        old.alive = True
        if not old.awaiting:
            old.awaiting = True
            g.waiting -= 1
        old.stuck = False
        old.last_hb = self.now
        g.members[new_id] = old
        g.static_ids[process.iid] = new_id
        if g.leader == old_id:
            g.leader = new_id
        self.emit(
            MEMBER_FENCED,
            g,
            f',"member_id":"{old_id}","new_member_id":"{new_id}","group_instance_id":{old.iid_js},'
            f'"client_id":{old.cid_js},"cause":"static_member_replaced","reason":null',
        )
        if g.state == STABLE:
            old.awaiting = False  # the same protocol: it takes over the old assignment, no rebalance
            g.waiting += 1
            self._next_disturbance(g)
        elif g.state == COMPLETING:
            self._prepare(
                g, "static_member_replaced", new_id, f"static member {process.iid} replaced during CompletingRebalance"
            )
        else:
            self._maybe_complete_join(g)

    def _rejoin(self, g: Group, arg: tuple[Member, str]) -> None:
        m, why = arg
        if g.members.get(m.id) is not m or m.awaiting or not m.alive:
            return
        if g.state == PREPARING:
            m.awaiting = True
            g.waiting -= 1
            self.emit(
                MEMBER_REJOINED,
                g,
                f',"member_id":{m.js},"protocols":{g.protocols_js},"state":"{PREPARING}","reason":'
                f"{g.rejoin_js if why is REJOIN_REASON or not g.reason else js(why)}",
            )
            if g.waiting == 0 and g.prev_state != EMPTY:
                self._complete_join(g)
        elif g.state == STABLE and why == REVOKE_REASON:
            # Its subscription now lists fewer owned partitions: new metadata, so a rebalance (KIP-429).
            m.awaiting = True
            g.waiting -= 1
            reason = why if g.reason else None
            self.emit(
                MEMBER_REJOINED,
                g,
                f',"member_id":{m.js},"protocols":{g.protocols_js},"state":"{STABLE}","reason":{js(reason)}',
            )
            self._prepare(g, "member_rejoined", m.id, f"member {m.id} rejoined ({reason or 'no reason given'})")

    def _sync(self, g: Group, gen: int) -> None:
        """The leader's SyncGroup: the assignment is stored and the group is Stable."""
        if g.state != COMPLETING or g.gen != gen:
            return
        assignment, revokers = assign(g, self.ranges)
        parts_js, sizes_js, unowned = self.render_assignment(g, assignment)
        moves = moved(g, assignment)
        self._transition(g, STABLE)
        self.emit(
            SYNC_COMPLETED,
            g,
            f',"generation_id":{g.gen},"protocol":{g.proto_js},"assignments":{parts_js},"moved":{moves},'
            f'"unowned":{unowned},"rebalance_ms":{self.now - g.reb_start},"rebalance_protocol":{g.reb_proto_js},'
            f'"assignment_bytes":{sizes_js}',
        )
        # Only owners matter to the next generation's "moved" (as in the broker's referee).
        g.view = {member_id: codes for member_id, codes in assignment.items() if codes}
        for m in g.members.values():
            m.owned = assignment[m.id]
        if revokers:
            for member_id in sorted(revokers):
                self.at(self.now + self.r(5, 100), g, A_REJOIN, (g.members[member_id], REVOKE_REASON))
        else:
            self._next_disturbance(g)

    def _leave(self, g: Group, m: Member) -> None:
        if g.members.get(m.id) is not m:
            return
        self._remove(g, m)
        reason = CLOSE_REASON if g.reason else "not provided"
        self.emit(
            MEMBER_LEFT,
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},'
            f'"cause":"leave_group","reason":"{reason}"',
        )
        if g.state in (STABLE, COMPLETING):
            self._prepare(g, "member_left", m.id, f"members ['{m.id}'] left the group")
        elif g.state == PREPARING:
            self._maybe_complete_join(g)

    # -- timers -----------------------------------------------------------------------------------------

    def _expire(self, g: Group, arg: tuple[Member, str, int]) -> None:
        """The member's session deadline: evicted down the expiry path (or kicked through the control API)."""
        m, cause, last_hb = arg
        if g.members.get(m.id) is not m:
            return
        if cause == "session_timeout" and (m.alive or m.last_hb != last_hb):
            return  # it came back (a static member's new process) since, or died again later
        silence = self.now - m.last_hb
        self._remove(g, m)
        self.emit(
            MEMBER_EXPIRED,
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},'
            f'"since_last_heartbeat_ms":{silence},"session_timeout_ms":{g.session},"cause":"{cause}"',
        )
        if cause == "kicked":
            why, reason = "member_kicked", f"member {m.id} was kicked through the control API"
            # The consumer is alive: its next heartbeat gets UNKNOWN_MEMBER_ID and it joins again.
            self.at(self.now + self.r(100, g.hb + 200), g, A_JOIN, m.process())
        else:
            why, reason = "member_expired", f"member {m.id} sent no heartbeat for {silence} ms"
        if g.state in (STABLE, COMPLETING):
            self._prepare(g, why, m.id, reason)
        elif g.state == PREPARING:
            self._maybe_complete_join(g)

    def _initial_delay(self, g: Group, arg: tuple[int, int, int]) -> None:
        epoch, delay, remaining = arg
        if g.epoch != epoch or g.state != PREPARING:
            return
        if g.new_added and remaining != 0:
            g.new_added = False
            new_delay = min(INITIAL_REBALANCE_DELAY_MS, remaining)
            self.at(self.now + new_delay, g, A_INITIAL_DELAY, (epoch, new_delay, max(remaining - delay, 0)))
        else:
            self._complete_join(g)

    def _join_deadline(self, g: Group, epoch: int) -> None:
        if g.epoch == epoch and g.state == PREPARING:
            self._complete_join(g)

    def _sync_deadline(self, g: Group, arg: tuple[int, Member]) -> None:
        gen, m = arg
        if g.gen != gen or g.state not in (COMPLETING, STABLE) or g.members.get(m.id) is not m:
            return
        self._remove(g, m)
        self.emit(
            MEMBER_LEFT,
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},"cause":"sync_timeout",'
            '"reason":"sent no SyncGroup within the rebalance timeout"',
        )
        self._prepare(g, "sync_timeout", m.id, f"members ['{m.id}'] did not sync within the rebalance timeout")
        self.at(self.now + self.r(1000, 20_000), g, A_JOIN, m.process())

    # -- what the consumers do next: the scenario's -----------------------------------------------------

    def _next_disturbance(self, g: Group) -> None:
        """``g`` is Stable again: schedule the next thing that happens to it."""
        raise NotImplementedError

    def _completing_twist(self, g: Group, t: int) -> None:
        """The group changes at ``t``, while its leader computes the assignment."""
        raise NotImplementedError
