from broker.coordinator.classic.state import GroupState
from tests.coordinator.harness import E, Harness


def test_three_members_form_a_stable_group_and_expire() -> None:
    h = Harness()
    leader, *followers = h.stable_group(3)
    assert h.group().generation_id == 1
    assert h.heartbeat(leader, 1) is E.none
    h.advance(9_999)
    for member in (leader, *followers):
        assert h.heartbeat(member, 1) is E.none
    h.advance(10_000)
    assert h.heartbeat(leader, 1) is E.unknown_member_id
    assert h.state() is GroupState.EMPTY
