"""A steady group writes nothing to the data directory (issue 27's heartbeat bar: ``--data-dir`` heartbeats >= 0.95x
memory-only holds because a heartbeat that changes nothing has nothing to write). The deterministic proxy of that
bar: the journal's and the segments' bytes do not move while a classic member (kafka-python) and two KIP-848
members (librdkafka) heartbeat for a few seconds, and they do move when one of them commits."""

from __future__ import annotations

import threading
import time
import urllib.error
from pathlib import Path

import pytest

from tests.durability.broker_process import BrokerProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
#: The KIP-848 heartbeat interval the broker gives its members: 200 ms, so that a few seconds hold many heartbeats.
CONSUMER_TIMERS = (
    "--group-consumer-heartbeat-interval-ms", "200", "--group-consumer-min-heartbeat-interval-ms", "200",
)  # fmt: skip


def directory_bytes(data_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(data_dir)): p.stat().st_size for p in sorted(data_dir.rglob("*")) if p.is_file()}


def test_steady_heartbeats_of_both_protocols_write_nothing(tmp_path: Path) -> None:
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer

    broker = BrokerProcess(tmp_path / "data", "--topic", "t:3", *CONSUMER_TIMERS)
    broker.start()
    stop = threading.Event()
    members: list[Consumer] = []
    poller: threading.Thread | None = None
    try:
        classic = KafkaConsumer(
            "t", bootstrap_servers=broker.bootstrap, group_id="steady-classic", enable_auto_commit=False,
            session_timeout_ms=6000, heartbeat_interval_ms=100,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while len(classic.assignment()) < 3:
            assert time.monotonic() < deadline, "the classic member was not assigned"
            classic.poll(100)
        members = [
            Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "steady-cg", "group.protocol": "consumer",
                      "enable.auto.commit": False})
            for _ in range(2)
        ]  # fmt: skip
        for member in members:
            member.subscribe(["t"])

        def poll_all() -> None:
            while not stop.is_set():
                for member in members:
                    member.poll(0.05)

        poller = threading.Thread(target=poll_all, daemon=True)
        poller.start()
        while True:  # reconciled: every partition owned, and the group's epoch settled
            try:
                group = broker.get("/v1/groups/steady-cg")
            except urllib.error.HTTPError:  # 404 until the first heartbeat
                assert time.monotonic() < deadline, "no KIP-848 group"
                time.sleep(0.1)
                continue
            owned = sum(len(ps) for m in group["members"] for ps in (m.get("assignment") or {}).values())
            if group["state"] == "Stable" and owned == 3:
                break
            assert time.monotonic() < deadline, group
            classic.poll(100)
            time.sleep(0.1)
        time.sleep(0.5)  # the members' last acknowledgements of their assignments
        epochs = [m["member_epoch"] for m in broker.get("/v1/groups/steady-cg")["members"]]
        before = directory_bytes(tmp_path / "data")
        quiet_until = time.monotonic() + 3
        while time.monotonic() < quiet_until:
            classic.poll(100)  # kafka-python heartbeats every 100 ms; librdkafka every 200 ms
        after = directory_bytes(tmp_path / "data")
        assert [m["member_epoch"] for m in broker.get("/v1/groups/steady-cg")["members"]] == epochs
        assert after == before, "a steady heartbeat wrote to the data directory"

        classic.commit()  # and the proxy can fail: a change is written
        assert directory_bytes(tmp_path / "data") != before
    finally:
        stop.set()
        if poller is not None:
            poller.join(10)
        for member in members:
            member.close()
        broker.stop()
