"""``chaos wait`` that times out says the shape the group was in and the one wanted (issue 26, item 8)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_control_cli import Broker, cli, consumers, failed, stable, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = start_broker(tmp_path_factory.mktemp("wait") / "broker.log")
    yield started
    started.stop()


def test_a_timed_out_wait_names_the_last_state_members_and_generation(broker: Broker, tmp_path: Path) -> None:
    group = "wait-timeout"
    with consumers(broker, group, tmp_path):
        generation = stable(broker.api(), group, members=1)["generation_id"]
        message = failed(cli(broker, "chaos", "wait", group, "--state", "Stable", "--members", "3",
                             "--min-generation", "9", "--timeout-ms", "300"))
        assert message == (
            f"timed out after 300 ms: group {group} was Stable with 1 member at generation {generation}, "
            "wanted Stable, 3 members, generation 9 or later"
        )
        # --json prints the group as it was, and the same one line on stderr.
        result = cli(broker, "chaos", "wait", group, "--members", "2", "--timeout-ms", "300", "--json")
        assert json.loads(result.stdout)["state"] == "Stable"
        assert failed(result) == (
            f"timed out after 300 ms: group {group} was Stable with 1 member at generation {generation}, "
            "wanted 2 members"
        )
