"""The command line, as a user runs it: a real process, real signals, real sockets."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from protocol.apis import ApiKey, advertised_versions
from protocol.codec import build, nested
from tests.conftest import ROOT, free_port, start_broker_process, wait_for_port
from tests.wire.client import WireClient, request_schema


def join_request(version: int = 5) -> object:
    cls = request_schema(ApiKey.JOIN_GROUP, version)
    protocol = nested(cls, "JoinGroupRequestProtocol")(name="range", metadata=b"")
    return build(
        cls,
        group_id="parked",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id="",
        group_instance_id="instance-1",  # static: joins at once, no MEMBER_ID_REQUIRED round
        protocol_type="consumer",
        protocols=(protocol,),
    )


def api_versions_request() -> object:
    return build(request_schema(ApiKey.API_VERSIONS, 3), client_software_name="t", client_software_version="1")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_answers_parked_join_and_exits_zero(tmp_path: Path, signum: signal.Signals) -> None:
    # A long initial delay keeps the first JoinGroup parked until we stop the broker.
    broker = start_broker_process(tmp_path, "--group-initial-rebalance-delay-ms", "60000")
    client = await WireClient.connect(broker.port)
    try:
        correlation_id = 77
        await client.send_raw(client.encode(join_request(), correlation_id))
        # The join is parked: the connection stays silent behind it.
        with pytest.raises(TimeoutError):
            await client.read_frame(timeout=0.3)
        broker.process.send_signal(signum)
        answered, response = client.decode(ApiKey.JOIN_GROUP, 5, await client.read_frame(timeout=10))
        assert answered == correlation_id
        assert response.error_code is ErrorCode.not_coordinator
        assert response.member_id.startswith("instance-1-")
        assert broker.process.wait(timeout=10) == 0
    finally:
        await client.close()
        broker.stop()
    events = [json.loads(line) for line in broker.log().splitlines() if line.startswith("{")]
    assert [e["event"] for e in events if e["event"] in ("broker listening", "broker stopped")] == [
        "broker listening",
        "broker stopped",
    ]


async def test_environment_variables_configure_the_broker(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "GROUP_BROKER_PORT": str(port),
        "GROUP_BROKER_HOST": "127.0.0.1",
        "GROUP_BROKER_ADVERTISED_HOST": "broker.example",
        "GROUP_BROKER_ADVERTISED_PORT": "19999",
        "GROUP_BROKER_NODE_ID": "7",
        "GROUP_BROKER_CLUSTER_ID": "env-cluster",
        "GROUP_BROKER_TOPIC": "alpha:2,beta:5",
        "GROUP_BROKER_LOG_FORMAT": "json",
        "GROUP_BROKER_ADMIN_PORT": "0",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "broker", "serve"], env=env, cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        wait_for_port(port, process)
        client = await WireClient.connect(port)
        cls = request_schema(ApiKey.METADATA, 12)
        response = await client.call(build(cls, topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
        await client.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(7, "broker.example", 19999)]
    assert response.cluster_id == "env-cluster"
    assert response.controller_id == 7
    assert {t.name: len(t.partitions) for t in response.topics} == {"alpha": 2, "beta": 5}


async def test_api_versions_answers_from_the_version_table(tmp_path: Path) -> None:
    broker = start_broker_process(tmp_path)
    try:
        client = await WireClient.connect(broker.port)
        response = await client.call(api_versions_request())
        await client.close()
    finally:
        assert broker.stop() == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == dict(advertised_versions(True))


def test_help_lists_every_setting_with_its_environment_variable() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    for flag, variable in [
        ("--group-initial-rebalance-delay-ms", "GROUP_BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS"),
        ("--socket-request-max-bytes", "GROUP_BROKER_SOCKET_REQUEST_MAX_BYTES"),
        ("--advertised-host", "GROUP_BROKER_ADVERTISED_HOST"),
        ("--topic", "GROUP_BROKER_TOPIC"),
    ]:
        assert flag in result.stdout and variable in result.stdout


def test_console_script_is_installed() -> None:
    script = shutil.which("group-broker", path=str(Path(sys.executable).parent)) or shutil.which("group-broker")
    assert script is not None, "pip install should put a group-broker script next to the interpreter"
    result = subprocess.run([script, "serve", "--help"], capture_output=True, text=True, check=True)
    assert "--group-max-size" in result.stdout


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    broker = start_broker_process(tmp_path)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", str(broker.port),
             "--admin-port", "0"],
            cwd=ROOT, capture_output=True, text=True, timeout=20,
        )
    finally:
        broker.stop()
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{broker.port}" in result.stderr


def test_log_limits_from_flags_and_environment_reach_a_real_producer(tmp_path: Path) -> None:
    """message.max.bytes from the environment and the storage cap from a flag, as kafka-python sees them."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaStorageError, MessageSizeTooLargeError

    os.environ["GROUP_BROKER_MESSAGE_MAX_BYTES"] = "1500"
    try:
        broker = start_broker_process(tmp_path, "--topic", "limited:1", "--storage-max-bytes", "4000")
    finally:
        del os.environ["GROUP_BROKER_MESSAGE_MAX_BYTES"]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, retries=0, linger_ms=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send("limited", b"x" * 2000).get(timeout=10)
        stored = 0
        with pytest.raises(KafkaStorageError):
            for _ in range(10):
                producer.send("limited", b"y" * 1000).get(timeout=10)
                stored += 1
        assert stored == 3  # batches of a little over 1000 bytes: the fourth would pass 4000
    finally:
        producer.close()
        broker.stop()
    log = broker.log()
    assert "max.message.bytes 1500" in log
    assert "would exceed the broker's cap of 4000" in log
