"""What a new user tripped over with the command line (issue 18, items 4 and 8), checked as a user meets it: the
CLI as a subprocess, a real broker in its own process, ``watch`` on a pseudo-terminal.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cli import watch
from broker.control.client import ControlClient
from tests.cli.test_control_cli import Broker, cli, consumers, failed, ok, stable, start_broker
from tests.conftest import ROOT, free_port

ENTER_ALT_SCREEN, LEAVE_ALT_SCREEN = b"\x1b[?1049h", b"\x1b[?1049l"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = start_broker(tmp_path_factory.mktemp("first-use") / "broker.log", "--topic", "orders")
    yield started
    started.stop()


# -- usage errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "prog", "option", "value"),
    [
        (["serve", "--port", "abc"], "group-broker serve", "--port", "abc"),
        (["health", "--timeout", "soon"], "group-broker health", "--timeout", "soon"),
        (["groups", "--type", "odd"], "group-broker groups", "--type", "odd"),
        (["chaos", "wait", "g", "--timeout-ms", "x"], "group-broker chaos wait", "--timeout-ms", "x"),
        (["chaos", "fault", "add", "--delay-ms", "x"], "group-broker chaos fault add", "--delay-ms", "x"),
        (["chaos", "run", "--duration", "soon"], "group-broker chaos run", "--duration", "soon"),
        (["generate-events", "out.jsonl", "--events", "many"], "group-broker generate-events", "--events", "many"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_option_and_the_value(
    args: list[str], prog: str, option: str, value: str
) -> None:
    result = cli(None, *args)
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines == [f"usage: {prog} [-h] ... (see {prog} --help)", lines[1]], result.stderr
    assert lines[1].startswith(f"{prog}: error: argument {option}: "), lines[1]
    assert repr(value) in lines[1], lines[1]


def test_help_still_lists_every_flag_and_says_what_swallowing_heartbeats_does() -> None:
    assert "--group-initial-rebalance-delay-ms" in ok(cli(None, "serve", "--help"))
    text = " ".join(ok(cli(None, "chaos", "fault", "add", "--help")).split())
    assert "answer the matched Heartbeats with NONE but leave the session unrefreshed" in text
    assert "never answer" not in text
    text = " ".join(ok(cli(None, "serve", "--help")).split())
    assert "NAME:PARTITIONS to create at start (a bare NAME gets 1 partition;" in text


# -- serve's start-up log -------------------------------------------------------------------------------------


def test_the_start_up_log_lists_the_topics_with_their_partitions(broker: Broker) -> None:
    records = [json.loads(line) for line in broker.log_path.read_text().splitlines() if line.startswith("{")]
    (topics,) = [r for r in records if r.get("event") == "topics created"]
    assert topics["topics"] == {"cli": 3, "orders": 1}  # `--topic orders` made one partition, and says so
    assert topics["auto_create"] is True and topics["auto_create_partitions"] == 1


# -- chaos wait -----------------------------------------------------------------------------------------------


def test_chaos_wait_says_there_is_no_such_group(broker: Broker) -> None:
    started = time.monotonic()
    result = cli(broker, "chaos", "wait", "first-use-nosuch", "--state", "Stable", "--timeout-ms", "400")
    message = failed(result)
    assert message == "no such group: 'first-use-nosuch' (none appeared within 400 ms)"
    assert "timed out" not in result.stderr
    assert "no group 'first-use-nosuch' yet" in result.stderr  # said at once, before waiting
    assert time.monotonic() - started < 15
    assert result.stdout == ""


def test_chaos_wait_gives_a_starting_group_time_to_appear(broker: Broker, tmp_path: Path) -> None:
    group = "first-use-late"
    waiter = subprocess.Popen(
        [sys.executable, "-m", "broker", "chaos", "wait", group, "--state", "Stable", "--members", "1",
         "--admin", broker.admin_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        time.sleep(0.5)  # the wait has found no group: the consumer starts only now, as in the README's walkthrough
        with consumers(broker, group, tmp_path):
            out, err = waiter.communicate(timeout=60)
            assert waiter.returncode == 0, err
            assert out.startswith(f"group {group}: Stable, generation "), out
            assert f"no group {group!r} yet" in err
            stable(ControlClient(broker.admin_url), group, members=1)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()


# -- watch on a terminal --------------------------------------------------------------------------------------


def test_watch_on_a_terminal_draws_in_the_alternate_screen_and_leaves_it_on_ctrl_c() -> None:
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    url = f"http://127.0.0.1:{free_port()}"  # nobody there: the view says so and keeps polling
    watcher = subprocess.Popen(
        [sys.executable, "-m", "broker", "watch", "--admin", url],
        stdin=secondary, stdout=secondary, stderr=secondary, cwd=ROOT,
    )
    os.close(secondary)
    output = bytearray()

    def read() -> None:  # the terminal's side: read everything, or the writer blocks on a full pty
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the last writer has gone
                return
            if not chunk:
                return
            output.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 20
        while output.count(b"broker unreachable") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # two frames drawn
        assert output.count(b"broker unreachable") >= 2, bytes(output)
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=10) == 0
        reader.join(timeout=10)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        os.close(primary)
    screen = bytes(output)
    assert screen.startswith(ENTER_ALT_SCREEN), screen[:80]
    assert screen.count(ENTER_ALT_SCREEN) == 1 and screen.count(LEAVE_ALT_SCREEN) == 1
    # Every frame starts at the top-left corner (ESC[H) and the last thing written is leaving the alternate screen.
    assert screen.count(b"\x1b[H") >= 2
    assert screen.rstrip().endswith(LEAVE_ALT_SCREEN), screen[-80:]


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class FailingPoller(watch.Poller):
    """The second poll fails as a bug would: the view must still give the terminal back."""

    def __init__(self) -> None:
        super().__init__(ControlClient(f"http://127.0.0.1:{free_port()}", timeout=0.5), None)
        self.polls = 0

    def poll(self) -> watch.Frame:
        self.polls += 1
        if self.polls > 2:
            raise RuntimeError("a bug in the view")
        return watch.Frame()


def test_the_view_leaves_the_alternate_screen_on_an_error_too() -> None:
    from rich.console import Console

    stream = TTY()
    console = Console(file=stream, width=100, height=20)
    assert console.is_terminal
    with pytest.raises(RuntimeError, match="a bug in the view"):
        watch.live_view(console, FailingPoller(), "http://example")
    written = stream.getvalue()
    assert written.startswith(ENTER_ALT_SCREEN.decode())
    assert written.rstrip().endswith(LEAVE_ALT_SCREEN.decode())

