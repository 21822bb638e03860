"""ConnectionQuotas on their own: Kafka's counting of max.connections, max.connections.per.ip and the overrides."""

from __future__ import annotations

import asyncio

from broker.server.quotas import ConnectionQuotas, normalized


def test_an_address_at_its_limit_is_refused_and_others_are_not() -> None:
    quotas = ConnectionQuotas(max_connections=100, max_per_ip=2)
    slots = [quotas.take("10.0.0.1"), quotas.take("10.0.0.1")]
    assert all(slot is not None for slot in slots)
    assert quotas.take("10.0.0.1") is None  # Kafka: count >= max throws TooManyConnectionsException
    assert quotas.take("10.0.0.2") is not None
    assert (quotas.total, quotas.count("10.0.0.1")) == (3, 2)


def test_overrides_raise_or_lower_one_address_limit() -> None:
    quotas = ConnectionQuotas(max_connections=100, max_per_ip=1, overrides=[("10.0.0.1", 3), ("10.0.0.2", 0)])
    assert quotas.limit_for("10.0.0.1") == (3, "max.connections.per.ip.overrides")
    assert quotas.limit_for("10.0.0.9") == (1, "max.connections.per.ip")
    assert [quotas.take("10.0.0.1") is not None for _ in range(4)] == [True, True, True, False]
    assert quotas.take("10.0.0.2") is None


def test_addresses_are_counted_in_one_spelling() -> None:
    quotas = ConnectionQuotas(max_connections=100, max_per_ip=1, overrides=[("0:0:0:0:0:0:0:1", 2)])
    assert normalized("0:0:0:0:0:0:0:1") == "::1"
    assert quotas.limit_for(normalized("::1"))[0] == 2


def test_a_slot_is_released_once_whoever_releases_it() -> None:
    quotas = ConnectionQuotas(max_connections=100, max_per_ip=5)
    slot = quotas.take("10.0.0.1")
    assert slot is not None
    slot.release()
    slot.release()
    assert (quotas.total, quotas.count("10.0.0.1")) == (0, 0)


async def test_waiting_for_a_slot_ends_when_a_connection_closes() -> None:
    quotas = ConnectionQuotas(max_connections=2, max_per_ip=10)
    first, second = quotas.take("10.0.0.1"), quotas.take("10.0.0.2")
    assert first is not None and second is not None and not quotas.slot_available
    waiters = [asyncio.ensure_future(quotas.wait_for_slot()) for _ in range(2)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    first.release()
    await asyncio.sleep(0)
    assert all(w.done() for w in waiters)  # both wake (Kafka's notifyAll); each then takes or waits again
    assert quotas.take("10.0.0.3") is not None and not quotas.slot_available
    third = asyncio.ensure_future(quotas.wait_for_slot())
    await asyncio.sleep(0)
    assert not third.done()
    third.cancel()
