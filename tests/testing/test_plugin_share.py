"""The pytest plugin's share-group helpers (KIP-932, issue 28) as a user meets them: generated test files run by a
fresh pytest with the plugin, real confluent-kafka ``ShareConsumer``s and a Producer against ``group_broker``.

``wait_for_share``, ``share_records``, ``expect_redelivery`` (a RELEASE, a close, a lock expiry), ``no_redelivery``
and ``assert_nothing_archived`` (a REJECT, the delivery limit); the checks that must fail are meant to, and their
messages are matched. The broker's record lock is 3 s (short, and long enough for a loaded machine to acknowledge
within it) and its delivery limit 2 (``group_broker_settings``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import broker
from tests.testing.test_pytest_plugin import INI

pytest_plugins = ["pytester"]

# What every generated file starts with: the settings, a consumer, a producer and a loop that receives records.
PRELUDE = """
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

import broker

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


@pytest.fixture(scope="session")
def group_broker_settings():
    return {"topics": {"jobs": 1}, "group": {"share_record_lock_duration_ms": 3000, "share_delivery_count_limit": 2}}


def test_the_plugin_runs_this_trees_broker():
    assert broker.__file__ == BROKER_FILE


@pytest.fixture
def share(group_broker):
    \"\"\"An explicit-mode ShareConsumer of ``jobs`` in a group of its own, joined and fetching: the group starts at the
    latest offset, so records are produced after its share-partition exists.\"\"\"
    group = f"sg-{uuid.uuid4().hex[:8]}"
    consumer = ShareConsumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["jobs"])
    group_broker.wait_for_share(group, members=1, partitions=1, timeout=20, poll=lambda: consumer.poll(0.1))
    yield group, consumer
    consumer.close()


def produce(group_broker, *values):
    producer = Producer({"bootstrap.servers": group_broker.bootstrap, "linger.ms": 20})
    offsets = []
    for value in values:
        producer.produce("jobs", value.encode(), on_delivery=lambda error, message: offsets.append(message.offset()))
    assert producer.flush(10) == 0
    return sorted(offsets)


def receive(consumer, count, decide=lambda message: ACCEPT, commit=True):
    \"\"\"Poll until ``count`` records came, each acknowledged as ``decide`` says (None: not at all); the records.\"\"\"
    got, deadline = [], time.monotonic() + 15
    while len(got) < count:
        assert time.monotonic() < deadline, f"received only {[(m.offset(), m.delivery_count()) for m in got]}"
        for message in consumer.poll(0.2):
            assert message.error() is None, message.error()
            got.append(message)
            answer = decide(message)
            if answer is not None:
                consumer.acknowledge(message, answer)
    if commit:
        consumer.commit_sync(10)
    return got
"""

PASSING = """
def test_records_are_waited_for_read_and_finished(group_broker, share):
    group, consumer = share
    [member] = group_broker.member_ids(group)
    offsets = produce(group_broker, "a", "b", "c")
    got = receive(consumer, 3, decide=lambda message: None, commit=False)
    assert [m.offset() for m in got] == offsets
    rows = group_broker.share_records(group)
    assert [(r["offset"], r["state"], r["delivery_count"], r["member_id"]) for r in rows] == [
        (offset, "acquired", 1, member) for offset in offsets
    ]
    [partition] = group_broker.share_partitions(group)
    assert (partition["topic"], partition["acquired"]) == ("jobs", 3)
    with group_broker.no_redelivery(group), group_broker.assert_nothing_archived(group) as check:
        for message in got:
            consumer.acknowledge(message, ACCEPT)
        detail = group_broker.wait_for_share(group, acknowledged_through=offsets[-1], timeout=10,
                                             poll=lambda: consumer.poll(0.1))
    assert check.archived == []
    assert detail["share_partitions"][0]["start_offset"] == offsets[-1] + 1
    assert group_broker.share_records(group) == []


def test_a_release_is_a_redelivery(group_broker, share):
    group, consumer = share
    first, second = produce(group_broker, "keep", "again")
    with group_broker.expect_redelivery(group, cause="release", offsets=[second]) as check:
        receive(consumer, 2, decide=lambda message: RELEASE if message.offset() == second else ACCEPT)
    [redelivery] = check.redeliveries
    assert (redelivery.topic, redelivery.offsets, redelivery.cause) == ("jobs", (second,), "release")
    [back] = receive(consumer, 1)
    assert (back.offset(), back.delivery_count()) == (second, 2)
    assert group_broker.redeliveries(group) == [redelivery]


def test_a_closed_consumer_redelivers_what_it_held(group_broker, share):
    group, consumer = share
    offsets = produce(group_broker, "x", "y")
    with group_broker.expect_redelivery(group, cause="session_closed", offsets=offsets) as check:
        receive(consumer, 2, decide=lambda message: None, commit=False)
        consumer.close()
    assert [r.cause for r in check.redeliveries] == ["session_closed"]
    assert {r["state"] for r in group_broker.share_records(group)} == {"available"}


async def test_an_expired_lock_is_a_redelivery(group_broker, share):
    group, consumer = share
    [offset] = produce(group_broker, "slow")
    async with group_broker.expect_redelivery(group, cause="lock_expired", timeout=10) as check:
        receive(consumer, 1, decide=lambda message: None, commit=False)  # held past its 3 s lock
    assert [r.offsets for r in check.redeliveries] == [(offset,)]
    rows = await group_broker.aio.share_records(group)
    assert [(r["offset"], r["state"], r["delivery_count"]) for r in rows] == [(offset, "available", 1)]
    detail = await group_broker.aio.wait_for_share(group, members=1, partitions=1, timeout=5)
    [partition] = detail["share_partitions"]
    assert (partition["start_offset"], partition["available"], partition["redelivered_total"]) == (offset, 1, 0)
"""

MISUSE = """

def test_what_is_refused_and_what_is_missing(group_broker):
    from confluent_kafka import Consumer, TopicPartition
    from broker.testing import WaitTimeout

    with pytest.raises(ValueError, match="no redelivery has cause 'lock_expiry': the causes are release, "
                                         "lock_expired, session_closed"):
        group_broker.expect_redelivery("anyone", cause="lock_expiry")
    assert group_broker.assert_nothing_archived("nobody").archived == []  # no group, nothing archived
    with pytest.raises(WaitTimeout, match="share group 'nobody' did not reach members=1 within 0.2 s: the broker "
                                          "has no such group"):
        group_broker.wait_for_share("nobody", members=1, timeout=0.2)
    classic = f"classic-{uuid.uuid4().hex[:8]}"
    committer = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": classic})
    committer.commit(offsets=[TopicPartition("jobs", 0, 0)], asynchronous=False)
    committer.close()
    with pytest.raises(ValueError, match=f"group '{classic}' is a classic group, not a share group"):
        group_broker.assert_nothing_archived(classic)
"""

FAILING = """
def test_an_idle_block_is_no_redelivery(group_broker, share):
    group, consumer = share
    with group_broker.expect_redelivery(group, timeout=0.5):
        consumer.poll(0.2)


def test_a_reject_is_archived(group_broker, share):
    group, consumer = share
    offsets = produce(group_broker, "good", "bad")
    with group_broker.assert_nothing_archived(group):
        receive(consumer, 2, decide=lambda message: REJECT if message.offset() == offsets[1] else ACCEPT)


def test_the_delivery_limit_archives(group_broker, share):
    group, consumer = share
    [offset] = produce(group_broker, "poison")
    receive(consumer, 1, decide=lambda message: RELEASE)  # delivery 1: released
    receive(consumer, 1, decide=lambda message: RELEASE)  # delivery 2 of 2: archived
    group_broker.assert_nothing_archived(group)


def test_a_release_inside_no_redelivery(group_broker, share):
    group, consumer = share
    produce(group_broker, "again")
    with group_broker.no_redelivery(group):
        receive(consumer, 1, decide=lambda message: RELEASE)


def test_a_wait_for_more_members_says_what_the_group_looks_like(group_broker, share):
    group, consumer = share
    group_broker.wait_for_share(group, members=2, timeout=0.5, poll=lambda: consumer.poll(0.1))


def test_a_wait_for_records_held_by_a_consumer(group_broker, share):
    group, consumer = share
    [offset] = produce(group_broker, "held")
    receive(consumer, 1, decide=lambda message: None, commit=False)
    group_broker.wait_for_share(group, acknowledged_through=offset, timeout=0.3)
"""


def generated(pytester: pytest.Pytester, body: str) -> None:
    pytester.makeini(INI)
    prelude = PRELUDE.replace("BROKER_FILE", repr(broker.__file__))
    pytester.makepyfile(test_share=prelude + body)


def test_the_share_helpers_pass_on_redeliveries_and_finished_records(pytester: pytest.Pytester) -> None:
    generated(pytester, PASSING + MISUSE)
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=6)


def test_the_share_helpers_fail_naming_what_happened(pytester: pytest.Pytester) -> None:
    generated(pytester, FAILING)
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=1, failed=6)  # every failure is meant: the messages below
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: expected share group 'sg-*' to redeliver records during the block (or 0.5 s after "
            "it); saw none; share-partitions now: jobs-0 SPSO * SPEO *: 0 acquired, 0 available, *",
            "E * AssertionError: share group 'sg-*' archived 1 record(s): jobs-0 offset * (delivery count 1, "
            "rejected by *)",
            "E * AssertionError: share group 'sg-*' archived 1 record(s): jobs-0 offset * (delivery count 2, "
            "delivery_limit, held by *)",
            "E * AssertionError: share group 'sg-*' redelivered records during the block: jobs-0 offset * (release, "
            "held by *)",
            "E *WaitTimeout: share group 'sg-*' did not reach members=2 within 0.5 s (1 member(s), not 2): it is "
            "Stable, epoch 1, 1 member(s) [[]'*'[]]; share-partitions: jobs-0 SPSO *; latest events: *",
            "E *WaitTimeout: share group 'sg-*' did not reach acknowledged_through=* within 0.3 s (jobs-0 not "
            "finished through *: its SPSO is *): *; share-partitions: jobs-0 * 1 acquired, * [[]offset * acquired by * "
            "(delivery count 1, lock expires in * ms)[]]*",
        ],
        consecutive=False,
    )



OPTION_TESTS = """
import pytest


@pytest.fixture(scope="session")
def group_broker_settings():
    return {"group": {"share_delivery_count_limit": 4}}  # its own group entries win over the options


def test_the_share_options_reach_the_broker(group_broker):
    group = group_broker.settings.group
    assert (group.share_record_lock_duration_ms, group.share_delivery_count_limit) == (1500, 4)
    assert group.share_min_record_lock_duration_ms == 1000
"""


def test_the_share_options_set_the_lock_and_the_limit_and_refuse_bad_values(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI + "group_broker_share_delivery_count_limit = 3\n")
    pytester.makepyfile(test_options=OPTION_TESTS)
    result = pytester.runpytest_subprocess("--group-broker-share-record-lock-duration-ms=1500", timeout=60)
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("--group-broker-share-record-lock-duration-ms=500")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*group_broker_share_record_lock_duration_ms = '500' is not a number within 1000 "
                                 "and 60000*"])  # fmt: skip


def test_the_guides_share_example_runs_as_written(pytester: pytest.Pytester) -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "pytest-plugin.md").read_text()
    section = guide.split("### Share groups", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def group_broker_settings():
            return {"topics": {"jobs": 1}}
        """
    )
    pytester.makepyfile(test_guide=example)
    result = pytester.runpytest_subprocess(timeout=60)
    result.assert_outcomes(passed=1)
