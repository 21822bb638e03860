"""``share_judge.judge``, the verdict of ``chaos run --group-protocol share``, fed records shaped as the share workers
write them (``broker.chaos.share_consumer``): it must pass a healthy history and catch a lost record, a record
never accepted, one lock given to two members, a redelivery under a live lock, and a redelivery after acceptance.
"""

from __future__ import annotations

from broker.chaos.share_judge import Ack, Delivery, Member, judge

LOCK_S = 2.0
LIMIT = 5
T0 = 1_800_000_000.0


def delivery(member: str, offset: int, count: int, at: float, partition: int = 0) -> Delivery:
    return Delivery(member, partition, offset, f"k-{offset:06d}", count, T0 + at - 0.1, T0 + at)


def ack(member: str, offsets: list[int], at: float, error: str | None = None, partition: int = 0) -> Ack:
    return Ack(member, partition, tuple(offsets), T0 + at, error)


def keys(*offsets: int) -> list[str]:
    return [f"k-{o:06d}" for o in offsets]


def test_a_healthy_history_passes_and_counts_causes() -> None:
    """Offset 0 and 1 go to a member that is SIGKILLed before acknowledging them: they come back at once to another
    (cause killed); offset 2 goes to one that is SIGSTOPped: it comes back after the lock (cause stopped); its late
    acknowledgement fails. Every record is accepted once."""
    deliveries = [
        delivery("chaos-0-0", 0, 1, 1.0), delivery("chaos-0-0", 1, 1, 1.0),
        delivery("chaos-1-0", 0, 2, 1.3), delivery("chaos-1-0", 1, 2, 1.3),
        delivery("chaos-2-0", 2, 1, 2.0), delivery("chaos-1-0", 2, 2, 4.2),
        delivery("chaos-1-0", 3, 1, 4.5),
    ]  # fmt: skip
    acks = [ack("chaos-1-0", [0, 1], 1.4), ack("chaos-1-0", [2], 4.3), ack("chaos-1-0", [3], 4.6),
            ack("chaos-2-0", [2], 6.0, error="INVALID_RECORD_STATE")]  # fmt: skip
    members = {
        "chaos-0-0": Member("chaos-0-0", killed_at=T0 + 1.2),
        "chaos-2-0": Member("chaos-2-0", stops=((T0 + 2.1, T0 + 5.9),)),
    }
    verdict = judge(keys(0, 1, 2, 3), deliveries, acks, members, LOCK_S, LIMIT)
    report = verdict.json()
    assert verdict.ok, report
    assert report["redeliveries_by_cause"] == {
        "killed": 2, "exited": 0, "closed": 0, "stopped": 1, "lock_expired": 0, "unrecorded": 0
    }, report  # fmt: skip
    assert (report["accepted"], report["failed_acks"], report["archived"]) == (4, 1, 0)


def test_a_lost_record_and_an_unaccepted_one_fail() -> None:
    deliveries = [delivery("chaos-0-0", 0, 1, 1.0), delivery("chaos-0-0", 1, 1, 1.0)]
    verdict = judge(keys(0, 1, 2), deliveries, [ack("chaos-0-0", [0], 1.1)], {}, LOCK_S, LIMIT)
    report = verdict.json()
    assert not verdict.ok
    assert report["lost_keys"] == ["k-000002"], report
    assert report["unaccepted_records"] == ["0:1"], report


def test_one_lock_to_two_members_is_a_violation() -> None:
    """Two members receive offset 0 with delivery count 1, both accept: one acquisition given twice."""
    deliveries = [delivery("chaos-0-0", 0, 1, 1.0), delivery("chaos-1-0", 0, 1, 1.05)]
    acks = [ack("chaos-0-0", [0], 1.5), ack("chaos-1-0", [0], 1.5)]
    verdict = judge(keys(0), deliveries, acks, {}, LOCK_S, LIMIT)
    assert not verdict.ok
    assert [v["kind"] for v in verdict.violations] == ["same_lock"], verdict.violations


def test_a_redelivery_under_a_live_lock_is_an_overlap() -> None:
    """The holder is alive, not stopped, has not acknowledged; 0.5 s later (lock 2 s) another member gets it."""
    deliveries = [delivery("chaos-0-0", 0, 1, 1.0), delivery("chaos-1-0", 0, 2, 1.5)]
    verdict = judge(keys(0), deliveries, [ack("chaos-1-0", [0], 1.6)], {}, LOCK_S, LIMIT)
    assert [v["kind"] for v in verdict.violations] == ["overlap"], verdict.violations
    assert verdict.violations[0]["first"]["member"] == "chaos-0-0"
    # The same redelivery after the lock ran out, or after the holder was killed, is fine.
    late = [delivery("chaos-0-0", 0, 1, 1.0), delivery("chaos-1-0", 0, 2, 3.2)]
    assert judge(keys(0), late, [ack("chaos-1-0", [0], 3.3)], {}, LOCK_S, LIMIT).ok
    killed = {"chaos-0-0": Member("chaos-0-0", killed_at=T0 + 1.2)}
    assert judge(keys(0), deliveries, [ack("chaos-1-0", [0], 1.6)], killed, LOCK_S, LIMIT).ok


def test_a_redelivery_after_acceptance_is_a_violation() -> None:
    deliveries = [delivery("chaos-0-0", 0, 1, 1.0), delivery("chaos-1-0", 0, 2, 5.0)]
    acks = [ack("chaos-0-0", [0], 1.1), ack("chaos-1-0", [0], 5.1)]
    verdict = judge(keys(0), deliveries, acks, {}, LOCK_S, LIMIT)
    assert [v["kind"] for v in verdict.violations] == ["after_accept"], verdict.violations


def test_a_record_at_the_delivery_limit_is_archived_not_unaccepted() -> None:
    deliveries = [delivery("chaos-0-0", 0, n, 1.0 + 3 * n) for n in range(1, LIMIT + 1)]
    verdict = judge(keys(0), deliveries, [], {}, LOCK_S, LIMIT)
    report = verdict.json()
    assert (report["archived"], report["unaccepted"], report["redelivered"]) == (1, 0, LIMIT - 1), report
    assert report["redeliveries_by_cause"]["lock_expired"] == LIMIT - 1


def test_a_late_acknowledgement_of_a_record_finished_by_another_is_moot_not_an_acceptance() -> None:
    """As a real run had it: chaos-0-0's poll began at 1.0, it was SIGSTOPped at 1.3 while the broker acquired
    offset 0 for it (count 1); the lock expired at 3.3 and chaos-2-0 got and accepted it (count 2); after its
    SIGCONT at 4.3 chaos-0-0's poll returned it and its acknowledgement was answered without error (Kafka ignores
    offsets below the SPSO, spec 6.5). That is no acceptance of its delivery, and no redelivery after acceptance."""
    stale = Delivery("chaos-0-0", 0, 0, "k-000000", 1, T0 + 1.0, T0 + 4.4)
    deliveries = [stale, delivery("chaos-2-0", 0, 2, 3.4)]
    acks = [ack("chaos-2-0", [0], 3.5), ack("chaos-0-0", [0], 4.41)]
    members = {"chaos-0-0": Member("chaos-0-0", stops=((T0 + 1.3, T0 + 4.3),))}
    verdict = judge(keys(0), deliveries, acks, members, LOCK_S, LIMIT)
    report = verdict.json()
    assert verdict.ok, report
    assert (report["moot_acks"], report["accepted"], report["redeliveries_by_cause"]["stopped"]) == (1, 1, 1), report
    assert stale not in verdict.accepted_deliveries


def test_a_record_whose_acknowledgement_died_with_its_worker_is_accepted_only_if_the_broker_finished_it() -> None:
    """As a real run had it: chaos-1-0's commit_sync reached the broker, which accepted offsets 0-1, and the SIGKILL
    came before the worker wrote the answer down. No file says they were accepted; below the final SPSO, the
    broker says they were finished. Without that, or with a holder that lived on, they are unaccepted."""
    deliveries = [delivery("chaos-1-0", 0, 1, 1.0), delivery("chaos-1-0", 1, 1, 1.0)]
    killed = {"chaos-1-0": Member("chaos-1-0", killed_at=T0 + 1.2)}
    verdict = judge(keys(0, 1), deliveries, [], killed, LOCK_S, LIMIT, finished={0: 2})
    assert verdict.ok and verdict.json()["accepted_unrecorded"] == 2, verdict.json()
    assert judge(keys(0, 1), deliveries, [], killed, LOCK_S, LIMIT, finished={0: 1}).json()["unaccepted"] == 1
    assert not judge(keys(0, 1), deliveries, [], {}, LOCK_S, LIMIT, finished={0: 2}).ok


def test_causes_of_a_crash_a_close_and_an_acquisition_nobody_wrote_down() -> None:
    """Offset 0's holder crashed (exited by itself), offset 1's closed (SIGTERM: its final ShareAcknowledge releases
    what it did not acknowledge, spec 12.6), both 0.3 s into a 2 s lock; offset 2 was first acquired by a worker
    SIGKILLed before it wrote the batch: the first delivery anyone wrote has delivery count 2."""
    deliveries = [
        delivery("chaos-0-0", 0, 1, 1.0), delivery("chaos-2-0", 0, 2, 1.5),
        delivery("chaos-1-0", 1, 1, 1.0), delivery("chaos-2-0", 1, 2, 1.5),
        delivery("chaos-2-0", 2, 2, 1.5),
    ]  # fmt: skip
    members = {
        "chaos-0-0": Member("chaos-0-0", exited_at=T0 + 1.3),
        "chaos-1-0": Member("chaos-1-0", closed_at=T0 + 1.3),
    }
    verdict = judge(keys(0, 1, 2), deliveries, [ack("chaos-2-0", [0, 1, 2], 1.6)], members, LOCK_S, LIMIT)
    report = verdict.json()
    assert verdict.ok, report
    causes = {cause: n for cause, n in report["redeliveries_by_cause"].items() if n}
    assert causes == {"exited": 1, "closed": 1, "unrecorded": 1}, report
    assert (report["redelivered"], report["unseen_deliveries"]) == (3, 1), report
