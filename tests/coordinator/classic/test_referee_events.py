"""The assignment referee through the coordinator: what SyncGroup completion reports, and that it changes nothing.

The referee itself is unit-tested in ``test_referee.py``; here the coordinator feeds it the leader's SyncGroup, the
members' subscriptions and its ``partition_count`` callback, and turns its findings into events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from broker.coordinator.classic.state import GroupState
from broker.coordinator.consumer_protocol import Subscription, encode_subscription
from broker.coordinator.messages import SyncResult
from broker.events.hub import Record
from tests.coordinator.harness import GROUP, E, Harness
from tests.coordinator.test_events import EventHarness, assert_events, assign

TOPICS = {"orders": 3, "payments": 2}
RANGE = "range"
COOPERATIVE = "cooperative-sticky"


def subscribe(
    *topics: str, protocol: str = RANGE, owned: Mapping[str, Sequence[int]] | None = None
) -> tuple[tuple[str, bytes], ...]:
    """JoinGroup protocols: one consumer-protocol subscription (v1, with owned partitions)."""
    owned_partitions = tuple((topic, tuple(ps)) for topic, ps in (owned or {}).items())
    return ((protocol, encode_subscription(Subscription(1, topics, None, owned_partitions))),)


def two_members(h: Harness, protocols: tuple[tuple[str, bytes], ...]) -> tuple[str, str]:
    """Two members in CompletingRebalance at generation 1, leader first."""
    joins = [h.join_new(protocols=protocols) for _ in range(2)]
    h.advance(0)
    a, b = (j.value.member_id for j in joins)
    assert joins[0].value.leader == a
    assert h.state() is GroupState.COMPLETING_REBALANCE
    return a, b


def only(records: list[Record], name: str) -> list[Record]:
    return [r for r in records if r["event"] == name]


def test_double_owner_unknown_member_and_unowned_partition_are_reported() -> None:
    h = EventHarness(topics=TOPICS)
    a, b = two_members(h, subscribe("orders", "payments"))
    h.take()
    plan = {
        a: assign(orders=[0, 1], payments=[0]),
        b: assign(orders=[1], payments=[1]),
        "ghost-member": assign(orders=[2]),
    }
    follower = h.sync(b, 1)
    leader = h.sync(a, 1, plan)
    assert leader.value == SyncResult(E.none, plan[a], "consumer", RANGE)
    assert follower.value == SyncResult(E.none, plan[b], "consumer", RANGE)
    assert h.state() is GroupState.STABLE
    assert_events(
        h.take(),
        [
            ("state_changed", {"to": "Stable"}),
            (
                "sync_completed",
                {
                    "generation_id": 1,
                    "assignments": {a: {"orders": [0, 1], "payments": [0]}, b: {"orders": [1], "payments": [1]}},
                    "unowned": 1,
                    "rebalance_protocol": "eager",
                },
            ),
            (
                "referee_violation",
                {"generation_id": 1, "kind": "double_owner", "topic": "orders", "partition": 1, "members": [a, b]},
            ),
            (
                "referee_violation",
                {
                    "generation_id": 1,
                    "kind": "unknown_member",
                    "topic": None,
                    "partition": None,
                    "members": ["ghost-member"],
                },
            ),
            (
                "referee_violation",
                {"generation_id": 1, "kind": "unowned", "topic": "orders", "partition": 2, "members": []},
            ),
        ],
    )


def test_unowned_needs_the_partition_count_callback() -> None:
    """Without partition counts (the topic unknown to the broker) nothing can be called unowned."""
    h = EventHarness(topics={})
    a, b = two_members(h, subscribe("orders"))
    h.take()
    h.sync(a, 1, {a: assign(orders=[0]), b: b""})
    (completed,) = only(h.take(), "sync_completed")
    assert completed["unowned"] == 0
    assert completed["assignments"] == {a: {"orders": [0]}, b: {}}
    assert only(h.emitted, "referee_violation") == []


def test_a_clean_assignment_has_no_violations() -> None:
    h = EventHarness(topics=TOPICS)
    a, b = two_members(h, subscribe("orders", "payments"))
    h.take()
    h.sync(a, 1, {a: assign(orders=[0, 1], payments=[0]), b: assign(orders=[2], payments=[1])})
    assert [r["event"] for r in h.take()] == ["state_changed", "sync_completed"]


def test_cooperative_sticky_revocation_round_is_not_a_violation() -> None:
    """KIP-429: a partition that changes owner is first revoked (unowned for one generation), then reassigned."""
    h = EventHarness(topics={"orders": 4})
    first = h.join_new(protocols=subscribe("orders", protocol=COOPERATIVE))
    h.advance(0)
    a = first.value.member_id
    h.sync(a, 1, {a: assign(orders=[0, 1, 2, 3])})
    h.take()

    # Generation 2: b joins; a still owns everything, so the leader revokes 2 and 3 without handing them out.
    second = h.join_new(protocols=subscribe("orders", protocol=COOPERATIVE))
    h.join(a, protocols=subscribe("orders", protocol=COOPERATIVE, owned={"orders": [0, 1, 2, 3]}))
    b = second.value.member_id
    h.sync(a, 2, {a: assign(orders=[0, 1]), b: assign()})
    assert h.sync(b, 2).value.error is E.none
    records = h.take()
    assert only(records, "referee_violation") == []
    (revocation,) = only(records, "sync_completed")
    assert revocation["rebalance_protocol"] == "cooperative"
    assert revocation["unowned"] == 2
    assert revocation["assignments"] == {a: {"orders": [0, 1]}, b: {}}
    assert revocation["moved"] == [
        {"topic": "orders", "partition": 2, "from": a, "to": None},
        {"topic": "orders", "partition": 3, "from": a, "to": None},
    ]

    # Generation 3: a rejoins owning only 0 and 1; the revoked partitions go to b.
    h.join(a, protocols=subscribe("orders", protocol=COOPERATIVE, owned={"orders": [0, 1]}))
    h.join(b, protocols=subscribe("orders", protocol=COOPERATIVE))
    h.sync(a, 3, {a: assign(orders=[0, 1]), b: assign(orders=[2, 3])})
    records = h.take()
    assert only(records, "referee_violation") == []
    (reassignment,) = only(records, "sync_completed")
    assert reassignment["unowned"] == 0
    assert reassignment["moved"] == [
        {"topic": "orders", "partition": 2, "from": None, "to": b},
        {"topic": "orders", "partition": 3, "from": None, "to": b},
    ]


def test_cooperative_partition_owned_by_nobody_is_still_unowned() -> None:
    """Only partitions a member still owns count as being revoked; a forgotten one is a violation."""
    h = EventHarness(topics={"orders": 4})
    protocols = subscribe("orders", protocol=COOPERATIVE, owned={"orders": [0, 1]})
    a, b = two_members(h, protocols)
    h.take()
    h.sync(a, 1, {a: assign(orders=[0]), b: assign(orders=[1])})
    violations = only(h.take(), "referee_violation")
    assert [(v["kind"], v["topic"], v["partition"]) for v in violations] == [
        ("unowned", "orders", 2),
        ("unowned", "orders", 3),
    ]


def test_the_same_revocation_round_is_a_violation_under_an_eager_protocol() -> None:
    h = EventHarness(topics={"orders": 4})
    a, b = two_members(h, subscribe("orders", owned={"orders": [0, 1, 2, 3]}))
    h.take()
    h.sync(a, 1, {a: assign(orders=[0, 1]), b: assign()})
    records = h.take()
    assert only(records, "sync_completed")[0]["rebalance_protocol"] == "eager"
    assert [v["partition"] for v in only(records, "referee_violation")] == [2, 3]


def test_non_consumer_protocol_type_is_not_judged() -> None:
    h = EventHarness(topics=TOPICS)
    protocols = (("default", b"\x00\x01not a consumer subscription"),)
    joins = [h.join_new(protocol_type="connect", protocols=protocols) for _ in range(2)]
    h.advance(0)
    a, b = (j.value.member_id for j in joins)
    h.take()
    plan = {a: b"worker config", b: b"\xff\xff\xff"}
    follower = h.sync(b, 1)
    assert h.sync(a, 1, plan).value == SyncResult(E.none, plan[a], "connect", "default")
    assert follower.value == SyncResult(E.none, plan[b], "connect", "default")
    assert_events(
        h.take(),
        [
            ("state_changed", {"to": "Stable"}),
            (
                "sync_completed",
                {
                    "generation_id": 1,
                    "protocol": "default",
                    "assignments": None,
                    "moved": None,
                    "unowned": None,
                    "rebalance_protocol": None,
                    "assignment_bytes": {a: len(plan[a]), b: len(plan[b])},
                },
            ),
        ],
    )


def test_undecodable_consumer_assignment_is_reported_as_null() -> None:
    h = EventHarness(topics=TOPICS)
    a, b = two_members(h, subscribe("orders"))
    h.take()
    plan = {a: assign(orders=[0, 1, 2]), b: b"\x00\x00garbage"}
    follower = h.sync(b, 1)
    h.sync(a, 1, plan)
    assert follower.value.assignment == plan[b]
    (completed,) = only(h.take(), "sync_completed")
    assert completed["assignments"] is None and completed["moved"] is None and completed["unowned"] is None
    assert only(h.emitted, "referee_violation") == []


def test_violations_do_not_change_the_brokers_answers() -> None:
    """The same requests on a coordinator without events or partition counts get exactly the same answers."""

    def scenario(h: Harness) -> list[object]:
        answers: list[object] = []
        joins = [h.join_new(protocols=subscribe("orders", "payments")) for _ in range(3)]
        h.advance(0)
        a, b, c = (j.value.member_id for j in joins)
        answers += [j.value for j in joins]
        bad_plan = {a: assign(orders=[0, 1, 2]), b: assign(orders=[0]), "stranger": assign(payments=[0])}
        parked = [h.sync(b, 1), h.sync(c, 1)]
        answers.append(h.sync(a, 1, bad_plan).value)
        answers += [p.value for p in parked]
        answers += [h.heartbeat(m, 1) for m in (a, b, c)]
        answers.append(h.commit({("orders", 0): 10}, generation_id=1, member_id=b))
        answers.append(h.state())
        h.advance(5_000)
        answers += [h.heartbeat(m, 1) for m in (a, b, c)]
        answers.append(h.coordinator.describe(GROUP))
        return answers

    judged = EventHarness(topics=TOPICS)
    assert scenario(judged) == scenario(Harness())
    assert len(only(judged.emitted, "referee_violation")) == 4  # double owner, stranger, payments 0 and 1 unowned
    assert judged.state() is GroupState.STABLE
