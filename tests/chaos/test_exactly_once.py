"""``group-broker chaos run --exactly-once`` (broker/chaos/exactly_once.py, broker/chaos/eos_worker.py).

The end-to-end test runs the runner as a user would, with its own broker: three transactional
consume-transform-produce workers (confluent-kafka, read_committed, ``send_offsets_to_transaction``), a kill every
4 s for 13 s (seed 4: SIGKILL, SIGTERM, SIGKILL) with restarts after 1 s, a 2 s session timeout. A restarted slot
keeps its transactional id, so its InitProducerId fences the killed incarnation and aborts what it left open
(docs/spec/transactions.md). At the end the output topic, read read_committed from the start, must hold every
acknowledged input exactly once. The other tests feed the verification a duplicate, a gap and a stranger, and
check the option's combinations.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from broker.chaos import exactly_once, options, runner
from broker.chaos.display import exactly_once_line
from broker.chaos.records import Produced
from tests.chaos.test_chaos_runner import chaos

SESSION_MS = 2000
HEARTBEAT_MS = 500


@pytest.mark.timeout(90)
def test_an_exactly_once_chaos_run_outputs_every_input_once(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    done = chaos(
        "--client", "confluent", "--exactly-once", "--consumers", "3", "--partitions", "6",
        "--duration", "13", "--interval", "4", "--kill-ratio", "0.5", "--restart-after", "1", "--seed", "4",
        "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", str(HEARTBEAT_MS),
        "--rate", "100", "--json", str(report_path), "--workdir", str(tmp_path / "work"),
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads(report_path.read_text())
    context = f"{json.dumps(report, indent=1)[:6000]}\nstdout:\n{done.stdout}"
    assert report["ok"] is True and report["config"]["exactly_once"] is True, context
    assert report["notes"] == [], context

    check = report["exactly_once"]
    produced = report["records"]["produced"]
    assert produced > 500, context  # ~100/s for 13 s and more
    assert check["ok"] is True and check["read_to_end"] is True, context
    assert check["output_topic"] == f"{report['config']['topic']}-out", context
    assert (check["missing"], check["duplicated"], check["unexpected"]) == (0, 0, 0), context
    assert check["inputs"] == produced == check["outputs"] == check["unique"], context
    assert check["aborted"] >= 0, context  # a SIGKILL inside an open transaction leaves writes read_committed hides
    # While the run went on the output was read the same way: nothing lost, nothing twice.
    assert (report["records"]["lost"], report["records"]["duplicated"]) == (0, 0), context

    kills = report["kills"]
    assert [k["signal"] for k in kills] == ["SIGKILL", "SIGTERM", "SIGKILL"], context
    for kill in kills:
        assert kill["member_ids"] and kill["detected"] and kill["recovered"], context
        assert kill["restarted_as"] == f"chaos-{kill['slot']}-{kill['incarnation'] + 1}", context
    workers = report["consumers"]
    assert len(workers) == 6, context
    assert {(w["stopped_by"], w["exit_code"]) for w in workers if w["stopped_by"] == "SIGKILL"} == {("SIGKILL", -9)}
    # Each output record names the worker that committed it: together they are the whole output.
    assert sum(w["records"] for w in workers) == check["outputs"], context
    words = " ".join(done.stdout.split())  # the report wraps at 100 columns in a pipe
    assert f"missing 0, duplicated 0, unexpected 0 (aborted writes hidden {check['aborted']})" in words, words
    assert "lost 0, duplicated 0  OK" in done.stdout, done.stdout


def produced(n: int, unacked: tuple[int, ...] = ()) -> Produced:
    return Produced(sent=n, acked=n - len(unacked), unacked=list(unacked), done=True, ready=True)


def test_verify_passes_every_input_exactly_once() -> None:
    check = exactly_once.verify(produced(3), ["k-000002", "k-000000", "k-000001"], "t-out", written=5)
    assert check["ok"] is True
    assert (check["inputs"], check["outputs"], check["unique"], check["aborted"]) == (3, 3, 3, 2)
    assert (check["missing"], check["duplicated"], check["unexpected"]) == (0, 0, 0)
    # A record sent but never acknowledged may have been written once: not a failure.
    assert exactly_once.verify(produced(3, unacked=(2,)), ["k-000000", "k-000001", "k-000002"], "t")["ok"] is True
    assert exactly_once.verify(produced(3, unacked=(2,)), ["k-000000", "k-000001"], "t")["ok"] is True


def test_verify_fails_on_a_duplicate_a_gap_a_stranger_or_an_unread_end() -> None:
    twice = exactly_once.verify(produced(3), ["k-000000", "k-000001", "k-000002", "k-000001"], "t-out")
    assert twice["ok"] is False
    assert (twice["duplicated"], twice["duplicated_keys"], twice["missing"]) == (1, ["k-000001"], 0)
    assert "duplicated 1" in exactly_once_line(twice)

    gap = exactly_once.verify(produced(3), ["k-000000", "k-000002"], "t-out")
    assert gap["ok"] is False and (gap["missing"], gap["missing_keys"], gap["duplicated"]) == (1, ["k-000001"], 0)

    unacked_twice = exactly_once.verify(produced(2, unacked=(1,)), ["k-000000", "k-000001", "k-000001"], "t")
    assert unacked_twice["ok"] is False and unacked_twice["duplicated"] == 1

    stranger = exactly_once.verify(produced(2), ["k-000000", "k-000001", "k-000007"], "t-out")
    assert stranger["ok"] is False and stranger["unexpected_keys"] == ["k-000007"]

    unread = exactly_once.verify(produced(2), None, "t-out", written=4)
    assert unread["ok"] is False and unread["read_to_end"] is False and unread["missing"] == 2
    assert unread["aborted"] is None and "not read to its end" in exactly_once_line(unread)


def test_exactly_once_needs_confluent_and_combines_with_the_rest() -> None:
    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    args = parser.parse_args(["--exactly-once", "--client", "aiokafka"])
    assert runner.run(args) == 2
    problems = options.argument_problems(args)
    assert problems == ["--exactly-once needs --client confluent: its transactional worker is confluent-kafka's"]
    for more in ([], ["--group-protocol", "consumer"], ["--assignor", "cooperative-sticky", "--seed", "3"]):
        args = parser.parse_args(["--exactly-once", "--client", "confluent", "--duration", "5", *more])
        assert options.argument_problems(args) == [], more
    assert parser.parse_args([]).exactly_once is False
