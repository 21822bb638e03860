"""Fault rule matching on a manual clock: order, limits, and the swallow rule's hand-over to an evicted member."""

from __future__ import annotations

import pytest

from broker.server.faults import FaultRules, FaultSpecError
from broker.timing.clock import ManualClock
from protocol.apis import ApiKey

HEARTBEAT = ApiKey.HEARTBEAT


def nobody(group_id: str, member_id: str) -> bool:
    return False


def test_a_swallow_rule_passes_over_an_evicted_member_to_the_next_rule_without_a_hit() -> None:
    rules = FaultRules(ManualClock())
    swallow = rules.add({"action": "swallow_heartbeats", "member_id": "m1"})
    error = rules.add({"action": "error", "error": "REBALANCE_IN_PROGRESS", "member_id": "m1"})
    assert rules.match(HEARTBEAT, "c", "g", "m1", None) is swallow
    assert rules.match(HEARTBEAT, "c", "g", "m1", None, nobody) is error
    assert (swallow.hits, error.hits) == (1, 1)


def test_a_passed_over_swallow_rule_draws_nothing_from_its_seeded_sequence() -> None:
    seeded = {"action": "swallow_heartbeats", "probability": 0.5, "seed": 3}
    undisturbed, interleaved = FaultRules(ManualClock()), FaultRules(ManualClock())
    undisturbed.add(seeded)
    interleaved.add(seeded)
    expected = [undisturbed.match(HEARTBEAT, "c", "g", "m", None) is not None for _ in range(20)]
    seen = []
    for _ in range(20):
        assert interleaved.match(HEARTBEAT, "c", "g", "m", None, nobody) is None
        seen.append(interleaved.match(HEARTBEAT, "c", "g", "m", None) is not None)
    assert seen == expected
    assert True in expected and False in expected


def test_count_and_duration_limit_a_rule() -> None:
    clock = ManualClock()
    rules = FaultRules(clock)
    counted = rules.add({"action": "close", "api": "Heartbeat", "count": 2})
    assert [rules.match(HEARTBEAT, "c", "g", "m", None) is counted for _ in range(3)] == [True, True, False]
    timed = rules.add({"action": "close", "api": "JoinGroup", "duration_ms": 1000})
    assert rules.match(ApiKey.JOIN_GROUP, "c", "g", "", None) is timed
    clock.advance(1000)
    assert rules.match(ApiKey.JOIN_GROUP, "c", "g", "", None) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"action": "error", "api": "ApiVersions", "error": 27}, "can answer for"),
        ({"action": "swallow_heartbeats", "api": "JoinGroup"}, "applies to Heartbeat"),
        ({"action": "delay"}, "needs delay_ms"),
        ({"action": "close", "probability": 0}, "probability"),
        ({"action": "close", "colour": "red"}, "unknown field"),
    ],
)
def test_bad_rules_are_refused_with_the_reason(spec: dict[str, object], message: str) -> None:
    rules = FaultRules(ManualClock())
    with pytest.raises(FaultSpecError, match=message):
        rules.add(spec)
    assert not rules


def test_a_transactional_id_rule_matches_only_requests_naming_that_id() -> None:
    rules = FaultRules(ManualClock())
    rule = rules.add({"action": "error", "error": "CONCURRENT_TRANSACTIONS", "transactional_id": "tx-a"})
    assert rule.to_json(0)["transactional_id"] == "tx-a"
    assert rules.match(ApiKey.END_TXN, "c", None, None, None, transactional_id="tx-b") is None
    assert rules.match(ApiKey.END_TXN, "c", None, None, None) is None  # a request naming no transactional id
    assert rules.match(ApiKey.JOIN_GROUP, "c", "g", "", None) is None
    assert rules.match(ApiKey.END_TXN, "c", None, None, None, transactional_id="tx-a") is rule
    assert rule.hits == 1


@pytest.mark.parametrize(
    "api",
    [
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN,
        ApiKey.TXN_OFFSET_COMMIT,
    ],
)
def test_error_rules_answer_for_every_transaction_api(api: ApiKey) -> None:
    rules = FaultRules(ManualClock())
    named = rules.add({"action": "error", "api": int(api), "error": "COORDINATOR_NOT_AVAILABLE", "count": 1})
    assert rules.match(api, "c", None, None, None, transactional_id="t") is named
    unnamed = rules.add({"action": "error", "error": "NOT_COORDINATOR", "count": 1})  # no api: every error API
    assert rules.match(api, "c", None, None, None) is unnamed


def test_error_answers_of_the_transaction_apis_have_kafkas_shape() -> None:
    import datetime

    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i8, i16, i32, i64

    from broker.api.routes import error_answer, request_identity
    from tests.wire.client import part, request

    init = request(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id="tx",
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=i64(-1),
        producer_epoch=i16(-1),
    )
    answer = error_answer(ApiKey.INIT_PRODUCER_ID, 4, init, ErrorCode.producer_fenced)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (ErrorCode.producer_fenced, -1, -1)
    assert request_identity(ApiKey.INIT_PRODUCER_ID, init).transactional_id == "tx"
    topic = part(
        ApiKey.TXN_OFFSET_COMMIT,
        3,
        "TxnOffsetCommitRequestTopic",
        name="t",
        partitions=(
            part(
                ApiKey.TXN_OFFSET_COMMIT,
                3,
                "TxnOffsetCommitRequestPartition",
                partition_index=i32(index),
                committed_offset=i64(5),
                committed_leader_epoch=i32(-1),
                committed_metadata=None,
            )
            for index in (0, 2)
        ),
    )
    commit = request(
        ApiKey.TXN_OFFSET_COMMIT,
        3,
        transactional_id="tx",
        group_id="g",
        producer_id=i64(1),
        producer_epoch=i16(0),
        generation_id=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=(topic,),
    )
    answer = error_answer(ApiKey.TXN_OFFSET_COMMIT, 3, commit, ErrorCode.concurrent_transactions)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics] == [
        ("t", [(0, ErrorCode.concurrent_transactions), (2, ErrorCode.concurrent_transactions)])
    ]
    assert request_identity(ApiKey.TXN_OFFSET_COMMIT, commit).transactional_id == "tx"
    find = request(ApiKey.FIND_COORDINATOR, 4, key_type=i8(1), coordinator_keys=("tx",))
    assert request_identity(ApiKey.FIND_COORDINATOR, find).transactional_id == "tx"
    group = request(ApiKey.FIND_COORDINATOR, 4, key_type=i8(0), coordinator_keys=("g",))
    assert request_identity(ApiKey.FIND_COORDINATOR, group).transactional_id is None
