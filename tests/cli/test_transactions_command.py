"""``group-broker transactions``: the open transactions (``--all`` every transactional id, ``--json`` the API's JSON),
run as a user runs it (``python -m broker transactions``, a subprocess) against a broker in this process whose
transactions a real confluent-kafka transactional producer opens. Also how the event tables (``describe``,
``watch``) show a transaction's events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.cli.format import event_details, event_row, transaction_row
from broker.testing.embedded import EmbeddedBroker, run_broker
from tests.conftest import ROOT

TOPIC = "txn"


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with run_broker(topics={TOPIC: 2}) as running:
        yield running


def cli(broker: EmbeddedBroker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", *args, "--admin", broker.admin_url],
        capture_output=True, text=True, cwd=ROOT, timeout=60, env=dict(os.environ),
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def producer(broker: EmbeddedBroker, tid: str) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(10)
    return p


def test_open_transactions_all_and_json(broker: EmbeddedBroker) -> None:
    assert ok(cli(broker, "transactions")).strip() == "no open transactions"
    assert ok(cli(broker, "transactions", "--all")).strip() == "no transactional ids"
    idle_id, open_id = f"idle-{uuid.uuid4()}", f"open-{uuid.uuid4()}"
    producer(broker, idle_id)
    p = producer(broker, open_id)
    p.begin_transaction()
    p.produce(TOPIC, value=b"v", partition=1)
    assert p.flush(10) == 0

    lines = ok(cli(broker, "transactions")).splitlines()
    assert lines[0].split() == ["TRANSACTIONAL", "ID", "STATE", "PRODUCER", "TV", "TIMEOUT", "OPEN", "FOR",
                                "PARTITIONS", "GROUPS"]
    [row] = lines[1:]
    assert row.split()[:2] == [open_id, "Ongoing"]
    assert f"{TOPIC}[1]" in row and "1m00s" in row  # librdkafka's default transaction.timeout.ms

    every = ok(cli(broker, "transactions", "--all"))
    assert open_id in every and idle_id in every and "Empty" in every

    listed = json.loads(ok(cli(broker, "transactions", "--json")))
    assert [t["transactional_id"] for t in listed] == [open_id]
    assert listed[0]["partitions"] == {TOPIC: [1]} and listed[0]["state"] == "Ongoing"
    assert {t["transactional_id"] for t in json.loads(ok(cli(broker, "transactions", "--all", "--json")))} == {
        idle_id, open_id
    }

    p.commit_transaction(10)
    assert ok(cli(broker, "transactions")).strip() == "no open transactions"
    assert "CompleteCommit" in ok(cli(broker, "transactions", "--all"))


def test_unreachable_broker_exits_1() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "transactions", "--admin", "http://127.0.0.1:9"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert result.returncode == 1 and result.stderr.startswith("group-broker: ")


def test_a_transaction_row_and_its_events_read_well() -> None:
    row = transaction_row(
        {
            "transactional_id": "t-1", "state": "Ongoing", "producer_id": 7, "producer_epoch": 2,
            "transaction_version": 1, "txn_timeout_ms": 60_000, "duration_ms": 1_500,
            "partitions": {"b": [1, 0], "a": [3]}, "groups": ["orders", "audit"],
        }
    )
    assert row == ["t-1", "Ongoing", "7/2", "1", "1m00s", "1.5s", "a[3] b[0,1]", "orders,audit"]
    record = {
        "v": 2, "seq": 9, "ts_ms": 0, "run_id": "r", "event": "transaction_timed_out", "group_id": "",
        "transactional_id": "t-1", "producer_id": 7, "producer_epoch": 3, "transaction_version": 1,
        "partitions": {"t": [0, 2]}, "groups": ["orders"], "fenced_epoch": 2, "duration_ms": 61_000,
        "txn_timeout_ms": 60_000,
    }
    details = event_details(record)
    assert details.startswith("transactional_id=t-1 ")
    assert "partitions=t[0,2]" in details and "groups=orders" in details and "fenced_epoch=2" in details
    assert event_row(record)[2] == "transaction_timed_out"
