"""A ShareConsumer against a broker without share groups (``--share-version 0``): checklist item 71.

librdkafka 2.16 checks that ShareGroupHeartbeat v1 is listed in ApiVersions; when it is not, it drops the
coordinator and looks it up again, saying nothing (no error callback, no error message from poll(): share-groups
spec 12.5). A test of an application against such a broker must end by its own timeout; this shows what it will
see meanwhile: no records, no error, a live process that does not spin, and a broker that created nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.clients.share_processes import SHARE_FLAGS, ShareFleet, ShareTarget, unique
from tests.conftest import start_broker_process

WAIT_S = 4.0


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time, from /proc (fields 14 and 15 of its stat line, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_consumer_waits_silently_and_the_broker_creates_nothing(tmp_path: Path) -> None:
    topic, group = unique("queue"), unique("share")
    broker = start_broker_process(
        tmp_path, *SHARE_FLAGS, "--share-version", "0", "--log-level", "debug", "--topic", f"{topic}:1"
    )
    target = ShareTarget(broker.bootstrap, broker)
    fleet = ShareFleet(target, tmp_path, group, topic)
    try:
        fleet.produce(["a", "b", "c"])
        worker = fleet.start("m0")
        fleet.quiet(WAIT_S)
        assert worker.alive, worker.describe()
        assert worker.deliveries() == [] and worker.joined_at is None, worker.describe()
        assert worker.commit_failures() == [], worker.describe()  # not even an error line: it says nothing
        assert cpu_seconds(worker.process.pid) < WAIT_S / 2, "the consumer spins while it waits"
        # librdkafka never sent a share request it was not offered, and no share group exists.
        assert target.log_lines("share_member_joined", "share_group_created") == []
        assert target.alive()
    finally:
        fleet.close()
        target.stop()
