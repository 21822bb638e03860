"""The embedded broker's ``restart()`` (issue 27): same ports, same data directory; a kill by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.testing.embedded import embedded_settings, run_broker

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def commit_and_read(bootstrap: str, offset: int | None) -> int | None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
    if offset is not None:
        consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(offset, "", -1)})
    found = consumer.committed(TopicPartition("t", 0))
    consumer.close()
    return found


@pytest.mark.parametrize("graceful", [False, True])
def test_restart_keeps_ports_and_with_a_data_dir_the_offsets(tmp_path: Path, graceful: bool) -> None:
    log = tmp_path / "events.jsonl"
    settings = embedded_settings(topics={"t": 1}, data_dir=str(tmp_path / "d"), event_log=str(log))
    with run_broker(settings) as broker:
        bootstrap, admin = broker.bootstrap, broker.admin_url
        assert commit_and_read(bootstrap, 42) == 42
        broker.restart(graceful=graceful)
        assert (broker.bootstrap, broker.admin_url) == (bootstrap, admin)
        assert commit_and_read(bootstrap, None) == 42
    lifecycle = [
        (record["event"], record.get("clean")) for line in log.read_text().splitlines()
        if (record := json.loads(line))["event"].startswith("broker_")
    ]  # fmt: skip
    stopped = ("broker_stopped", True) if graceful else ("broker_stopped", False)
    assert lifecycle == [("broker_started", None), stopped, ("broker_started", None), ("broker_stopped", True)]


def test_restart_without_a_data_dir_forgets(tmp_path: Path) -> None:
    with run_broker(embedded_settings(topics={"t": 1})) as broker:
        assert commit_and_read(broker.bootstrap, 7) == 7
        broker.restart()
        assert commit_and_read(broker.bootstrap, None) is None
