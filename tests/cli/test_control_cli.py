"""The control API client and the ``group-broker`` client commands, against a real broker in its own process.

The broker runs as ``python -m broker serve --port 0 --admin-port 0``; its ports come from its JSON log lines
("broker listening", "control api listening"). Groups are driven by real kafka-python consumers, each its own
process (tests/clients/worker.py). The commands run as a user runs them: ``python -m broker ...`` subprocesses,
checked by their output and exit codes. Every test uses its own group ids; the broker is shared by the module.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.control.client import ControlClient, ControlError
from broker.events.names import FORMAT_VERSION
from tests.conftest import ROOT, free_port

TOPIC = "cli"
PARTITIONS = 3
START_TIMEOUT_S = 20.0


@dataclass
class Broker:
    process: subprocess.Popen[bytes]
    port: int
    admin_port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def api(self) -> ControlClient:
        return ControlClient(self.admin_url)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_broker(log_path: Path, *extra: str) -> Broker:
    """Start a broker on ephemeral ports and read both ports from its log lines."""
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "broker", "serve",
            "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--log-format", "json",
            "--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000",
            "--topic", f"{TOPIC}:{PARTITIONS}",
            *extra,
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log_file.close()
    ports: dict[str, int] = {}
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and len(ports) < 2:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}:\n{log_path.read_text()}")
        for line in log_path.read_text().splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if record.get("event") == "broker listening":
                ports["kafka"] = int(record["port"])
            elif record.get("event") == "control api listening":
                ports["admin"] = int(record["port"])
        time.sleep(0.02)
    if len(ports) < 2:
        process.kill()
        process.wait()
        raise TimeoutError(f"the broker did not log both listeners within {START_TIMEOUT_S}s:\n{log_path.read_text()}")
    return Broker(process, ports["kafka"], ports["admin"], log_path)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = start_broker(tmp_path_factory.mktemp("control") / "broker.log")
    yield started
    started.stop()


@pytest.fixture
def api(broker: Broker) -> ControlClient:
    return broker.api()


def cli(broker: Broker | None, *args: str, admin: bool = True, timeout: float = 60,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``group-broker ARGS --admin URL`` as a process; its exit code and output."""
    argv = [sys.executable, "-m", "broker", *args]
    if admin and broker is not None:
        argv += ["--admin", broker.admin_url]
    return subprocess.run(
        argv, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def failed(result: subprocess.CompletedProcess[str]) -> str:
    """The message of a command the API refused: exit 1, one ``group-broker: ...`` line on stderr."""
    assert result.returncode == 1, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("group-broker: "), result.stderr
    message = lines[-1].removeprefix("group-broker: ")
    assert message.strip()
    return message


# -- consumers ------------------------------------------------------------------------------------------------


class Consumer:
    """A kafka-python consumer of TOPIC in its own process (tests/clients/worker.py)."""

    def __init__(self, broker: Broker, group: str, name: str, tmp_path: Path, instance_id: str | None = None) -> None:
        self.name = name
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        self.out_path = tmp_path / f"{safe}.out"
        self.err_path = tmp_path / f"{safe}.err"
        argv = [
            sys.executable, "-m", "tests.clients.worker", "--client", "kafka-python",
            "--bootstrap", broker.bootstrap, "--group", group, "--topic", TOPIC, "--client-id", name,
            "--session-timeout-ms", "10000", "--heartbeat-interval-ms", "500",
        ]
        if instance_id is not None:
            argv += ["--instance-id", instance_id]
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.process = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT)

    def stop(self) -> None:
        """SIGTERM: the worker closes its consumer (a dynamic member sends LeaveGroup)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextmanager
def consumers(broker: Broker, group: str, tmp_path: Path, count: int = 1,
              instance_ids: list[str] | None = None) -> Iterator[list[Consumer]]:
    started = [
        Consumer(broker, group, f"{group}-c{i}", tmp_path, instance_ids[i] if instance_ids else None)
        for i in range(count)
    ]
    try:
        yield started
    finally:
        for consumer in started:
            consumer.kill()


def stable(api: ControlClient, group: str, members: int, min_generation: int | None = None) -> dict[str, Any]:
    """The group once Stable with ``members`` members and each of them holding an assignment."""
    deadline = time.monotonic() + 45
    while True:
        detail = api.wait(group, state="Stable", members=members, min_generation=min_generation, timeout_ms=30000)
        if all(m.get("assignment") for m in detail["members"]) or time.monotonic() > deadline:
            return detail
        time.sleep(0.1)


ASSIGNED = re.compile(rf"\b{TOPIC}\[([0-9,]+)\]")


# -- reading groups -------------------------------------------------------------------------------------------


def test_groups_describe_and_watch_once(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli-show"
    with consumers(broker, group, tmp_path, count=2):
        detail = stable(api, group, members=2)
        member_ids = {m["member_id"] for m in detail["members"]}

        out = ok(cli(broker, "groups"))
        header, *rows = out.splitlines()
        assert header.split() == ["GROUP", "TYPE", "STATE", "GENERATION", "PROTOCOL", "MEMBERS", "LEADER"]
        row = next(r for r in rows if r.split()[0] == group)
        assert row.split()[1:6] == [
            "classic", "Stable", str(detail["generation_id"]), f"consumer/{detail['protocol']}", "2"
        ]
        assert row.split()[6] == detail["leader"]

        listed = json.loads(ok(cli(broker, "groups", "--json")))
        summary = next(g for g in listed if g["group_id"] == group)
        assert summary["state"] == "Stable"
        assert summary["members"] == 2
        assert summary["protocol_type"] == "consumer"

        out = ok(cli(broker, "describe", group))
        assert f"Group:      {group}" in out
        assert "Stable" in out
        for member in detail["members"]:
            line = next(line for line in out.splitlines() if line.startswith(member["member_id"]))
            assert member["client_id"] in line
            assert "10s" in line  # the session timeout
        owned = [int(p) for found in ASSIGNED.findall(out) for p in found.split(",")]
        assert sorted(owned) == list(range(PARTITIONS))  # each partition once, rendered as cli[0,1]
        assert "member_joined" in out
        assert "sync_completed" in out

        described = json.loads(ok(cli(broker, "describe", group, "--json")))
        assert {m["member_id"] for m in described["group"]["members"]} == member_ids
        assert 0 < len(described["events"]) <= 10
        seqs = [e["seq"] for e in described["events"]]
        assert seqs == sorted(seqs)
        assert all(e["group_id"] == group for e in described["events"])

        for args in (["watch", "--once"], ["watch", group, "--once"]):
            out = ok(cli(broker, *args))
            assert group in out
            assert "Stable" in out
            for member_id in member_ids:
                assert member_id in out
            assert "latest events" in out
            assert ASSIGNED.search(out)

        snapshot = json.loads(ok(cli(broker, "watch", group, "--once", "--json")))
        assert [g["group_id"] for g in snapshot["groups"]] == [group]
        assert snapshot["events"]


def test_client_reads_health_events_and_metrics(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    assert api.health() == {"status": "ok"}
    assert api.ready() == {"status": "ready"}
    assert isinstance(api.metrics(), str)
    assert api.metrics().strip()

    group = "cli-events"
    with consumers(broker, group, tmp_path):
        stable(api, group, members=1)
    everything = api.events(group)
    assert [e["event"] for e in everything][:1] == ["group_created"]
    assert all(e["v"] == FORMAT_VERSION and e["group_id"] == group for e in everything)
    latest = api.events(group, limit=2)
    assert latest == everything[-2:]
    middle = everything[len(everything) // 2]["seq"]
    assert api.events(group, since_seq=middle) == [e for e in everything if e["seq"] > middle]


def test_stream_events_follows_a_group(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli-stream"
    seen: queue.Queue[dict[str, Any]] = queue.Queue()
    stream = api.stream_events(group)  # connected once this returns

    def follow() -> None:
        for event in stream:
            seen.put(event)

    threading.Thread(target=follow, daemon=True).start()  # ends with the broker at the end of the module
    with consumers(broker, group, tmp_path):
        names = []
        deadline = time.monotonic() + 45
        while "sync_completed" not in names:
            event = seen.get(timeout=max(0.1, deadline - time.monotonic()))
            assert event["group_id"] == group
            names.append(event["event"])
    assert names[0] == "group_created"
    assert "member_joined" in names


def test_watch_json_follows_events_and_ctrl_c_exits_zero(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli-watch-json"
    watcher = subprocess.Popen(
        [sys.executable, "-m", "broker", "watch", group, "--json", "--admin", broker.admin_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        time.sleep(1.0)  # let the watcher connect before the group exists
        lines: queue.Queue[str] = queue.Queue()
        assert watcher.stdout is not None
        stdout = watcher.stdout

        def read() -> None:
            for line in stdout:
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        with consumers(broker, group, tmp_path):
            names = []
            deadline = time.monotonic() + 45
            while "sync_completed" not in names:
                event = json.loads(lines.get(timeout=max(0.1, deadline - time.monotonic())))
                assert event["group_id"] == group
                names.append(event["event"])
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=10) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()


def test_live_watch_survives_a_broker_that_comes_late_and_ctrl_c_exits_zero(tmp_path: Path) -> None:
    admin_port = free_port()
    watcher = subprocess.Popen(
        [sys.executable, "-m", "broker", "watch", "--admin", f"http://127.0.0.1:{admin_port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    late: Broker | None = None
    try:
        time.sleep(1.0)  # polling a port nobody listens on
        assert watcher.poll() is None
        late = start_broker(tmp_path / "late.log", "--admin-port", str(admin_port))
        time.sleep(1.0)
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=10)
        assert watcher.returncode == 0, err
        # The final frame, printed when the view stops: the broker was reached.
        assert "broker unreachable" not in out
        assert "0 groups" in out
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        if late is not None:
            late.stop()


# -- chaos ----------------------------------------------------------------------------------------------------


def test_kick_removes_the_member_and_the_group_rebalances(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli-kick"
    with consumers(broker, group, tmp_path, count=2):
        detail = stable(api, group, members=2)
        victim = detail["members"][0]["member_id"]

        out = ok(cli(broker, "chaos", "kick", group, victim))
        assert out.strip() == f"kicked member {victim} from group {group}"
        assert victim not in {m["member_id"] for m in api.group(group)["members"]}

        next_generation = detail["generation_id"] + 1
        out = ok(cli(broker, "chaos", "wait", group, "--state", "Stable", "--min-generation", str(next_generation),
                     "--timeout-ms", "30000"))
        assert out.startswith(f"group {group}: Stable, generation ")
        waited = json.loads(ok(cli(broker, "chaos", "wait", group, "--min-generation", str(next_generation),
                                   "--json")))
        assert waited["generation_id"] >= next_generation
        assert victim not in {m["member_id"] for m in waited["members"]}

        expired = [e for e in api.events(group) if e["event"] == "member_expired" and e["member_id"] == victim]
        assert [e["cause"] for e in expired] == ["kicked"]

        message = failed(cli(broker, "chaos", "kick", group, victim))  # gone already: 404
        assert message


def test_rebalance_and_wait(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli-rebalance"
    with consumers(broker, group, tmp_path) as (consumer,):
        detail = stable(api, group, members=1)
        out = ok(cli(broker, "chaos", "rebalance", group))
        assert out.startswith(f"group {group}: PreparingRebalance, generation {detail['generation_id']}")
        ok(cli(broker, "chaos", "wait", group, "--state", "Stable", "--members", "1",
               "--min-generation", str(detail["generation_id"] + 1)))

        summary = json.loads(ok(cli(broker, "chaos", "rebalance", group, "--json")))
        assert summary["group_id"] == group
        assert summary["state"] == "PreparingRebalance"
        stable(api, group, members=1, min_generation=detail["generation_id"] + 2)

        consumer.stop()  # LeaveGroup: the group empties
        ok(cli(broker, "chaos", "wait", group, "--state", "Empty", "--members", "0"))
        assert failed(cli(broker, "chaos", "rebalance", group))  # 409: nothing to rebalance


def test_wait_times_out_with_exit_1(broker: Broker) -> None:
    started = time.monotonic()
    message = failed(cli(broker, "chaos", "wait", "cli-never", "--state", "Stable", "--timeout-ms", "300"))
    assert message
    assert time.monotonic() - started < 20
    result = cli(broker, "chaos", "wait", "cli-never", "--state", "Stable", "--timeout-ms", "200", "--json")
    failed(result)
    assert result.stdout.strip() == ""  # the group never existed: nothing to show


def test_fence_a_static_member(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli-fence"
    with consumers(broker, group, tmp_path, instance_ids=["cli-static-1"]):
        detail = stable(api, group, members=1)
        (member,) = detail["members"]
        assert member["group_instance_id"] == "cli-static-1"

        answer = json.loads(ok(cli(broker, "chaos", "fence", group, "cli-static-1", "--json")))
        assert answer["group_id"] == group
        assert answer["group_instance_id"] == "cli-static-1"
        assert answer["member_id"] == member["member_id"]
        assert answer["new_member_id"] != member["member_id"]
        assert member["member_id"] not in {m["member_id"] for m in api.group(group)["members"]}
        fenced = [e for e in api.events(group) if e["event"] == "member_fenced"]
        assert fenced and fenced[-1]["member_id"] == member["member_id"]

        assert failed(cli(broker, "chaos", "fence", group, "no-such-instance"))


def test_fault_rules_add_list_delete_clear(broker: Broker, api: ControlClient) -> None:
    ok(cli(broker, "chaos", "fault", "clear"))
    first = json.loads(ok(cli(
        broker, "chaos", "fault", "add", "--api", "Heartbeat", "--group", "cli-faults", "--error",
        "rebalance_in_progress", "--count", "1", "--json",
    )))
    assert first["action"] == "error"
    assert first["api"] == "Heartbeat"
    assert first["group_id"] == "cli-faults"
    assert first["count"] == 1
    assert first["hits"] == 0
    assert first["active"] is True

    out = ok(cli(
        broker, "chaos", "fault", "add", "--api", "JoinGroup", "--group", "cli-faults", "--member", "m-1",
        "--delay-ms", "100", "--probability", "0.5", "--seed", "7",
    ))
    match = re.fullmatch(r"added fault rule (\S+): delay 100ms when api=JoinGroup group=cli-faults member=m-1\n", out)
    assert match, out
    second = match.group(1)
    third = json.loads(ok(cli(broker, "chaos", "fault", "add", "--client-id", "cli x", "--close", "--duration-ms",
                              "60000", "--json")))
    fourth = json.loads(ok(cli(broker, "chaos", "fault", "add", "--instance", "i-1", "--swallow-heartbeats",
                               "--json")))
    fifth = json.loads(ok(cli(broker, "chaos", "fault", "add", "--error", "27", "--json")))  # a numeric code
    assert third["action"] == "close"
    assert fourth["action"] == "swallow_heartbeats"
    assert fifth["action"] == "error"

    out = ok(cli(broker, "chaos", "fault", "list"))
    assert out.splitlines()[0].split() == ["ID", "ACTIVE", "HITS", "ACTION", "MATCH", "LIMITS"]
    for rule_id in (first["id"], second, third["id"], fourth["id"], fifth["id"]):
        assert any(line.split()[0] == rule_id for line in out.splitlines()[1:])
    assert "count=1" in out
    assert "probability=0.5 seed=7" in out
    listed = json.loads(ok(cli(broker, "chaos", "fault", "list", "--json")))
    assert [r["id"] for r in listed] == [first["id"], second, third["id"], fourth["id"], fifth["id"]]

    assert ok(cli(broker, "chaos", "fault", "delete", first["id"])).strip() == f"deleted fault rule {first['id']}"
    failed(cli(broker, "chaos", "fault", "delete", first["id"]))  # 404 now
    assert ok(cli(broker, "chaos", "fault", "clear")).strip() == "deleted 4 fault rules"
    assert ok(cli(broker, "chaos", "fault", "list")).strip() == "no fault rules"
    assert json.loads(ok(cli(broker, "chaos", "fault", "clear", "--json"))) == {"deleted": 0}

    message = failed(cli(broker, "chaos", "fault", "add", "--error", "NOT_A_KAFKA_ERROR"))
    assert "error" in message.lower()
    message = failed(cli(broker, "chaos", "fault", "add", "--api", "NoSuchApi", "--close"))
    assert "api" in message.lower()
    message = failed(cli(broker, "chaos", "fault", "add", "--close", "--probability", "1.5"))
    assert "probability" in message.lower()
    assert api.faults() == []


def test_a_fault_rule_fires_on_a_real_consumer(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli-fault-fires"
    with consumers(broker, group, tmp_path):
        detail = stable(api, group, members=1)
        rule = json.loads(ok(cli(broker, "chaos", "fault", "add", "--api", "Heartbeat", "--group", group, "--error",
                                 "REBALANCE_IN_PROGRESS", "--count", "1", "--json")))
        try:
            # The consumer hears "rebalance in progress" on a heartbeat and rejoins: a new generation.
            stable(api, group, members=1, min_generation=detail["generation_id"] + 1)
            (listed,) = [r for r in api.faults() if r["id"] == rule["id"]]
            assert listed["hits"] == 1
        finally:
            ok(cli(broker, "chaos", "fault", "delete", rule["id"]))


# -- errors and plumbing --------------------------------------------------------------------------------------


def test_unknown_group_exits_1_with_the_api_message(broker: Broker, api: ControlClient) -> None:
    with pytest.raises(ControlError) as raised:
        api.group("cli-no-such-group")
    assert raised.value.status == 404
    message = failed(cli(broker, "describe", "cli-no-such-group"))
    assert message == raised.value.message
    for args in (
        ["chaos", "kick", "cli-no-such-group", "m-1"],
        ["chaos", "rebalance", "cli-no-such-group"],
        ["watch", "cli-no-such-group", "--once"],
        ["watch", "cli-no-such-group", "--once", "--json"],
    ):
        result = cli(broker, *args)
        failed(result)
    result = cli(broker, "describe", "cli-no-such-group", "--json")
    failed(result)
    assert result.stdout == ""


def test_unreachable_broker_exits_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (["groups"], ["describe", "g"], ["chaos", "fault", "list"], ["watch", "--once"]):
        message = failed(cli(None, *args, "--admin", url, "--wait-for-broker", "0"))  # the grace: test_broker_grace
        assert f"cannot reach the control API at {url}" in message
    with pytest.raises(ControlError) as raised:
        ControlClient(url).groups()
    assert raised.value.status == 0
    assert raised.value.message.startswith(f"cannot reach the control API at {url}: ")


def test_usage_errors_exit_2(broker: Broker) -> None:
    assert cli(broker, "describe").returncode == 2
    assert cli(broker, "chaos", "fault", "add", "--api", "Heartbeat").returncode == 2  # no action
    assert cli(broker, "chaos", "fault", "add", "--close", "--error", "27").returncode == 2  # two actions
    assert cli(broker, "chaos", "wait", "g", "--members", "two").returncode == 2
    assert cli(None, "no-such-command").returncode == 2


def test_admin_url_from_the_environment(broker: Broker) -> None:
    result = cli(broker, "groups", "--json", admin=False, env={"GROUP_BROKER_ADMIN_URL": broker.admin_url})
    assert isinstance(json.loads(ok(result)), list)
    # --admin wins over the environment.
    result = cli(broker, "groups", "--json", env={"GROUP_BROKER_ADMIN_URL": f"http://127.0.0.1:{free_port()}"})
    assert isinstance(json.loads(ok(result)), list)


def test_ids_with_any_characters_are_quoted(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "cli odd/group?#%[b]&x=1"
    with consumers(broker, group, tmp_path):
        detail = stable(api, group, members=1)
        assert detail["group_id"] == group
        assert api.group(group)["group_id"] == group
        assert all(e["group_id"] == group for e in api.events(group))

        out = ok(cli(broker, "describe", group))
        assert group in out
        out = ok(cli(broker, "watch", group, "--once"))
        assert group in out  # rich printed it as text, not as markup
        assert any(g["group_id"] == group for g in json.loads(ok(cli(broker, "groups", "--json"))))

        with pytest.raises(ControlError) as raised:
            api.kick(group, "no/such member?")
        assert raised.value.status == 404  # routed to the kick endpoint, not a 404/405 of a wrong path
        with pytest.raises(ControlError) as raised:
            api.kick(group, "..")
        assert raised.value.status == 404
        member_id = detail["members"][0]["member_id"]
        ok(cli(broker, "chaos", "kick", group, member_id))


def test_chaos_run_is_registered() -> None:
    """``chaos run`` is listed however the runner is; the other commands never import it."""
    result = cli(None, "chaos", "--help")
    assert "run" in ok(result)
    result = cli(None, "chaos", "run", "--help")
    assert result.returncode == 0
