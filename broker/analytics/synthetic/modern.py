"""The simulated coordinator's KIP-848 consumer groups: heartbeats, epochs, targets and reconciliation.

The rules of ``broker/coordinator/modern/`` (docs/spec/consumer-groups.md), and the version-2 records they write
(every one with ``group_type`` "consumer"), in the broker's order within a heartbeat: a member's join, the group
epoch's bump (section 6.1), the target computed by the next heartbeat of any member (4.11, a sticky uniform
assignor: 6.4), that member's reconciliation step (section 5: revoke before assign, a partition handed over only
once nobody owns it), and the group's derived state (3.4). A member told to revoke acknowledges a moment later
(librdkafka sends that heartbeat at once, 12.4); the others learn of a new target at their next heartbeat, within
the heartbeat interval. A member that leaves or whose session runs out is fenced (4.13): removed, its partitions
free, the epoch bumped; the next heartbeat computes the new target. Steady heartbeats are not written (they are
not events) and are not simulated: only those that move something.

``ConsumerCoordinator`` takes over the classic coordinator's requests for consumer groups (``Group.cg`` set).
"""

from __future__ import annotations

import base64
from typing import cast

from broker.analytics.synthetic.coordinator import Coordinator
from broker.analytics.synthetic.lines import js, render_partitions
from broker.analytics.synthetic.world import (
    A_CG_HEARTBEAT,
    A_EMPTY_NEXT,
    ASSIGNING,
    CONSUMER_ASSIGNOR,
    EMPTY,
    M_STABLE,
    M_UNRELEASED,
    M_UNREVOKED,
    RECONCILING,
    STABLE,
    ConsumerMember,
    ConsumerState,
    Group,
    Member,
    Process,
)
from broker.events.names import (
    GROUP_CREATED,
    GROUP_EMPTIED,
    GROUP_EPOCH_BUMPED,
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_RECONCILED,
    STATE_CHANGED,
    TARGET_ASSIGNMENT_COMPUTED,
)

_TYPE = ',"group_type":"consumer"'


def uniform(parts: list[int], member_ids: list[str], old: dict[str, list[int]]) -> dict[str, list[int]]:
    """A sticky, balanced target (the uniform assignor's homogeneous case, section 6.4): every member keeps what
    its old target had up to its share (the members keeping most get the extra partitions), the rest is dealt
    out in partition order."""
    q, extra = divmod(len(parts), len(member_ids))
    valid = set(parts)
    kept = {m: [c for c in old.get(m, ()) if c in valid] for m in member_ids}
    order = sorted(member_ids, key=lambda m: (-len(kept[m]), m))
    quota = {m: q + (1 if i < extra else 0) for i, m in enumerate(order)}
    result = {m: kept[m][: quota[m]] for m in order}
    taken = {c for codes in result.values() for c in codes}
    pool = iter(c for c in parts if c not in taken)
    for m in order:
        result[m] = sorted(result[m] + [next(pool) for _ in range(quota[m] - len(result[m]))])
    return {m: result[m] for m in member_ids}


class ConsumerCoordinator(Coordinator):
    """The coordinator's rules for consumer groups; classic groups go on to ``Coordinator``."""

    @staticmethod
    def _cg(g: Group) -> tuple[ConsumerState, dict[str, ConsumerMember]]:
        assert g.cg is not None
        return g.cg, cast(dict[str, ConsumerMember], g.members)

    def _cg_emit(self, name: str, g: Group, rest: str) -> None:
        self.emit(name, g, rest + _TYPE)

    def _member_id(self) -> str:
        """librdkafka's: a random uuid in standard base64 without padding (section 12.2)."""
        return base64.b64encode(self.rng.getrandbits(128).to_bytes(16, "big")).decode("ascii").rstrip("=")

    # -- requests ---------------------------------------------------------------------------------------

    def _join(self, g: Group, process: Process) -> None:
        """A first heartbeat (epoch 0): the member joins, its subscription bumps the epoch, and it takes a step."""
        if g.cg is None:
            super()._join(g, process)
            return
        if not g.exists:
            g.reset()
            g.exists = True
            self.created += 1
            g.created = self.created
            self._cg_emit(GROUP_CREATED, g, "")
        m = ConsumerMember(self._member_id(), process.cid, process.host)
        m.last_hb = self.now
        g.members[m.id] = m
        names = ",".join(f'"{t}"' for t in g.tnames)
        self._cg_emit(
            MEMBER_JOINED,
            g,
            f',"member_id":{m.js},"group_instance_id":null,"client_id":{m.cid_js},"client_host":{m.host_js},'
            f'"protocol_type":"consumer","subscribed_topic_names":[{names}],"subscribed_topic_regex":"",'
            f'"server_assignor":null,"rebalance_timeout_ms":{g.rto}',
        )
        self._bump(g, "subscription_changed", m.id)
        self._step(g, m)

    def _leave(self, g: Group, m: Member) -> None:
        """A heartbeat with epoch -1 (section 7.4): fenced at once."""
        if g.cg is None:
            super()._leave(g, m)
            return
        if g.members.get(m.id) is m:
            self._fence(g, cast(ConsumerMember, m), "left", "left the group (epoch -1)")

    def _expire(self, g: Group, arg: tuple[Member, str, int]) -> None:
        """The member's session timer (section 7.1): it fires only if no heartbeat came since."""
        if g.cg is None:
            super()._expire(g, arg)
            return
        m, _, last_hb = arg
        if g.members.get(m.id) is not m or m.alive or m.last_hb != last_hb:
            return
        self._cg_emit(MEMBER_EXPIRED, g, f',"member_id":{m.js},"group_instance_id":null,"timer":"session",'
                      f'"timeout_ms":{g.session}')  # fmt: skip
        self._fence(g, cast(ConsumerMember, m), "expired", "session timeout")

    def _cg_heartbeat(self, g: Group, arg: tuple[ConsumerMember, bool]) -> None:
        """A heartbeat that may move something; ``ack``: it reports the revoked partitions gone."""
        m, ack = arg
        m.hb_due = False
        if g.cg is None or g.members.get(m.id) is not m or not m.alive:
            return
        m.last_hb = self.now
        if ack:
            m.revoked = True
        self._step(g, m)

    # -- the group's changes ----------------------------------------------------------------------------

    def _bump(self, g: Group, cause: str, member_id: str | None) -> None:
        cg, _ = self._cg(g)
        cg.group_epoch += 1
        rest = f',"group_epoch":{cg.group_epoch},"cause":"{cause}","member_id":{js(member_id)}'
        self._cg_emit(GROUP_EPOCH_BUMPED, g, rest)

    def _fence(self, g: Group, m: ConsumerMember, cause: str, reason: str) -> None:
        """Section 4.13: removed, partitions free, target gone, epoch + 1; the next heartbeat recomputes."""
        cg, _ = self._cg(g)
        del g.members[m.id]
        self._disown(cg, m)
        cg.targets.pop(m.id, None)
        self._cg_emit(MEMBER_LEFT, g, f',"member_id":{m.js},"group_instance_id":null,"cause":"{cause}",'
                      f'"reason":"{reason}","member_epoch":{m.epoch}')  # fmt: skip
        self._bump(g, f"member_{cause}", m.id)
        self._note_state(g)
        self._wake(g)

    def _step(self, g: Group, m: ConsumerMember) -> None:
        """One heartbeat's work: the target if the epoch moved (4.11), the member's step (4.12), the state; then
        what the member does next."""
        cg, _ = self._cg(g)
        if cg.group_epoch > cg.assignment_epoch:
            self._compute_target(g)
        self._reconcile(g, m)
        self._note_state(g)
        self._wake(g)
        if m.state == M_UNREVOKED and not m.revoked:
            self._beat(g, m, self.now + self.r(5, 300), ack=True)  # revoke (the callback, a commit), then say so
        elif not (m.state == M_STABLE and m.epoch == cg.assignment_epoch):
            self._beat(g, m, self.now + g.hb)

    def _compute_target(self, g: Group) -> None:
        cg, members = self._cg(g)
        old = cg.targets
        new = uniform(g.parts, list(members), old)
        before = {c: m for m, codes in old.items() for c in codes}
        after = {c: m for m, codes in new.items() for c in codes}
        moves = []
        for c in sorted(before.keys() | after.keys()):
            if before.get(c) != after.get(c):
                moves.append(
                    f'{{"topic":"{g.tnames[c >> 12]}","partition":{c & 4095},'
                    f'"from":{js(before.get(c))},"to":{js(after.get(c))}}}'
                )
        cg.targets = new
        cg.assignment_epoch = cg.group_epoch
        self._cg_emit(
            TARGET_ASSIGNMENT_COMPUTED,
            g,
            f',"assignment_epoch":{cg.assignment_epoch},"assignor":"{CONSUMER_ASSIGNOR}","members":{len(members)},'
            f'"moved":[{",".join(moves)}]',
        )

    def _reconcile(self, g: Group, m: ConsumerMember) -> None:
        """Section 5.1 for a member reporting nothing (it still owns everything) or, acknowledging, its revoked
        partitions gone: keep, then revoke (its epoch waits), then the new partitions nobody else owns."""
        cg, _ = self._cg(g)
        epoch = cg.assignment_epoch
        if (m.state == M_STABLE and m.epoch == epoch) or (m.state == M_UNREVOKED and not m.revoked):
            return
        target = cg.targets.get(m.id, [])
        wanted = set(target)
        keep = [c for c in m.assigned if c in wanted]
        revoke = [c for c in m.assigned if c not in wanted]
        mine = set(keep)
        candidates = [c for c in target if c not in mine]
        free = [c for c in candidates if cg.owners.get(c, m.id) == m.id]
        if revoke:
            state, new_epoch, assigned, pending = M_UNREVOKED, m.epoch, keep, revoke
        else:
            state = M_UNRELEASED if len(free) != len(candidates) else M_STABLE
            new_epoch, assigned, pending = epoch, sorted(keep + free), []
        if (state, new_epoch, assigned, pending) == (m.state, m.epoch, m.assigned, m.pending):
            return
        previous = m.epoch
        self._disown(cg, m)
        m.state, m.epoch, m.assigned, m.pending, m.revoked = state, new_epoch, assigned, pending, False
        for c in (*assigned, *pending):
            cg.owners[c] = m.id
        self._cg_emit(
            MEMBER_RECONCILED,
            g,
            f',"member_id":{m.js},"member_epoch":{new_epoch},"previous_epoch":{previous},"state":"{state}",'
            f'"assigned":{render_partitions(g.tnames, assigned)[0] if assigned else "{}"},'
            f'"pending_revocation":{render_partitions(g.tnames, pending)[0] if pending else "{}"}',
        )

    @staticmethod
    def _disown(cg: ConsumerState, m: ConsumerMember) -> None:
        for c in (*m.assigned, *m.pending):
            if cg.owners.get(c) == m.id:
                del cg.owners[c]

    def _note_state(self, g: Group) -> None:
        """The derived state (section 3.4), written when it changed; Stable lets the next disturbance come."""
        cg, members = self._cg(g)
        if not members:
            state = EMPTY
        elif cg.group_epoch > cg.assignment_epoch:
            state = ASSIGNING
        elif any(not (m.state == M_STABLE and m.epoch == cg.assignment_epoch) for m in members.values()):
            state = RECONCILING
        else:
            state = STABLE
        if state != g.state:
            self._cg_emit(
                STATE_CHANGED,
                g,
                f',"from":"{g.state}","to":"{state}","group_epoch":{cg.group_epoch},'
                f'"assignment_epoch":{cg.assignment_epoch}',
            )
            g.prev_state, g.state = g.state, state
            if state == EMPTY:
                self._cg_emit(GROUP_EMPTIED, g, f',"group_epoch":{cg.group_epoch}')
                g.epoch += 1
                self.at(self.now + self.r(60_000, 3_600_000), g, A_EMPTY_NEXT, g.epoch)
        if state == STABLE:
            self._next_disturbance(g)

    # -- the members' next heartbeats -------------------------------------------------------------------

    def _beat(self, g: Group, m: ConsumerMember, t: int, ack: bool = False) -> None:
        if not m.hb_due or ack:
            m.hb_due = True
            self.at(t, g, A_CG_HEARTBEAT, (m, ack))

    def _wake(self, g: Group) -> None:
        """Members not at the current target hear of it at their next heartbeat, somewhere in the interval; while
        the group is Assigning, any member's next heartbeat computes the target (section 6.1)."""
        cg, members = self._cg(g)
        stale = cg.group_epoch > cg.assignment_epoch
        for m in members.values():
            if m.alive and not m.hb_due and (stale or not (m.state == M_STABLE and m.epoch == cg.assignment_epoch)):
                self._beat(g, m, self.now + self.r(1, g.hb))
