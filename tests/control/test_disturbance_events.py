"""Disturbances as events, over real HTTP with every answer checked against ``docs/control-api.yaml``: the broker's
own ``fault_rule_added`` / ``fault_rule_removed`` when the rules change, and a chaos runner's ``chaos_action``
posted to ``POST /v1/events`` (validated: that event only, known fields, bounded size; 400 and nothing recorded
otherwise). The event series of ``/metrics`` count them, and the broker's event log file holds them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from broker.control.posted_events import MAX_BODY_BYTES
from broker.events import names
from broker.server.broker import BrokerServer
from tests.conftest import broker_settings
from tests.control.test_control_api import ControlClient, url


async def every_event(api: ControlClient, count: int) -> list[dict[str, Any]]:
    """The broker's first ``count`` events, every group's (a rule of every group has ``group_id`` "": the
    stream's replay is where those are read)."""
    async with api.stream({"since_seq": 0}) as stream:
        return await stream.until(lambda record: record["seq"] == count)


async def test_fault_rules_added_and_removed_are_events_of_their_group(api: ControlClient) -> None:
    rule = await api.add_fault(api="heartbeat", action="error", error="rebalance_in_progress", group_id="g", count=2)
    delay = await api.add_fault(action="delay", delay_ms=40, client_id="c1")  # every group: group_id ""
    added = await api.events("g")
    assert [e["event"] for e in added] == [names.FAULT_RULE_ADDED], added
    assert added[0] == added[0] | {
        "v": 2, "group_id": "g", "rule_id": rule["id"], "action": "error", "error": "REBALANCE_IN_PROGRESS",
        "count": 2, "match": {"api": "Heartbeat", "group_id": "g"},
    }  # fmt: skip
    # seq 1 is broker_started, the broker's own event (group_id "" too).
    everywhere = [e for e in await every_event(api, 3) if e["group_id"] == "" and e["event"] != names.BROKER_STARTED]
    assert [(e["event"], e["rule_id"], e["match"], e["delay_ms"]) for e in everywhere] == [
        (names.FAULT_RULE_ADDED, delay["id"], {"client_id": "c1"}, 40)
    ]

    assert (await api.delete(f"/v1/faults/{rule['id']}")).status == 204
    assert (await api.delete("/v1/faults/f99")).status == 404  # nothing removed: no event
    assert (await api.delete("/v1/faults")).json == {"deleted": 1}
    removed = [e for e in await every_event(api, 5) if e["event"] == names.FAULT_RULE_REMOVED]
    assert [(e["group_id"], e["rule_id"], e["reason"], e["hits"]) for e in removed] == [
        ("g", rule["id"], "deleted", 0),
        ("", delay["id"], "cleared", 0),
    ]
    # A refused rule changes nothing and records nothing.
    bad = await api.post("/v1/faults", json={"action": "error", "group_id": "g"}, well_formed=False)
    assert bad.status == 400
    assert len(await api.events("g")) == 2

    metrics = await api.metrics()
    for name, count in ((names.FAULT_RULE_ADDED, 2), (names.FAULT_RULE_REMOVED, 2)):
        assert metrics[("group_broker_events_total", frozenset({("event", name)}))] == count, metrics


async def test_a_posted_chaos_action_is_recorded_stamped_by_the_broker(api: ControlClient) -> None:
    body = {
        "event": "chaos_action", "group_id": "g", "action": "kill", "signal": "SIGKILL", "client_id": "chaos-1-0",
        "member_id": "chaos-1-0-abc", "pid": 4242, "session_timeout_ms": 2000, "note": "kill #1",
    }  # fmt: skip
    async with api.stream({"group": "g"}) as stream:
        answer = await api.post("/v1/events", json=body)
        assert answer.status == 201, answer.data
        streamed = await stream.next()
    record = answer.json
    assert record == {**body, "v": 2, "seq": record["seq"], "ts_ms": record["ts_ms"], "run_id": record["run_id"]}
    assert streamed == record
    assert await api.events("g") == [record]
    metrics = await api.metrics()
    assert metrics[("group_broker_events_total", frozenset({("event", names.CHAOS_ACTION)}))] == 1


async def test_only_a_well_formed_chaos_action_can_be_posted(api: ControlClient) -> None:
    good: dict[str, Any] = {"event": "chaos_action", "group_id": "g", "action": "kill"}
    cases: list[tuple[Any, str]] = [
        ({**good, "event": "member_left"}, "only 'chaos_action' events can be posted"),
        ({"group_id": "g", "action": "kill"}, "only 'chaos_action'"),
        ({**good, "seq": 1}, "unknown field(s) ['seq']"),
        ({**good, "ts_ms": 0, "run_id": "x"}, "unknown field(s) ['run_id', 'ts_ms']"),
        ({"event": "chaos_action", "action": "kill"}, "group_id is required"),
        ({**good, "group_id": 7}, "group_id must be a string"),
        ({"event": "chaos_action", "group_id": "g"}, "action is required"),
        ({**good, "action": "Kill -9"}, "action must be a lower-case word"),
        ({**good, "signal": "kill"}, "signal must be a signal's name"),
        ({**good, "pid": -1}, "pid must be between 0 and"),
        ({**good, "pid": True}, "pid must be an integer"),
        ({**good, "session_timeout_ms": "2000"}, "session_timeout_ms must be an integer"),
        ({**good, "note": "x" * 1001}, "note must be at most 1000 characters"),
        ([good], "the body must be a JSON object"),
    ]
    for body, message in cases:
        answer = await api.post("/v1/events", json=body, well_formed=False)
        assert answer.status == 400 and message in answer.error, (body, answer.status, answer.data)
    big = json.dumps({**good, "note": "x" * 900, "client_id": "y" * 900, "member_id": "z" * 900}).encode()
    big = big.replace(b'"kill"', b'"kill"' + b" " * (MAX_BODY_BYTES - len(big) + 1))
    answer = await api.post("/v1/events", body=big, well_formed=False)
    assert answer.status == 400 and f"at most {MAX_BODY_BYTES} bytes" in answer.error, answer.data
    for raw in (b"{", b"[" * 100 + b"]" * 100, b'{"event": "chaos_action", "pid": ' + b"9" * 200 + b"}"):
        answer = await api.post("/v1/events", body=raw, well_formed=False)
        assert answer.status == 400, (raw[:40], answer.data)
    assert (await api.get(url("v1", "groups", "g", "events"))).status == 404  # nothing recorded for g


async def test_the_event_log_file_holds_the_disturbances(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    server = BrokerServer(broker_settings(admin_port=0, event_log=str(log)))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{server.control.port}"
            async with session.post(f"{base}/v1/faults", json={"action": "close", "group_id": "g"}) as added:
                assert added.status == 201
            body = {"event": "chaos_action", "group_id": "g", "action": "kill", "signal": "SIGTERM"}
            async with session.post(f"{base}/v1/events", json=body) as posted:
                assert posted.status == 201
            async with session.delete(f"{base}/v1/faults/f1") as deleted:
                assert deleted.status == 204
    finally:
        await server.stop()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["event"], r["group_id"]) for r in lines] == [
        (names.BROKER_STARTED, ""), (names.FAULT_RULE_ADDED, "g"), (names.CHAOS_ACTION, "g"),
        (names.FAULT_RULE_REMOVED, "g"), (names.BROKER_STOPPED, ""),
    ]  # fmt: skip
    assert [r["seq"] for r in lines] == [1, 2, 3, 4, 5]
