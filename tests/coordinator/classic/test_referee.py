"""The assignment referee: a pure judgement of one generation's consumer-protocol assignment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.coordinator.classic.referee import Move, TopicPartitions, Verdict, Violation, judge
from broker.coordinator.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription

TOPICS = {"orders": 3, "payments": 2}


def partition_count(topic: str) -> int | None:
    return TOPICS.get(topic)


def sub(*topics: str, owned: Mapping[str, Sequence[int]] | None = None) -> bytes:
    owned_partitions = tuple((t, tuple(p)) for t, p in (owned or {}).items())
    return encode_subscription(Subscription(1, topics, None, owned_partitions))


def asg(**partitions: Sequence[int]) -> bytes:
    return encode_assignment(Assignment(0, tuple((t, tuple(p)) for t, p in partitions.items()), b""))


def run(
    leader: Sequence[tuple[str, bytes]],
    members: Mapping[str, bytes],
    previous: Mapping[str, TopicPartitions] | None = None,
    cooperative: bool = False,
) -> Verdict:
    verdict = judge(leader, members, previous, partition_count, cooperative)
    assert verdict is not None
    return verdict


BOTH = {"a": sub("orders", "payments"), "b": sub("orders", "payments")}


def test_clean_assignment() -> None:
    verdict = run([("a", asg(orders=[0, 1])), ("b", asg(orders=[2], payments=[0, 1]))], BOTH)
    assert verdict.violations == ()
    assert verdict.unowned == 0
    assert verdict.moved == ()
    assert verdict.assignments == {"a": {"orders": [0, 1]}, "b": {"orders": [2], "payments": [0, 1]}}


def test_double_owner_names_every_owner_once_per_partition() -> None:
    members = BOTH | {"c": sub("orders")}
    leader = [
        ("c", asg(orders=[1])),
        ("a", asg(orders=[0, 1], payments=[0])),
        ("b", asg(orders=[1, 2], payments=[0, 1])),
    ]
    verdict = run(leader, members)
    assert verdict.violations == (
        Violation("double_owner", "orders", 1, ("a", "b", "c")),
        Violation("double_owner", "payments", 0, ("a", "b")),
    )
    assert verdict.unowned == 0


def test_a_member_listing_a_partition_twice_is_not_a_double_owner() -> None:
    raw = encode_assignment(Assignment(0, (("orders", (2, 0, 2)), ("payments", (1,)), ("orders", (1,))), None))
    verdict = run([("a", raw), ("b", asg(payments=[0]))], BOTH)
    assert verdict.violations == ()
    assert verdict.assignments["a"] == {"orders": [0, 1, 2], "payments": [1]}


def test_unknown_member_is_named_and_its_partitions_are_not_owned() -> None:
    leader = [("a", asg(orders=[0, 1, 2], payments=[0])), ("ghost", asg(payments=[1]))]
    verdict = run(leader, BOTH)
    assert verdict.violations == (
        Violation("unknown_member", None, None, ("ghost",)),
        Violation("unowned", "payments", 1, ()),
    )
    assert verdict.unowned == 1
    assert "ghost" not in verdict.assignments


def test_every_unknown_member_is_reported_once() -> None:
    leader = [("zed", b""), ("a", asg(orders=[0, 1, 2], payments=[0, 1])), ("eve", b""), ("zed", b"")]
    verdict = run(leader, {"a": sub("orders", "payments")})
    assert verdict.violations == (
        Violation("unknown_member", None, None, ("eve",)),
        Violation("unknown_member", None, None, ("zed",)),
    )


def test_unowned_partition_under_eager_rebalancing_is_a_violation() -> None:
    members = {"a": sub("orders", "payments", owned={"orders": [2]}), "b": sub("orders")}
    verdict = run([("a", asg(orders=[0], payments=[0, 1])), ("b", asg(orders=[1]))], members)
    assert verdict.unowned == 1
    assert verdict.violations == (Violation("unowned", "orders", 2, ()),)


def test_cooperative_revocation_is_counted_but_not_a_violation() -> None:
    # a owned everything; b joins. Round one takes orders-2 and payments-1 away from a without giving them to b.
    members = {
        "a": sub("orders", "payments", owned={"orders": [0, 1, 2], "payments": [0, 1]}),
        "b": sub("orders", "payments"),
    }
    leader = [("a", asg(orders=[0, 1], payments=[0])), ("b", asg())]
    verdict = run(leader, members, cooperative=True)
    assert verdict.unowned == 2
    assert verdict.violations == ()


def test_cooperative_does_not_excuse_a_partition_nobody_owned() -> None:
    members = {"a": sub("orders", "payments", owned={"orders": [0]}), "b": sub("orders")}
    verdict = run([("a", asg(orders=[1], payments=[0, 1])), ("b", asg())], members, cooperative=True)
    assert verdict.unowned == 2
    # orders-0 is being revoked from a; orders-2 was nobody's and still is.
    assert verdict.violations == (Violation("unowned", "orders", 2, ()),)


def test_partitions_owned_only_by_members_that_left_are_not_excused() -> None:
    members = {"b": sub("orders")}  # a, which owned orders-0, is gone: its owned_partitions are not here
    verdict = run([("b", asg(orders=[1, 2]))], members, cooperative=True)
    assert verdict.violations == (Violation("unowned", "orders", 0, ()),)


def test_topics_that_do_not_exist_are_skipped() -> None:
    members = {"a": sub("orders", "missing"), "b": sub("also-missing")}
    verdict = run([("a", asg(orders=[0, 1, 2])), ("b", asg())], members)
    assert verdict.unowned == 0
    assert verdict.violations == ()


def test_only_subscribed_topics_can_be_unowned() -> None:
    verdict = run([("a", asg(orders=[0, 1, 2]))], {"a": sub("orders")})
    assert verdict.unowned == 0  # payments exists but nobody subscribes to it


def test_members_the_leader_left_out_get_nothing() -> None:
    verdict = run([("a", asg(orders=[0, 1, 2], payments=[0, 1]))], BOTH | {"c": sub("orders")})
    assert verdict.assignments == {"a": {"orders": [0, 1, 2], "payments": [0, 1]}, "b": {}, "c": {}}
    assert verdict.violations == ()


def test_duplicate_entries_last_one_wins() -> None:
    leader = [("a", asg(orders=[0, 1, 2], payments=[0, 1])), ("b", asg()), ("a", asg(orders=[0]))]
    verdict = run(leader, BOTH)
    assert verdict.assignments["a"] == {"orders": [0]}
    assert verdict.unowned == 4


def test_assignments_are_normalised() -> None:
    raw = encode_assignment(Assignment(0, (("payments", (1, 0)), ("orders", (2, 0, 1))), b"user data"))
    verdict = run([("a", raw)], {"a": sub("orders", "payments")})
    assert list(verdict.assignments["a"].items()) == [("orders", [0, 1, 2]), ("payments", [0, 1])]


def test_moved_partitions() -> None:
    previous: dict[str, TopicPartitions] = {
        "a": {"orders": [0, 1, 2]},
        "gone": {"payments": [0, 1]},
    }
    leader = [("a", asg(orders=[0], payments=[1])), ("b", asg(orders=[1]))]
    verdict = run(leader, BOTH, previous)
    assert verdict.moved == (
        Move("orders", 1, "a", "b"),
        Move("orders", 2, "a", None),
        Move("payments", 0, "gone", None),
        Move("payments", 1, "gone", "a"),
    )


def test_first_generation_moves_nothing() -> None:
    verdict = run([("a", asg(orders=[0, 1, 2], payments=[0, 1]))], {"a": sub("orders", "payments")})
    assert verdict.moved == ()
    newly = run([("a", asg(orders=[0]))], {"a": sub("orders")}, previous={})
    assert newly.moved == (Move("orders", 0, None, "a"),)


def test_moves_with_double_owners_name_who_changed() -> None:
    previous: dict[str, TopicPartitions] = {"a": {"orders": [0]}, "b": {"orders": [0]}}
    verdict = run([("a", asg(orders=[0])), ("b", asg())], BOTH, previous)
    assert verdict.moved == (Move("orders", 0, "b", "a"),)
    verdict = run([("a", asg(orders=[0])), ("b", asg(orders=[0]))], BOTH, {"a": {"orders": [0]}})
    assert verdict.moved == (Move("orders", 0, "a", "b"),)


def test_the_previous_verdict_feeds_the_next() -> None:
    first = run([("a", asg(orders=[0, 1, 2], payments=[0, 1]))], {"a": sub("orders", "payments")})
    leader = [("a", asg(orders=[0, 1], payments=[0])), ("b", asg(orders=[2], payments=[1]))]
    second = run(leader, BOTH, first.assignments)
    assert second.moved == (Move("orders", 2, "a", "b"), Move("payments", 1, "a", "b"))


def test_violations_are_sorted_by_kind_topic_partition() -> None:
    members = {"a": sub("payments", "orders"), "b": sub("orders")}
    leader = [("zz", asg()), ("b", asg(payments=[1], orders=[2])), ("a", asg(payments=[1])), ("aa", asg())]
    verdict = run(leader, members)
    assert [(v.kind, v.topic, v.partition) for v in verdict.violations] == [
        ("double_owner", "payments", 1),
        ("unknown_member", None, None),
        ("unknown_member", None, None),
        ("unowned", "orders", 0),
        ("unowned", "orders", 1),
        ("unowned", "payments", 0),
    ]
    assert [v.members for v in verdict.violations if v.kind == "unknown_member"] == [("aa",), ("zz",)]


def test_undecodable_input_is_no_verdict() -> None:
    good = [("a", asg(orders=[0]))]
    assert judge([("a", b"\x00\x00\x00")], {"a": sub("orders")}, None, partition_count, False) is None
    assert judge(good, {"a": b"not a subscription"}, None, partition_count, False) is None
    assert judge([*good, ("ghost", b"\xff\xff")], {"a": sub("orders")}, None, partition_count, False) is None
    assert judge(good, {"a": sub("orders"), "b": b""}, None, partition_count, False) is None


def test_empty_group_and_empty_assignment_bytes() -> None:
    assert run([], {}) == Verdict({}, (), 0, ())
    verdict = run([("a", b"")], {"a": sub("orders")})
    assert verdict.assignments == {"a": {}}
    assert verdict.unowned == 3


def test_a_few_thousand_members() -> None:
    topics = {f"t{i}": 50 for i in range(40)}  # 2000 partitions
    members = {f"m{i:04d}": encode_subscription(Subscription(0, tuple(topics), None)) for i in range(2000)}
    ids = sorted(members)
    leader = [(ids[i], asg(**{f"t{i // 50}": [i % 50]})) for i in range(2000)]
    shifted = {ids[(i + 1) % 2000]: {f"t{i // 50}": [i % 50]} for i in range(2000)}
    verdict = judge(leader, members, shifted, topics.get, False)
    assert verdict is not None
    assert (verdict.unowned, verdict.violations, len(verdict.moved)) == (0, (), 2000)


# -- real assignors ------------------------------------------------------------------------


class FakeCluster:
    """The two questions the clients' assignors ask of cluster metadata."""

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        return set(TOPICS)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = TOPICS.get(topic)
        return None if count is None else set(range(count))


@dataclass
class KafkaPythonMember:
    member_id: str
    group_instance_id: str | None
    metadata: Any


def kafka_python_round(assignor: Any, subscriptions: Mapping[str, bytes]) -> list[tuple[str, bytes]]:
    """Run a kafka-python assignor as its leader does: decode with its decoder, assign, encode."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    members = [KafkaPythonMember(m, None, ConsumerProtocolSubscription.decode(raw)) for m, raw in subscriptions.items()]
    return [(m, a.encode()) for m, a in assignor.assign(FakeCluster(), members).items()]


def test_kafka_python_assignors_are_clean() -> None:
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    for assignor in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor()):
        subscriptions = {m: assignor.metadata({"orders", "payments"}).encode() for m in ("a", "b", "c")}
        verdict = run(kafka_python_round(assignor, subscriptions), subscriptions)
        assert (verdict.violations, verdict.unowned) == ((), 0), assignor
        assert sum(len(p) for owned in verdict.assignments.values() for p in owned.values()) == 5


def test_kafka_python_cooperative_sticky_two_rounds() -> None:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.structs import TopicPartition

    alone = CooperativeStickyAssignor()
    first_subs = {"a": alone.metadata({"orders", "payments"}).encode()}
    first = run(kafka_python_round(alone, first_subs), first_subs, cooperative=True)
    assert (first.violations, first.unowned) == ((), 0)

    # a rejoins listing what it owns, b joins with nothing: round one revokes, it does not hand over.
    a, b = CooperativeStickyAssignor(), CooperativeStickyAssignor()
    a.member_assignment = [TopicPartition(t, p) for t, ps in first.assignments["a"].items() for p in ps]
    subs = {"a": a.metadata({"orders", "payments"}).encode(), "b": b.metadata({"orders", "payments"}).encode()}
    leader = kafka_python_round(a, subs)
    second = run(leader, subs, first.assignments, cooperative=True)
    assert second.assignments["b"] == {}
    assert second.unowned == 2
    assert second.violations == ()
    assert all(move.to_member is None for move in second.moved)
    # The same assignment judged as an eager one: the gap is a violation.
    assert [v.kind for v in run(leader, subs, first.assignments).violations] == ["unowned", "unowned"]


def test_aiokafka_assignors_are_clean() -> None:
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

    for assignor in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor):
        subscriptions = {m: assignor.metadata(["orders", "payments"]).encode() for m in ("a", "b", "c")}
        decoded = {m: ConsumerProtocolMemberMetadata.decode(raw) for m, raw in subscriptions.items()}
        leader = [(m, a.encode()) for m, a in assignor.assign(FakeCluster(), decoded).items()]
        verdict = run(leader, subscriptions)
        assert (verdict.violations, verdict.unowned) == ((), 0), assignor


# -- librdkafka, replayed (captured from confluent-kafka 2.16.1 / librdkafka 2.16.0) ---------------------

RD_TOPICS = {"topic": 4, "other": 2}
RD_SUB_A1 = "00030000000200056f746865720005746f7069630000000000000000ffffffff00057261636b41"
RD_SUB_B = "0003000000010005746f7069630000000000000000ffffffff00057261636b41"
RD_SUB_A2 = (
    "00030000000200056f746865720005746f706963000000360000000200056f746865720000000200000000000000010005746f7069"
    "630000000400000000000000010000000200000003000000010000000200056f74686572000000020000000000000001000574"
    "6f7069630000000400000000000000010000000200000003000000010000000200057261636b41"
)
RD_GEN1_A = (
    "00000000000200056f746865720000000200000000000000010005746f706963000000040000000000000001000000020000000300000000"
)
RD_GEN2_A = (
    "0000000000020005746f706963000000010000000300056f74686572000000020000000100000000000000360000000200056f7468"
    "65720000000200000000000000010005746f706963000000040000000000000001000000020000000300000001"
)
RD_GEN2_B = "00000000000000000000"


def test_librdkafka_cooperative_sticky_revocation_round() -> None:
    def count(topic: str) -> int | None:
        return RD_TOPICS.get(topic)

    first = judge([("A", bytes.fromhex(RD_GEN1_A))], {"A": bytes.fromhex(RD_SUB_A1)}, None, count, True)
    assert first is not None
    assert first.assignments == {"A": {"other": [0, 1], "topic": [0, 1, 2, 3]}}

    members = {"A": bytes.fromhex(RD_SUB_A2), "B": bytes.fromhex(RD_SUB_B)}
    leader = [("A", bytes.fromhex(RD_GEN2_A)), ("B", bytes.fromhex(RD_GEN2_B))]
    second = judge(leader, members, first.assignments, count, True)
    assert second is not None
    assert second.assignments == {"A": {"other": [0, 1], "topic": [3]}, "B": {}}
    assert second.unowned == 3
    assert second.violations == ()
    assert second.moved == tuple(Move("topic", p, "A", None) for p in (0, 1, 2))
