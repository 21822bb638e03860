"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs over a real socket, every supported version.

What each answer must hold is Kafka 4's (ConfigHelper, ConfigAdminManager, ConfigurationControlManager): per
resource error codes and messages, sources and synonyms, and a change that the broker then acts on.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.wire.client import Connect, part, request
from tests.wire.test_versions import versions

E = ErrorCode
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DESCRIBE, ALTER, INCREMENTAL = ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS


def describe(version: int, *resources: tuple[int, str, tuple[str, ...] | None], synonyms: bool = True) -> Any:
    return request(
        DESCRIBE,
        version,
        resources=tuple(
            part(
                DESCRIBE, version, "DescribeConfigsResource", resource_type=i8(t), resource_name=n, configuration_keys=k
            )
            for t, n, k in resources
        ),
        include_synonyms=synonyms,
        include_documentation=True,
    )


def alter(version: int, *resources: tuple[int, str, dict[str, str | None]], validate_only: bool = False) -> Any:
    return request(
        ALTER,
        version,
        resources=tuple(
            part(
                ALTER,
                version,
                "AlterConfigsResource",
                resource_type=i8(t),
                resource_name=n,
                configs=tuple(part(ALTER, version, "AlterableConfig", name=k, value=v) for k, v in c.items()),
            )
            for t, n, c in resources
        ),
        validate_only=validate_only,
    )


def incremental(
    version: int, *resources: tuple[int, str, list[tuple[str, int, str | None]]], validate_only: bool = False
) -> Any:
    return request(
        INCREMENTAL,
        version,
        resources=tuple(
            part(
                INCREMENTAL,
                version,
                "AlterConfigsResource",
                resource_type=i8(t),
                resource_name=n,
                configs=tuple(
                    part(INCREMENTAL, version, "AlterableConfig", name=k, config_operation=i8(op), value=v)
                    for k, op, v in c
                ),
            )
            for t, n, c in resources
        ),
        validate_only=validate_only,
    )


def by_name(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def outcome(response: Any) -> list[tuple[ErrorCode, str | None]]:
    return [(r.error_code, r.error_message) for r in response.responses]


@pytest.mark.parametrize("version", versions(DESCRIBE))
async def test_describe_topic(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    server.topics.get("topic").replace_configs({"retention.ms": "5000"})  # type: ignore[union-attr]
    response = await client.call(describe(version, (TOPIC, "topic", None)))
    (result,) = response.results
    assert (result.error_code, result.error_message, result.resource_name) == (E.none, None, "topic")
    configs = by_name(result)
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("5000", TOPIC_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "5000", TOPIC_CONFIG),
        ("log.retention.ms", "604800000", DEFAULT_CONFIG),
    ]
    assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == ("delete", DEFAULT_CONFIG)
    assert configs["max.message.bytes"].value == "1048588"
    if version >= 3:
        assert retention.config_type == 5  # LONG
        assert configs["cleanup.policy"].config_type == 7  # LIST
        assert retention.documentation


@pytest.mark.parametrize("version", versions(DESCRIBE))
async def test_describe_filters_and_refusals(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(
        describe(
            version,
            (TOPIC, "topic", ("retention.ms", "segment.bytes", "no.such.config")),
            (TOPIC, "missing", None),
            (TOPIC, "bad name!", None),
            (BROKER, "7", None),
            (BROKER, "one", None),
            (BROKER, "", None),
            (BROKER_LOGGER, "1", None),
            (99, "x", None),
            synonyms=False,
        )
    )
    filtered, missing, bad, other, not_int, cluster, logger, unknown = response.results
    assert sorted(by_name(filtered)) == ["retention.ms", "segment.bytes"]
    assert all(not c.synonyms for c in filtered.configs)
    assert (missing.error_code, missing.error_message, missing.configs) == (E.unknown_topic_or_partition, None, ())
    assert bad.error_code == E.invalid_topic_exception
    assert (other.error_code, other.error_message) == (
        E.invalid_request,
        "Unexpected broker id, expected 1 or empty string, but received 7",
    )
    assert (not_int.error_code, not_int.error_message) == (
        E.invalid_request,
        "Broker id must be an integer, but it is: one",
    )
    assert (cluster.error_code, cluster.configs) == (E.none, ())
    assert (logger.error_code, logger.error_message) == (E.invalid_request, "Unsupported resource type: BROKER_LOGGER")
    assert (unknown.error_code, unknown.error_message) == (E.invalid_request, "Unsupported resource type: UNKNOWN")
    assert (unknown.resource_type, unknown.resource_name) == (99, "x")


@pytest.mark.parametrize("version", versions(DESCRIBE))
async def test_describe_broker(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(describe(version, (BROKER, "1", None)))
    (result,) = response.results
    assert result.error_code == E.none
    configs = by_name(result)
    for name, value in {
        "broker.id": "1",
        "node.id": "1",
        "num.partitions": "1",
        "log.retention.ms": "604800000",
        "auto.create.topics.enable": "true",
        "message.max.bytes": "1048588",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "min.insync.replicas": "1",
    }.items():
        assert configs[name].value == value, name
        assert configs[name].read_only
    # Set away from Kafka's defaults by the test settings / fixed by being one broker.
    assert configs["group.initial.rebalance.delay.ms"].config_source == STATIC_BROKER_CONFIG
    assert configs["offsets.topic.replication.factor"].config_source == STATIC_BROKER_CONFIG
    assert configs["num.partitions"].config_source == DEFAULT_CONFIG


@pytest.mark.parametrize("version", versions(ALTER))
async def test_alter_configs_replaces_the_set(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    topic = server.topics.get("topic")
    assert topic is not None
    topic.replace_configs({"retention.bytes": "100", "cleanup.policy": "delete"})
    response = await client.call(alter(version, (TOPIC, "topic", {"retention.ms": "1000"}), validate_only=True))
    assert outcome(response) == [(E.none, None)]
    assert topic.configs == {"retention.bytes": "100", "cleanup.policy": "delete"}
    response = await client.call(alter(version, (TOPIC, "topic", {"retention.ms": "1000"})))
    assert outcome(response) == [(E.none, None)]
    assert topic.configs == {"retention.ms": "1000"}
    assert (topic.retention_ms, topic.retention_bytes) == (1000, -1)
    described = await client.call(describe(4, (TOPIC, "topic", ("retention.ms",))))
    assert described.results[0].configs[0].value == "1000"


@pytest.mark.parametrize("version", versions(ALTER))
async def test_alter_configs_refusals(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(
        alter(
            version,
            (TOPIC, "topic", {"no.such": "1"}),
            (TOPIC, "missing", {"retention.ms": "1"}),
            (BROKER, "1", {"num.partitions": "3"}),
            (BROKER, "2", {}),
            (BROKER_LOGGER, "1", {"root": "DEBUG"}),
        )
    )
    assert outcome(response) == [
        (E.invalid_config, "Unknown topic config name: no.such"),
        (E.unknown_topic_or_partition, "The topic 'missing' does not exist."),
        (E.invalid_request, "Cannot update these configs dynamically: Set(num.partitions)"),
        (E.invalid_request, "Unexpected broker id, expected 1 or empty string, but received 2"),
        (
            E.invalid_request,
            "AlterConfigs is only supported for topics and brokers, but resource type is BROKER_LOGGER",
        ),
    ]
    response = await client.call(alter(version, (TOPIC, "topic", {"retention.ms": "soon"})))
    assert outcome(response) == [(E.invalid_config, "Invalid value soon for configuration retention.ms")]
    response = await client.call(alter(version, (TOPIC, "topic", {"retention.ms": None})))
    assert outcome(response) == [(E.invalid_request, "Null value not supported for : retention.ms")]
    response = await client.call(alter(version, (TOPIC, "topic", {}), (TOPIC, "topic", {})))
    assert outcome(response) == [(E.invalid_request, "Duplicate resource.")] * 2
    response = await client.call(alter(version, (BROKER, "", {})))  # nothing to change: nothing refused
    assert outcome(response) == [(E.none, None)]
    assert server.topics.get("topic").configs == {}  # type: ignore[union-attr]


@pytest.mark.parametrize("version", versions(INCREMENTAL))
async def test_incremental_alter_configs(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    topic = server.topics.get("topic")
    assert topic is not None
    topic.replace_configs({"retention.bytes": "100"})
    ops = [("retention.ms", SET, "2000"), ("retention.bytes", DELETE, None), ("cleanup.policy", APPEND, "compact")]
    response = await client.call(incremental(version, (TOPIC, "topic", ops), validate_only=True))
    assert outcome(response) == [(E.none, None)]
    assert topic.configs == {"retention.bytes": "100"}
    response = await client.call(incremental(version, (TOPIC, "topic", ops)))
    assert outcome(response) == [(E.none, None)]
    assert topic.configs == {"retention.ms": "2000", "cleanup.policy": "delete,compact"}
    assert topic.retention_ms == 2000
    response = await client.call(incremental(version, (TOPIC, "topic", [("cleanup.policy", SUBTRACT, "delete")])))
    assert outcome(response) == [(E.none, None)]
    assert topic.configs == {"retention.ms": "2000", "cleanup.policy": "compact"}


@pytest.mark.parametrize("version", versions(INCREMENTAL))
async def test_incremental_alter_configs_refusals(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(
        incremental(
            version,
            (TOPIC, "topic", [("retention.ms", APPEND, "5")]),
            (TOPIC, "missing", [("retention.ms", SET, "5")]),
            (BROKER, "1", [("log.retention.ms", SET, "5")]),
            (BROKER, "x", []),
        )
    )
    assert outcome(response) == [
        (E.invalid_config, "Can't APPEND to key retention.ms because its type is not LIST."),
        (E.unknown_topic_or_partition, "The topic 'missing' does not exist."),
        (E.invalid_request, "Cannot update these configs dynamically: Set(log.retention.ms)"),
        (E.invalid_request, "Broker id must be an integer, but it is: x"),
    ]
    cases = [
        ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], E.invalid_request, "duplicate config keys"),
        ([("retention.ms", SET, None)], E.invalid_request, "Null value not supported for : SET:retention.ms"),
        ([("retention.ms", 9, "1")], E.invalid_request, "Unknown alter config operation type 9"),
        ([("no.such", DELETE, None)], E.invalid_config, "Unknown topic config name: no.such"),
        ([("max.message.bytes", SET, "-5")], E.invalid_config, "Invalid value -5 for configuration max.message.bytes"),
    ]
    for ops, error, message in cases:
        ((code, text),) = outcome(await client.call(incremental(version, (TOPIC, "topic", ops))))
        assert code == error and text is not None and message in text, (ops, code, text)
    assert server.topics.get("topic").configs == {}  # type: ignore[union-attr]


async def test_altered_retention_is_enforced(server: BrokerServer, connect: Connect) -> None:
    """retention.ms set through IncrementalAlterConfigs is what the retention pass uses."""
    client = await connect()
    topic = server.topics.get("topic")
    assert topic is not None
    response = await client.call(incremental(1, (TOPIC, "topic", [("retention.ms", SET, "1000")])))
    assert outcome(response) == [(E.none, None)]
    assert topic.retention_ms == 1000
    response = await client.call(alter(2, (TOPIC, "topic", {"retention.bytes": "0"})))
    assert outcome(response) == [(E.none, None)]
    assert (topic.retention_ms, topic.retention_bytes) == (604_800_000, 0)
