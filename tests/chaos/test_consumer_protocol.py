"""``group-broker chaos run --group-protocol consumer``: KIP-848 consumer groups under the same chaos.

The end-to-end test runs the runner as a user would, with its own broker: three confluent-kafka consumers with
``group.protocol=consumer``, a kill every 4 s for 13 s (seed 4: SIGKILL, SIGTERM, SIGKILL), and the broker's
consumer-group session timeout at 2 s with a 500 ms heartbeat interval (the broker dictates both:
docs/spec/consumer-groups.md 7.1, 7.2, 12.1). A SIGKILLed member is fenced when its session runs out (7.1), a
SIGTERMed one leaves with a heartbeat at epoch -1 (7.4); either bumps the group epoch (4.13) and the group is
Stable again once every member has reconciled to the new target (3.4). Nothing acknowledged may be lost.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from broker.chaos import measure, protocols, runner, schedule
from broker.chaos.display import group_line
from tests.chaos.test_chaos_runner import chaos, event

SESSION_MS = 2000
HEARTBEAT_MS = 500
CONSUMER = protocols.PROTOCOLS["consumer"]


@pytest.mark.timeout(90)
def test_a_consumer_protocol_chaos_run_loses_nothing_and_measures_every_kill(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    done = chaos(
        "--client", "confluent", "--group-protocol", "consumer", "--consumers", "3", "--partitions", "6",
        "--duration", "13", "--interval", "4", "--kill-ratio", "0.5", "--restart-after", "1", "--seed", "4",
        "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", str(HEARTBEAT_MS),
        "--rate", "100", "--json", str(report_path), "--workdir", str(tmp_path / "work"),
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads(report_path.read_text())
    context = f"{json.dumps(report, indent=1)[:6000]}\nstdout:\n{done.stdout}"
    assert report["ok"] is True and report["config"]["group_protocol"] == "consumer", context

    records = report["records"]
    assert records["produced"] > 500 and records["lost"] == 0 and records["unexpected"] == 0, context
    assert records["unique"] == records["produced"], context

    kills = report["kills"]
    assert [k["signal"] for k in kills] == ["SIGKILL", "SIGTERM", "SIGKILL"], context
    for kill in kills:
        assert kill["member_ids"] and kill["detected"] and kill["recovered"], context
        if kill["signal"] == "SIGKILL":
            # Fenced by the broker's session timer, restarted by every heartbeat (section 7.1).
            assert (kill["detect_event"], kill["detect_cause"]) == ("member_expired", "session_timeout"), context
            assert (SESSION_MS - HEARTBEAT_MS - 200) / 1000 <= kill["detect_s"] <= (SESSION_MS + 1500) / 1000, context
        else:
            # librdkafka's close: a ConsumerGroupHeartbeat with epoch -1 (section 7.4), no LeaveGroup.
            assert (kill["detect_event"], kill["detect_cause"]) == ("member_left", "left"), context
            assert kill["detect_s"] < SESSION_MS / 1000, context
        assert kill["detect_s"] <= kill["recover_s"] < kill["detect_s"] + 5, context
        # At least the fencing's bump (4.13); the restarted consumer's join may add one. Epochs only grow.
        assert kill["rebalances"] >= 1 and kill["recover_generation"] >= 2, context
        assert kill["rejoin_s"] is not None and kill["rejoin_s"] >= kill["recover_s"], context
    generations = [k["recover_generation"] for k in kills]
    assert generations == sorted(generations), context

    group = report["group"]
    assert group["protocol"] == "consumer" and group["generation"] >= max(generations), context
    assert group["rebalances"] >= group["rebalances_during_run"] >= len(kills), context
    assert report["summary"]["recovered"] == 3 and report["notes"] == [], context
    consumers = report["consumers"]
    assert len(consumers) == 6 and sum(c["records"] for c in consumers) == records["consumed"], context

    assert "3 kills (confluent, consumer protocol, seed 4)" in done.stdout, done.stdout
    assert "session_timeout" in done.stdout and "group epoch bumps" in done.stdout, done.stdout
    assert f"lost 0, duplicated {records['duplicated']}  OK" in done.stdout, done.stdout
    assert "epoch" in done.stdout and "(target" in done.stdout, "the live line shows the consumer group's epochs"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--client", "aiokafka"], "--group-protocol consumer needs --client confluent: aiokafka speaks only"),
        (["--client", "kafka-python"], "--group-protocol consumer needs --client confluent: kafka-python speaks"),
        (["--assignor", "range"], "--assignor is a classic-protocol client setting"),
    ],
)
def test_the_consumer_protocol_is_refused_where_it_cannot_run(options: list[str], message: str) -> None:
    done = chaos("--group-protocol", "consumer", *options)
    assert done.returncode == 2, done
    assert message in done.stderr, done.stderr

    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    assert runner.run(parser.parse_args(["--group-protocol", "consumer", *options])) == 2


def test_the_bundled_consumer_refuses_the_consumer_protocol_with_other_clients(tmp_path: Path) -> None:
    from broker.chaos import consumer

    base = ["--bootstrap", "127.0.0.1:1", "--group", "g", "--topic", "t", "--client-id", "c", "--out", "x"]
    with pytest.raises(SystemExit) as refused:
        consumer.main(["--client", "kafka-python", "--group-protocol", "consumer", *base])
    assert refused.value.code == 2
    # librdkafka refuses the classic settings with group.protocol=consumer (section 12.1): none is set.
    args = consumer.build_parser().parse_args(["--client", "confluent", "--group-protocol", "consumer", *base])
    config = consumer.confluent_config(args)
    assert config["group.protocol"] == "consumer"
    assert not {"session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"} & set(config)


# -- measuring consumer groups from events, without processes ---------------------------------------------------


def consumer_event(seq: int, ts_ms: int, name: str, **fields: Any) -> dict[str, Any]:
    return {**event(seq, ts_ms, name, **fields), "v": 2, "group_type": "consumer"}


def test_measure_reads_a_consumer_group_recovery_from_its_epochs() -> None:
    """m0 is SIGKILLed at 10 s; its replacement m0b joins at 11 s (an epoch bump, Reconciling: m0 never acks);
    m0 is fenced at 12 s (member_expired, then member_left and a bump: section 4.13); the survivors reconcile and
    the group is Stable at 12.3 s, m0b owning nothing yet; m0b gets partitions and the group is Stable at 12.6 s."""
    c = consumer_event
    events = [
        c(1, 1000, "member_joined", member_id="m0", client_id="chaos-0-0"),
        c(2, 1000, "member_joined", member_id="m1", client_id="chaos-1-0"),
        c(3, 11000, "member_joined", member_id="m0b", client_id="chaos-0-1"),
        c(4, 11000, "group_epoch_bumped", group_epoch=4, cause="subscription_changed", member_id="m0b"),
        c(5, 11000, "target_assignment_computed", assignment_epoch=4, members=3, moved=[]),
        c(6, 11000, "state_changed", **{"from": "Stable", "to": "Reconciling", "group_epoch": 4}),
        c(7, 12000, "member_expired", member_id="m0", timer="session", timeout_ms=2000),
        c(8, 12000, "member_left", member_id="m0", cause="expired", reason="session timeout"),
        c(9, 12000, "group_epoch_bumped", group_epoch=5, cause="member_expired", member_id="m0"),
        c(10, 12000, "state_changed", **{"from": "Reconciling", "to": "Assigning", "group_epoch": 5}),
        c(11, 12100, "target_assignment_computed", assignment_epoch=5, members=2, moved=[]),
        c(12, 12100, "member_reconciled", member_id="m0b", member_epoch=5, assigned={}, state="unreleased_partitions"),
        c(13, 12300, "state_changed", **{"from": "Reconciling", "to": "Stable", "group_epoch": 5}),
        c(14, 12500, "member_reconciled", member_id="m0b", member_epoch=5, assigned={"t": [2]}, state="stable"),
        c(15, 12500, "state_changed", **{"from": "Stable", "to": "Reconciling", "group_epoch": 5}),
        c(16, 12600, "state_changed", **{"from": "Reconciling", "to": "Stable", "group_epoch": 5}),
    ]
    kill = schedule.Kill(1, slot=0, incarnation=0, pid=1, signal="SIGKILL", at=10.0, t=10.0, restarted_as="chaos-0-1")
    measured = measure.measure(kill, events, measure.member_clients(events), None, CONSUMER)
    assert measured == {
        "member_ids": ["m0"],
        "detected": True,
        "detect_event": "member_expired",
        "detect_cause": "session_timeout",
        "detect_s": 2.0,
        "recovered": True,
        "recover_s": 2.3,
        "recover_generation": 5,
        "rebalances": 2,
        "rejoin_s": 2.6,
        "overlapped": False,
    }
    assert measure.group_report(events, 9.0, 13.0, Counter(), CONSUMER)["rebalances"] == 2

    view = protocols.GroupView()
    for record in events:
        view.apply(record)
    assert (view.state, view.members, view.group_epoch, view.assignment_epoch) == ("Stable", {"m1", "m0b"}, 5, 5)
    assert group_line(view.summary()) == "Stable epoch 5 (target 5), 2 members"
    assert group_line({"state": "Stable", "generation_id": 7, "members": 3}) == "Stable gen 7, 3 members"
