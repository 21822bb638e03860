"""OffsetFetch on classic groups: checklist items 122-129 (spec 13.3).

Elsewhere:
* 127 (transaction committed/aborted), 128 (transactional offsets to several groups) and the transactional half of
  126 (UNSTABLE_OFFSET_COMMIT while a transactional offset is pending) are in tests/coordinator/test_txn_offsets.py;
  here 126's other half: with nothing pending, require_stable=True returns the committed values.
* Version shaping (v0-1 error copied into partitions, v2-7 top-level, v8+ per group) is the API layer's job.
"""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import CommitRequest, FetchedOffset, GroupOffsets, PartitionCommit
from tests.coordinator.harness import GROUP, E, Harness


def commit(h: Harness, topic: str, partition: int, offset: int, *, epoch: int = -1, metadata: str | None = "") -> None:
    request = CommitRequest(GROUP, ((topic, (PartitionCommit(partition, offset, epoch, metadata),)),))
    assert h.coordinator.commit_offsets(request) == ((topic, ((partition, E.none),)),)


def test_122_fetch_returns_offset_leader_epoch_and_metadata() -> None:
    h = Harness()
    commit(h, "t", 0, 100, epoch=7, metadata="hello")
    commit(h, "t", 1, 200, epoch=-1, metadata=None)
    commit(h, "u", 4, 0, epoch=3, metadata="")
    result = h.coordinator.fetch_offsets(GROUP, [("t", [0, 1]), ("u", [4])])
    assert result == GroupOffsets(
        GROUP,
        E.none,
        (
            ("t", (FetchedOffset(0, 100, 7, "hello", E.none), FetchedOffset(1, 200, -1, "", E.none))),
            ("u", (FetchedOffset(4, 0, 3, "", E.none),)),
        ),
    )


def test_122_fetch_sees_the_latest_commit_of_a_member() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.commit({("t", 0): 5}, generation_id=1, member_id=leader, metadata="a") == {("t", 0): E.none}
    assert h.commit({("t", 0): 6}, generation_id=1, member_id=follower, metadata="b") == {("t", 0): E.none}
    result = h.coordinator.fetch_offsets(GROUP, [("t", [0])])
    assert result.topics == (("t", (FetchedOffset(0, 6, -1, "b", E.none),)),)


def test_123_fetch_unknown_partition_or_unknown_group() -> None:
    h = Harness()
    commit(h, "t", 0, 100, epoch=1, metadata="m")
    # known group, mix of a known and unknown partitions / topics, in request order
    result = h.coordinator.fetch_offsets(GROUP, [("t", [5, 0]), ("nope", [0])])
    assert result == GroupOffsets(
        GROUP,
        E.none,
        (
            ("t", (FetchedOffset(5, -1, -1, "", E.none), FetchedOffset(0, 100, 1, "m", E.none))),
            ("nope", (FetchedOffset(0, -1, -1, "", E.none),)),
        ),
    )
    # unknown group: NONE with -1 everywhere, and no group is created
    unknown = h.coordinator.fetch_offsets("other", [("t", [0, 1])])
    assert unknown == GroupOffsets(
        "other", E.none, (("t", (FetchedOffset(0, -1, -1, "", E.none), FetchedOffset(1, -1, -1, "", E.none))),)
    )
    assert "other" not in h.coordinator.groups
    # empty string is a legal group id for OffsetFetch (spec 6)
    assert h.coordinator.fetch_offsets("", [("t", [0])]).topics == (("t", (FetchedOffset(0),)),)
    assert "" not in h.coordinator.groups


def test_124_fetch_all_offsets() -> None:
    h = Harness()
    assert h.coordinator.fetch_offsets(GROUP, None) == GroupOffsets(GROUP, E.none, ())
    assert GROUP not in h.coordinator.groups
    commit(h, "t", 1, 11, epoch=2, metadata="x")
    commit(h, "u", 0, 20)
    commit(h, "t", 0, 10)
    result = h.coordinator.fetch_offsets(GROUP, None)
    assert result.error is E.none
    got = {(topic, p.partition): p for topic, parts in result.topics for p in parts}
    assert got == {
        ("t", 1): FetchedOffset(1, 11, 2, "x", E.none),
        ("t", 0): FetchedOffset(0, 10, -1, "", E.none),
        ("u", 0): FetchedOffset(0, 20, -1, "", E.none),
    }
    # each topic appears once
    assert sorted(topic for topic, _ in result.topics) == ["t", "u"]


def test_124_fetch_all_offsets_of_a_group_without_offsets() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.coordinator.fetch_offsets(GROUP, None) == GroupOffsets(GROUP, E.none, ())


def test_125_fetch_on_dead_group_answers_no_offsets() -> None:
    h = Harness()
    commit(h, "t", 0, 100, epoch=4, metadata="m")
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.coordinator.fetch_offsets(GROUP, [("t", [0, 1])]) == GroupOffsets(
        GROUP, E.none, (("t", (FetchedOffset(0, -1, -1, "", E.none), FetchedOffset(1, -1, -1, "", E.none))),)
    )
    assert h.coordinator.fetch_offsets(GROUP, None) == GroupOffsets(GROUP, E.none, ())


def test_126_require_stable_without_transactions_returns_committed_values() -> None:
    """126: no transactions exist, so require_stable never yields UNSTABLE_OFFSET_COMMIT."""
    h = Harness()
    commit(h, "t", 0, 100, epoch=2, metadata="m")
    stable = h.coordinator.fetch_offsets(GROUP, [("t", [0, 1])], require_stable=True)
    assert stable == GroupOffsets(
        GROUP, E.none, (("t", (FetchedOffset(0, 100, 2, "m", E.none), FetchedOffset(1, -1, -1, "", E.none))),)
    )
    assert stable == h.coordinator.fetch_offsets(GROUP, [("t", [0, 1])], require_stable=False)
    all_stable = h.coordinator.fetch_offsets(GROUP, None, require_stable=True)
    assert all_stable.topics == (("t", (FetchedOffset(0, 100, 2, "m", E.none),)),)


def test_129_commit_describe_delete_then_fetch() -> None:
    h = Harness()
    commit(h, "t", 0, 100)
    described = h.coordinator.describe(GROUP)
    assert (described.error, described.state, described.members) == (E.none, "Empty", ())
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.none),)
    assert h.coordinator.fetch_offsets(GROUP, [("t", [0])]).topics == (("t", (FetchedOffset(0, -1, -1, "", E.none),)),)
    assert h.coordinator.fetch_offsets(GROUP, None) == GroupOffsets(GROUP, E.none, ())
    assert h.coordinator.describe(GROUP).state == "Dead"
