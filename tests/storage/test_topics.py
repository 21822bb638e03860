"""The topic registry: Kafka's topic name rule and its messages, name collisions, and the partition limits."""

from __future__ import annotations

import pytest

from broker.storage.partition_log import StorageBudget
from broker.storage.topics import (
    KAFKA_MAX_RECORDS_PER_USER_OP,
    InvalidConfig,
    LogDefaults,
    TopicRegistry,
    check_configs,
    shown,
    topic_name_problem,
)

STRING_MAX_BYTES = 32_767  # a Kafka STRING's length is an int16


def registry(**limits: int) -> TopicRegistry:
    return TopicRegistry(
        auto_create=True, default_partitions=1, defaults=LogDefaults(), budget=StorageBudget(-1), **limits
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        ("a" * 250, f"Topic name is invalid: the length of '{'a' * 250}' is longer than the max allowed length 249"),
        (
            "bad name!",
            "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        ),
    ],
)
def test_kafkas_messages_for_an_illegal_name(name: str, message: str) -> None:
    """Topic.validate's InvalidTopicException messages, as CreateTopics answers them."""
    assert topic_name_problem(name) == message


@pytest.mark.parametrize("name", ["a", "a" * 249, "Topic_1.a-b", "..."])
def test_legal_names(name: str) -> None:
    assert topic_name_problem(name) is None


@pytest.mark.parametrize("name", ["x" * STRING_MAX_BYTES, "é" * (STRING_MAX_BYTES // 2)])
def test_a_name_as_long_as_a_string_can_be_is_not_quoted_whole(name: str) -> None:
    """Kafka quotes the whole name and cannot encode its answer; the quote is cut so the message fits."""
    message = topic_name_problem(name)
    assert message is not None
    assert len(message.encode()) < 1000
    assert f"({len(name)} characters)" in message


def test_shown() -> None:
    assert shown("a" * 255) == "a" * 255
    assert shown("a" * 256) == "a" * 255 + "...(256 characters)"


def test_config_errors_quote_client_input_within_a_string() -> None:
    for configs in ({"x" * STRING_MAX_BYTES: "1"}, {"retention.ms": "y" * STRING_MAX_BYTES}):
        with pytest.raises(InvalidConfig) as caught:
            check_configs(configs)
        assert len(str(caught.value).encode()) < 1000


def test_colliding_names_are_found_up_to_dot_and_underscore() -> None:
    topics = registry()
    first = topics.create("metrics.topic", 1)
    topics.create("metrics_topic", 1)  # start-up topics are not checked: both exist
    assert topics.colliding("metrics_topic") == "metrics.topic"
    assert topics.colliding("metrics.topic") == "metrics.topic"
    assert topics.colliding("other") is None
    topics.delete(first)
    assert topics.colliding("metrics.topic") == "metrics_topic"
    second = topics.get("metrics_topic")
    assert second is not None
    topics.delete(second)
    assert topics.colliding("metrics.topic") is None


def test_the_partition_limits_default_to_kafkas_records_per_operation() -> None:
    topics = registry()
    assert KAFKA_MAX_RECORDS_PER_USER_OP == 10_000
    assert (topics.max_partitions_per_request, topics.max_partitions_per_topic) == (10_000, 10_000)
    limited = registry(max_partitions_per_request=7, max_partitions_per_topic=3)
    assert (limited.max_partitions_per_request, limited.max_partitions_per_topic) == (7, 3)
