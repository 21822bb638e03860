"""A share group's event log written by the real broker for real confluent-kafka ``ShareConsumer`` processes.

The broker runs as a process with ``--event-log`` and the share-group timings of the client tests (record lock
2000 ms, delivery limit 5: ``tests/clients/share_processes.py``), on a one-partition topic whose group starts from
the earliest offset. Four members come one after the other, so that no two of them compete for records:

1. ``releaser`` (explicit): ``ok-0 poison-1 reject-2 ok-3`` in one batch; ``poison-1`` is RELEASEd on every delivery
   (delivery counts 1..5, then archived at the limit), ``reject-2`` REJECTed, the others ACCEPTed; it then closes.
2. ``closer`` (implicit): ``c-4 c-5 c-6`` in one batch, then close() right after the poll, which does not accept
   them (spec 12.6): the broker releases them (``session_closed``).
3. ``holder`` (explicit): acquires them again (delivery count 2) and is SIGSTOPped: their lock expires
   (``lock_expired``).
4. ``receiver`` (explicit): acquires them a third time and ACCEPTs them; the holder is SIGKILLed.

``Scenario`` keeps what the workers saw (their deliveries), the tests' ground truth beside the log.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.clients.share_processes import (
    DELIVERY_LIMIT,
    LOCK_MS,
    SHARE_FLAGS,
    Delivery,
    ShareFleet,
    ShareTarget,
    set_group_configs,
    unique,
)
from tests.conftest import start_broker_process

GROUP_PREFIX = "share-analytics"


@dataclass
class Scenario:
    log: Path
    group: str
    topic: str
    deliveries: list[Delivery] = field(default_factory=list)

    def delivery_counts(self) -> Counter[int]:
        return Counter(d.delivery_count for d in self.deliveries)


def run_scenario(tmp_path: Path) -> Scenario:
    """The four members' run above; the broker is stopped (cleanly) before this returns."""
    log = tmp_path / "events.jsonl"
    topic = unique("queue")
    target = start_share_target_with_log(tmp_path, topic, log)
    fleet = ShareFleet(target, tmp_path, unique(GROUP_PREFIX), topic)
    try:
        assert set_group_configs(target, fleet.group, {"share.auto.offset.reset": "earliest"})
        fleet.produce(["ok-0", "poison-1", "reject-2", "ok-3"], one_batch=True)
        releaser = fleet.start("releaser", "--mode", "explicit", "--release", "^poison", "--reject", "^reject")
        fleet.wait(lambda: sum(d.value == "poison-1" for d in releaser.deliveries()) >= DELIVERY_LIMIT, "the limit")
        fleet.quiet(0.5)
        releaser.terminate()
        assert releaser.wait_exit() == 0, releaser.describe()

        fleet.produce(["c-4", "c-5", "c-6"], one_batch=True)
        closer = fleet.start("closer", "--commit", "none", "--close-after-batches", "1", "--on-close", "plain")
        fleet.wait(lambda: bool(closer.events("closed")), "the closer to poll once and close")
        assert closer.wait_exit() == 0, closer.describe()
        held = {d.offset for d in closer.deliveries()}

        holder = fleet.start("holder", "--mode", "explicit", "--hold-after-batches", "1")
        fleet.wait(lambda: bool(holder.events("holding")), "the holder to acquire the records")
        holder.stop()
        receiver = fleet.start("receiver", "--mode", "explicit")
        fleet.wait(
            lambda: held <= {d.offset for d in receiver.deliveries()}, "the receiver to get them",
            timeout=4 * LOCK_MS / 1000 + 20,
        )  # fmt: skip
        holder.kill()
        fleet.quiet(0.5)
        receiver.terminate()
        assert receiver.wait_exit() == 0, receiver.describe()
        deliveries = fleet.deliveries()
        assert target.alive(), "the broker died:\n" + "\n".join(target.log_lines())
    finally:
        fleet.close()
        target.stop()
    return Scenario(log, fleet.group, topic, deliveries)


def start_share_target_with_log(tmp_path: Path, topic: str, log: Path) -> ShareTarget:
    """``start_share_target``'s broker (our own: the log is what is analysed), writing its event log to ``log``."""
    broker = start_broker_process(
        tmp_path, *SHARE_FLAGS, "--log-level", "debug", "--event-log", str(log), "--topic", f"{topic}:1"
    )
    return ShareTarget(broker.bootstrap, broker)
