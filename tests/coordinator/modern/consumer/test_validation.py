"""ConsumerGroupHeartbeat request validation: checklist items 6-18 and 21 of ``docs/spec/consumer-groups.md``
section 13 (rules of section 4.3, error responses of 4.15).

Items 19 and 20 (topic and group ACLs) and 1-5 are wire level (tests/wire).
"""

from __future__ import annotations

from broker.coordinator.messages import ConsumerHeartbeatResult
from tests.coordinator.modern.consumer.harness import GROUP, INTERVAL_MS, ConsumerHarness, E

INVALID = E.invalid_request


def refused(result: ConsumerHeartbeatResult, error: E, message: str) -> None:
    """Section 4.15: the error, Kafka's message, and nothing else."""
    assert result == ConsumerHeartbeatResult(error, message, None, 0, 0, None)


def test_item_6_v1_join_with_empty_member_id() -> None:
    """Item 6: HB v1 epoch 0 with MemberId "" -> INVALID_REQUEST "MemberId can't be empty."."""
    h = ConsumerHarness()
    refused(h.cjoin(""), INVALID, "MemberId can't be empty.")
    assert GROUP not in h.coordinator.consumer_groups


def test_item_7_v0_join_with_empty_member_id_gets_a_generated_id() -> None:
    """Item 7: HB v0 epoch 0 with MemberId "" -> success, a new non-empty member id, epoch 1."""
    h = ConsumerHarness()
    result = h.ok(h.cjoin("", version=0))
    assert result.member_id and result.member_epoch == 1
    assert len(result.member_id) == 22  # Kafka's Uuid in URL-safe base64, as the Java broker makes it
    assert list(h.cgroup().members) == [result.member_id]
    assert h.named(result.assignment) == {"t": {0, 1, 2, 3}}


def test_item_8_v0_heartbeat_with_empty_member_id() -> None:
    """Item 8: HB v0 epoch 3 with MemberId "" -> INVALID_REQUEST "MemberId can't be empty."; v0 leave likewise."""
    h = ConsumerHarness()
    refused(h.hb("", 3, version=0), INVALID, "MemberId can't be empty.")
    refused(h.hb("", -1, version=0), INVALID, "MemberId can't be empty.")


def test_item_9_blank_group_id() -> None:
    """Item 9: GroupId "" or "   " -> INVALID_REQUEST "GroupId can't be empty." (not INVALID_GROUP_ID)."""
    h = ConsumerHarness()
    for group_id in ("", "   "):
        refused(h.cjoin("m", group_id=group_id), INVALID, "GroupId can't be empty.")
    assert not h.coordinator.consumer_groups


def test_item_10_blank_instance_id_and_rack_id() -> None:
    """Item 10: InstanceId "" -> "InstanceId can't be empty."; RackId " " -> "RackId can't be empty."."""
    h = ConsumerHarness()
    refused(h.cjoin("m", instance_id=""), INVALID, "InstanceId can't be empty.")
    refused(h.cjoin("m", rack_id=" "), INVALID, "RackId can't be empty.")
    assert not h.coordinator.consumer_groups


def test_item_11_join_without_rebalance_timeout() -> None:
    """Item 11: a join with RebalanceTimeoutMs -1 -> "RebalanceTimeoutMs must be provided in first request."."""
    h = ConsumerHarness()
    refused(h.cjoin("m", rebalance_ms=-1), INVALID, "RebalanceTimeoutMs must be provided in first request.")


def test_item_12_join_with_null_or_non_empty_topic_partitions() -> None:
    """Item 12: a join with TopicPartitions null, or non-empty -> "TopicPartitions must be empty when (re-)joining."."""
    h = ConsumerHarness()
    message = "TopicPartitions must be empty when (re-)joining."
    refused(h.hb("m", 0, rebalance_ms=30_000, names=["t"]), INVALID, message)
    refused(h.cjoin("m", owned={"t": [0]}), INVALID, message)
    assert not h.coordinator.consumer_groups


def test_item_13_join_without_names_or_regex() -> None:
    """Item 13: a join with SubscribedTopicNames and SubscribedTopicRegex both null -> INVALID_REQUEST."""
    h = ConsumerHarness()
    refused(
        h.cjoin("m", names=None),
        INVALID,
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
    )


def test_item_14_join_with_empty_names_list() -> None:
    """Item 14: a join with SubscribedTopicNames [] -> success; the member is in the group with nothing assigned."""
    h = ConsumerHarness()
    result = h.ok(h.cjoin("m", names=[]))
    assert result.member_epoch == 1 and result.heartbeat_interval_ms == INTERVAL_MS
    assert result.assignment == ()  # present (epoch-0 request) and empty
    assert h.assigned("m") == {} and h.target("m") == {}


def test_item_15_static_leave_without_instance_id() -> None:
    """Item 15: HB(-2) without InstanceId -> "InstanceId can't be null."."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    refused(h.hb("m", -2), INVALID, "InstanceId can't be null.")
    assert h.member("m").member_epoch == 1


def test_item_16_epoch_below_minus_two() -> None:
    """Item 16: HB(-3) -> "MemberEpoch is invalid."."""
    h = ConsumerHarness()
    refused(h.hb("m", -3), INVALID, "MemberEpoch is invalid.")


def test_item_17_unknown_server_assignor() -> None:
    """Item 17: ServerAssignor "foo" -> UNSUPPORTED_ASSIGNOR, the message lists the configured assignors."""
    h = ConsumerHarness()
    refused(
        h.cjoin("m", assignor="foo"),
        E.unsupported_assignor,
        "ServerAssignor foo is not supported. Supported assignors: uniform, range.",
    )
    # The comparison is exact (section 4.3): case matters.
    assert h.cjoin("m", assignor="Range").error is E.unsupported_assignor
    assert not h.coordinator.consumer_groups


def test_item_18_range_assignor_is_accepted_and_described() -> None:
    """Item 18: ServerAssignor "range" -> accepted; ConsumerGroupDescribe shows AssignorName "range"."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m", assignor="range"))
    assert h.describe_group().assignor_name == "range"


def test_item_21_validation_errors_carry_no_member_fields() -> None:
    """Item 21: validation errors carry MemberEpoch 0, HeartbeatIntervalMs 0, MemberId null, Assignment null and the
    message, and change nothing (4.15), also for a known member."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    h.advance(1_000)
    before = (h.epochs(), h.member("m").member_epoch, h.member("m").rack_id, h.session_due("m"))
    refused(h.hb("m", 1, rack_id=""), INVALID, "RackId can't be empty.")
    refused(
        h.hb("m", 1, assignor="nope"),
        E.unsupported_assignor,
        "ServerAssignor nope is not supported. Supported assignors: uniform, range.",
    )
    # Nothing changed, and the session was not refreshed.
    assert (h.epochs(), h.member("m").member_epoch, h.member("m").rack_id, h.session_due("m")) == before
