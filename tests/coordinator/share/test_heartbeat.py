"""ShareGroupHeartbeat on the manual clock: validation messages and their order, epochs, leaving, the group size
limit, session expiry through the purgatory and the one group-id namespace (checklist items 5-17)."""

from __future__ import annotations

import pytest

from tests.coordinator.share.harness import GROUP, INTERVAL_MS, SESSION_MS, E, ShareHarness, share_config


@pytest.fixture
def h() -> ShareHarness:
    return ShareHarness(topics={"t": 1, "u": 2})


# -- item 5-7: the static checks, in GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid's order -----


@pytest.mark.parametrize(
    ("member_id", "group_id", "rack_id", "names", "epoch", "message"),
    [
        ("", GROUP, None, ("t",), 0, "MemberId can't be empty."),
        ("  ", GROUP, None, ("t",), 0, "MemberId can't be empty."),
        ("m", "", None, ("t",), 0, "GroupId can't be empty."),
        ("m", GROUP, "", ("t",), 0, "RackId can't be empty."),
        ("m", GROUP, None, None, 0, "SubscribedTopicNames must be set in first request."),
        ("m", GROUP, None, (), 0, "SubscribedTopicNames must be set in first request."),
        ("m", GROUP, None, ("t",), -2, "MemberEpoch is invalid."),
        # Order: the member id is checked before the group id, the group id before the rack, all before the epoch.
        ("", "", "", None, -2, "MemberId can't be empty."),
        ("m", "", "", None, 0, "GroupId can't be empty."),
        ("m", GROUP, "", None, 0, "RackId can't be empty."),
    ],
)
def test_static_checks(
    h: ShareHarness, member_id: str, group_id: str, rack_id: str | None, names: tuple[str, ...] | None,
    epoch: int, message: str,
) -> None:  # fmt: skip
    result = h.shb(member_id, epoch, names, group_id=group_id, rack_id=rack_id)
    assert (result.error, result.error_message) == (E.invalid_request, message)
    assert GROUP not in h.coordinator._registry.share_groups  # nothing was created


# -- items 8, 9, 11, 12: epochs and the null assignment -------------------------------------------------------------


def test_first_member_gets_epoch_one_and_the_partition(h: ShareHarness) -> None:
    """Item 8."""
    result = h.sjoin("m1")
    assert (result.member_id, result.member_epoch, result.heartbeat_interval_ms) == ("m1", 1, INTERVAL_MS)
    assert h.named(result.assignment) == {"t": {0}}
    assert h.sgroup().group_epoch == h.sgroup().assignment_epoch == 1


def test_second_member_bumps_and_first_sees_no_change(h: ShareHarness) -> None:
    """Item 9: the share assignor gives the one partition to both; the first member's assignment is unchanged."""
    h.sjoin("m1")
    second = h.sjoin("m2")
    assert second.member_epoch == 2 and h.named(second.assignment) == {"t": {0}}
    first = h.shb("m1", 1)
    assert first.error is E.none and first.member_epoch == 2 and first.assignment is None


def test_full_request_carries_the_assignment_even_unchanged(h: ShareHarness) -> None:
    """Item 12."""
    h.sjoin("m1")
    assert h.shb("m1", 1).assignment is None
    full = h.shb("m1", 1, ("t",))
    assert full.error is E.none and h.named(full.assignment) == {"t": {0}}


def test_previous_epoch_accepted_others_fenced(h: ShareHarness) -> None:
    """Item 11: after a bump, the previous epoch is answered with the current one; an older or future one is fenced."""
    h.sjoin("m1")
    h.sjoin("m2")
    assert h.shb("m1", 1).member_epoch == 2  # m1 moves 1 -> 2
    h.sjoin("m3")
    assert h.shb("m1", 2).member_epoch == 3  # 2 -> 3; its previous epoch is now 2
    again = h.shb("m1", 2)
    assert again.error is E.none and again.member_epoch == 3
    stale = h.shb("m1", 1)
    assert stale.error is E.fenced_member_epoch and "smaller member epoch (1)" in (stale.error_message or "")
    future = h.shb("m1", 9)
    assert future.error is E.fenced_member_epoch and "greater member epoch (9)" in (future.error_message or "")
    assert "m1" in h.sgroup().members  # fencing by epoch does not remove the member


# -- item 10 and 14: unknown group, unknown member, leaving -------------------------------------------------------


def test_unknown_group_and_unknown_member(h: ShareHarness) -> None:
    """Item 10."""
    unknown = h.shb("m", 5, group_id="nobody")
    assert unknown.error is E.group_id_not_found
    assert "nobody" not in h.coordinator._registry.share_groups
    h.sjoin("m1")
    assert h.shb("ghost", 5).error is E.unknown_member_id


def test_leave(h: ShareHarness) -> None:
    """Item 14: HB(-1) answers epoch -1 and interval 0, the member is gone, the group epoch moves."""
    h.sjoin("m1")
    h.sjoin("m2")
    before = h.sgroup().group_epoch
    left = h.shb("m1", -1)
    assert (left.error, left.member_epoch, left.heartbeat_interval_ms) == (E.none, -1, 0)
    assert "m1" not in h.sgroup().members and h.sgroup().group_epoch == before + 1
    assert h.share_session_due("m1") is None
    assert h.shb("m1", 2).error is E.unknown_member_id
    assert h.shb("m1", -1).error is E.unknown_member_id
    assert h.shb("m9", -1, group_id="nobody").error is E.group_id_not_found


# -- item 13: a new subscription ----------------------------------------------------------------------------------


def test_subscription_change_bumps_and_reassigns(h: ShareHarness) -> None:
    h.sjoin("m1")
    epoch = h.sgroup().group_epoch
    changed = h.shb("m1", 1, ("u",))
    assert changed.error is E.none and h.sgroup().group_epoch == epoch + 1
    assert changed.member_epoch == epoch + 1
    assert h.named(changed.assignment) == {"u": {0, 1}}
    assert h.sassigned("m1") == {"u": {0, 1}}


# -- item 15: group.share.max.size ------------------------------------------------------------------------------


def test_group_max_size() -> None:
    h = ShareHarness(config=share_config(share_max_size=3))
    for member in ("a", "b", "c"):
        h.sjoin(member)
    full = h.shb("d", 0, ("t",))
    assert full.error is E.group_max_size_reached
    assert "maximum capacity of 3" in (full.error_message or "")
    assert "d" not in h.sgroup().members
    # An existing member re-joining (epoch 0) a full group is accepted.
    assert h.shb("a", 0, ("t",)).error is E.none
    assert h.shb("b", 2).error is E.none and h.shb("b", 3).error is E.none  # b moves 2 -> 3


def test_default_max_size_is_200() -> None:
    h = ShareHarness()
    for index in range(200):
        h.sjoin(f"m{index}")
    assert h.shb("m200", 0, ("t",)).error is E.group_max_size_reached
    assert h.shb("m0", 0, ("t",)).error is E.none


# -- item 16: the session timeout through the purgatory ----------------------------------------------------------


def test_session_timeout_removes_the_member(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.sjoin("m2")
    epoch = h.sgroup().group_epoch
    assert h.share_session_due("m1") == h.clock.now_ms() + SESSION_MS
    h.advance(SESSION_MS - 1)
    h.shb("m2", 2)  # m2 keeps beating; m1 does not
    assert "m1" in h.sgroup().members
    h.advance(1)
    assert "m1" not in h.sgroup().members and h.sgroup().group_epoch == epoch + 1
    description = h.share.describe(GROUP)
    assert [m.member_id for m in description.members] == ["m2"]
    assert description.group_epoch == epoch + 1
    assert h.shb("m1", 2).error is E.unknown_member_id


def test_heartbeat_rearms_the_session(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.advance(SESSION_MS - 100)
    h.shb("m1", 1)
    h.advance(SESSION_MS - 100)
    assert "m1" in h.sgroup().members
    h.advance(100)
    assert "m1" not in h.sgroup().members


# -- item 17: one namespace ---------------------------------------------------------------------------------------


def test_share_heartbeat_on_a_consumer_group_id(h: ShareHarness) -> None:
    h.create_topic("c", 1)
    assert h.ok(h.cjoin("cm", ("c",), group_id="cgroup")).member_epoch == 1
    result = h.shb("m", 0, ("t",), group_id="cgroup")
    assert result.error is E.group_id_not_found
    assert h.shb("m", -1, group_id="cgroup").error is E.group_id_not_found


def test_consumer_heartbeat_and_join_on_a_share_group_id(h: ShareHarness) -> None:
    h.sjoin("m1")
    assert h.cjoin("cm", ("t",), group_id=GROUP).error is E.group_id_not_found
    joined = h.join_new(group_id=GROUP)
    assert joined.done and joined.value.error is E.group_id_not_found
    assert list(h.sgroup().members) == ["m1"]
