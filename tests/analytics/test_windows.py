"""The windows, on small hand-written logs whose answers are worked out by hand in each test's docstring.

Every scenario is its own group, so one run of the job (in a module fixture) serves all the tests. The events are
what the coordinator emits for each situation (broker/coordinator/coordinator.py), state changes included.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import job
from tests.analytics.conftest import Log, rows, write_lines

Tables = dict[str, list[dict[str, Any]]]


def joined(log: Log, ts: int, member: str, session_ms: int = 3000, instance: str | None = None) -> None:
    log(ts, "member_joined", member_id=member, group_instance_id=instance, client_id=f"client-{member}",
        client_host="/127.0.0.1", protocol_type="consumer", protocols=["range"], session_timeout_ms=session_ms,
        rebalance_timeout_ms=10000, reason=None)  # fmt: skip


def started(log: Log, ts: int, generation: int, previous: str, members: int, cause: str, member: str | None) -> None:
    log(ts, "state_changed", **{"from": previous, "to": "PreparingRebalance", "generation_id": generation})
    log(ts, "rebalance_started", generation_id=generation, previous_state=previous, members=members, cause=cause,
        member_id=member, reason="words")  # fmt: skip


def join_done(log: Log, ts: int, generation: int, members: list[str], protocol: str = "range") -> None:
    state = "CompletingRebalance" if members else "Empty"
    log(ts, "state_changed", **{"from": "PreparingRebalance", "to": state, "generation_id": generation})
    log(ts, "join_completed", generation_id=generation, state=state, protocol_type="consumer",
        protocol=protocol if members else None, leader=members[0] if members else None, members=members)  # fmt: skip
    if not members:
        log(ts, "group_emptied", generation_id=generation)


def synced(
    log: Log,
    ts: int,
    generation: int,
    assignments: dict[str, list[int]],
    *,
    cooperative: bool = False,
    moved: Sequence[tuple[int, str | None, str | None]] = (),
    unowned: int = 0,
    rebalance_ms: int = 0,
) -> None:
    log(ts, "state_changed", **{"from": "CompletingRebalance", "to": "Stable", "generation_id": generation})
    log(ts, "sync_completed", generation_id=generation,
        protocol="cooperative-sticky" if cooperative else "range",
        assignments={member: ({"t": parts} if parts else {}) for member, parts in assignments.items()},
        moved=[{"topic": "t", "partition": p, "from": a, "to": b} for p, a, b in moved], unowned=unowned,
        rebalance_ms=rebalance_ms, rebalance_protocol="cooperative" if cooperative else "eager",
        assignment_bytes={member: 30 for member in assignments})  # fmt: skip


def expired(log: Log, ts: int, member: str, silence_ms: int, cause: str = "session_timeout") -> None:
    log(ts, "member_expired", member_id=member, group_instance_id=None, client_id=f"client-{member}",
        since_last_heartbeat_ms=silence_ms, session_timeout_ms=3000, cause=cause)  # fmt: skip


def eager_log(run_id: str, group: str) -> Log:
    """Two members, one expires: the initial rebalance and the one the expiry starts."""
    log = Log(run_id, group)
    log(1000, "group_created")
    joined(log, 1000, "a")
    started(log, 1000, 0, "Empty", 1, "member_joined", "a")
    joined(log, 1000, "b")
    join_done(log, 2000, 1, ["a", "b"])
    synced(log, 2100, 1, {"a": [0, 1], "b": [2, 3]}, rebalance_ms=1100)
    expired(log, 10000, "b", 3001)
    started(log, 10000, 1, "Stable", 1, "member_expired", "b")
    join_done(log, 10500, 2, ["a"])
    synced(log, 10600, 2, {"a": [0, 1, 2, 3]}, moved=[(2, "b", "a"), (3, "b", "a")], rebalance_ms=600)
    return log


def restart_log() -> Log:
    log = Log("run-b", "restart")
    joined(log, 0, "a")
    started(log, 0, 0, "Empty", 1, "member_joined", "a")
    join_done(log, 100, 1, ["a"])
    synced(log, 200, 1, {"a": [0, 1]}, rebalance_ms=200)
    joined(log, 5000, "b")
    started(log, 5000, 1, "Stable", 2, "member_joined", "b")
    join_done(log, 5200, 2, ["a", "b"])
    joined(log, 5300, "c")  # during CompletingRebalance: the rebalance starts over
    log(5300, "state_changed", **{"from": "CompletingRebalance", "to": "PreparingRebalance", "generation_id": 2})
    log(5300, "rebalance_started", generation_id=2, previous_state="CompletingRebalance", members=3,
        cause="member_joined", member_id="c", reason="words")  # fmt: skip
    join_done(log, 5500, 3, ["a", "b", "c"])
    synced(log, 5600, 3, {"a": [0], "b": [1], "c": []}, rebalance_ms=300)
    return log


def killed_eager_log() -> Log:
    log = Log("run-c", "killed-eager")
    for member in ("a", "b", "c"):
        joined(log, 0, member)
        if member == "a":
            started(log, 0, 0, "Empty", 1, "member_joined", "a")
    join_done(log, 100, 1, ["a", "b", "c"])
    synced(log, 200, 1, {"a": [0], "b": [1], "c": [2]})
    log(4000, "member_rejoined", member_id="a", protocols=["range"], state="Stable", reason="metadata changed")
    started(log, 4000, 1, "Stable", 3, "member_rejoined", "a")
    log(4100, "member_rejoined", member_id="b", protocols=["range"], state="PreparingRebalance", reason=None)
    expired(log, 6000, "c", 3000)  # c was killed: it never rejoins, and its session runs out mid-rebalance
    join_done(log, 6000, 2, ["a", "b"])
    synced(log, 6100, 2, {"a": [0, 2], "b": [1]}, moved=[(2, "c", "a")])
    return log


def killed_cooperative_log() -> Log:
    log = Log("run-c", "killed-coop")
    joined(log, 0, "a")
    started(log, 0, 0, "Empty", 1, "member_joined", "a")
    joined(log, 0, "b")
    join_done(log, 100, 1, ["a", "b"], protocol="cooperative-sticky")
    synced(log, 200, 1, {"a": [0, 1], "b": [2, 3]}, cooperative=True)
    log(3000, "member_rejoined", member_id="a", protocols=["cooperative-sticky"], state="Stable", reason=None)
    started(log, 3000, 1, "Stable", 2, "member_rejoined", "a")
    expired(log, 4000, "b", 3500)
    join_done(log, 4000, 2, ["a"], protocol="cooperative-sticky")
    synced(log, 4100, 2, {"a": [0, 1, 2, 3]}, cooperative=True, moved=[(2, "b", "a"), (3, "b", "a")])
    return log


def deleted_log() -> Log:
    log = Log("run-d", "deleted")
    log(0, "group_created")
    joined(log, 0, "a")
    started(log, 0, 0, "Empty", 1, "member_joined", "a")
    join_done(log, 100, 1, ["a"])
    synced(log, 200, 1, {"a": [0, 1]})
    log(1000, "member_left", member_id="a", group_instance_id=None, client_id="client-a", cause="leave_group",
        reason="the consumer is being closed")  # fmt: skip
    started(log, 1000, 1, "Stable", 0, "member_left", "a")
    join_done(log, 1000, 2, [])
    log(2000, "state_changed", **{"from": "Empty", "to": "Dead", "generation_id": 2})
    log(2000, "group_deleted", reason="deleted by DeleteGroups")
    log(3000, "group_created")
    joined(log, 3000, "x")
    started(log, 3000, 0, "Empty", 1, "member_joined", "x")
    join_done(log, 3100, 1, ["x"])
    synced(log, 3200, 1, {"x": [0, 1]})
    log(5000, "state_changed", **{"from": "Stable", "to": "Dead", "generation_id": 1})  # the broker shut down
    return log


def cooperative_move_log() -> Log:
    log = Log("run-f", "coop-move")
    joined(log, 500, "a")
    started(log, 500, 0, "Empty", 1, "member_joined", "a")
    join_done(log, 900, 1, ["a"], protocol="cooperative-sticky")
    synced(log, 1000, 1, {"a": [0, 1, 2, 3]}, cooperative=True)
    joined(log, 2000, "b")
    started(log, 2000, 1, "Stable", 2, "member_joined", "b")
    join_done(log, 2400, 2, ["a", "b"], protocol="cooperative-sticky")
    synced(log, 2500, 2, {"a": [0, 1], "b": []}, cooperative=True, moved=[(2, "a", None), (3, "a", None)], unowned=2)
    log(2600, "member_rejoined", member_id="a", protocols=["cooperative-sticky"], state="Stable", reason=None)
    started(log, 2600, 2, "Stable", 2, "member_rejoined", "a")
    join_done(log, 2900, 3, ["a", "b"], protocol="cooperative-sticky")
    synced(log, 3000, 3, {"a": [0, 1], "b": [2, 3]}, cooperative=True, moved=[(2, None, "b"), (3, None, "b")])
    return log


def static_log() -> Log:
    log = Log("run-h", "static")
    log(0, "member_joined", member_id="s1", group_instance_id="i1", client_id="cs", client_host="/10.0.0.1",
        protocol_type="consumer", protocols=["range"], session_timeout_ms=5000, rebalance_timeout_ms=10000,
        reason=None)  # fmt: skip
    started(log, 0, 0, "Empty", 1, "member_joined", "s1")
    joined(log, 0, "d")
    join_done(log, 100, 1, ["s1", "d"])
    synced(log, 200, 1, {"s1": [0], "d": [1]})
    # The static member's process restarted: same group.instance.id, new member id, no rebalance (KIP-345).
    log(5000, "member_fenced", member_id="s1", new_member_id="s2", group_instance_id="i1", client_id="cs",
        cause="static_member_replaced", reason=None)  # fmt: skip
    log(8000, "member_left", member_id="s2", group_instance_id="i1", client_id="cs", cause="leave_group",
        reason="closing")  # fmt: skip
    started(log, 8000, 1, "Stable", 1, "member_left", "s2")
    join_done(log, 8100, 2, ["d"])
    synced(log, 8200, 2, {"d": [0, 1]}, moved=[(0, "s1", "d")])
    return log


def kicked_log() -> Log:
    log = Log("run-i", "kicked")
    joined(log, 0, "a")
    started(log, 0, 0, "Empty", 1, "member_joined", "a")
    joined(log, 0, "b")
    join_done(log, 100, 1, ["a", "b"])
    synced(log, 200, 1, {"a": [0], "b": [1]})
    expired(log, 1000, "b", 700, cause="kicked")
    started(log, 1000, 1, "Stable", 1, "member_kicked", "b")
    join_done(log, 1050, 2, ["a"])
    synced(log, 1100, 2, {"a": [0, 1]}, moved=[(1, "b", "a")])
    return log


@pytest.fixture(scope="module")
def tables(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Tables:
    tmp = tmp_path_factory.mktemp("windows")
    in_order: list[str] = []
    for log in (eager_log("run-a", "eager"), restart_log(), killed_eager_log(), killed_cooperative_log(),
                deleted_log(), cooperative_move_log(), static_log(), kicked_log()):  # fmt: skip
        in_order += log.lines()
    # The same history as "eager" in another run, its lines shuffled across two files, two of them repeated.
    shuffled = eager_log("run-e", "out-of-order").lines()
    random.Random(7).shuffle(shuffled)
    half = len(shuffled) // 2
    files = [
        write_lines(tmp / "events.jsonl", in_order),
        write_lines(tmp / "part-1.jsonl", shuffled[:half]),
        write_lines(tmp / "part-2.jsonl", shuffled[half:] + shuffled[:2]),
    ]
    out = tmp / "out"
    job.run([str(f) for f in files], str(out), spark=spark)
    return {name: rows(spark, out, name) for name in ("input", "rebalances", "members", "ownership", "summary")}


def of(tables: Tables, table: str, group: str, *keys: str) -> list[dict[str, Any]]:
    found = [row for row in tables[table] if row["group_id"] == group]
    return sorted(found, key=lambda row: tuple((row[k] is None, row[k]) for k in keys))


def pick(row: dict[str, Any], *names: str) -> tuple[Any, ...]:
    return tuple(row[name] for name in names)


REBALANCE = ("generation", "previous_generation", "cause", "trigger_member", "restarts", "start_ms", "end_ms",
             "duration_ms", "outcome", "members_before", "members_after", "partitions_moved", "partitions_unowned",
             "partitions", "unowned_partition_seconds", "rebalance_protocol")  # fmt: skip
OWNER = ("topic", "partition", "member_id", "generation", "start_ms", "end_ms", "duration_ms", "end")
MEMBER = ("member_id", "joined_ms", "ended_ms", "duration_ms", "end", "end_cause", "since_last_heartbeat_ms")


def test_eager_rebalances_members_and_ownership(tables: Tables) -> None:
    """4 partitions. Initial rebalance 1000-2100: nothing owned before, all 4 after: 4 x 1.1 s = 4.4 unowned
    partition-seconds. b expires at 10000 (3001 ms after its last heartbeat) and a rebalance runs to 10600: eager,
    so a revokes its two at the start and all 4 are unowned for 0.6 s: 2.4."""
    rebalances = [pick(r, *REBALANCE) for r in of(tables, "rebalances", "eager", "start_ms")]
    assert rebalances == [
        (1, 0, "member_joined", "a", 0, 1000, 2100, 1100, "stable", 1, 2, 0, 0, 4, 4.4, "eager"),
        (2, 1, "member_expired", "b", 0, 10000, 10600, 600, "stable", 1, 1, 2, 0, 4, 2.4, "eager"),
    ]
    assert [r["broker_rebalance_ms"] for r in of(tables, "rebalances", "eager", "start_ms")] == [1100, 600]
    members = [pick(m, *MEMBER) for m in of(tables, "members", "eager", "member_id")]
    assert members == [
        ("a", 1000, None, None, "open", None, None),
        ("b", 1000, 10000, 9000, "expired", "session_timeout", 3001),
    ]
    b = of(tables, "members", "eager", "member_id")[1]
    details = pick(b, "client_id", "client_host", "session_timeout_ms", "run_id")
    assert details == ("client-b", "/127.0.0.1", 3000, "run-a")
    owners = [pick(o, *OWNER) for o in of(tables, "ownership", "eager", "start_ms", "partition")]
    assert owners == [
        ("t", 0, "a", 1, 2100, 10000, 7900, "rebalance"),
        ("t", 1, "a", 1, 2100, 10000, 7900, "rebalance"),
        ("t", 2, "b", 1, 2100, 10000, 7900, "member_gone"),  # b's expiry comes before the rebalance it starts
        ("t", 3, "b", 1, 2100, 10000, 7900, "member_gone"),
        ("t", 0, "a", 2, 10600, None, None, "open"),
        ("t", 1, "a", 2, 10600, None, None, "open"),
        ("t", 2, "a", 2, 10600, None, None, "open"),
        ("t", 3, "a", 2, 10600, None, None, "open"),
    ]


def test_a_rebalance_started_during_a_rebalance_is_a_restart_of_the_same_episode(tables: Tables) -> None:
    """b joins at 5000 (rebalance); c joins at 5300 while the group completes it: the broker starts over (its
    sync_completed.rebalance_ms, 300, counts from that second start), the episode counts from 5000 to 5600.
    Eager, 2 partitions unowned for 0.6 s."""
    episodes = of(tables, "rebalances", "restart", "start_ms")
    assert [pick(r, *REBALANCE) for r in episodes] == [
        (1, 0, "member_joined", "a", 0, 0, 200, 200, "stable", 1, 1, 0, 0, 2, 0.4, "eager"),
        (3, 1, "member_joined", "b", 1, 5000, 5600, 600, "stable", 2, 3, 0, 0, 2, 1.2, "eager"),
    ]
    assert episodes[1]["broker_rebalance_ms"] == 300
    # Every rebalance_started is an episode or a restart of one.
    assert sum(1 + r["restarts"] for r in episodes) == 3


def test_a_member_killed_during_an_eager_rebalance(tables: Tables) -> None:
    """a rejoins at 4000 (rebalance); c, killed, never rejoins and expires at 6000, which completes the join.
    Everything was revoked at 4000, so c's partition ends with the rebalance, not with c; 3 partitions unowned
    from 4000 to 6100: 6.3."""
    episodes = of(tables, "rebalances", "killed-eager", "start_ms")
    second = (2, 1, "member_rejoined", "a", 0, 4000, 6100, 2100, "stable", 3, 2, 1, 0, 3, 6.3, "eager")
    assert [pick(r, *REBALANCE) for r in episodes][1] == second
    c = of(tables, "members", "killed-eager", "member_id")[2]
    assert pick(c, *MEMBER) == ("c", 0, 6000, 6000, "expired", "session_timeout", 3000)
    owners = of(tables, "ownership", "killed-eager", "generation", "partition")
    first = [pick(o, "partition", "member_id", "end_ms", "end") for o in owners][:3]
    assert first == [(0, "a", 4000, "rebalance"), (1, "b", 4000, "rebalance"), (2, "c", 4000, "rebalance")]


def test_a_member_killed_during_a_cooperative_rebalance(tables: Tables) -> None:
    """Cooperative: a keeps 0 and 1 through the rebalance (3000-4100); b keeps 2 and 3 until it expires at 4000.
    Covered: 2 x 1.1 + 2 x 1.0 = 4.2 of 4 x 1.1 = 4.4 partition-seconds: 0.2 unowned."""
    episodes = of(tables, "rebalances", "killed-coop", "start_ms")
    assert [pick(r, *REBALANCE) for r in episodes] == [
        (1, 0, "member_joined", "a", 0, 0, 200, 200, "stable", 1, 2, 0, 0, 4, 0.8, "cooperative"),
        (2, 1, "member_rejoined", "a", 0, 3000, 4100, 1100, "stable", 2, 1, 2, 0, 4, 0.2, "cooperative"),
    ]
    owners = [pick(o, *OWNER) for o in of(tables, "ownership", "killed-coop", "start_ms", "partition")]
    assert owners == [
        ("t", 0, "a", 1, 200, None, None, "open"),  # one interval through both generations
        ("t", 1, "a", 1, 200, None, None, "open"),
        ("t", 2, "b", 1, 200, 4000, 3800, "member_gone"),
        ("t", 3, "b", 1, 200, 4000, 3800, "member_gone"),
        ("t", 2, "a", 2, 4100, None, None, "open"),
        ("t", 3, "a", 2, 4100, None, None, "open"),
    ]


def test_cooperative_partitions_move_through_a_revocation_round(tables: Tables) -> None:
    """a owns 0-3; b joins (2000-2500): a keeps 0 and 1 and gives up 2 and 3, which stay unowned until the
    follow-up rebalance (2600-3000) gives them to b. The first rebalance costs nothing (every partition is owned
    throughout); the second leaves 2 and 3 unowned for its 0.4 s: 0.8."""
    episodes = of(tables, "rebalances", "coop-move", "start_ms")
    assert [pick(r, *REBALANCE) for r in episodes] == [
        (1, 0, "member_joined", "a", 0, 500, 1000, 500, "stable", 1, 1, 0, 0, 4, 2.0, "cooperative"),
        (2, 1, "member_joined", "b", 0, 2000, 2500, 500, "stable", 2, 2, 2, 2, 4, 0.0, "cooperative"),
        (3, 2, "member_rejoined", "a", 0, 2600, 3000, 400, "stable", 2, 2, 2, 0, 4, 0.8, "cooperative"),
    ]
    owners = [pick(o, *OWNER) for o in of(tables, "ownership", "coop-move", "start_ms", "partition")]
    assert owners == [
        ("t", 0, "a", 1, 1000, None, None, "open"),
        ("t", 1, "a", 1, 1000, None, None, "open"),
        ("t", 2, "a", 1, 1000, 2500, 1500, "moved"),
        ("t", 3, "a", 1, 1000, 2500, 1500, "moved"),
        ("t", 2, "b", 3, 3000, None, None, "open"),
        ("t", 3, "b", 3, 3000, None, None, "open"),
    ]


def test_a_group_deleted_mid_log_starts_afresh_and_a_shutdown_unloads_it(tables: Tables) -> None:
    """a leaves, the group empties and is deleted at 2000, then created again with x. The new incarnation's
    first rebalance has no "before" (the old sync belongs to the deleted group): 2 partitions x 0.2 s. The broker
    shuts down at 5000: x and its partitions end "unloaded"."""
    episodes = of(tables, "rebalances", "deleted", "start_ms")
    assert [pick(r, *REBALANCE) for r in episodes] == [
        (1, 0, "member_joined", "a", 0, 0, 200, 200, "stable", 1, 1, 0, 0, 2, 0.4, "eager"),
        (2, 1, "member_left", "a", 0, 1000, 1000, 0, "empty", 0, 0, None, None, 2, 0.0, None),
        (1, 0, "member_joined", "x", 0, 3000, 3200, 200, "stable", 1, 1, 0, 0, 2, 0.4, "eager"),
    ]
    members = [pick(m, *MEMBER) for m in of(tables, "members", "deleted", "member_id")]
    assert members == [
        ("a", 0, 1000, 1000, "left", "leave_group", None),
        ("x", 3000, 5000, 2000, "unloaded", "unloaded", None),
    ]
    owners = [pick(o, *OWNER) for o in of(tables, "ownership", "deleted", "start_ms", "partition")]
    assert owners == [
        ("t", 0, "a", 1, 200, 1000, 800, "member_gone"),
        ("t", 1, "a", 1, 200, 1000, 800, "member_gone"),
        ("t", 0, "x", 1, 3200, 5000, 1800, "unloaded"),
        ("t", 1, "x", 1, 3200, 5000, 1800, "unloaded"),
    ]


def test_lines_out_of_order_across_files_and_repeated_give_the_same_answer(tables: Tables) -> None:
    def strip(table: str, row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k not in ("group_id", "run_id")}

    for table, keys in (("rebalances", ("start_ms",)), ("members", ("member_id",)),
                        ("ownership", ("start_ms", "partition"))):  # fmt: skip
        expected = [strip(table, r) for r in of(tables, table, "eager", *keys)]
        assert [strip(table, r) for r in of(tables, table, "out-of-order", *keys)] == expected, table
    report = {row["kind"]: row for row in tables["input"]}
    assert report["duplicate"]["count"] == 2
    assert all(":" in example and "part-2.jsonl:" in example for example in report["duplicate"]["examples"])


def test_a_static_member_keeps_its_partitions_through_a_replacement(tables: Tables) -> None:
    """s1 (instance i1) is replaced by s2 at 5000 without a rebalance; s2 leaves at 8000. The partition s1 got in
    generation 1 is owned until the instance leaves; s2 inherits the host and session timeout of the join."""
    members = of(tables, "members", "static", "member_id")
    assert [pick(m, *MEMBER, "group_instance_id", "client_host", "session_timeout_ms") for m in members] == [
        ("d", 0, None, None, "open", None, None, None, "/127.0.0.1", 3000),
        ("s1", 0, 5000, 5000, "fenced", "static_member_replaced", None, "i1", "/10.0.0.1", 5000),
        ("s2", 5000, 8000, 3000, "left", "leave_group", None, "i1", "/10.0.0.1", 5000),
    ]
    owners = [pick(o, *OWNER) for o in of(tables, "ownership", "static", "start_ms", "partition")][:2]
    assert owners == [("t", 0, "s1", 1, 200, 8000, 7800, "member_gone"), ("t", 1, "d", 1, 200, 8000, 7800, "rebalance")]


def test_a_kicked_member_is_not_an_expiration(tables: Tables) -> None:
    b = of(tables, "members", "kicked", "member_id")[1]
    assert pick(b, *MEMBER) == ("b", 0, 1000, 1000, "kicked", "kicked", 700)
    summary = of(tables, "summary", "kicked")
    assert [(s["expirations"], s["causes"], s["detection_ms_max"]) for s in summary] == [
        (0, {"member_joined": 1, "member_kicked": 1}, None)
    ]


def test_summary_per_group_and_overall(tables: Tables) -> None:
    by_group = {row["group_id"]: row for row in tables["summary"] if row["scope"] == "group"}
    overall = [row for row in tables["summary"] if row["scope"] == "all"]
    assert len(overall) == 1 and overall[0]["group_id"] is None
    all_rows = overall[0]

    eager = by_group["eager"]
    # The group's formation (1,100 ms, 4.4 unowned p-s) counted apart: the protocols count the episodes after it,
    # and the percentiles are of those that ended Stable after it (issue 26), as the report's.
    split = ("rebalances", "formations", "eager", "cooperative", "consumer", "no_protocol", "expirations")
    assert tuple(eager[k] for k in split) == (2, 1, 1, 0, 0, 0, 1)
    assert eager["causes"] == {"member_joined": 1, "member_expired": 1}
    assert (eager["rebalance_ms_p50"], eager["rebalance_ms_p95"], eager["rebalance_ms_max"]) == (600.0, 600.0, 600.0)
    assert (eager["detection_ms_p50"], eager["detection_ms_max"]) == (3001.0, 3001.0)
    assert (eager["unowned_ps_p50"], eager["unowned_ps_max"], eager["unowned_partition_seconds"]) == (2.4, 2.4, 6.8)
    assert eager["formation_unowned_partition_seconds"] == 4.4
    coop = by_group["coop-move"]
    assert (coop["formations"], coop["cooperative"], coop["unowned_partition_seconds"]) == (1, 2, 2.8)
    # The empty episode counts as a rebalance, with no protocol; only Stable ones after formation give durations:
    # the group formed twice (created, then again after Empty), so none here.
    deleted = by_group["deleted"]
    assert tuple(deleted[k] for k in split[:6]) == (3, 2, 0, 0, 0, 1) and deleted["rebalance_ms_max"] is None
    for row in [*by_group.values(), all_rows]:  # every split adds up
        assert row["rebalances"] == sum(row[k] for k in split[1:6]), row["group_id"]

    assert all_rows["rebalances"] == sum(row["rebalances"] for row in by_group.values()) == len(tables["rebalances"])
    # Expired: eager b (3001), killed-eager c (3000), killed-coop b (3500), out-of-order b (3001).
    assert all_rows["expirations"] == 4
    assert (all_rows["detection_ms_p50"], all_rows["detection_ms_max"]) == (3001.0, 3500.0)
    causes: dict[str, int] = {}
    for row in by_group.values():
        for cause, count in row["causes"].items():
            causes[cause] = causes.get(cause, 0) + count
    assert all_rows["causes"] == causes
    assert all_rows["unowned_partition_seconds"] == pytest.approx(
        sum(r["unowned_partition_seconds"] or 0 for r in tables["rebalances"])
    )


def test_input_report_of_clean_logs(tables: Tables) -> None:
    report = {row["kind"]: (row["count"], len(row["examples"])) for row in tables["input"]}
    lines = report.pop("lines")[0]
    assert report.pop("parsed")[0] == lines - 2
    assert report == {
        "malformed": (0, 0), "unknown_event": (0, 0), "newer_version": (0, 0), "unknown_version": (0, 0),
        "missing_field": (0, 0), "duplicate": (2, 2),
    }  # fmt: skip
