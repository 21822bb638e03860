"""The broker's retention check: scheduled on the purgatory every log.retention.check.interval.ms."""

from __future__ import annotations

from broker.server.broker import BrokerServer
from broker.storage.records import split_batches
from broker.storage.topics import LogDefaults
from broker.timing.clock import ManualClock
from tests.conftest import broker_settings
from tests.storage import make_batch

START_MS = 1_700_000_000_000
INTERVAL_MS = 60_000
RETENTION_MS = 3_600_000


def test_retention_runs_every_check_interval_and_moves_the_log_start() -> None:
    clock = ManualClock(START_MS)
    server = BrokerServer(
        broker_settings(log=LogDefaults(retention_ms=RETENTION_MS), log_retention_check_interval_ms=INTERVAL_MS),
        clock=clock,
    )
    clock.attach(server.purgatory)
    topic = server.topics.get("topic")
    assert topic is not None
    log = topic.logs[0]
    for timestamp in (START_MS - RETENTION_MS - 1, START_MS):  # one batch already too old, one fresh
        ((header, batch),) = split_batches(make_batch(2, timestamps=[timestamp, timestamp]))
        log.append(header, batch)
    stored = server.topics.budget.used

    clock.advance(INTERVAL_MS - 1)
    assert log.log_start_offset == 0  # the check has not run yet

    clock.advance(1)
    assert log.log_start_offset == 2
    assert server.topics.budget.used < stored

    clock.advance(RETENTION_MS)  # the fresh batch ages out at a later check
    assert log.log_start_offset == log.next_offset == 4
    assert server.topics.budget.used == 0
