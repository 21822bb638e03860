"""The control API's chaos verbs against real clients: a real broker process, real HTTP, consumers in processes.

One broker serves the whole module (a fresh topic and group per test); every scenario runs for aiokafka,
kafka-python and confluent-kafka, with consumers as ``tests/clients/worker.py`` processes (client ids "a" and "b":
"a" is the one the verb aims at). Fault rules are scoped to the test's group. After each disruption a round of
records (one per partition, from a confluent-kafka producer) must be consumed, so "the group recovered" always means
"and it consumes again". Waits go through the control API's ``wait`` endpoint or poll the group's events with a
deadline; nothing sleeps and hopes.

What each library does, as these tests pin it down:

- REBALANCE_IN_PROGRESS on one member's Heartbeat: all three revoke and send JoinGroup under the same member id.
  The leader's rejoin rebalances the group (a new generation); a follower's, its subscription unchanged, is
  answered with the current generation as Kafka does, so nothing moves (and the broker logs no event for it).
- kick: all three hear UNKNOWN_MEMBER_ID on their next Heartbeat and join again under a new member id; the group's
  next generation comes within a second, not after the 45 s session.
- swallowed heartbeats: all three believe all is well until the broker expires them; once evicted they hear
  UNKNOWN_MEMBER_ID (the broker stops swallowing for a member it no longer has) and join again under a new id.
- a delayed JoinGroup: the client just waits (no client times out a 1.5 s JoinGroup); the other member is untouched.
- a Heartbeat's connection closed: all three reconnect and keep their membership (same member id, no rebalance).
- a forced rebalance: all three rejoin under their own member ids.
- fence (FENCED_INSTANCE_ID for the old member id of a static instance):
  * kafka-python logs "Heartbeat failed ... due to fenced id error" and stops heartbeating, but ``poll()`` does not
    raise: the consumer keeps fetching its old partitions as a zombie, and ``commit()`` raises
    FencedInstanceIdError. After the ghost member expires, its next commit fails with UNKNOWN_MEMBER_ID
    (CommitFailedError), it reports its partitions lost and joins again under a new member id.
  * confluent-kafka (librdkafka) raises a fatal error: ``consume()`` returns one ``_FATAL`` error ("Static
    consumer fenced by other consumer with same group.instance.id"); the consumer fetches nothing more and never
    rejoins (it must be closed and created again).
  * aiokafka 0.14.0 is never told: its Heartbeat (v0/v1) and OffsetCommit (v2) carry no group.instance.id, so the
    broker answers UNKNOWN_MEMBER_ID, as Kafka does; aiokafka then joins with its instance id and an empty member
    id, which takes the instance back from the ghost at once ("static_member_replaced"), without a rebalance. So
    for aiokafka the ghost is never evicted by its session timeout: the client has replaced it before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.control.client import ControlClient
from tests.clients.chaos_helpers import PARTITIONS, SESSION_MS, Crew, control_url
from tests.conftest import BrokerProcess, start_broker_process

CLIENTS = ["aiokafka", "kafka-python", "confluent"]
# A fresh topic for every test, so a new group has no backlog to consume and commit: the only commits are those
# of the rounds a test produces (a stray commit would change how a client learns it is out of the group).
TOPICS = [f"chaos-{i}" for i in range(24)]
KICK_SESSION_MS = 45_000  # a kick must not wait for this
JOIN_DELAY_MS = 1500

pytestmark = [pytest.mark.timeout(60), pytest.mark.parametrize("client", CLIENTS)]


@pytest.fixture(scope="module")
def chaos_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    topics = [arg for name in TOPICS for arg in ("--topic", f"{name}:{PARTITIONS}")]
    broker = start_broker_process(tmp_path_factory.mktemp("chaos-broker"), *topics)
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def unused_topics() -> Iterator[str]:
    return iter(TOPICS)


@pytest.fixture(scope="module")
def ctl(chaos_broker: BrokerProcess) -> ControlClient:
    return ControlClient(control_url(chaos_broker))


@pytest.fixture(scope="module")
def producer(chaos_broker: BrokerProcess) -> Iterator[Any]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": chaos_broker.bootstrap, "linger.ms": 0})
    yield producer
    producer.flush(5)


@pytest.fixture
def crew(
    client: str,
    chaos_broker: BrokerProcess,
    ctl: ControlClient,
    producer: Any,
    unused_topics: Iterator[str],
    tmp_path: Path,
) -> Iterator[Crew]:
    topic = next(unused_topics, None)
    assert topic is not None, "every topic of TOPICS is taken: make the list longer"
    crew = Crew(chaos_broker, ctl, producer, client, topic, tmp_path)
    try:
        yield crew
        assert chaos_broker.process.poll() is None, "the broker died:\n" + chaos_broker.log()[-4000:]
    finally:
        crew.close()


def member_ids(detail: dict[str, Any]) -> set[str]:
    return {m["member_id"] for m in detail["members"]}


def broker_lines(broker: BrokerProcess, event: str) -> list[dict[str, Any]]:
    found = []
    for raw in broker.log().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("event") == event:
            found.append(line)
    return found


# -- 1. an error answer to one member's heartbeat -------------------------------------------------------------


def test_rebalance_in_progress_on_one_heartbeat_makes_that_member_rejoin(crew: Crew) -> None:
    """The leader's rejoin rebalances the group; a follower's, with an unchanged subscription, does not (Kafka
    answers a Stable group's follower with the current generation), so both are checked, the follower first."""
    crew.start("a"), crew.start("b")
    before = crew.settled(2)
    generation = before["generation_id"]
    ids = member_ids(before)
    leader = next(m for m in before["members"] if m["is_leader"])
    follower = next(m for m in before["members"] if not m["is_leader"])
    leader_worker, follower_worker = crew.workers[leader["client_id"]], crew.workers[follower["client_id"]]
    mark = crew.last_seq()

    seen = len(follower_worker.events())
    rule = crew.add_fault(
        api="Heartbeat", member_id=follower["member_id"], action="error", error="REBALANCE_IN_PROGRESS", count=1
    )
    assert rule["error_code"] == 27

    def follower_rejoined() -> list[dict[str, Any]] | None:
        later = [e for e in follower_worker.events()[seen:] if e["event"] in ("revoked", "assigned")]
        return later if [e["event"] for e in later] == ["revoked", "assigned"] else None

    revoked, assigned = crew.wait(follower_rejoined, "the follower to revoke and join again")
    assert revoked["partitions"] and revoked["member_id"] == follower["member_id"], revoked
    assert assigned["generation"] == generation and assigned["member_id"] == follower["member_id"], assigned
    assert crew.rule(rule["id"])["hits"] == 1
    assert not crew.events("rebalance_started", after=mark), "a follower's rejoin does not rebalance"
    assert crew.ctl.group(crew.group)["generation_id"] == generation

    rule = crew.add_fault(
        api="Heartbeat", member_id=leader["member_id"], action="error", error="REBALANCE_IN_PROGRESS", count=1
    )
    after = crew.settled(2, min_generation=generation + 1)
    assert crew.rule(rule["id"])["hits"] == 1
    # (A client may rebalance again on its own, e.g. kafka-python's leader after new metadata: not counted.)
    started = crew.events("rebalance_started", after=mark)
    assert [e for e in started if e["cause"] == "member_rejoined" and e["member_id"] == leader["member_id"]], (
        crew.describe()
    )
    assert member_ids(after) == ids, "both rejoined under their own member ids"
    crew.round_consumed_by_each(leader_worker, follower_worker)
    assert crew.ctl.group(crew.group)["generation_id"] == after["generation_id"]


# -- 2. kick --------------------------------------------------------------------------------------------------


def test_kick_evicts_at_once_and_the_kicked_client_rejoins(crew: Crew) -> None:
    a, b = crew.start("a", session_ms=KICK_SESSION_MS), crew.start("b", session_ms=KICK_SESSION_MS)
    before = crew.settled(2)
    generation = before["generation_id"]
    a_id, b_id = crew.member(before, "a")["member_id"], crew.member(before, "b")["member_id"]
    mark = crew.last_seq()

    answer = crew.ctl.kick(crew.group, a_id)
    assert answer == {"group_id": crew.group, "member_id": a_id, "kicked": True}

    expired = crew.wait_event("member_expired", "the kick's member_expired", lambda e: e["member_id"] == a_id, mark)
    assert expired["cause"] == "kicked", expired
    assert expired["session_timeout_ms"] == KICK_SESSION_MS and expired["since_last_heartbeat_ms"] < 5000, expired
    next_generation = crew.wait_event(
        "join_completed", "the group's next generation", lambda e: e["generation_id"] > generation, mark, 10.0
    )
    assert a_id not in next_generation["members"], next_generation
    took = next_generation["ts_ms"] - expired["ts_ms"]  # both on the broker's clock
    assert took < 10_000, f"the next generation came {took} ms after the kick (session {KICK_SESSION_MS} ms)"

    after = crew.settled(2, min_generation=generation + 1)
    new_a = crew.member(after, "a")["member_id"]
    assert new_a != a_id, "the kicked client joins again under a new member id"
    assert crew.member(after, "b")["member_id"] == b_id
    crew.round_consumed_by_each(a, b)


# -- 3. swallowed heartbeats -----------------------------------------------------------------------------------


def test_swallowed_heartbeats_expire_the_member_after_its_session(crew: Crew) -> None:
    a, b = crew.start("a"), crew.start("b")
    before = crew.settled(2)
    generation = before["generation_id"]
    a_id, b_id = crew.member(before, "a")["member_id"], crew.member(before, "b")["member_id"]
    mark = crew.last_seq()

    rule = crew.add_fault(member_id=a_id, action="swallow_heartbeats")

    def starving() -> dict[str, Any] | None:
        detail = crew.ctl.group(crew.group)
        found = [m for m in detail["members"] if m["member_id"] == a_id]
        return detail if found and found[0]["last_heartbeat_age_ms"] >= SESSION_MS // 2 else None

    # Half a session without a heartbeat reaching the coordinator, and "a" is still a member of the same generation.
    during = crew.wait(starving, "a's heartbeats to stop counting", SESSION_MS / 1000)
    assert during["state"] == "Stable" and during["generation_id"] == generation, during
    assert member_ids(during) == {a_id, b_id}
    assert not crew.events("member_expired", after=mark)

    expired = crew.wait_event(
        "member_expired", "a's session to run out", lambda e: e["member_id"] == a_id, mark, SESSION_MS / 1000 + 5
    )
    assert expired["cause"] == "session_timeout", expired
    assert expired["session_timeout_ms"] == SESSION_MS and expired["since_last_heartbeat_ms"] >= SESSION_MS, expired
    assert crew.rule(rule["id"])["hits"] >= 3, "the client kept heartbeating; the broker swallowed them"
    rebalanced = crew.wait_event(
        "join_completed", "a generation without a's old member id", lambda e: e["generation_id"] > generation, mark
    )
    assert a_id not in rebalanced["members"] and b_id in rebalanced["members"], rebalanced

    # Once evicted, the member's heartbeats are no longer swallowed (the rule is still there): it hears
    # UNKNOWN_MEMBER_ID, as from Kafka, and joins again under a new member id.
    assert any(r["id"] == rule["id"] for r in crew.ctl.faults())
    after = crew.settled(2, min_generation=rebalanced["generation_id"])
    assert crew.member(after, "a")["member_id"] != a_id
    assert crew.member(after, "b")["member_id"] == b_id
    crew.round_consumed_by_each(a, b)


# -- 4. a delayed JoinGroup ------------------------------------------------------------------------------------


def test_delayed_join_group_delays_the_join(crew: Crew) -> None:
    b = crew.start("b")
    alone = crew.settled(1)
    b_id = crew.member(alone, "b")["member_id"]
    mark = crew.last_seq()
    rule = crew.add_fault(api="JoinGroup", client_id="a", action="delay", delay_ms=JOIN_DELAY_MS, count=1)
    a = crew.start("a")

    # The delayed JoinGroup reached the broker after the last look that saw no hit, and before the first that did.
    last_miss = time.time()

    def hit() -> float | None:
        nonlocal last_miss
        asked = time.time()
        if crew.rule(rule["id"])["hits"]:
            return time.time()
        last_miss = asked
        return None

    first_hit = crew.wait(hit, "a's JoinGroup to reach the broker")
    after = crew.settled(2)
    a_id = crew.member(after, "a")["member_id"]
    joined = crew.events("member_joined", after=mark)
    assert [e["member_id"] for e in joined] == [a_id], joined
    completed = next(e for e in crew.events("join_completed", after=mark) if a_id in e["members"])

    earliest = last_miss * 1000 + JOIN_DELAY_MS
    early = earliest - joined[0]["ts_ms"]
    assert joined[0]["ts_ms"] >= earliest - 1, f"a joined {early:.0f} ms before its delay ran out"
    assert completed["ts_ms"] >= earliest - 1, completed
    assert joined[0]["ts_ms"] <= first_hit * 1000 + JOIN_DELAY_MS + 2000, "the join waited far longer than the delay"
    assert crew.rule(rule["id"])["hits"] == 1
    assert set(completed["members"]) == {a_id, b_id}, "b stayed in the group while a's join was held"
    crew.round_consumed_by_each(a, b)


# -- 5. a closed connection -------------------------------------------------------------------------------------


def test_closed_heartbeat_connection_the_client_reconnects_and_stays(crew: Crew) -> None:
    a, b = crew.start("a"), crew.start("b")
    before = crew.settled(2)
    generation = before["generation_id"]
    a_id, b_id = crew.member(before, "a")["member_id"], crew.member(before, "b")["member_id"]

    rule = crew.add_fault(api="Heartbeat", client_id="a", action="close", count=1)
    closed_by = crew.wait(lambda: crew.rule(rule["id"])["hits"] == 1 and time.time(), "the close rule to fire")

    def heartbeat_after_close() -> dict[str, Any] | None:
        asked = time.time()
        detail = crew.ctl.group(crew.group)
        found = [m for m in detail["members"] if m["client_id"] == "a"]
        return detail if found and asked - found[0]["last_heartbeat_age_ms"] / 1000 > closed_by else None

    # A heartbeat of a's counted after the close: it reconnected and its session goes on.
    detail = crew.wait(heartbeat_after_close, "a heartbeat from a after its connection was closed")
    reason = f"fault rule {rule['id']} closes the connection"
    closes = [line for line in broker_lines(crew.broker, "closing connection") if line.get("reason") == reason]
    assert len(closes) == 1 and closes[0]["client_id"] == "a", closes
    # All three clients keep their membership across the reconnect: no rejoin, no rebalance.
    assert member_ids(detail) == {a_id, b_id} and detail["generation_id"] == generation, detail
    crew.round_consumed_by_each(a, b)
    after = crew.ctl.group(crew.group)
    assert member_ids(after) == {a_id, b_id} and after["generation_id"] == generation, after
    assert crew.rule(rule["id"])["hits"] == 1


# -- 6. fence a static member -------------------------------------------------------------------------------------


def test_fenced_static_member(crew: Crew, client: str) -> None:
    a, b = crew.start("a", instance_id="static-a"), crew.start("b", instance_id="static-b")
    before = crew.settled(2)
    generation = before["generation_id"]
    a_id, b_id = crew.member(before, "a")["member_id"], crew.member(before, "b")["member_id"]
    mark = crew.last_seq()

    answer = crew.ctl.fence(crew.group, "static-a")
    ghost = answer["new_member_id"]
    assert answer["member_id"] == a_id and ghost not in (a_id, b_id), answer
    fenced = crew.events("member_fenced", after=mark)
    assert fenced and fenced[0]["cause"] == "fenced" and fenced[0]["new_member_id"] == ghost, fenced

    if client == "aiokafka":
        # Never told FENCED_INSTANCE_ID (no instance id on its Heartbeat): UNKNOWN_MEMBER_ID, and a join with
        # its instance id replaces the ghost at once, keeping the generation and the assignment.
        replaced = crew.wait_event(
            "member_fenced", "aiokafka to take its instance back",
            lambda e: e["member_id"] == ghost and e["cause"] == "static_member_replaced", mark,
        )  # fmt: skip
        after = crew.settled(2)
        assert after["generation_id"] == generation, "no rebalance: the static member came back"
        assert crew.member(after, "a")["member_id"] == replaced["new_member_id"]
        assert crew.member(after, "b")["member_id"] == b_id
        assert ghost not in member_ids(after), "the ghost is gone before its session could run out"
        assert "local member_id was not recognized" in a.stderr()
        assert not a.events("error", "commit_failed")
        assert not crew.events("join_completed", "member_expired", after=mark)
        crew.round_consumed_by_each(a, b)
        return

    if client == "kafka-python":
        # Its heartbeat thread stops on FENCED_INSTANCE_ID; poll() goes on, fetching; commit() raises.
        crew.produce_round()
        failed = crew.wait(lambda: a.events("commit_failed"), "a's commit to fail")
        assert "FencedInstanceIdError" in failed[0]["error"], failed
        assert "due to fenced id error" in a.stderr()
    else:
        # librdkafka: a fatal error, reported once by consume().
        errors = crew.wait(lambda: a.events("error"), "confluent to report the fatal error")
        assert "_FATAL" in errors[0]["error"] and "fenced" in errors[0]["error"].lower(), errors

    # Nobody heartbeats for the ghost: its session runs out and the group rebalances without it.
    expired = crew.wait_event(
        "member_expired", "the ghost to expire", lambda e: e["member_id"] == ghost, mark, SESSION_MS / 1000 + 5
    )
    assert expired["cause"] == "session_timeout" and expired["since_last_heartbeat_ms"] >= SESSION_MS, expired
    assert expired["group_instance_id"] == "static-a", expired
    rebalanced = crew.wait_event(
        "join_completed", "a generation without the ghost", lambda e: e["generation_id"] > generation, mark
    )
    assert rebalanced["members"] == [b_id], rebalanced

    if client == "confluent":
        after = crew.settled(1, min_generation=generation + 1)
        assert member_ids(after) == {b_id}
        seen = crew.round_consumed_by_each(b)
        assert not seen["a"], "a fenced confluent consumer fetches nothing more"
        assert a.alive and len(a.events("error")) == 1
        return

    # kafka-python's zombie fetches its old partitions still; the commit after that fails with UNKNOWN_MEMBER_ID
    # (the instance is gone), it reports its partitions lost and joins again, as static-a under a new member id.
    crew.consumed(crew.produce_round())
    rejoined = crew.wait(
        lambda: [e for e in a.events("commit_failed") if "UnknownMemberIdError" in e["error"]], "a's next commit"
    )
    assert "CommitFailedError" in rejoined[0]["error"], rejoined
    after = crew.settled(2, min_generation=rebalanced["generation_id"] + 1)
    new_a = crew.member(after, "a")
    assert new_a["member_id"] not in (a_id, ghost) and new_a["group_instance_id"] == "static-a", new_a
    assert a.events("lost"), "kafka-python reports the partitions lost"
    crew.round_consumed_by_each(a, b)


# -- 7. a forced rebalance ------------------------------------------------------------------------------------------


def test_forced_rebalance_every_member_rejoins(crew: Crew) -> None:
    a, b = crew.start("a"), crew.start("b")
    before = crew.settled(2)
    generation = before["generation_id"]
    ids = member_ids(before)
    mark = crew.last_seq()

    summary = crew.ctl.rebalance(crew.group)
    assert summary["state"] == "PreparingRebalance" and summary["generation_id"] == generation, summary
    after = crew.settled(2, min_generation=generation + 1)

    assert member_ids(after) == ids, "every member rejoined under its own id"
    started = crew.events("rebalance_started", after=mark)
    assert started[0]["cause"] == "forced" and started[0]["member_id"] is None, started
    assert {e["member_id"] for e in crew.events("member_rejoined", after=mark)} == ids
    completed = [e for e in crew.events("join_completed", after=mark) if e["generation_id"] == generation + 1]
    assert len(completed) == 1 and set(completed[0]["members"]) == ids, completed
    crew.round_consumed_by_each(a, b)
