"""A Kafka client pointed at the control port (issue 26, item 7): one log line naming the Kafka listener, at most
one per 10 s per client host (with how many were left out), instead of one "not an HTTP method" per reconnect."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.control.kafka_frames import KafkaFrameNotices, looks_like_kafka
from tests.cli.test_control_cli import Broker, start_broker

NOTICE = "kafka client on the control port"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    started = start_broker(tmp_path / "broker.log")
    yield started
    started.stop()


def log_lines(broker: Broker) -> list[dict[str, object]]:
    lines = []
    for line in broker.log_path.read_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def api_versions_frame(correlation_id: int) -> bytes:
    client = b"test"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client)) + client
    return struct.pack(">i", len(body)) + body


def test_a_real_kafka_producer_on_the_control_port_is_told_once(broker: Broker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    errors: list[str] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{broker.admin_port}",
        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 100,
        "error_cb": lambda error: errors.append(str(error)),
    })  # fmt: skip
    producer.produce("cli", b"value")
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(1)
    time.sleep(0.3)  # the broker writes its last lines
    lines = log_lines(broker)
    notices = [line for line in lines if line.get("event") == NOTICE]
    assert len(notices) == 1, notices
    assert notices[0]["reason"] == (
        f"this is the control API (HTTP); the Kafka listener is at 127.0.0.1:{broker.port}"
    )
    assert not [line for line in lines if line.get("event") == "control request rejected"]
    assert errors  # the client did try, and failed: the broker did not answer it as Kafka


def test_connections_from_one_host_are_said_once_per_interval(broker: Broker) -> None:
    for attempt in range(5):
        with socket.create_connection(("127.0.0.1", broker.admin_port), timeout=5) as connection:
            connection.sendall(api_versions_frame(attempt))
            answer = connection.recv(65536)
        assert b"the Kafka listener is at 127.0.0.1:" in answer  # told over HTTP too, in the JSON error
    time.sleep(0.3)
    notices = [line for line in log_lines(broker) if line.get("event") == NOTICE]
    assert len(notices) == 1 and notices[0]["left_out"] == 0, notices
    # Bad HTTP that is not a Kafka frame is still reported as it was.
    with socket.create_connection(("127.0.0.1", broker.admin_port), timeout=5) as connection:
        connection.sendall(b"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n")
        connection.recv(65536)
    time.sleep(0.3)
    assert [line for line in log_lines(broker) if line.get("event") == "control request rejected"]


def test_the_notices_count_what_they_leave_out() -> None:
    now = [0.0]
    notices = KafkaFrameNotices(interval_s=10, clock=lambda: now[0])
    assert notices.due("10.0.0.1") == 0
    assert notices.due("10.0.0.1") is None and notices.due("10.0.0.1") is None
    assert notices.due("10.0.0.2") == 0  # another host: its own interval
    now[0] = 10.5
    assert notices.due("10.0.0.1") == 2


def test_a_kafka_frame_is_told_from_http() -> None:
    assert looks_like_kafka(api_versions_frame(1))
    for http in (b"GET / HTTP/1.1\r\n", b"PRI * HTTP/2.0", b"\x16\x03\x01\x02\x00\x01\x00\x01"):
        assert not looks_like_kafka(http)
