"""``group_broker.mark(...)``: a test records what it does to a member (a ``chaos_action`` event) on the broker."""

from __future__ import annotations

import pytest

from broker.control.client import ControlError
from broker.testing.embedded import EmbeddedBroker


def test_mark_records_a_chaos_action_in_the_groups_events(group_broker: EmbeddedBroker) -> None:
    record = group_broker.mark("orders", "pause", signal="SIGSTOP", client_id="worker-1", pid=1234, note="paused")
    assert record == record | {
        "event": "chaos_action", "group_id": "orders", "action": "pause", "signal": "SIGSTOP",
        "client_id": "worker-1", "pid": 1234, "note": "paused",
    }  # fmt: skip
    assert group_broker.events("orders")[-1] == record
    with pytest.raises(ControlError) as refused:
        group_broker.mark("orders", "Pause!")
    assert refused.value.status == 400 and "action must be a lower-case word" in str(refused.value)
    assert group_broker.events("orders") == [record]


async def test_mark_has_its_aio_twin(group_broker: EmbeddedBroker) -> None:
    record = await group_broker.aio.mark("payments", "kill", signal="SIGKILL", pid=7)
    assert (record["event"], record["signal"], record["pid"]) == ("chaos_action", "SIGKILL", 7)
    assert await group_broker.aio.events("payments") == [record]
