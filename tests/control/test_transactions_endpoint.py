"""``GET /v1/transactions`` and the transaction events, over real HTTP against a broker in this process, with real
transactions opened by confluent-kafka transactional producers (librdkafka, TV1). Every answer is validated against
``docs/control-api.yaml``; the metrics are read from ``/metrics``.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.datastructures import Headers, ImmutableMultiDict

from broker.control.client import ControlClient
from broker.events import names
from broker.testing.embedded import EmbeddedBroker, run_broker
from broker.transactions.config import TxnConfig
from tests.control.test_control_api import SPEC_PATH, OpenApiRequest, OpenApiResponse

TOPIC = "txn"
SCAN_MS = 200


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    config = TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=SCAN_MS)
    with run_broker(topics={TOPIC: 3}, txn=config) as running:
        yield running


@pytest.fixture(scope="module")
def checked() -> OpenAPI:
    return OpenAPI.from_file_path(str(SPEC_PATH))


def get(broker: EmbeddedBroker, openapi: OpenAPI, path: str, **query: str) -> tuple[int, Any]:
    """GET over urllib; the request and the answer validated against the document."""
    url = broker.admin_url.rstrip("/") + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            status, content_type, data = response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        status, content_type, data = error.code, error.headers["Content-Type"], error.read()
    host = broker.admin_url.rstrip("/")
    request = OpenApiRequest(
        host, path, "get", RequestParameters(query=ImmutableMultiDict(list(query.items())), header=Headers()), None, ""
    )
    answer = OpenApiResponse(status, content_type.lower(), Headers(), data)
    openapi.validate_response(request, answer)
    return status, json.loads(data)


def producer(broker: EmbeddedBroker, tid: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0, **extra})


def deliver(p: Any, partition: int, value: bytes) -> None:
    p.produce(TOPIC, value=value, partition=partition)
    assert p.flush(10) == 0


def with_offsets(broker: EmbeddedBroker, p: Any, group: str) -> None:
    """AddOffsetsToTxn and TxnOffsetCommit for ``group``: what a consume-transform-produce loop sends."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 1)], consumer.consumer_group_metadata(), 10)
    finally:
        consumer.close()


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def metric(broker: EmbeddedBroker, name: str, **labels: str) -> float:
    text = ControlClient(broker.admin_url).metrics()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no sample {name} {labels}")


def transaction_events(broker: EmbeddedBroker, tid: str) -> list[dict[str, Any]]:
    """``tid``'s buffered events, read from the event stream's replay (``/v1/events?since_seq=0``).

    A transaction's records have group_id "", which no group route names: the stream is where they are read.
    The stream never ends, so the replay is read until the broker has been quiet for half a second.
    """
    address = urllib.parse.urlsplit(broker.admin_url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=10)
    records: list[dict[str, Any]] = []
    try:
        connection.request("GET", "/v1/events?since_seq=0")
        response = connection.getresponse()
        assert response.status == 200
        assert connection.sock is not None
        connection.sock.settimeout(0.5)
        try:
            while line := response.readline():
                text = line.decode().rstrip("\n")
                if text.startswith("data: "):
                    record = json.loads(text.removeprefix("data: "))
                    if record.get("transactional_id") == tid:
                        records.append(record)
        except TimeoutError:
            pass
    finally:
        connection.close()
    return records


def test_an_open_transaction_is_listed_with_its_partitions_and_group(broker: EmbeddedBroker, checked: OpenAPI) -> None:
    tid, group = f"open-{uuid.uuid4()}", f"g-{uuid.uuid4()}"
    p = producer(broker, tid)
    p.init_transactions(10)
    status, body = get(broker, checked, "/v1/transactions", state="open")
    assert status == 200 and tid not in [t["transactional_id"] for t in body["transactions"]]
    _, every = get(broker, checked, "/v1/transactions")
    [idle] = [t for t in every["transactions"] if t["transactional_id"] == tid]
    assert (idle["state"], idle["start_ms"], idle["duration_ms"], idle["partitions"]) == ("Empty", None, None, {})

    p.begin_transaction()
    deliver(p, 1, b"open")
    with_offsets(broker, p, group)
    _, body = get(broker, checked, "/v1/transactions", state="open")
    [listed] = [t for t in body["transactions"] if t["transactional_id"] == tid]
    assert listed["state"] == "Ongoing"
    assert listed["groups"] == [group]
    assert listed["partitions"][TOPIC] == [1] and "__consumer_offsets" in listed["partitions"]
    assert listed["producer_epoch"] == idle["producer_epoch"] and listed["producer_id"] == idle["producer_id"]
    assert listed["txn_timeout_ms"] == 60_000  # librdkafka's default transaction.timeout.ms
    assert listed["start_ms"] is not None and listed["duration_ms"] >= 0
    assert metric(broker, "group_broker_open_transactions") >= 1
    # The same filter by state name, any case; the client's call says the same.
    _, ongoing = get(broker, checked, "/v1/transactions", state="ONGOING")
    assert tid in [t["transactional_id"] for t in ongoing["transactions"]]
    assert tid in [t["transactional_id"] for t in ControlClient(broker.admin_url).transactions("open")]

    committed_before = metric(broker, "group_broker_transactions_ended_total", outcome="committed")
    p.commit_transaction(10)
    _, body = get(broker, checked, "/v1/transactions", state="open")
    assert tid not in [t["transactional_id"] for t in body["transactions"]]
    _, body = get(broker, checked, "/v1/transactions", state="CompleteCommit")
    [done] = [t for t in body["transactions"] if t["transactional_id"] == tid]
    assert (done["partitions"], done["groups"], done["start_ms"]) == ({}, [], None)
    assert metric(broker, "group_broker_transactions_ended_total", outcome="committed") == committed_before + 1

    started, ended = eventually(lambda: transaction_events(broker, tid) or None)
    assert started["event"] == names.TRANSACTION_STARTED and started["group_id"] == ""
    assert ended["event"] == names.TRANSACTION_COMMITTED
    assert ended["groups"] == [group] and ended["partitions"][TOPIC] == [1]
    assert ended["producer_id"] == listed["producer_id"] and ended["duration_ms"] >= 0


def test_fence_and_timeout_are_events_and_counted(broker: EmbeddedBroker) -> None:
    fenced_before = metric(broker, "group_broker_transactions_ended_total", outcome="fenced")
    timed_out_before = metric(broker, "group_broker_transactions_ended_total", outcome="timed_out")
    tid = f"fence-{uuid.uuid4()}"
    first = producer(broker, tid)
    first.init_transactions(10)
    first.begin_transaction()
    deliver(first, 2, b"first")
    second = producer(broker, tid)
    second.init_transactions(10)  # fences the first and aborts its transaction (transactions spec 3.4 step 2)
    fence = [r for r in transaction_events(broker, tid) if r["event"] == names.TRANSACTION_FENCED]
    assert len(fence) == 1 and fence[0]["fenced_epoch"] + 1 == fence[0]["producer_epoch"]
    assert metric(broker, "group_broker_transactions_ended_total", outcome="fenced") == fenced_before + 1

    slow = f"timeout-{uuid.uuid4()}"
    p = producer(broker, slow, **{"transaction.timeout.ms": 1000, "socket.timeout.ms": 1000})
    p.init_transactions(10)
    p.begin_transaction()
    deliver(p, 2, b"left-open")
    events = eventually(
        lambda: [r for r in transaction_events(broker, slow) if r["event"] == names.TRANSACTION_TIMED_OUT]
    )
    assert events[0]["txn_timeout_ms"] == 1000 and events[0]["duration_ms"] > 1000
    assert metric(broker, "group_broker_transactions_ended_total", outcome="timed_out") == timed_out_before + 1


def test_bad_query_parameters_are_400(broker: EmbeddedBroker, checked: OpenAPI) -> None:
    status, body = get(broker, checked, "/v1/transactions", state="Dead")
    assert status == 400 and "state must be one of" in body["error"]
    status, body = get(broker, checked, "/v1/transactions", states="open")
    assert status == 400 and "unknown query parameter" in body["error"]
