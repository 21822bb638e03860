"""Fault rule matching on a manual clock: order, limits, and the swallow rule's hand-over to an evicted member."""

from __future__ import annotations

import pytest

from broker.server.faults import FaultRules, FaultSpecError
from broker.timing.clock import ManualClock
from protocol.apis import ApiKey

HEARTBEAT = ApiKey.HEARTBEAT


def nobody(group_id: str, member_id: str) -> bool:
    return False


def test_a_swallow_rule_passes_over_an_evicted_member_to_the_next_rule_without_a_hit() -> None:
    rules = FaultRules(ManualClock())
    swallow = rules.add({"action": "swallow_heartbeats", "member_id": "m1"})
    error = rules.add({"action": "error", "error": "REBALANCE_IN_PROGRESS", "member_id": "m1"})
    assert rules.match(HEARTBEAT, "c", "g", "m1", None) is swallow
    assert rules.match(HEARTBEAT, "c", "g", "m1", None, nobody) is error
    assert (swallow.hits, error.hits) == (1, 1)


def test_a_passed_over_swallow_rule_draws_nothing_from_its_seeded_sequence() -> None:
    seeded = {"action": "swallow_heartbeats", "probability": 0.5, "seed": 3}
    undisturbed, interleaved = FaultRules(ManualClock()), FaultRules(ManualClock())
    undisturbed.add(seeded)
    interleaved.add(seeded)
    expected = [undisturbed.match(HEARTBEAT, "c", "g", "m", None) is not None for _ in range(20)]
    seen = []
    for _ in range(20):
        assert interleaved.match(HEARTBEAT, "c", "g", "m", None, nobody) is None
        seen.append(interleaved.match(HEARTBEAT, "c", "g", "m", None) is not None)
    assert seen == expected
    assert True in expected and False in expected


def test_count_and_duration_limit_a_rule() -> None:
    clock = ManualClock()
    rules = FaultRules(clock)
    counted = rules.add({"action": "close", "api": "Heartbeat", "count": 2})
    assert [rules.match(HEARTBEAT, "c", "g", "m", None) is counted for _ in range(3)] == [True, True, False]
    timed = rules.add({"action": "close", "api": "JoinGroup", "duration_ms": 1000})
    assert rules.match(ApiKey.JOIN_GROUP, "c", "g", "", None) is timed
    clock.advance(1000)
    assert rules.match(ApiKey.JOIN_GROUP, "c", "g", "", None) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"action": "error", "api": "Fetch", "error": 27}, "can answer for"),
        ({"action": "swallow_heartbeats", "api": "JoinGroup"}, "applies to Heartbeat"),
        ({"action": "delay"}, "needs delay_ms"),
        ({"action": "close", "probability": 0}, "probability"),
        ({"action": "close", "colour": "red"}, "unknown field"),
    ],
)
def test_bad_rules_are_refused_with_the_reason(spec: dict[str, object], message: str) -> None:
    rules = FaultRules(ManualClock())
    with pytest.raises(FaultSpecError, match=message):
        rules.add(spec)
    assert not rules
