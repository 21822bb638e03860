"""Settings: defaults, TOML file, environment and flags (in that order of strength), listeners, the README table,
``--version`` and ``health``, through the real parser and, where it crosses the wire, a real broker."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

import broker
from broker.config import settings
from broker.config.settings import Endpoint, Settings, SettingsError, parse_endpoints
from broker.coordinator.config import GroupConfig
from broker.server.broker import BrokerServer
from broker.server.settings import AclConfig, ClusterConfig, SaslConfig, TlsConfig, parse_node_endpoints
from broker.storage.topics import LogDefaults
from broker.transactions.config import TxnConfig
from protocol.apis import ApiKey
from protocol.codec import build
from tests.conftest import ROOT, broker_settings, free_port, start_broker_process
from tests.wire.client import WireClient, request_schema


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "broker.toml"
    path.write_text(text)
    return str(path)


def test_defaults_match_kafka_where_kafka_has_the_setting() -> None:
    config = settings.parse([], environ={})
    assert config.group.min_session_timeout_ms == 6000
    assert config.group.max_session_timeout_ms == 1_800_000
    assert config.group.initial_rebalance_delay_ms == 3000
    assert config.group.offsets_retention_minutes == 10080
    assert config.socket_request_max_bytes == 104_857_600
    assert config.bind_endpoints() == (Endpoint("PLAINTEXT", "0.0.0.0", 9092),)
    assert config.advertised_for(config.bind_endpoints()[0], 9092) == ("localhost", 9092)
    assert len(config.cluster_id) == 22


def test_each_field_is_filled_by_one_option_whose_default_is_the_fields() -> None:
    """Defaults are written once, on the fields (GroupConfig and LogDefaults keep Kafka's for unit tests)."""
    paths = [option.path for option in settings.OPTIONS if option.setting]
    assert len(paths) == len(set(paths))
    holders = (
        ("", Settings), ("group.", GroupConfig), ("log.", LogDefaults), ("txn.", TxnConfig),
        ("cluster.", ClusterConfig), ("tls.", TlsConfig), ("acls.", AclConfig), ("sasl.", SaslConfig),
    )
    fields = [f"{prefix}{field.name}" for prefix, holder in holders for field in dataclasses.fields(holder)]
    # group, log and txn are the sections; the join timeout of a new member is a constant in Kafka, not a setting.
    # The transaction coordinator's internal-topic partition counts and its completion delay (a test knob) are
    # not settings either (transactions spec section 7); ``given`` records which options were set (issue 18).
    unset = {"group", "log", "txn", "cluster", "tls", "acls", "sasl", "given", "group.new_member_join_timeout_ms",
             "txn.transaction_state_log_num_partitions", "txn.offsets_topic_num_partitions", "txn.completion_delay_ms"}
    assert sorted(paths) == sorted(set(fields) - unset)
    config = settings.parse([], environ={})
    for option in settings.OPTIONS:
        if option.setting and option.name != "cluster_id":
            value = functools.reduce(getattr, option.path.split("."), config)
            assert value == option.default, option.name
    assert config.log == LogDefaults() and config.group == GroupConfig() and config.txn == TxnConfig()
    assert (config.log.retention_ms, config.log.retention_bytes, config.log.max_message_bytes) == (
        604_800_000, -1, 1_048_588,
    )


def test_an_empty_cluster_id_is_a_random_one_in_kafkas_format() -> None:
    drawn = {settings.parse(["--cluster-id", ""], environ={}).cluster_id, Settings().cluster_id}
    assert len(drawn) == 2 and all(len(cluster_id) == 22 for cluster_id in drawn)
    assert settings.parse([], environ={"GROUP_BROKER_CLUSTER_ID": "fixed"}).cluster_id == "fixed"


def test_send_buffer_marks() -> None:
    config = settings.parse([], environ={})
    assert (config.socket_send_buffer_high_bytes, config.socket_send_buffer_low_bytes) == (4 << 20, 1 << 20)
    config = settings.parse(["--socket-send-buffer-high-bytes", "65536", "--socket-send-buffer-low-bytes", "0"], {})
    assert (config.socket_send_buffer_high_bytes, config.socket_send_buffer_low_bytes) == (65536, 0)
    for flags in (["--socket-send-buffer-low-bytes", "8388608"], ["--socket-send-buffer-low-bytes", "-1"]):
        with pytest.raises(SettingsError, match=r"--socket-send-buffer-low-bytes \(-?\d+\) must be between 0 and"):
            settings.parse(flags, environ={})


def test_flag_beats_environment_beats_toml_beats_default(tmp_path: Path) -> None:
    path = write(tmp_path, 'group_max_size = 5\nnode_id = 3\nport = 9100\n"num.partitions" = 7\n')
    environ = {"GROUP_BROKER_CONFIG": path, "GROUP_BROKER_NODE_ID": "4", "GROUP_BROKER_PORT": "9200"}
    config = settings.parse(["--port", "9300"], environ=environ)
    assert config.port == 9300  # flag over environment and file
    assert config.node_id == 4  # environment over file
    assert config.group.max_size == 5  # file over default
    assert config.num_partitions == 7  # Kafka's name works in the file
    assert config.group.min_session_timeout_ms == 6000  # default


def test_config_flag_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "admin_port = -1\n")
    assert settings.parse(["--config", path], environ={}).admin_port == -1


def test_kafka_dotted_names_bare_or_quoted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "group.initial.rebalance.delay.ms = 0\n"
        '"group.min.session.timeout.ms" = 1000\n'
        "auto.create.topics.enable = false\n"
        'listeners = "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:19092"\n'
        'advertised.listeners = ["INTERNAL://broker:9092", "EXTERNAL://localhost:19092"]\n'
        'topic = {orders = 6, payments = 3}\n',
    )
    config = settings.parse(["--config", path], environ={})
    assert config.group.initial_rebalance_delay_ms == 0
    assert config.group.min_session_timeout_ms == 1000
    assert config.auto_create_topics is False
    assert [str(e) for e in config.listeners] == ["INTERNAL://127.0.0.1:9092", "EXTERNAL://127.0.0.1:19092"]
    assert config.advertised_for(config.listeners[0], 9092) == ("broker", 9092)
    assert config.advertised_for(config.listeners[1], 19092) == ("localhost", 19092)
    assert config.topics == (("orders", 6), ("payments", 3))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("group_max_sise = 5\n", "unknown setting 'group_max_sise' (did you mean 'group_max_size'?)"),
        ("group.max.sise = 5\n", "unknown setting 'group.max.sise'"),
        ('port = "9092"\n', "port: expected a TOML int, got str '9092'"),
        ("auto_create_topics_enable = 1\n", "expected a TOML bool, got int 1"),
        ("port = true\n", "expected a TOML int, got bool True"),
        ('log_level = "loud"\n', "expected one of debug, info, warning, error"),
        ("group_max_size = 5\n\"group.max.size\" = 6\n", "sets group_max_size a second time"),
        ("port = \n", "not valid TOML"),
        ('listeners = "PLAINTEXT//x:1"\n', "is not NAME://HOST:PORT"),
        ("config = 'other.toml'\n", "unknown setting 'config'"),
    ],
)
def test_bad_toml_is_a_clear_error_naming_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        settings.parse(["--config", path], environ={})
    assert message in str(caught.value)
    assert path in str(caught.value)


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"config file .*nope.toml: No such file"):
        settings.parse([], environ={"GROUP_BROKER_CONFIG": str(tmp_path / "nope.toml")})


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("GROUP_BROKER_PORT", "ninety", "GROUP_BROKER_PORT='ninety': expected an integer from 0 to 65535, got 'nin"),
        ("GROUP_BROKER_AUTO_CREATE_TOPICS_ENABLE", "maybe", "expected true or false"),
        ("GROUP_BROKER_TOPIC", "bad name!:3", "bad topic spec"),
        ("GROUP_BROKER_LOG_FORMAT", "xml", "expected one of auto, console, json"),
    ],
)
def test_bad_environment_value_names_the_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        settings.parse([], environ={variable: value})
    assert message in str(caught.value)


def test_cross_field_checks_are_settings_errors() -> None:
    with pytest.raises(SettingsError, match=r"--group-min-session-timeout-ms \(10\) exceeds"):
        settings.parse(["--group-min-session-timeout-ms", "10", "--group-max-session-timeout-ms", "5"], environ={})
    with pytest.raises(SettingsError, match=r"--advertised-listeners \(OUTSIDE://h:1\): OUTSIDE is not a listener"):
        settings.parse(["--listeners", "INSIDE://:9092", "--advertised-listeners", "OUTSIDE://h:1"], environ={})
    with pytest.raises(SettingsError, match="each listener needs its own port"):
        settings.parse(["--listeners", "A://:9092,B://127.0.0.1:9092"], environ={})


def test_endpoint_syntax() -> None:
    assert parse_endpoints("PLAINTEXT://:9092") == (Endpoint("PLAINTEXT", "", 9092),)
    assert parse_endpoints(" A://[::1]:1 , B://host.example:2 ") == (
        Endpoint("A", "::1", 1),
        Endpoint("B", "host.example", 2),
    )
    assert str(Endpoint("A", "::1", 1)) == "A://[::1]:1"
    # What a client on this machine dials for a bound address (health, the pytest plugin).
    reached = [settings.reachable_host(h) for h in ("", "0.0.0.0", "::", "10.0.0.5")]
    assert reached == ["127.0.0.1", "127.0.0.1", "::1", "10.0.0.5"]
    assert (settings.host_port("::1", 9644), settings.host_port("127.0.0.1", 9644)) == ("[::1]:9644", "127.0.0.1:9644")
    for bad, message in [
        ("A://h", "is not NAME://HOST:PORT"),
        ("A://h:70000", "out of range"),
        ("A://h:1,A://g:2", "listener name A appears twice"),
        ("a b://h:1", "is not NAME://HOST:PORT"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_endpoints(bad)


def test_flags_topic_repeats_and_environment_topics_are_comma_separated() -> None:
    assert settings.parse(["--topic", "a:2", "--topic", "b"], environ={}).topics == (("a", 2), ("b", 1))
    assert settings.parse([], environ={"GROUP_BROKER_TOPIC": "a:2,b:3"}).topics == (("a", 2), ("b", 3))


def test_readme_settings_table_is_generated_from_the_options() -> None:
    readme = (ROOT / "README.md").read_text()
    assert settings.markdown_table() in readme, (
        "README's settings table is stale: paste the output of "
        "`python -c 'from broker.config import settings; print(settings.markdown_table())'`"
    )
    for option in settings.OPTIONS:  # and the serve help lists every one with its variable
        assert option.env.startswith("GROUP_BROKER_")


def test_bad_environment_value_stops_serve_with_exit_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "serve"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
        env={**os.environ, "GROUP_BROKER_PORT": "ninety"},
    )
    assert result.returncode == 2
    assert "group-broker serve: error: GROUP_BROKER_PORT='ninety'" in result.stderr
    assert "Traceback" not in result.stderr


def test_version_comes_from_one_place() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "--version"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == f"group-broker {broker.__version__}"
    assert version("kafka-group-broker") == broker.__version__
    assert re.search(rf"^## {re.escape(broker.__version__)} ", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)


# --- two listeners, over the wire ------------------------------------------------------------------------------


async def metadata_and_coordinator(port: int) -> tuple[list[tuple[str, int]], tuple[str, int]]:
    client = await WireClient.connect(port)
    try:
        metadata = await client.call(
            build(request_schema(ApiKey.METADATA, 12), topics=None, allow_auto_topic_creation=False,
                  include_topic_authorized_operations=False)
        )
        coordinator = await client.call(
            build(request_schema(ApiKey.FIND_COORDINATOR, 2), key="g", key_type=0)
        )
    finally:
        await client.close()
    return [(b.host, b.port) for b in metadata.brokers], (coordinator.host, coordinator.port)


async def test_each_listener_advertises_its_own_address() -> None:
    server = BrokerServer(
        broker_settings(
            listeners=parse_endpoints("INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"),
            advertised_listeners=parse_endpoints("INTERNAL://broker.internal:9092"),
        )
    )
    await server.start()
    try:
        internal, external = (listener.port for listener in server.listeners)
        assert internal != external
        assert await metadata_and_coordinator(internal) == ([("broker.internal", 9092)], ("broker.internal", 9092))
        # No advertised entry: the listener's own address and the port it bound.
        assert await metadata_and_coordinator(external) == ([("127.0.0.1", external)], ("127.0.0.1", external))
    finally:
        await server.stop()


def test_node_advertised_listeners_from_flag_environment_and_toml(tmp_path: Path) -> None:
    listeners = ["--nodes", "3", "--listeners", "INTERNAL://:9092,EXTERNAL://:29092"]
    per_node = "2=EXTERNAL://h2:4000;3=EXTERNAL://h3:5000,INTERNAL://i3:1"
    flag = settings.parse([*listeners, "--node-advertised-listeners", per_node], environ={})
    environment = settings.parse(listeners, environ={"GROUP_BROKER_NODE_ADVERTISED_LISTENERS": per_node})
    toml = tmp_path / "broker.toml"
    toml.write_text(
        'node_advertised_listeners = { 2 = "EXTERNAL://h2:4000", 3 = ["EXTERNAL://h3:5000", "INTERNAL://i3:1"] }\n'
    )
    from_file = settings.parse([*listeners, "--config", str(toml)], environ={})
    expected = (
        (2, (Endpoint("EXTERNAL", "h2", 4000),)),
        (3, (Endpoint("EXTERNAL", "h3", 5000), Endpoint("INTERNAL", "i3", 1))),
    )
    assert flag.cluster.node_advertised_listeners == environment.cluster.node_advertised_listeners == expected
    assert from_file.cluster.node_advertised_listeners == expected
    internal, external = flag.listeners
    # Node 1 (index 0) has no entry: its own address; node 2's EXTERNAL its entry, its INTERNAL the port it bound.
    assert [flag.node_advertised(external, 29092 + i, i) for i in range(3)] == [
        ("localhost", 29092), ("h2", 4000), ("h3", 5000),
    ]  # fmt: skip
    assert [flag.node_advertised(internal, 9092 + i, i) for i in range(3)] == [
        ("localhost", 9092), ("localhost", 9093), ("i3", 1),
    ]  # fmt: skip
    for argv, message in [
        (["--node-advertised-listeners", "4=EXTERNAL://h:1"], "there is no node 4 (the nodes are 1, 2, 3)"),
        (["--node-advertised-listeners", "2=OUTSIDE://h:1"], "node 2's OUTSIDE is not a listener"),
        (["--node-advertised-listeners", "2=EXTERNAL://h:1;2=EXTERNAL://h:2"], "node 2 appears twice"),
        (["--node-advertised-listeners", "EXTERNAL://h:1"], "is not NODE_ID=NAME://HOST:PORT"),
    ]:
        with pytest.raises((SettingsError, SystemExit)) as refused:
            settings.parse([*listeners, *argv], environ={})
        if isinstance(refused.value, SettingsError):
            assert message in str(refused.value)


def test_an_advertised_port_moves_up_with_each_node_even_where_it_meets_a_bound_one() -> None:
    """Node i advertises the advertised port + i; it used to keep the advertised port when that was the one node i
    bound (advertised 9093 over listeners on 9092: node 2 bound 9093 and advertised 9093, like node 1)."""
    config = settings.parse(
        ["--nodes", "3", "--listeners", "PLAINTEXT://:9092", "--advertised-listeners", "PLAINTEXT://h:9093"], environ={}
    )
    (listener,) = config.listeners
    assert [config.node_advertised(listener, 9092 + i, i) for i in range(3)] == [("h", 9093), ("h", 9094), ("h", 9095)]


async def test_each_node_advertises_its_own_address() -> None:
    """``serve --nodes 3`` with per-node advertised listeners: every node's Metadata names each node as the
    settings say, on the listener the client came in by."""
    server = BrokerServer(
        broker_settings(
            listeners=parse_endpoints("INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"),
            advertised_listeners=parse_endpoints("EXTERNAL://far.invalid:29092"),
            cluster=ClusterConfig(
                nodes=3, node_advertised_listeners=parse_node_endpoints("2=EXTERNAL://h2.invalid:4000")
            ),
        )
    )
    await server.start()
    try:
        ports = {(listener.name, listener.api.identity.node_id): listener.port for listener in server.listeners}
        expected_external = [("far.invalid", 29092), ("h2.invalid", 4000), ("far.invalid", 29094)]
        expected_internal = [("127.0.0.1", ports[("INTERNAL", node)]) for node in (1, 2, 3)]
        for node in (1, 2, 3):
            brokers, _coordinator = await metadata_and_coordinator(ports[("EXTERNAL", node)])
            assert brokers == expected_external
            brokers, _coordinator = await metadata_and_coordinator(ports[("INTERNAL", node)])
            assert brokers == expected_internal
    finally:
        await server.stop()


def test_a_real_client_through_the_second_listener(tmp_path: Path) -> None:
    """The host-and-container case: the first listener advertises a name only other containers resolve; a client
    on the host bootstraps through the second listener and is handed an address it can reach."""
    internal, external = free_port(), free_port()
    broker_process = start_broker_process(
        tmp_path,
        "--listeners", f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        "--advertised-listeners", f"INTERNAL://broker.invalid:{internal},EXTERNAL://localhost:{external}",
        listen_port=external,
    )
    try:
        bootstrap = f"localhost:{external}"
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("listeners", b"hello").get(timeout=10)
        producer.close()
        consumer = KafkaConsumer(
            "listeners", bootstrap_servers=bootstrap, group_id="listeners", auto_offset_reset="earliest",
            consumer_timeout_ms=10_000,
        )
        values = [record.value for record in consumer]
        consumer.close()
        assert values[:1] == [b"hello"]
        log = broker_process.log()
        assert "INTERNAL" in log and "EXTERNAL" in log
    finally:
        assert broker_process.stop() == 0


# --- group-broker health ---------------------------------------------------------------------------------------


def health(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", "health", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})},
    )


def test_health_finds_the_broker_from_the_same_settings_as_serve(tmp_path: Path) -> None:
    port = free_port()
    broker_process = start_broker_process(tmp_path, "--port", str(port), "--admin-port", "-1", listen_port=port)
    try:
        assert health(env={"GROUP_BROKER_PORT": str(port), "GROUP_BROKER_ADMIN_PORT": "-1"}).returncode == 0
        assert health("--bootstrap", f"127.0.0.1:{port}", "--admin", "off").returncode == 0
        # The control API is expected on 9644 by default; that one is off, so the check fails and says why.
        failed = health("--bootstrap", f"127.0.0.1:{port}", "--admin", f"http://127.0.0.1:{free_port()}")
        assert failed.returncode == 1 and "group-broker health:" in failed.stderr
    finally:
        broker_process.stop()
    nothing = health(env={"GROUP_BROKER_PORT": str(port), "GROUP_BROKER_ADMIN_PORT": "-1"})
    assert nothing.returncode == 1
    assert "Connection refused" in nothing.stderr


def test_health_asks_readyz_when_the_control_api_is_on(tmp_path: Path) -> None:
    port, admin = free_port(), free_port()
    broker_process = start_broker_process(tmp_path, "--port", str(port), "--admin-port", str(admin), listen_port=port)
    environment = {"GROUP_BROKER_PORT": str(port), "GROUP_BROKER_ADMIN_PORT": str(admin)}
    try:
        # The control API comes up just after the Kafka listener; a HEALTHCHECK retries, so do we.
        deadline = time.monotonic() + 10
        while (answer := health(env=environment)).returncode != 0 and time.monotonic() < deadline:
            assert "/readyz: [Errno 111] Connection refused" in answer.stderr
            time.sleep(0.1)
        assert answer.returncode == 0, answer.stderr
    finally:
        broker_process.stop()


def test_health_through_a_toml_file(tmp_path: Path) -> None:
    port = free_port()
    path = write(tmp_path, f'listeners = "PLAINTEXT://127.0.0.1:{port}"\nadmin_port = -1\n')
    # The listeners from the file win over the --port the test harness passes.
    broker_process = start_broker_process(tmp_path, "--config", path, listen_port=port)
    try:
        assert health(env={"GROUP_BROKER_CONFIG": path}).returncode == 0
    finally:
        broker_process.stop()


def test_the_readme_toml_example_is_valid(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    config = settings.parse(["--config", write(tmp_path, example)], environ={})
    assert config.group.initial_rebalance_delay_ms == 0
    assert [e.name for e in config.advertised_listeners] == ["INTERNAL", "EXTERNAL"]
    assert config.topics == (("orders", 6), ("payments", 3))
