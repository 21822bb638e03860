"""The pytest plugin as a user meets it: generated test files run by a fresh pytest, which loads the plugin
through its ``pytest11`` entry point."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# What a user of asyncio tests writes in their own configuration (the repo's does not apply in pytester's dir).
INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""

# Each test appends the bootstrap it saw, so the outer test can count the brokers.
SCOPE_TESTS = """
def test_first(group_broker):
    with open("bootstraps.txt", "a") as out:
        out.write(group_broker.bootstrap + "\\n")

def test_second(group_broker):
    with open("bootstraps.txt", "a") as out:
        out.write(group_broker.bootstrap + "\\n")
"""

CLIENT_TESTS = """
import asyncio
import time
import uuid


def names(prefix):
    return f"{prefix}-topic-{uuid.uuid4()}", f"{prefix}-group-{uuid.uuid4()}"


def test_kafka_python(group_broker):
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = names("kp")
    producer = KafkaProducer(bootstrap_servers=group_broker.bootstrap)
    producer.send(topic, b"hello").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=group_broker.bootstrap, group_id=group, auto_offset_reset="earliest"
    )
    try:
        consumer.partitions_for_topic(topic)  # join knowing the topic (docs/pytest-plugin.md)
        records, deadline = [], time.monotonic() + 20
        while not records and time.monotonic() < deadline:
            records = [r for batch in consumer.poll(timeout_ms=500).values() for r in batch]
        assert [r.value for r in records] == [b"hello"]
        detail = group_broker.wait_for(group, state="Stable", members=1, timeout=10)
        assert detail["members"][0]["assignment"] == {topic: [0]}
    finally:
        consumer.close()


async def test_aiokafka(group_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic, group = names("aio")
    producer = AIOKafkaProducer(bootstrap_servers=group_broker.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"hello")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=group_broker.bootstrap, group_id=group, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        # The consumer joins on this loop while the wait runs in a thread.
        detail = await group_broker.aio.wait_for(group, state="Stable", members=1, timeout=10)
        assert detail["members"][0]["assignment"] == {topic: [0]}
        record = await asyncio.wait_for(consumer.getone(), 10)
        assert record.value == b"hello"
    finally:
        await consumer.stop()


def test_confluent_kafka(group_broker):
    from confluent_kafka import Consumer, Producer

    topic, group = names("ck")
    producer = Producer({"bootstrap.servers": group_broker.bootstrap})
    producer.produce(topic, b"hello")
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": group_broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    try:
        message, deadline = None, time.monotonic() + 20
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        assert message.value() == b"hello"
        group_broker.wait_for(group, state="Stable", members=1, timeout=10)
    finally:
        consumer.close()
"""

REBALANCE_TESTS = """
import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer


@pytest.fixture(scope="session")
def group_broker_settings():
    return {"topics": {"rebalances": 1}}


@pytest.fixture
async def member(group_broker):
    group = f"rebalance-{uuid.uuid4()}"
    consumer = AIOKafkaConsumer(
        "rebalances", bootstrap_servers=group_broker.bootstrap, group_id=group, heartbeat_interval_ms=200
    )
    await consumer.start()
    detail = await group_broker.aio.wait_for(group, state="Stable", members=1, timeout=10)
    yield group, detail["members"][0]["member_id"]
    await consumer.stop()


async def test_quiet_group_passes(group_broker, member):
    group, _ = member
    async with group_broker.no_rebalance(group) as check:
        await asyncio.sleep(0.3)
    assert check.rebalances == []


async def test_kick_inside_no_rebalance_fails(group_broker, member):
    group, member_id = member
    async with group_broker.no_rebalance(group):
        await group_broker.aio.kick(group, member_id)


async def test_kick_inside_expect_rebalance_passes(group_broker, member):
    group, member_id = member
    async with group_broker.expect_rebalance(group, cause="member_kicked") as check:
        await group_broker.aio.kick(group, member_id)
    assert [r["member_id"] for r in check.rebalances] == [member_id]
    await group_broker.aio.wait_for(group, state="Stable", members=1, timeout=10)  # aiokafka rejoins


def test_sync_forms(group_broker):
    from kafka import KafkaConsumer

    group = f"sync-{uuid.uuid4()}"
    consumer = KafkaConsumer("rebalances", bootstrap_servers=group_broker.bootstrap, group_id=group)
    try:
        consumer.partitions_for_topic("rebalances")
        # kafka-python rebalances only inside poll(): wait_for keeps polling it.
        group_broker.wait_for(group, state="Stable", members=1, timeout=10, poll=lambda: consumer.poll(100))
        # kafka-python rejoins once when the metadata it assigned from is older than its next refresh (a client
        # race, seen once on a loaded CI machine, as it would be against Kafka): let that settle first.
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle:
            consumer.poll(100)
        group_broker.wait_for(group, state="Stable", members=1, timeout=10, poll=lambda: consumer.poll(100))
        with group_broker.no_rebalance(group):
            consumer.poll(timeout_ms=300)
        with group_broker.expect_rebalance(group, cause="forced"):
            group_broker.rebalance(group)
    finally:
        consumer.close()


def test_expect_rebalance_without_one_fails(group_broker):
    with group_broker.expect_rebalance(f"idle-{uuid.uuid4()}", cause="forced", timeout=0.2):
        pass
"""

FAULT_AND_EVENT_TESTS = """
import asyncio
import uuid

from aiokafka import AIOKafkaConsumer


async def test_fault_rule_is_seen_then_gone(group_broker):
    group = f"faults-{uuid.uuid4()}"
    consumer = AIOKafkaConsumer(
        "faults", bootstrap_servers=group_broker.bootstrap, group_id=group, heartbeat_interval_ms=100
    )
    await consumer.start()
    try:
        first = await group_broker.aio.wait_for(group, state="Stable", members=1, timeout=10)
        since = group_broker.last_seq(group)
        with group_broker.fault("Heartbeat", error="REBALANCE_IN_PROGRESS", group_id=group, count=1) as rule:
            assert [f["id"] for f in group_broker.faults()] == [rule.id]
            again = await group_broker.aio.wait_for(
                group, state="Stable", min_generation=first["generation_id"] + 1, timeout=10
            )
            assert rule.hits() == 1, (rule.hits(), group_broker.faults())
        assert group_broker.faults() == []
        seen = [e["event"] for e in group_broker.events(group, since_seq=since)]
        # Said in full when it fails: a CI run once failed here and its output was cut.
        assert again["members"][0]["member_id"] == first["members"][0]["member_id"], (first, again, seen)
        assert "member_rejoined" in seen and "rebalance_started" in seen, (first, again, seen)
    finally:
        await consumer.stop()


async def test_events(group_broker):
    group = f"events-{uuid.uuid4()}"
    consumer = AIOKafkaConsumer("events", bootstrap_servers=group_broker.bootstrap, group_id=group)
    await consumer.start()
    try:
        await group_broker.aio.wait_for(group, state="Stable", timeout=10)
    finally:
        await consumer.stop()
    names = [e["event"] for e in await group_broker.aio.events(group)]
    for name in ("group_created", "member_joined", "join_completed", "sync_completed", "member_left"):
        assert name in names
    everything = group_broker.events()
    assert [e["seq"] for e in everything] == sorted(e["seq"] for e in everything)
    assert {e["group_id"] for e in everything} >= {group}
    assert group_broker.events(f"never-{uuid.uuid4()}") == []


def test_wait_for_times_out_on_missing_group(group_broker):
    group_broker.wait_for("nobody-home", state="Stable", timeout=0.2)


async def test_wait_for_times_out_with_the_group_state(group_broker):
    group = "crowd-of-one"
    consumer = AIOKafkaConsumer("events", bootstrap_servers=group_broker.bootstrap, group_id=group)
    await consumer.start()
    try:
        await group_broker.aio.wait_for(group, state="Stable", timeout=10)
        await group_broker.aio.wait_for(group, members=3, timeout=0.2)
    finally:
        await consumer.stop()
"""

SETTINGS_TESTS = """
import pytest


@pytest.fixture(scope="session")
def group_broker_settings():
    return {"topics": {"four": 4}, "group": {"min_session_timeout_ms": 3000}}


def test_overrides_apply(group_broker):
    from kafka import KafkaConsumer

    assert group_broker.settings.group.min_session_timeout_ms == 3000
    assert group_broker.settings.group.initial_rebalance_delay_ms == 0  # the test-friendly default stays
    consumer = KafkaConsumer(bootstrap_servers=group_broker.bootstrap)
    try:
        assert consumer.partitions_for_topic("four") == {0, 1, 2, 3}
    finally:
        consumer.close()


def test_factory_starts_another_broker(group_broker, group_broker_factory):
    other = group_broker_factory(topics={"five": 5})
    assert other.bootstrap != group_broker.bootstrap
    assert other.settings.topics == (("five", 5),)
    assert other.settings.group.min_session_timeout_ms == 3000  # over group_broker_settings
    with pytest.raises(ValueError, match="unknown broker setting"):
        group_broker_factory(topicz={"x": 1})
"""

BAD_SETTINGS_TESTS = """
import pytest


@pytest.fixture(scope="session")
def group_broker_settings():
    return {"bogus_setting": 1}


def test_never_runs(group_broker):
    pass
"""


# KIP-848 consumer groups (group.protocol=consumer) through the fixture, with the consumer-group timer options.
CONSUMER_GROUP_TESTS = """
import time
import uuid

import pytest
from confluent_kafka import Consumer


@pytest.fixture(scope="session")
def group_broker_settings():
    return {"topics": {"cg": 4}}


def test_the_options_set_the_consumer_group_timers(group_broker):
    group = group_broker.settings.group
    assert (group.consumer_session_timeout_ms, group.consumer_min_session_timeout_ms) == (1000, 1000)
    assert group.consumer_heartbeat_interval_ms == 200
    assert group.initial_rebalance_delay_ms == 0  # the test-friendly defaults stay


def test_a_consumer_group_is_waited_for_checked_and_disturbed(group_broker):
    group = f"cg-{uuid.uuid4()}"
    consumers = [
        Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group, "group.protocol": "consumer"})
        for _ in range(2)
    ]
    for consumer in consumers:
        consumer.subscribe(["cg"])

    def poll():
        for consumer in consumers:
            consumer.poll(0.05)

    try:
        assignments = group_broker.wait_for_assignment(group, members=2, timeout=20, poll=poll)
        assert sorted(p for assigned in assignments.values() for p in assigned["cg"]) == [0, 1, 2, 3]
        assert group_broker.group(group)["group_type"] == "consumer"
        with group_broker.no_rebalance(group):
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                poll()  # steady heartbeats: no epoch bump
        victim = sorted(assignments)[0]
        with group_broker.expect_rebalance(group, cause="member_kicked") as check:
            group_broker.kick(group, victim)
        assert [r["member_id"] for r in check.rebalances] == [victim]
        group_broker.wait_for(group, state="Stable", members=2, timeout=20, poll=poll)  # librdkafka re-joins
        with group_broker.no_rebalance(group):
            group_broker.kick(group, victim)
    finally:
        for consumer in consumers:
            consumer.close()


def test_a_timeout_names_the_members_not_reconciled(group_broker):
    group = f"cg-{uuid.uuid4()}"
    consumer = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group, "group.protocol": "consumer"})
    consumer.subscribe(["cg"])
    try:
        group_broker.wait_for(group, state="Stable", members=1, timeout=20, poll=lambda: consumer.poll(0.05))
        group_broker.wait_for(group, members=2, timeout=0.2)
    finally:
        consumer.close()
"""


def bootstraps(pytester: pytest.Pytester, *args: str) -> list[str]:
    log = pytester.path / "bootstraps.txt"
    log.unlink(missing_ok=True)
    result = pytester.runpytest_subprocess(*args, timeout=120)
    result.assert_outcomes(passed=4)
    return log.read_text().split()


def test_scope_session_module_function(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=SCOPE_TESTS, test_two=SCOPE_TESTS)
    assert len(set(bootstraps(pytester))) == 1  # the default: one broker for the session
    assert len(set(bootstraps(pytester, "--group-broker-scope=module"))) == 2
    assert len(set(bootstraps(pytester, "--group-broker-scope=function"))) == 4
    pytester.makeini("[pytest]\ngroup_broker_scope = function\n")
    assert len(set(bootstraps(pytester))) == 4
    assert len(set(bootstraps(pytester, "--group-broker-scope=session"))) == 1  # the option wins over the ini


def test_unknown_scope_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=SCOPE_TESTS)
    pytester.makeini("[pytest]\ngroup_broker_scope = per-test\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: group_broker_scope = 'per-test' is not a fixture scope: use one of session*"])
    result = pytester.runpytest_subprocess("--group-broker-scope=per-test")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--group-broker-scope: invalid choice: 'per-test'*"])


def test_three_clients_consume_through_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_clients=CLIENT_TESTS)
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=3)


def test_rebalance_assertions(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_rebalances=REBALANCE_TESTS)
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "E * AssertionError: group 'rebalance-*' rebalanced during the block: #* rebalance_started "
            "(cause=member_kicked, member_id=*, generation_id=1): member * was kicked through the control API",
            "E * AssertionError: expected group 'idle-*' to start a rebalance with cause 'forced' during the block "
            "(or 0.2 s after it); saw none",
        ]
    )


def test_faults_events_settings_and_wait_timeouts(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_faults=FAULT_AND_EVENT_TESTS, test_settings=SETTINGS_TESTS, test_bad_settings=BAD_SETTINGS_TESTS
    )
    # One broker per module, so each module's group_broker_settings applies to its own broker.
    result = pytester.runpytest_subprocess("--group-broker-scope=module", timeout=120)
    result.assert_outcomes(passed=4, failed=2, errors=1)
    result.stdout.fnmatch_lines_random(
        [
            "E * broker.testing.control.WaitTimeout: group 'nobody-home' did not reach state=Stable within 0.2 s: "
            "the broker has no such group",
            "E * broker.testing.control.WaitTimeout: group 'crowd-of-one' did not reach members=3 within 0.2 s: it is "
            "Stable, generation 1, 1 member(s) *aiokafka-*; latest events: *sync_completed*",
            "E * ValueError: unknown broker setting(s) *bogus_setting*; the settings are the fields of "
            "broker.config.settings.Settings: *topics*",
        ]
    )


def test_plugin_imports_no_broker_code() -> None:
    """pytest loads the plugin in every run wherever the package is installed: it must stay cheap."""
    code = textwrap.dedent(
        """
        import sys
        import broker.testing.pytest_plugin
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("aiohttp", "kio", "uvloop", "structlog")
                       or m in ("broker.testing.embedded", "broker.testing.control", "broker.server.broker",
                                "broker.config.settings"))
        print(heavy)
        """
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_the_readme_example_runs_as_written(pytester: pytest.Pytester) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### In a pytest suite", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makepyfile(test_readme="from kafka import KafkaConsumer\n\n\n" + example)
    try:
        result = pytester.runpytest_subprocess(timeout=45)
    except pytester.TimeoutExpired:
        # kafka-python 3.0.12 sometimes never wakes from ensure_coordinator_ready: its caller thread waits on an
        # Event for a coroutine its idle IO thread never runs (seen on trees from before this test's last change
        # too, about one run in four on a 2-core machine, never with its debug logging on). One more run tells that
        # race from a broken example, which fails both.
        result = pytester.runpytest_subprocess(timeout=45)
    result.assert_outcomes(passed=1)


def test_consumer_groups_with_the_timer_options(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI + "group_broker_consumer_heartbeat_interval_ms = 200\n")
    pytester.makepyfile(test_consumer_groups=CONSUMER_GROUP_TESTS)
    result = pytester.runpytest_subprocess("--group-broker-consumer-session-timeout-ms=1000", timeout=120)
    result.assert_outcomes(passed=1, failed=2)  # both failures are meant: the messages below
    result.stdout.fnmatch_lines_random(
        [
            "E * AssertionError: group 'cg-*' rebalanced during the block: #* group_epoch_bumped "
            "(cause=member_kicked, member_id=*, group_epoch=*)",
            "E * broker.testing.control.WaitTimeout: group 'cg-*' did not reach members=2 within 0.2 s: it is "
            "Stable, epoch * (target assignment *), 1 member(s) *; latest events: *state_changed*",
        ]
    )


def test_a_bad_consumer_timer_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=SCOPE_TESTS)
    result = pytester.runpytest_subprocess("--group-broker-consumer-session-timeout-ms=soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: group_broker_consumer_session_timeout_ms = 'soon' is not a positive number of milliseconds"]
    )
