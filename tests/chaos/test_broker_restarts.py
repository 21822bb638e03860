"""``group-broker chaos run --broker-restart-every`` (broker/chaos/broker_restarts.py): the runner SIGKILLs its
own broker and starts it again on the same ports and data directory, besides killing consumers.

The end-to-end tests run the runner as a user would, 14 s of chaos with a broker restart every 5 s (at 5 s and
10 s; the second leaves 4 s, not 2, for every consumer to commit again, which a loaded CI machine needed) and a
consumer kill every 4 s, for librdkafka and kafka-python consumers: nothing acknowledged lost, no record delivered
again after its commit was acknowledged, and per restart its down time, what the new broker
loaded, and each running consumer's first acknowledged commit after it. The others check the option's
combinations and the commit-file arithmetic on lines written by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from broker.chaos import broker_restarts, options
from tests.chaos.test_chaos_runner import chaos

SESSION_MS = 2000
HEARTBEAT_MS = 500


@pytest.mark.timeout(150)
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_broker_restarts_lose_nothing_and_are_measured(tmp_path: Path, client: str) -> None:
    report_path = tmp_path / "report.json"
    done = chaos(
        "--client", client, "--consumers", "3", "--partitions", "6",
        "--duration", "14", "--interval", "4", "--restart-after", "1", "--seed", "4", "--broker-restart-every", "5",
        "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", str(HEARTBEAT_MS),
        "--rate", "100", "--json", str(report_path), "--workdir", str(tmp_path / "work"),
        timeout=140,
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads(report_path.read_text())
    context = f"{json.dumps(report, indent=1)[:8000]}\nstdout:\n{done.stdout}"
    assert report["ok"] is True and report["config"]["broker_restart_every_s"] == 5, context

    records = report["records"]
    assert records["produced"] > 500 and records["lost"] == 0 and records["lost_keys"] == [], context
    assert records["unique"] == records["produced"] and records["unexpected"] == 0, context
    assert records["commits_acked"] > 0 and records["duplicated_after_commit"] == 0, context

    restarts = report["broker_restarts"]
    assert [round(r["t_s"]) for r in restarts] == [5, 10], context
    # One run id per broker start: the event follower went on across both restarts.
    assert len(report["broker"]["run_ids"]) == len(restarts) + 1, context
    assert {r["run_id"] for r in restarts} < set(report["broker"]["run_ids"]), context
    for restart in restarts:
        assert 0 < restart["down_ms"] < 30_000 and restart["load_ms"] is not None, context
        assert restart["clean_shutdown"] is False and restart["loaded"]["groups"] >= 1, context
        assert restart["loaded"]["records"] > 0 and restart["loaded"]["offsets"] > 0, context
        assert restart["first_commits"], context
        for row in restart["first_commits"]:
            assert row["client_id"].startswith("chaos-"), context
            # Every consumer the schedule left running committed again, after the new broker was listening.
            if row["stopped_after_ms"] is None:
                first = row["first_commit_ms"]  # None (no commit after the restart) fails with the report shown
                assert first is not None and restart["down_ms"] < first < 20_000, context
    assert [k["signal"] for k in report["kills"]] == ["SIGKILL"] * 3, context  # the consumer kills went on

    assert "2 broker restarts (SIGKILL, same ports and data directory)" in done.stdout, done.stdout
    assert "records delivered again after their commit was acknowledged 0" in done.stdout, done.stdout
    assert f"lost 0, duplicated {records['duplicated']}  OK" in done.stdout, done.stdout


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_broker_restarts_need_the_runners_own_broker() -> None:
    assert options.argument_problems(parse("--broker-restart-every", "5")) == []
    assert parse().broker_restart_every is None
    problems = options.argument_problems(parse("--broker-restart-every", "5", "--bootstrap", "127.0.0.1:9092"))
    assert problems == [
        "--broker-restart-every restarts the broker the run starts: a running broker (--bootstrap) is not the "
        "runner's to kill; leave out --bootstrap"
    ]
    for value in ("0", "-1"):
        problems = options.argument_problems(parse("--broker-restart-every", value))
        assert problems == ["--broker-restart-every must be positive"], value


def test_refused_at_the_command_line_with_exit_2() -> None:
    done = chaos("--broker-restart-every", "5", "--bootstrap", "127.0.0.1:1")
    assert done.returncode == 2 and "not the runner's to kill" in done.stderr, done


def commit(client: str, received: float, acked: float, *ranges: tuple[int, int, int]) -> broker_restarts.Commit:
    return broker_restarts.Commit(client, received, acked, ranges)


def test_commit_lines_and_records_delivered_again_after_their_commit() -> None:
    line = "100.5 100.75 0:10:20 3:0:5\n"
    assert broker_restarts.parse_commit("c", line) == commit("c", 100.5, 100.75, (0, 10, 20), (3, 0, 5))
    for torn in ("100.5 100.75 0:10:20", "100.5 100.75 0:10\n", "100.5\n", "100.5 100.75\n"):
        assert broker_restarts.parse_commit("c", torn) is None, torn

    # a reads 0-20 and commits 20; b takes the partition over and starts at 20: no duplicate.
    clean = [commit("a", 1.0, 1.1, (0, 0, 20)), commit("b", 2.0, 2.1, (0, 20, 30))]
    assert broker_restarts.commits_gone_back(clean) == []
    # b re-reads 10-20 after a's commit of 20 was acknowledged: ten records came again although committed.
    # c re-reads 15-25 before a's commit was acknowledged: an ordinary at-least-once duplicate.
    gone = [commit("c", 1.05, 1.3, (0, 15, 25)), *clean[:1], commit("b", 2.0, 2.1, (0, 10, 30))]
    assert broker_restarts.commits_gone_back(gone) == [{
        "partition": 0, "client_id": "b", "first_offset": 10, "received_at": 2.0, "committed_offset": 25,
        "committed_by": "c", "records": 15,
    }]  # fmt: skip
