"""Deterministic simulation of the group coordinator (issue 14): seeded random schedules of joins, syncs,
heartbeats, leaves, commits, kicks, fences, forced rebalances, restarts and clock jumps on a ManualClock, with
Kafka's invariants (``invariants.py``) checked after every step and after a final quiet period.

Hypothesis' stateful testing drives it: each rule application is one step of ``steps.py``, generated from a fixed
seed (``derandomize``), so CI runs the same schedules every time. A failing schedule is shrunk to a minimal one
and printed as Python to paste and replay::

    from tests.simulation.steps import *
    from tests.simulation.test_simulation import Simulation
    state = Simulation()
    state.start(config=0)
    state.do(step=Poll(client=2))
    ...
    state.teardown()

(``tests.simulation.world.replay(config, [steps])`` does the same from a list, printing each step.)

Environment:
* ``GROUP_BROKER_SIM_SCHEDULES``: how many schedules (default 3,000: about 25 s on one core);
* ``GROUP_BROKER_SIM_STEPS``: the most steps in one schedule (default 40).

The schedules come from one fixed seed, so a longer run starts with CI's schedules and goes on with new ones:
``GROUP_BROKER_SIM_SCHEDULES=100000 pytest -q -p no:cacheprovider tests/simulation -k random`` (about 15 min).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test
from kio.schema.errors import ErrorCode

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.member import Member
from tests.simulation import invariants
from tests.simulation.steps import Advance, Join, Leave, Poll, Step, Sync, step
from tests.simulation.world import CONFIGS, InvariantViolation, World, replay

SCHEDULES = int(os.environ.get("GROUP_BROKER_SIM_SCHEDULES", "3000"))
STEPS = int(os.environ.get("GROUP_BROKER_SIM_STEPS", "40"))


def simulation_settings(schedules: int) -> settings:
    return settings(
        max_examples=schedules,
        stateful_step_count=STEPS,
        derandomize=True,  # a fixed seed: CI runs the same schedules every time (a longer run: more of them)
        database=None,  # nothing remembered between runs: the same schedules every time
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=False,
    )


class Simulation(RuleBasedStateMachine):
    """One schedule: a coordinator under one of ``CONFIGS``, then steps, each followed by every invariant."""

    world: World

    @initialize(config=st.integers(0, len(CONFIGS) - 1))
    def start(self, config: int) -> None:
        self.world = World(CONFIGS[config])

    @rule(step=step)
    def do(self, step: Step) -> None:  # one name for every step: the printed replay reads as the schedule
        self.world.apply(step)
        self.broken = True  # until the checks pass: a broken world is not drained (one failure, one report)
        invariants.check(self.world, f"after {step!r}")
        self.broken = False

    def teardown(self) -> None:
        # The last word: a quiet period past every timeout, after which nothing may still wait.
        if hasattr(self, "world") and not getattr(self, "broken", False):
            self.world.drain()


def run_simulation(schedules: int, *, shrink: bool = True) -> None:
    chosen = simulation_settings(schedules)
    if not shrink:
        chosen = settings(chosen, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    run_state_machine_as_test(Simulation, settings=chosen)


@pytest.mark.timeout(max(120, SCHEDULES // 10))  # a longer run gets the time it needs (~8 ms a schedule)
def test_random_schedules_keep_kafkas_invariants() -> None:
    run_simulation(SCHEDULES)


# -- schedules worth keeping as they are ---------------------------------------------------------------------------

KEPT: list[tuple[int, list[Step]]] = [
    # Issue 14, defect 7: a lone member lists range twice; the join phase ends on the initial-delay timer.
    (0, [Join(client=0, version=3, protocols=3), Advance(choice=6), Sync(client=0), Poll(client=0)]),
    # ... and a LeaveGroup ends the join phase of a member that rejoined listing range twice.
    (
        1,
        [
            Join(client=0, version=3),
            Join(client=1, version=3),
            Advance(choice=0),
            Sync(client=0),
            Sync(client=1),
            Join(client=1, version=3, protocols=3),
            Leave(client=0),
            Poll(client=1),
        ],
    ),
]


@pytest.mark.parametrize(("config", "schedule"), KEPT)
def test_kept_schedules(config: int, schedule: list[Step]) -> None:
    replay(config, schedule, trace=False)


# -- the simulation can fail: bugs planted on purpose are caught within CI's first schedules ---------------------


def assert_caught(description: str) -> None:
    """Within CI's first 300 schedules, or the test fails naming the planted bug ``description``. Not shrunk here, to
    keep CI fast: a real failure is, to a minimal replay."""
    try:
        run_simulation(300, shrink=False)
    except InvariantViolation:
        return
    pytest.fail(f"not caught within the first 300 schedules: {description}")


def test_a_planted_bug_not_caught_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(globals(), "run_simulation", lambda schedules, *, shrink: None)  # finds nothing
    with pytest.raises(pytest.fail.Exception, match="first 300 schedules: a bug nobody planted"):
        assert_caught("a bug nobody planted")


def test_a_timer_left_armed_on_leave_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ClassicGroups.remove_member

    def keeps_the_timer(groups: ClassicGroups, group: ClassicGroup, member: Member) -> None:
        member.heartbeat_key = ("heartbeat", group.group_id, "someone else")  # the cancel misses the real key
        original(groups, group, member)

    monkeypatch.setattr(ClassicGroups, "remove_member", keeps_the_timer)
    assert_caught("a heartbeat timer left armed for a member that left")


def test_duplicate_protocols_counted_twice_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    import broker.coordinator.classic.join as join

    monkeypatch.setattr(join, "unique_protocols", lambda protocols: protocols)
    assert_caught("defect 7 (a protocol name listed twice)")


def test_parked_syncs_left_unanswered_by_a_rebalance_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.coordinator.classic.rebalance import Rebalancer

    original = Rebalancer.propagate_assignment

    def forgets_errors(rebalancer: Rebalancer, group: ClassicGroup, error: ErrorCode) -> None:
        if error is ErrorCode.none:
            original(rebalancer, group, error)

    monkeypatch.setattr(Rebalancer, "propagate_assignment", forgets_errors)
    assert_caught("parked SyncGroups never answered")


def test_an_illegal_transition_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.coordinator.classic import state

    table = dict(state.VALID_PREVIOUS_STATES)
    table[state.STABLE] = frozenset({state.COMPLETING, state.PREPARING})  # a looser table in the coordinator ...
    monkeypatch.setattr("broker.coordinator.classic.group.VALID_PREVIOUS_STATES", table)
    from broker.coordinator.classic.sync import SyncHandler

    original = SyncHandler.sync

    def stable_too_early(handler: SyncHandler, request: object) -> object:
        group = handler._groups.get(request.group_id)  # type: ignore[attr-defined]
        if group is not None and group.is_in(state.PREPARING) and group.members:
            handler._groups.transition(group, state.STABLE)  # ... and a bug that uses it
        return original(handler, request)  # type: ignore[arg-type]

    monkeypatch.setattr(SyncHandler, "sync", stable_too_early)
    assert_caught("PreparingRebalance -> Stable")
