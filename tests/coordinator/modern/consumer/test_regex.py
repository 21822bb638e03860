"""Regular-expression subscriptions: checklist items 82-88 of ``docs/spec/consumer-groups.md`` section 13 (section 4.9:
RE2 syntax, whole-name matching, internal topics included).

This broker resolves a new regex inside the heartbeat that brings it (4.9 allows it: the member gets its
partitions one heartbeat earlier than from Kafka), and re-resolves at the first heartbeat after the topic catalog
changed, so item 85's "within about 10 s" is "at the next heartbeat".
"""

from __future__ import annotations

from tests.coordinator.modern.consumer.harness import GROUP, ConsumerHarness, E

FAMILY = {"orders": 2, "orders-1": 1, "xorders": 1, "ordersx": 1}


def test_item_82_invalid_regex() -> None:
    """Item 82: a join with regex "[" -> INVALID_REGULAR_EXPRESSION with RE2's description; nothing is stored."""
    h = ConsumerHarness()
    result = h.cjoin("m", names=[], regex="[")
    assert result.error is E.invalid_regular_expression
    assert result.error_message is not None
    assert result.error_message.startswith("SubscribedTopicRegex `[` is not a valid regular expression: ")
    assert result.error_message.endswith(".") and result.member_epoch == 0 and result.member_id is None
    assert GROUP not in h.coordinator.consumer_groups
    # In an existing group, a bad regex leaves the member as it was.
    h.ok(h.cjoin("m"))
    assert h.hb("m", 1, regex="a(").error is E.invalid_regular_expression
    assert h.member("m").subscribed_topic_regex == "" and h.epochs() == (1, 1)
    # The member checks come first (GMM compiles the regex in maybeUpdateRegularExpressions, after them).
    assert h.hb("stranger", 1, regex="[").error is E.unknown_member_id
    assert h.hb("m", 5, regex="[").error is E.fenced_member_epoch
    # A static member back from its -2 leave under its own id, with a bad regex: still at -2, nothing stored.
    h.ok(h.cjoin("s", instance_id="I"))
    h.ok(h.hb("s", -2, instance_id="I"))
    assert h.cjoin("s", instance_id="I", regex="[").error is E.invalid_regular_expression
    assert h.member("s").member_epoch == -2 and h.member("s").subscribed_topic_regex == ""


def test_item_83_regex_family() -> None:
    """Item 83: a join with regex "orders.*" -> receives the partitions of orders and orders-1, not of xorders."""
    h = ConsumerHarness(topics=FAMILY)
    m = h.consumer("m", names=[], regex="orders.*")
    m.join()
    h.settle(m)
    assert h.assigned("m") == {"orders": {0, 1}, "orders-1": {0}, "ordersx": {0}}


def test_item_84_regex_matches_whole_names() -> None:
    """Item 84: regex "orders" matches only the topic named exactly "orders"; "^orders" likewise."""
    for regex in ("orders", "^orders", "orders$"):
        h = ConsumerHarness(topics=FAMILY)
        m = h.consumer("m", names=[], regex=regex)
        m.join()
        h.settle(m)
        assert h.assigned("m") == {"orders": {0, 1}}, regex


def test_item_85_topic_created_matching_a_regex() -> None:
    """Item 85: a topic created that matches a subscribed regex -> the member receives its partitions at its next
    heartbeat (Kafka: within about 10 s plus a heartbeat)."""
    h = ConsumerHarness(topics={"orders": 1})
    m = h.consumer("m", names=[], regex="orders.*")
    m.join()
    h.settle(m)
    assert h.assigned("m") == {"orders": {0}}
    epoch = h.epochs()[0]
    h.create_topic("orders-2", 2)
    h.create_topic("payments", 2)
    h.advance(500)
    result = h.ok(m.poll())
    assert h.epochs()[0] == epoch + 1
    assert h.named(result.assignment) == {"orders": {0}, "orders-2": {0, 1}}


def test_item_86_empty_regex_is_no_regex() -> None:
    """Item 86: regex "" with names [a] is a plain name subscription ("" is never "match everything")."""
    h = ConsumerHarness(topics={"a": 2, "b": 2})
    result = h.ok(h.cjoin("m", names=["a"], regex=""))
    assert h.named(result.assignment) == {"a": {0, 1}}
    (member,) = h.describe_group().members
    assert member.subscribed_topic_regex == "" and member.subscribed_topic_names == ("a",)


def test_item_87_regex_includes_internal_topics() -> None:
    """Item 87: regex ".*" includes internal topics such as __consumer_offsets (no ACLs here)."""
    h = ConsumerHarness(topics={"a": 1, "__consumer_offsets": 3})
    m = h.consumer("m", names=[], regex=".*")
    m.join()
    h.settle(m)
    assert h.assigned("m") == {"a": {0}, "__consumer_offsets": {0, 1, 2}}


def test_item_88_librdkafka_names_and_combined_regex() -> None:
    """Item 88: librdkafka's subscription ["^a.*", "^b.*", "c"] arrives as names [c] and regex "(^a.*)|(^b.*)" ->
    the partitions of a*, b* and c are assigned (names and regex together, section 4.9)."""
    h = ConsumerHarness(topics={"a1": 1, "a2": 1, "b1": 1, "c": 1, "ca": 1, "d": 1})
    m = h.consumer("m", names=["c"], regex="(^a.*)|(^b.*)")
    m.join()
    h.settle(m)
    assert h.assigned("m") == {"a1": {0}, "a2": {0}, "b1": {0}, "c": {0}}
    (member,) = h.describe_group().members
    assert member.subscribed_topic_regex == "(^a.*)|(^b.*)" and member.subscribed_topic_names == ("c",)
