"""What test_chaos_verbs.py drives: consumer processes of one group, a producer, and the broker's control API.

Each consumer is ``tests/clients/worker.py`` in its own OS process (as in test_consume_failover.py): it prints one
JSON line per thing it does, and a reader thread keeps them. A ``Crew`` is one consumer group on the shared broker:
it starts workers, adds fault rules scoped to its group (and deletes them afterwards), reads the group's events
from the control API, produces one record per partition and waits until they are consumed. Every wait polls with
a deadline and fails with everything known (workers' lines and stderr, the group's events).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from broker.control.client import ControlClient, ControlError
from tests.clients.processes import WorkerProcess
from tests.conftest import BrokerProcess

T = TypeVar("T")

PARTITIONS = 4
SESSION_MS = 3000  # short sessions: an eviction by timeout costs three seconds
HEARTBEAT_MS = 300
DEADLINE_S = 20.0


def control_url(broker: BrokerProcess, timeout: float = 10.0) -> str:
    """The control API's address, from the ``control api listening`` line the broker logs (``--admin-port 0``)."""
    deadline = time.monotonic() + timeout
    while True:
        for raw in broker.log().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("event") == "control api listening":
                return f"http://127.0.0.1:{line['port']}"
        if time.monotonic() > deadline or broker.process.poll() is not None:
            raise AssertionError(f"the broker logged no 'control api listening' line:\n{broker.log()[-3000:]}")
        time.sleep(0.02)


class Worker(WorkerProcess):
    """One consumer process and the JSON lines it has printed so far."""

    @property
    def assigned(self) -> dict[str, Any] | None:
        """The last assignment the client's rebalance callback reported (member id and generation included)."""
        found = self.events("assigned")
        return found[-1] if found else None

    def keys(self) -> set[str]:
        return {e["key"] for e in self.events("record") if e["key"] is not None}

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.alive:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self._reader.join(timeout=10)

    def describe(self) -> str:
        lines = [json.dumps(e) for e in self.events() if e["event"] != "record"][-15:]
        records = self.events("record")
        return (
            f"--- worker {self.name} pid={self.process.pid} rc={self.process.poll()} records={len(records)} "
            f"last keys={[e['key'] for e in records[-8:]]}\n"
            + "\n".join(lines)
            + "\n--- stderr tail:\n"
            + self.stderr()[-1500:]
        )


class Crew:
    """The consumers of one group (one client library) on the shared broker, and the group's view from the API."""

    def __init__(
        self, broker: BrokerProcess, ctl: ControlClient, producer: Any, client: str, topic: str, tmp_path: Path
    ) -> None:
        self.broker = broker
        self.ctl = ctl
        self.producer = producer
        self.client = client
        self.topic = topic
        self.tmp_path = tmp_path
        self.group = f"chaos-{client}-{uuid.uuid4().hex[:8]}"
        self.workers: dict[str, Worker] = {}
        self.rule_ids: list[str] = []
        self._rounds = 0

    # -- consumers ------------------------------------------------------------------------------------------

    def start(self, name: str, session_ms: int = SESSION_MS, instance_id: str | None = None) -> Worker:
        """A consumer whose client id is ``name`` (the handle fault rules match on)."""
        argv = [
            sys.executable, "-m", "tests.clients.worker",
            "--client", self.client, "--bootstrap", self.broker.bootstrap, "--group", self.group,
            "--topic", self.topic, "--client-id", name, "--session-timeout-ms", str(session_ms),
            "--heartbeat-interval-ms", str(HEARTBEAT_MS),
            "--log-level", os.environ.get("CHAOS_WORKER_LOG_LEVEL", "WARNING"),
        ]  # fmt: skip
        if instance_id is not None:
            argv += ["--instance-id", instance_id]
        worker = Worker(name, argv, self.tmp_path / f"{self.group}-{name}-{len(self.workers)}.stderr")
        self.workers[name] = worker
        return worker

    def close(self) -> None:
        """Kill every worker (their members expire in their own groups), delete this group's fault rules."""
        for worker in self.workers.values():
            worker.kill()
            lines = "".join(json.dumps(e) + "\n" for e in worker.events())
            (self.tmp_path / f"{self.group}-{worker.name}.jsonl").write_text(lines)
        for rule_id in self.rule_ids:
            try:
                self.ctl.delete_fault(rule_id)
            except ControlError as error:
                if error.status != 404:
                    raise

    # -- the group through the control API ------------------------------------------------------------------

    def stable(self, members: int, min_generation: int | None = None, timeout_s: float = DEADLINE_S) -> dict[str, Any]:
        """The group's detail once it is Stable with exactly ``members`` members (and that generation or later)."""
        self.check_workers()
        try:
            return self.ctl.wait(
                self.group, state="Stable", members=members, min_generation=min_generation,
                timeout_ms=int(timeout_s * 1000),
            )  # fmt: skip
        except ControlError as error:
            raise AssertionError(
                f"group {self.group} not Stable with {members} members (generation >= {min_generation}): "
                f"{error}\nas it was: {json.dumps(error.payload.get('group'))}\n{self.describe()}"
            ) from None

    def settled(self, members: int, min_generation: int | None = None) -> dict[str, Any]:
        """Stable with ``members`` members, and every live worker that is a member has applied that generation's
        assignment (its rebalance callback reported the broker's member id and generation)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            detail = self.stable(members, min_generation, max(deadline - time.monotonic(), 0.1))
            ids = {m["member_id"] for m in detail["members"]}
            current = [w.assigned for w in self.workers.values()]
            reported = {(a["member_id"], a["generation"]) for a in current if a is not None}
            if all((member_id, detail["generation_id"]) in reported for member_id in ids):
                return detail
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the workers did not apply generation {detail['generation_id']}: {reported}\n{self.describe()}"
                )
            time.sleep(0.05)

    @staticmethod
    def member(detail: dict[str, Any], client_id: str) -> dict[str, Any]:
        found = [m for m in detail["members"] if m["client_id"] == client_id]
        assert len(found) == 1, f"expected one member with client id {client_id!r}: {detail['members']}"
        return found[0]

    def events(self, *kinds: str, after: int = 0) -> list[dict[str, Any]]:
        """The group's events from the broker's ring buffer (seq > after), oldest first."""
        found = self.ctl.events(self.group, since_seq=after)
        return [e for e in found if not kinds or e["event"] in kinds]

    def last_seq(self) -> int:
        found = self.ctl.events(self.group)
        return found[-1]["seq"] if found else 0

    def wait_event(
        self, kind: str, what: str, predicate: Callable[[dict[str, Any]], bool] = lambda e: True, after: int = 0,
        timeout_s: float = DEADLINE_S,
    ) -> dict[str, Any]:  # fmt: skip
        def found() -> dict[str, Any] | None:
            return next((e for e in self.events(kind, after=after) if predicate(e)), None)

        return self.wait(found, what, timeout_s)

    # -- fault rules ------------------------------------------------------------------------------------------

    def add_fault(self, **fields: Any) -> dict[str, Any]:
        """A fault rule limited to this group (so the module's other groups never match it)."""
        rule = self.ctl.add_fault(group_id=self.group, **fields)
        self.rule_ids.append(rule["id"])
        return rule

    def rule(self, rule_id: str) -> dict[str, Any]:
        return next(r for r in self.ctl.faults() if r["id"] == rule_id)

    # -- records ------------------------------------------------------------------------------------------------

    def produce_round(self) -> set[str]:
        """One record on every partition, keys unique to this group and round; returns the keys."""
        self._rounds += 1
        keys = {f"{self.group}-r{self._rounds}-p{p}" for p in range(PARTITIONS)}
        errors: list[Any] = []
        for key in sorted(keys):
            partition = int(key.rsplit("-p", 1)[1])
            self.producer.produce(
                self.topic, key=key.encode(), value=b"chaos", partition=partition,
                on_delivery=lambda error, _message: errors.append(error) if error is not None else None,
            )  # fmt: skip
        assert self.producer.flush(DEADLINE_S) == 0, "the producer did not deliver every record"
        assert not errors, errors
        return keys

    def consumed(self, keys: set[str], *by: Worker) -> dict[str, set[str]]:
        """Wait until every key was consumed by one of ``by`` (default: every worker); who consumed which."""
        consumers = list(by) or list(self.workers.values())

        def done() -> bool:
            return keys <= set().union(*(w.keys() for w in consumers))

        self.wait(done, f"records {sorted(keys)} to be consumed by {[w.name for w in consumers]}")
        return {w.name: w.keys() & keys for w in self.workers.values()}

    def round_consumed_by_each(self, *workers: Worker) -> dict[str, set[str]]:
        """Produce a round; every key is consumed, and each of ``workers`` consumed some (it holds partitions)."""
        seen = self.consumed(self.produce_round(), *workers)
        idle = [w.name for w in workers if not seen[w.name]]
        assert not idle, f"{idle} consumed none of the round: {seen}\n{self.describe()}"
        return seen

    # -- waiting and describing -------------------------------------------------------------------------------

    def check_workers(self, *allowed_dead: Worker) -> None:
        dead = [w.name for w in self.workers.values() if not w.alive and w not in allowed_dead]
        assert not dead, f"workers died: {dead}\n{self.describe()}"

    def wait(self, condition: Callable[[], T | None], what: str, timeout_s: float = DEADLINE_S) -> T:
        """Poll ``condition`` until it returns something truthy (returned); fail at the deadline or if a worker
        died, with everything known."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = condition()
            if result:
                return result
            dead = [w.name for w in self.workers.values() if not w.alive]
            if dead or time.monotonic() > deadline:
                why = f"workers died: {dead}" if dead else f"timed out after {timeout_s}s"
                raise AssertionError(f"{why} waiting for {what}\n{self.describe()}")
            time.sleep(0.05)

    def describe(self) -> str:
        try:
            events = [json.dumps(e) for e in self.events()][-40:]
        except ControlError as error:
            events = [f"(no events: {error})"]
        return "\n".join([w.describe() for w in self.workers.values()] + [f"--- group {self.group} events:", *events])
