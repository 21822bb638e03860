"""KIP-932 share groups end to end: confluent-kafka 2.16.1 ``ShareConsumer`` processes against the broker.

Checklist items 65-72 of the share-groups spec (section 15, "librdkafka end to end"), and the AdminClient calls a
confluent-kafka user has for a share group. Each test starts its own broker process with short share timings
(``share_processes.SHARE_FLAGS``: record lock 2000 ms, heartbeat 1 s, session 6 s, delivery limit 5) and a
one-partition topic, sets the group's ``share.auto.offset.reset`` to ``earliest`` (IncrementalAlterConfigs GROUP,
spec 6.2: the default ``latest`` would skip records produced before the group's first ShareFetch), and runs
consumers as separate OS processes (``share_worker.py``), so SIGKILL and SIGSTOP are real. What the workers print
(batches with offsets and delivery counts, acknowledgements, commit results) is what is checked; timestamps compare
across processes on one machine's clock.

Timing rules, so that CI stays deterministic: "nothing more is delivered" is watched for at least twice the lock
duration; a lower bound on when a record comes back ("not before its lock expired") allows 250 ms for the
acquisition to precede the worker's line; upper bounds are generous (``DEADLINE_S``).

Records are produced in one record batch where a test needs one consumer to acquire them all in one ShareFetch (a
share-partition acquires whole log batches, spec 6.4), and one batch per record where they should spread over
several consumers.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.share_processes import (
    DEADLINE_S,
    DELIVERY_LIMIT,
    LOCK_MS,
    Delivery,
    ShareFleet,
    ShareWorker,
    describe_group_configs,
    set_group_configs,
    start_share_target,
    unique,
)

LOCK_S = LOCK_MS / 1000
EARLY_S = 0.25  # how long before its worker printed it a record may have been acquired


@pytest.fixture
def share(tmp_path: Path) -> Iterator[ShareFleet]:
    """A broker (``start_share_target``) with a one-partition topic; the group starts from the earliest offset."""
    topic = unique("queue")
    target = start_share_target(tmp_path, topic)
    fleet = ShareFleet(target, tmp_path, unique("share"), topic)
    try:
        set_group_configs(target, fleet.group, {"share.auto.offset.reset": "earliest"})
        yield fleet
        assert target.alive(), "the broker died:\n" + "\n".join(target.log_lines())
    finally:
        fleet.close()
        target.stop()


def by_value(deliveries: list[Delivery]) -> dict[str, list[Delivery]]:
    grouped: dict[str, list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        grouped[delivery.value].append(delivery)
    return grouped


def counts(deliveries: list[Delivery]) -> list[int]:
    return [d.delivery_count for d in deliveries]


def assert_no_failures(fleet: ShareFleet, *workers: ShareWorker) -> None:
    failures = {w.name: w.commit_failures() for w in workers or fleet.workers}
    assert not any(failures.values()), f"failed commits or errors: {failures}\n{fleet.describe()}"


def joined(*workers: ShareWorker) -> bool:
    return all(w.joined_at is not None for w in workers)


# -- 65: three members share one partition -------------------------------------------------------------------------


def test_three_members_share_one_partition_each_record_once(share: ShareFleet) -> None:
    """Item 65 (a; spec 5, 6.4, 8.2; items 18, 31): three members on a one-partition topic are all assigned it, all
    receive records, and in a healthy run every record is delivered exactly once, with delivery count 1."""
    workers = share.start_members(3, "--max-poll-records", "5", "--processing-ms", "200", "--commit", "sync")
    share.wait(lambda: joined(*workers), "three members to be assigned the partition")
    produced = share.produce(f"r{i}" for i in range(60))  # 60 record batches: the members take turns
    wanted = {p.offset for p in produced}
    share.wait(lambda: wanted <= {d.offset for d in share.deliveries()}, "every record to be delivered")
    share.quiet(2 * LOCK_S)  # a record whose acceptance got lost would come back within one lock duration

    deliveries = share.deliveries()
    repeated = {o: n for o, n in Counter(d.offset for d in deliveries).items() if n > 1}
    assert not repeated, f"records delivered more than once: {repeated}\n{share.describe()}"
    assert {d.offset for d in deliveries} == wanted
    assert all(d.delivery_count == 1 for d in deliveries), counts(deliveries)
    assert {d.value for d in deliveries} == {p.value for p in produced}
    per_member = Counter(d.worker for d in deliveries)
    assert all(per_member[w.name] > 0 for w in workers), f"not every member received records: {per_member}"
    assert_no_failures(share)


# -- 66: implicit acknowledgement ----------------------------------------------------------------------------------


def test_implicit_mode_nothing_redelivered(share: ShareFleet) -> None:
    """Item 66 (b; spec 12.4): in implicit mode the next poll accepts the previous batch, so nothing comes back
    after the lock duration, and a member joining after the first one closed receives nothing."""
    produced = share.produce([f"r{i}" for i in range(10)], one_batch=True)
    first = share.start("first", "--commit", "none", "--on-close", "plain")  # only the polls acknowledge
    share.wait(lambda: len(first.deliveries()) >= len(produced), "the first member to receive every record")
    share.quiet(2 * LOCK_S)
    assert sorted(d.offset for d in first.deliveries()) == [p.offset for p in produced], first.describe()
    assert all(d.delivery_count == 1 for d in first.deliveries())

    first.terminate()
    assert first.wait_exit() == 0
    second = share.start("second")
    share.wait(lambda: joined(second), "the second member to be assigned the partition")
    share.quiet(2 * LOCK_S)
    assert second.deliveries() == [], f"accepted records delivered again: {second.deliveries()}"
    assert_no_failures(share)


# -- 67: explicit RELEASE and REJECT -------------------------------------------------------------------------------


def test_explicit_release_redelivers_and_reject_does_not(share: ShareFleet) -> None:
    """Item 67 (c; spec 6.5; items 43, 44): explicit mode with commit_sync; a RELEASEd record comes back with
    delivery count 2, a REJECTed one never (not after the lock either), accepted ones never."""
    values = ["keep-0", "release-1", "reject-2", "keep-3"]
    share.produce(values, one_batch=True)
    worker = share.start(
        "explicit", "--mode", "explicit", "--release", "^release", "--release-times", "1", "--reject", "^reject"
    )
    share.wait(lambda: len(by_value(worker.deliveries())["release-1"]) >= 2, "the released record to come back")
    share.quiet(2 * LOCK_S)

    delivered = by_value(worker.deliveries())
    assert counts(delivered["release-1"]) == [1, 2], worker.describe()
    assert counts(delivered["reject-2"]) == [1], worker.describe()
    assert counts(delivered["keep-0"]) == counts(delivered["keep-3"]) == [1], worker.describe()
    acks = [(a["offset"], a["type"]) for e in worker.events("acknowledged") for a in e["acks"]]
    assert acks[:4] == [(0, "ACCEPT"), (1, "RELEASE"), (2, "REJECT"), (3, "ACCEPT")], acks
    assert acks[4:] == [(1, "ACCEPT")], acks
    commits = worker.events("committed")
    assert commits and all(e["results"] == {f"{share.topic}:0": None} for e in commits if e["how"] == "sync"), commits
    assert_no_failures(share)


# -- 68: SIGKILL of a holder ---------------------------------------------------------------------------------------


def test_sigkilled_holder_records_go_to_the_other_member(share: ShareFleet) -> None:
    """Item 68 (d; spec 6.8, 7, trap 9; item 28): a member holding records is SIGKILLed while another member polls;
    the other never receives them while they are locked, then receives them all with delivery count 2 (the count
    kept, 4.2) soon after the kill: its connection closing released them, long before their lock would expire.

    The group's lock is raised to 15 s (IncrementalAlterConfigs ``share.record.lock.duration.ms``, spec 11.2) so the
    survivor has time to join and poll while they are locked, and a release by lock expiry cannot pass for one by
    the disconnect."""
    lock_s = 15.0
    if not set_group_configs(share.target, share.group, {"share.record.lock.duration.ms": str(int(lock_s * 1000))}):
        pytest.skip("the target has no group configs: cannot lengthen the lock")
    produced = share.produce([f"r{i}" for i in range(5)], one_batch=True)
    holder = share.start("holder", "--mode", "explicit", "--hold-after-batches", "1")
    share.wait(lambda: bool(holder.events("holding")), "the holder to acquire the records")
    held = {d.offset for d in holder.deliveries()}
    acquired_at = holder.batch_times()[0]
    assert held == {p.offset for p in produced}, holder.describe()

    survivor = share.start("survivor", "--mode", "explicit")
    share.wait(lambda: joined(survivor), "the survivor to be assigned the partition")
    share.quiet(2.0)  # the survivor polls (ShareFetch) while the records are locked
    assert time.time() < acquired_at + lock_s - 3, "the survivor joined too late for the test to mean anything"
    assert survivor.deliveries() == [], f"records delivered while locked by the holder: {survivor.deliveries()}"

    killed_at = holder.kill()
    received_at = share.wait(lambda: held <= {d.offset for d in survivor.deliveries()}, "the survivor to get them")
    assert received_at < acquired_at + lock_s - 1, (
        f"released only {received_at - killed_at:.1f} s after the kill: by the lock expiry, not the disconnect\n"
        + share.describe()
    )
    deliveries = survivor.deliveries()
    assert all(d.ts > killed_at for d in deliveries)
    assert sorted(counts(deliveries)) == [2] * len(held), f"delivery counts {counts(deliveries)}\n{share.describe()}"
    assert_no_failures(share, survivor)


# -- 69: SIGSTOP of a holder ---------------------------------------------------------------------------------------


def test_sigstopped_holder_records_come_back_after_the_lock(share: ShareFleet) -> None:
    """Item 69 (g; spec 6.6, trap 9; item 34): a member holding records is SIGSTOPped (its connection stays open,
    it neither heartbeats nor acknowledges); another member receives them only once their lock expired, with
    delivery count 2, and not much later.

    The lock is 4 s here (group config) when the target has group configs: below the 6 s session timeout, so the
    expiry and not the member's removal frees them, and long enough for the other member to be polling before it."""
    lock_s = 4.0 if set_group_configs(share.target, share.group, {"share.record.lock.duration.ms": "4000"}) else LOCK_S
    produced = share.produce([f"r{i}" for i in range(5)], one_batch=True)
    holder = share.start("holder", "--mode", "explicit", "--hold-after-batches", "1")
    share.wait(lambda: bool(holder.events("holding")), "the holder to acquire the records")
    holder.stop()
    acquired_at = holder.batch_times()[0]
    held = {d.offset for d in holder.deliveries()}
    assert held == {p.offset for p in produced}, holder.describe()

    other = share.start("other", "--mode", "explicit")
    received_at = share.wait(
        lambda: held <= {d.offset for d in other.deliveries()}, "the other member to get them", timeout=2 * lock_s + 10
    )
    deliveries = other.deliveries()
    first_at = min(d.ts for d in deliveries)
    assert first_at >= acquired_at + lock_s - EARLY_S, (
        f"redelivered {first_at - acquired_at:.2f} s after acquisition, before the {lock_s:g} s lock expired\n"
        + share.describe()
    )
    assert received_at <= acquired_at + 2 * lock_s + 5, share.describe()
    share.wait(lambda: joined(other), "the other member's statistics to show its assignment")  # every 500 ms
    assert other.joined_at is not None and other.joined_at < acquired_at + lock_s, (
        "the other member joined after the lock expired: nothing shown about the lock\n" + share.describe()
    )
    assert sorted(counts(deliveries)) == [2] * len(held), f"delivery counts {counts(deliveries)}\n{share.describe()}"
    assert_no_failures(share, other)


# -- 70: the delivery limit ----------------------------------------------------------------------------------------


def test_record_released_every_time_arrives_delivery_limit_times(share: ShareFleet) -> None:
    """Item 70 (e; spec 6.3 delivery limit rule; item 36): with the limit at 5, a record released on every delivery
    arrives with delivery counts 1, 2, 3, 4, 5 and then never again (archived); the records around it are delivered
    once, and records produced afterwards keep flowing."""
    share.produce(["ok-0", "poison-1", "ok-2"], one_batch=True)
    worker = share.start("releaser", "--mode", "explicit", "--release", "^poison")
    share.wait(
        lambda: len(by_value(worker.deliveries())["poison-1"]) >= DELIVERY_LIMIT,
        f"the poison record to arrive {DELIVERY_LIMIT} times",
    )
    share.quiet(2 * LOCK_S)
    delivered = by_value(worker.deliveries())
    assert counts(delivered["poison-1"]) == list(range(1, DELIVERY_LIMIT + 1)), worker.describe()
    assert counts(delivered["ok-0"]) == counts(delivered["ok-2"]) == [1], worker.describe()

    share.produce(["after-3"])
    share.wait(lambda: "after-3" in by_value(worker.deliveries()), "a record produced after it to be delivered")
    share.quiet(LOCK_S)
    assert counts(by_value(worker.deliveries())["poison-1"]) == list(range(1, DELIVERY_LIMIT + 1))
    assert_no_failures(share)


# -- 72: implicit mode, poll then close ----------------------------------------------------------------------------


def test_implicit_poll_then_close_releases_the_batch(share: ShareFleet) -> None:
    """Item 72 (spec 12.6, trap 13): in implicit mode close() right after a poll does not accept that poll's records
    (its final ShareAcknowledge carries no acknowledgement for them); the broker releases them, and the next member
    receives that batch with delivery count 2."""
    produced = share.produce([f"r{i}" for i in range(5)], one_batch=True)
    first = share.start("first", "--commit", "none", "--close-after-batches", "1", "--on-close", "plain")
    share.wait(lambda: bool(first.events("closed")), "the first member to poll once and close")
    assert first.wait_exit() == 0
    batch = {d.offset for d in first.deliveries()}
    assert batch and batch <= {p.offset for p in produced}, first.describe()
    assert all(d.delivery_count == 1 for d in first.deliveries())

    second = share.start("second")
    share.wait(lambda: batch <= {d.offset for d in second.deliveries()}, "the second member to get that batch")
    redelivered = [d for d in second.deliveries() if d.offset in batch]
    assert sorted(counts(redelivered)) == [2] * len(batch), f"{counts(redelivered)}\n{share.describe()}"
    assert_no_failures(share)


# -- admin calls ---------------------------------------------------------------------------------------------------


def listed_consumer_groups(fleet: ShareFleet, **filters: Any) -> dict[str, Any]:
    result = fleet.target.admin.list_consumer_groups(request_timeout=10, **filters).result(timeout=DEADLINE_S)
    assert not result.errors, result.errors
    return {listing.group_id: listing for listing in result.valid}


def legacy_groups(fleet: ShareFleet) -> dict[str, Any]:
    """``list_groups()``: ListGroups, then DescribeGroups of every group listed (deprecated, hence the filter)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return {group.id: group for group in fleet.target.admin.list_groups(timeout=10)}


def test_admin_client_calls_on_a_share_group(share: ShareFleet) -> None:
    """What confluent-kafka 2.16.1's AdminClient, which has no share-group API of its own (spec 12.1), shows of a
    share group and does to it (spec 2.6, 10.4; items 55, 58, 60, 64):

    * DescribeConfigs GROUP returns the group config the fixture set;
    * ``list_consumer_groups`` leaves it out, with and without a type filter: librdkafka keeps only groups whose
      ListGroups ProtocolType is "consumer" or "" (rd_kafka_ListConsumerGroupsResponse_parse), and a share group's is
      "share";
    * ``list_groups`` (ListGroups, then DescribeGroups) names it, and DescribeGroups describes it as Dead with no
      members, as it does a consumer group (item 58);
    * ``describe_consumer_groups``: ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for a share group, librdkafka
      falls back to DescribeGroups, so the same Dead group with no members;
    * ``delete_consumer_groups`` (DeleteGroups) refuses it while it has a member (NON_EMPTY_GROUP) and deletes it
      once its member closed (Empty); it is then gone from ``list_groups``.
    """
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException

    if share.target.group_configs:
        assert describe_group_configs(share.target, share.group)["share.auto.offset.reset"] == "earliest"
    member = share.start("member")
    share.wait(lambda: joined(member), "the member to be assigned the partition")
    share.produce(["r0"])
    share.wait(lambda: bool(member.deliveries()), "the member to consume")

    assert share.group not in listed_consumer_groups(share)
    assert share.group not in listed_consumer_groups(share, types={ConsumerGroupType.CONSUMER})
    listed = legacy_groups(share)
    assert share.group in listed, sorted(listed)
    assert (listed[share.group].state, listed[share.group].members) == ("Dead", []), vars(listed[share.group])
    described = share.target.admin.describe_consumer_groups([share.group], request_timeout=10)
    description = described[share.group].result(timeout=DEADLINE_S)
    assert description.state == ConsumerGroupState.DEAD, description.state
    assert description.members == []

    futures = share.target.admin.delete_consumer_groups([share.group], request_timeout=10)
    with pytest.raises(KafkaException) as refused:
        futures[share.group].result(timeout=DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP, refused.value

    member.terminate()
    assert member.wait_exit() == 0
    futures = share.target.admin.delete_consumer_groups([share.group], request_timeout=10)
    futures[share.group].result(timeout=DEADLINE_S)
    assert share.group not in legacy_groups(share)
