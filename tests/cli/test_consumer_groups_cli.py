"""The ``group-broker`` client commands with KIP-848 consumer groups, run as a user runs them (``python -m broker ...``
subprocesses) against a broker in its own process.

The members are real ConsumerGroupHeartbeat v1 clients over TCP, heartbeating every 100 ms on a thread of the test
(``tests/control/consumer_members.py``); a kicked or removed member re-joins on its next heartbeat, as librdkafka
does. Every test uses its own group ids; the broker is shared by the module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.control.client import ControlClient
from tests.cli.test_control_cli import PARTITIONS, TOPIC, Broker, cli, failed, ok, start_broker
from tests.control.consumer_members import MembersThread

ASSIGNED = re.compile(rf"\b{TOPIC}\[([0-9,]+)\]")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = start_broker(tmp_path_factory.mktemp("consumer-cli") / "broker.log")
    yield started
    started.stop()


@pytest.fixture
def api(broker: Broker) -> ControlClient:
    return broker.api()


def owned(text: str) -> list[int]:
    return sorted(int(p) for found in ASSIGNED.findall(text) for p in found.split(","))


def test_groups_describe_watch_and_wait_show_a_consumer_group(broker: Broker, api: ControlClient) -> None:
    group = "cg-cli-show"
    with MembersThread(broker.port, group, 2, topics=(TOPIC,)) as members:
        detail = api.wait(group, state="Stable", members=2, timeout_ms=20_000)
        epoch = detail["group_epoch"]

        header, *rows = ok(cli(broker, "groups")).splitlines()
        assert header.split() == ["GROUP", "TYPE", "STATE", "GENERATION", "PROTOCOL", "MEMBERS", "LEADER"]
        row = next(r for r in rows if r.split()[0] == group)
        assert row.split()[1:] == ["consumer", "Stable", str(epoch), "consumer/uniform", "2", "-"]
        assert [g["group_id"] for g in json.loads(ok(cli(broker, "groups", "--type", "consumer", "--json")))] == [group]
        assert group not in ok(cli(broker, "groups", "--type", "classic"))

        out = ok(cli(broker, "describe", group))
        assert "Type:       consumer" in out
        assert f"Epoch:      {epoch}, target assignment {epoch}" in out
        assert "Assignor:   uniform" in out
        table = out.split("Members (2):\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert table[0].split() == ["MEMBER", "ID", "INSTANCE", "ID", "CLIENT", "ID", "HOST", "EPOCH", "STATE", "LAST",
                                    "HEARTBEAT", "ASSIGNMENT", "REVOKING", "TARGET"]
        for member_id in members.member_ids:
            line = next(line for line in table if line.startswith(member_id))
            assert f" {epoch} " in line and " stable " in line
        assert owned("\n".join(table)) == sorted(list(range(PARTITIONS)) * 2)  # each partition: held, and target
        assert "member_reconciled" in out and "state=stable" in out

        out = ok(cli(broker, "watch", group, "--once"))
        assert f"epoch {epoch}" in out and "STATE" in out
        for member_id in members.member_ids:
            assert member_id in out
        assert owned(out)  # the assignments, as cli[0,1]

        out = ok(cli(broker, "chaos", "wait", group, "--state", "stable", "--members", "2"))
        assert out.strip() == f"group {group}: Stable, epoch {epoch}, 2 members"


def test_kick_fence_and_rebalance_a_consumer_group(broker: Broker, api: ControlClient) -> None:
    group = "cg-cli-verbs"
    with MembersThread(broker.port, group, 2, topics=(TOPIC,), instance_id=None) as dynamic, MembersThread(
        broker.port, group, 1, topics=(TOPIC,), instance_id="cli-static"
    ) as static:
        detail = api.wait(group, state="Stable", members=3, timeout_ms=20_000)
        victim = dynamic.member_ids[0]

        out = ok(cli(broker, "chaos", "kick", group, victim))
        assert out.strip() == f"kicked member {victim} from group {group}"
        detail = api.wait(group, state="Stable", members=3, min_generation=detail["group_epoch"] + 1,
                          timeout_ms=20_000)  # the kicked member re-joined
        assert victim in {m["member_id"] for m in detail["members"]}

        static_id = static.member_ids[0]
        out = ok(cli(broker, "chaos", "fence", group, "cli-static"))
        assert out.strip() == f"removed static member {static_id} (instance cli-static) from group {group}"
        detail = api.wait(group, state="Stable", members=3, min_generation=detail["group_epoch"] + 2,
                          timeout_ms=20_000)
        assert "cli-static" in {m["group_instance_id"] for m in detail["members"]}  # it came back

        before = {m["member_id"]: m["assignment"] for m in detail["members"]}
        out = ok(cli(broker, "chaos", "rebalance", group, "--json"))
        forced = json.loads(out)
        assert (forced["state"], forced["group_epoch"]) == ("Assigning", detail["group_epoch"] + 1)
        epoch = forced["group_epoch"]
        out = ok(cli(broker, "chaos", "wait", group, "--state", "Stable", "--min-generation", str(epoch)))
        assert out.startswith(f"group {group}: Stable, epoch {epoch}")
        after = api.group(group)
        assert {m["member_id"]: m["assignment"] for m in after["members"]} == before  # uniform is sticky

        assert "no static member" in failed(cli(broker, "chaos", "fence", group, "nobody"))


def test_events_of_a_consumer_group_in_watch_json(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cg-cli-events"
    with MembersThread(broker.port, group, 1, topics=(TOPIC,)):
        api.wait(group, state="Stable", members=1, timeout_ms=20_000)
        snapshot = json.loads(ok(cli(broker, "watch", group, "--once", "--json")))
    (shown,) = snapshot["groups"]
    assert shown["group_type"] == "consumer"
    names = [e["event"] for e in snapshot["events"]]
    assert "group_epoch_bumped" in names and "target_assignment_computed" in names
    assert all(e["v"] == 2 and e["group_type"] == "consumer" for e in snapshot["events"])
