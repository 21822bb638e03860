"""The consumer protocol codec against our own encoder and the real clients' encoders.

kafka-python (its JSON-schema ``ConsumerProtocolSubscription``/``Assignment`` and the legacy
``ConsumerProtocolMemberMetadata_v0``), aiokafka (``aiokafka.coordinator.protocol``), kio (generated
from Kafka's own JSON) and every assignor they ship encode in-process; librdkafka does not, so its
payloads below were captured from confluent-kafka 2.16.1 (librdkafka 2.16.0) joining this broker.
"""

from __future__ import annotations

import io
import struct
from dataclasses import replace
from typing import Any

import pytest

from broker.coordinator import consumer_protocol
from broker.coordinator.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

FULL = Subscription(
    version=3,
    topics=("orders", "payments"),
    user_data=b"\x00\x01sticky",
    owned_partitions=(("orders", (0, 2)), ("payments", (1,))),
    generation_id=7,
    rack_id="rack-a",
)


def at_version(version: int) -> Subscription:
    """FULL as a client at ``version`` would send it: later fields keep their defaults."""
    return Subscription(
        version=version,
        topics=FULL.topics,
        user_data=FULL.user_data,
        owned_partitions=FULL.owned_partitions if version >= 1 else (),
        generation_id=FULL.generation_id if version >= 2 else -1,
        rack_id=FULL.rack_id if version >= 3 else None,
    )


# -- our own encoder ---------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trips_every_version(version: int) -> None:
    subscription = at_version(version)
    assert decode_subscription(encode_subscription(subscription)) == subscription


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_round_trips_every_version(version: int) -> None:
    assignment = Assignment(version, (("orders", (0, 1, 5)), ("payments", ())), b"data")
    assert decode_assignment(encode_assignment(assignment)) == assignment


def test_v0_subscription_layout_by_hand() -> None:
    raw = bytes.fromhex("0000 00000002 0001 61 0002 6262 ffffffff")
    assert decode_subscription(raw) == Subscription(0, ("a", "bb"), None)
    assert encode_subscription(Subscription(0, ("a", "bb"), None)) == raw


def test_v3_subscription_layout_by_hand() -> None:
    raw = bytes.fromhex(
        "0003"  # version
        " 00000001 0001 74"  # topics ["t"]
        " 00000000"  # user_data b""
        " 00000001 0001 74 00000002 00000000 00000003"  # owned [t: 0, 3]
        " 00000009"  # generation_id
        " ffff"  # rack_id null
    )
    assert decode_subscription(raw) == Subscription(3, ("t",), b"", (("t", (0, 3)),), 9, None)


def test_null_and_empty_user_data_stay_apart() -> None:
    null = decode_subscription(encode_subscription(Subscription(0, ("t",), None)))
    empty = decode_subscription(encode_subscription(Subscription(0, ("t",), b"")))
    assert (null.user_data, empty.user_data) == (None, b"")
    assert decode_assignment(encode_assignment(Assignment(0, (), None))).user_data is None
    assert decode_assignment(encode_assignment(Assignment(0, (), b""))).user_data == b""


def test_empty_bytes_are_the_empty_assignment() -> None:
    assert decode_assignment(b"") == Assignment(0, (), None)


def test_encoder_drops_fields_the_version_does_not_have() -> None:
    # Kafka marks OwnedPartitions, GenerationId and RackId "ignorable": written only from their version on.
    assert encode_subscription(Subscription(0, FULL.topics, None, FULL.owned_partitions, 5, "r")) == (
        encode_subscription(Subscription(0, FULL.topics, None))
    )


def test_future_subscription_decodes_by_its_v3_prefix() -> None:
    v4 = encode_subscription(replace(FULL, version=4)) + b"\x00\x00\x00\x2a" + b"a v4 field"
    assert decode_subscription(v4) == replace(FULL, version=4)


def test_future_assignment_ignores_trailing_fields() -> None:
    v9 = encode_assignment(Assignment(9, (("t", (1,)),), None)) + b"\xff\xff"
    assert decode_assignment(v9) == Assignment(9, (("t", (1,)),), None)


# -- malformed input ----------------------------------------------------------------------


def test_every_truncation_of_a_subscription_is_an_error() -> None:
    raw = encode_subscription(FULL)
    for end in range(len(raw)):
        with pytest.raises(ConsumerProtocolError):
            decode_subscription(raw[:end])


def test_every_truncation_of_an_assignment_is_an_error() -> None:
    raw = encode_assignment(Assignment(0, (("orders", (0, 1)), ("payments", (2,))), b"xy"))
    for end in range(1, len(raw)):  # b"" itself is the empty assignment
        with pytest.raises(ConsumerProtocolError):
            decode_assignment(raw[:end])


def test_negative_versions_are_errors() -> None:
    with pytest.raises(ConsumerProtocolError, match="negative version"):
        decode_subscription(struct.pack(">hi", -1, 0) + struct.pack(">i", -1))
    with pytest.raises(ConsumerProtocolError, match="negative version"):
        decode_assignment(struct.pack(">hi", -3, 0) + struct.pack(">i", -1))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (struct.pack(">hi", 0, -1), "negative array length"),
        (struct.pack(">hih", 0, 1, -2), "negative string length"),
        (struct.pack(">hih", 0, 1, -1) + struct.pack(">i", -1), "null string"),
        (struct.pack(">hi", 0, 0) + struct.pack(">i", -2), "negative bytes length"),
        (struct.pack(">hi", 0, 0x7FFFFFFF), "truncated array"),
        (struct.pack(">hih", 0, 1, 2) + b"\xff\xfe" + struct.pack(">i", -1), "not UTF-8"),
        (struct.pack(">hi", 1, 0) + struct.pack(">ii", -1, -5), "negative array length"),
        (struct.pack(">hi", 3, 0) + struct.pack(">iiih", -1, 0, -1, -7), "negative string length"),
    ],
)
def test_malformed_subscriptions(raw: bytes, message: str) -> None:
    with pytest.raises(ConsumerProtocolError, match=message):
        decode_subscription(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (struct.pack(">hi", 0, -1), "negative array length"),
        (struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -4), "negative array length"),
        (struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", 1000), "truncated array"),
        (struct.pack(">hi", 0, 0) + struct.pack(">i", -9), "negative bytes length"),
        (b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05abc", "truncated bytes"),
    ],
)
def test_malformed_assignments(raw: bytes, message: str) -> None:
    with pytest.raises(ConsumerProtocolError, match=message):
        decode_assignment(raw)


def test_the_error_is_a_value_error() -> None:
    assert issubclass(ConsumerProtocolError, ValueError)


def test_encoder_rejects_what_the_wire_cannot_carry() -> None:
    with pytest.raises(ConsumerProtocolError):
        encode_subscription(Subscription(-1, (), None))
    with pytest.raises(ConsumerProtocolError):
        encode_assignment(Assignment(0x8000, (), None))
    with pytest.raises(ConsumerProtocolError):
        encode_assignment(Assignment(0, (("t", (2**31,)),), None))


# -- kafka-python -----------------------------------------------------------------------


def kafka_python_subscription(version: int, subscription: Subscription) -> bytes:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    tp = ConsumerProtocolSubscription.TopicPartition
    encoded: bytes = ConsumerProtocolSubscription(
        version=version,
        topics=list(subscription.topics),
        user_data=subscription.user_data,
        owned_partitions=[tp(topic=t, partitions=list(p)) for t, p in subscription.owned_partitions],
        generation_id=subscription.generation_id,
        rack_id=subscription.rack_id,
    ).encode()
    return encoded


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_subscriptions(version: int) -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    raw = kafka_python_subscription(version, FULL)
    assert decode_subscription(raw) == at_version(version)
    assert encode_subscription(at_version(version)) == raw
    theirs = ConsumerProtocolSubscription.decode(encode_subscription(at_version(version)))
    assert (theirs.version, theirs.topics, theirs.user_data) == (version, list(FULL.topics), FULL.user_data)


def test_kafka_python_subscription_defaults_are_null_user_data() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    raw = ConsumerProtocolSubscription(version=3, topics=["t"]).encode()
    assert decode_subscription(raw) == Subscription(3, ("t",), None, (), -1, None)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_assignments(version: int) -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    tp = ConsumerProtocolAssignment.TopicPartition
    for user_data in (None, b"", b"ud"):
        raw = ConsumerProtocolAssignment(
            version=version,
            assigned_partitions=[tp(topic="orders", partitions=[3, 1]), tp(topic="x", partitions=[])],
            user_data=user_data,
        ).encode()
        expected = Assignment(version, (("orders", (3, 1)), ("x", ())), user_data)
        assert decode_assignment(raw) == expected
        assert encode_assignment(expected) == raw


def test_kafka_python_future_subscription_agrees_with_ours() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    v4 = b"\x00\x04" + kafka_python_subscription(3, FULL)[2:] + b"trailing"
    theirs = ConsumerProtocolSubscription.decode(v4)
    ours = decode_subscription(v4)
    assert ours.version == 4
    assert list(ours.topics) == theirs.topics
    assert (ours.generation_id, ours.rack_id) == (theirs.generation_id, theirs.rack_id)


def test_kafka_python_legacy_struct_encoding() -> None:
    from kafka.protocol.old.consumer_protocol import (
        ConsumerProtocolMemberAssignment_v0,
        ConsumerProtocolMemberMetadata_v0,
    )

    metadata = ConsumerProtocolMemberMetadata_v0(0, ["a", "b"], b"").encode()
    assert decode_subscription(metadata) == Subscription(0, ("a", "b"), b"")
    assignment = ConsumerProtocolMemberAssignment_v0(0, [("a", [0, 1])], b"").encode()
    assert decode_assignment(assignment) == Assignment(0, (("a", (0, 1)),), b"")


def test_kafka_python_assignor_metadata() -> None:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import TopicPartition

    for assignor in (RangePartitionAssignor, RoundRobinPartitionAssignor):
        decoded = decode_subscription(assignor.metadata({"t1", "t2"}).encode())
        assert (decoded.version, sorted(decoded.topics), decoded.user_data) == (0, ["t1", "t2"], b"")

    sticky = StickyPartitionAssignor()
    assert decode_subscription(sticky.metadata({"t1"}).encode()) == Subscription(0, ("t1",), b"")
    sticky.member_assignment = [TopicPartition("t1", 0), TopicPartition("t1", 3)]
    sticky.generation = 5
    decoded = decode_subscription(sticky.metadata({"t1"}).encode())
    assert decoded.version == 0
    # The sticky assignor hides the previous assignment in user_data: StickyAssignorUserData v1, which
    # kafka-python writes WITH an int16 version header (Java and librdkafka write the struct without one).
    assert decoded.user_data == bytes.fromhex("0001 00000001 0002 7431 00000002 00000000 00000003 00000005")

    cooperative = CooperativeStickyAssignor()
    assert decode_subscription(cooperative.metadata({"t1"}).encode()) == Subscription(1, ("t1",), b"")
    cooperative.member_assignment = [TopicPartition("t1", 2), TopicPartition("t1", 0)]
    # KIP-429: v1, owned partitions in their own field (sorted by the client), generation not sent.
    decoded = decode_subscription(cooperative.metadata({"t1"}).encode())
    assert decoded == Subscription(1, ("t1",), b"", (("t1", (0, 2)),))


# -- aiokafka ---------------------------------------------------------------------------


def test_aiokafka_protocol_structs() -> None:
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

    for user_data in (b"", None, b"\x01\x02"):
        metadata = ConsumerProtocolMemberMetadata(0, ["a", "bb"], user_data).encode()
        assert decode_subscription(metadata) == Subscription(0, ("a", "bb"), user_data)
        assert encode_subscription(Subscription(0, ("a", "bb"), user_data)) == metadata
        assignment = ConsumerProtocolMemberAssignment(0, [("a", [0, 1]), ("bb", [4])], user_data).encode()
        assert decode_assignment(assignment) == Assignment(0, (("a", (0, 1)), ("bb", (4,))), user_data)
        assert encode_assignment(Assignment(0, (("a", (0, 1)), ("bb", (4,))), user_data)) == assignment

    ours = encode_assignment(Assignment(0, (("a", (2,)),), None))
    assert ConsumerProtocolMemberAssignment.decode(ours).partitions()[0].partition == 2


def test_aiokafka_assignor_metadata() -> None:
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    for assignor in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor):
        decoded = decode_subscription(assignor.metadata(["t1", "t2"]).encode())
        assert decoded == Subscription(0, ("t1", "t2"), b"")


# -- kio (generated from Kafka's JSON definitions) ------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kio_subscriptions(version: int) -> None:
    import importlib

    from kio.serial import entity_writer

    module: Any = importlib.import_module(f"kio.schema.consumer_protocol_subscription.v{version}.data")
    fields: dict[str, Any] = {"topics": FULL.topics, "user_data": FULL.user_data}
    if version >= 1:
        tp = module.TopicPartition
        fields["owned_partitions"] = tuple(tp(topic=t, partitions=p) for t, p in FULL.owned_partitions)
    if version >= 2:
        fields["generation_id"] = FULL.generation_id
    if version >= 3:
        fields["rack_id"] = FULL.rack_id
    body = io.BytesIO()
    entity_writer(module.ConsumerProtocolSubscription)(body, module.ConsumerProtocolSubscription(**fields))
    raw = struct.pack(">h", version) + body.getvalue()
    assert decode_subscription(raw) == at_version(version)


def test_kio_assignment() -> None:
    from kio.schema.consumer_protocol_assignment.v3.data import ConsumerProtocolAssignment, TopicPartition
    from kio.serial import entity_writer

    body = io.BytesIO()
    value = ConsumerProtocolAssignment(
        assigned_partitions=(TopicPartition(topic="t", partitions=(0, 9)),), user_data=None
    )
    entity_writer(ConsumerProtocolAssignment)(body, value)
    assert decode_assignment(b"\x00\x03" + body.getvalue()) == Assignment(3, (("t", (0, 9)),), None)


# -- librdkafka (captured from confluent-kafka 2.16.1 / librdkafka 2.16.0 against this broker) ------

# range, client.rack=rackA, subscribed to ["topic", "other"]: v3, user_data empty (not null).
RDKAFKA_RANGE_SUBSCRIPTION = "00030000000200056f746865720005746f7069630000000000000000ffffffff00057261636b41"
# cooperative-sticky after generation 1: owned partitions in their field AND the sticky
# user data (previous assignment + generation) in user_data, generation_id filled in.
RDKAFKA_COOPERATIVE_SUBSCRIPTION = (
    "00030000000200056f746865720005746f706963000000360000000200056f74686572000000020000000000000001000574"
    "6f7069630000000400000000000000010000000200000003000000010000000200056f746865720000000200000000000000"
    "010005746f70696300000004000000000000000100000002000000030000000100057261636b41"
)
# The leader's range assignment: v0, topics and partitions in the client's own order, user_data empty.
RDKAFKA_RANGE_ASSIGNMENT = (
    "0000000000020005746f70696300000002000000020000000300056f7468657200000002000000000000000100000000"
)
# What a librdkafka leader sends a member that gets nothing: ten bytes, not b"".
RDKAFKA_EMPTY_ASSIGNMENT = "00000000000000000000"


def test_librdkafka_range_subscription() -> None:
    raw = bytes.fromhex(RDKAFKA_RANGE_SUBSCRIPTION)
    decoded = decode_subscription(raw)
    assert decoded == Subscription(3, ("other", "topic"), b"", (), -1, "rackA")
    assert encode_subscription(decoded) == raw


def test_librdkafka_cooperative_subscription() -> None:
    raw = bytes.fromhex(RDKAFKA_COOPERATIVE_SUBSCRIPTION)
    decoded = decode_subscription(raw)
    assert decoded.version == 3
    assert decoded.topics == ("other", "topic")
    assert decoded.owned_partitions == (("other", (0, 1)), ("topic", (0, 1, 2, 3)))
    assert (decoded.generation_id, decoded.rack_id) == (1, "rackA")
    assert decoded.user_data is not None and len(decoded.user_data) == 0x36
    assert encode_subscription(decoded) == raw


def test_librdkafka_assignments() -> None:
    raw = bytes.fromhex(RDKAFKA_RANGE_ASSIGNMENT)
    assert decode_assignment(raw) == Assignment(0, (("topic", (2, 3)), ("other", (0, 1))), b"")
    assert encode_assignment(decode_assignment(raw)) == raw
    assert decode_assignment(bytes.fromhex(RDKAFKA_EMPTY_ASSIGNMENT)) == Assignment(0, (), b"")


def test_equal_subscription_bytes_share_one_decoded_subscription() -> None:
    """A group's members mostly subscribe alike: each distinct subscription is decoded once (issue 17)."""
    raw = encode_subscription(at_version(3))
    first = decode_subscription(raw)
    assert decode_subscription(bytes(bytearray(raw))) is first  # an equal copy, as another member sends it
    assert decode_subscription(bytearray(raw)) is first
    assert first == at_version(3)


def test_the_decoded_subscriptions_stay_bounded_and_errors_are_not_kept() -> None:
    for n in range(consumer_protocol._DECODED_MAX + 10):
        decode_subscription(encode_subscription(Subscription(0, (f"topic-{n}",), None)))
    assert len(consumer_protocol._DECODED) <= consumer_protocol._DECODED_MAX
    bad = b"\x00\x00\x00\x00\x00\x09"  # claims 9 topics, has none
    for _ in range(2):
        with pytest.raises(ConsumerProtocolError):
            decode_subscription(bad)
    assert bad not in consumer_protocol._DECODED
