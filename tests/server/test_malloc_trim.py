"""The broker gives the heap back to the OS after a burst of closed connections (issue 17), without polling."""

from __future__ import annotations

from broker.server.broker import _TRIM_AFTER_CLOSES, _TRIM_DELAY_MS, BrokerServer
from broker.timing.clock import ManualClock
from broker.timing.keys import MALLOC_TRIM
from tests.conftest import broker_settings


def test_a_burst_of_closes_trims_once_and_nothing_polls_otherwise() -> None:
    clock = ManualClock()
    server = BrokerServer(broker_settings(), clock)
    clock.attach(server.purgatory)
    for _ in range(_TRIM_AFTER_CLOSES - 1):
        server.connection_closed()
    assert MALLOC_TRIM not in server.purgatory  # a few closes arm nothing
    server.connection_closed()
    assert MALLOC_TRIM in server.purgatory
    server.connection_closed()  # more of the same burst: still one trim
    clock.advance(_TRIM_DELAY_MS)
    assert MALLOC_TRIM not in server.purgatory
    assert server._closed_since_trim == 0
    clock.advance(7 * 24 * 3_600_000)  # a week of manual time runs no trim timer
    assert MALLOC_TRIM not in server.purgatory
