"""Consumer processes fail over: a share of the topic each, kill -9, graceful close, static restarts, cooperative moves.

Every test runs one broker process (its own tmp_path) with a 6-partition topic and consumers as separate OS
processes (``tests/clients/worker.py``), one test body per scenario parametrized over aiokafka, kafka-python and
confluent-kafka. The test produces keyed records with the same library's idempotent producer, follows the
workers' JSON lines from reader threads, waits for conditions with deadlines, and then checks the records, the
commits, the assignments per generation (workers' view, tied to the broker's "join_completed" lines) and the
broker's log of joins, leaves and expiries.

What a client does not offer is left out with the reason, never imitated: aiokafka 0.14.0 has no cooperative
rebalance protocol (its assignors are range, roundrobin and the eager sticky one), so scenario e runs for
kafka-python (``CooperativeStickyAssignor``, new in 3.0) and confluent-kafka (``cooperative-sticky``). All three
clients support static membership (``group_instance_id`` / ``group.instance.id``, KIP-345) and none sends
LeaveGroup for a static member on close.

No test retries. kafka-python 3.0.12's client-side hang (a consumer stops heartbeating right after a correct
SyncGroup answer; test_group_assignment.py) did happen here with one consumer per process, in 2 of 3 full runs
with 200 ms polls: always the group leader, on the rejoin it starts itself when topic metadata arrives after its
first assignment (G9). The worker avoids that rejoin and its race instead of retrying (see run_kafka_python).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients.processes import WorkerProcess
from tests.conftest import BrokerProcess, start_broker_process

CLIENTS = ["aiokafka", "kafka-python", "confluent"]
# aiokafka is left out because it offers no cooperative protocol; test_aiokafka_offers_no_cooperative_protocol
# fails the day it does, so scenario e can then run for it too.
COOPERATIVE_CLIENTS = ["kafka-python", "confluent"]
TOPIC = "orders"
PARTITIONS = frozenset(range(6))
SESSION_MS = 6000  # the workers' default session timeout
STATIC_SESSION_MS = 10_000  # room for a restarted process to rejoin before its old session ends
DEADLINE_S = 30.0


# -- producing ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int
    key: str


def keys(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


def produce(client: str, bootstrap: str, record_keys: list[str]) -> list[Produced]:
    """Keyed records through the client library's own idempotent producer; their partitions and offsets."""
    if client == "aiokafka":
        produced = asyncio.run(_produce_aiokafka(bootstrap, record_keys))
    elif client == "kafka-python":
        produced = _produce_kafka_python(bootstrap, record_keys)
    else:
        produced = _produce_confluent(bootstrap, record_keys)
    assert sorted(p.key for p in produced) == sorted(record_keys)
    return produced


async def _produce_aiokafka(bootstrap: str, record_keys: list[str]) -> list[Produced]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        futures = [await producer.send(TOPIC, key=key.encode(), value=b"payload") for key in record_keys]
        sent = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return [Produced(meta.partition, meta.offset, key) for meta, key in zip(sent, record_keys, strict=True)]


def _produce_kafka_python(bootstrap: str, record_keys: list[str]) -> list[Produced]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)  # idempotent by default since 3.0 (KIP-679)
    try:
        futures = [producer.send(TOPIC, key=key.encode(), value=b"payload") for key in record_keys]
        producer.flush(timeout=DEADLINE_S)
        sent = [future.get(timeout=DEADLINE_S) for future in futures]
    finally:
        producer.close()
    return [Produced(meta.partition, meta.offset, key) for meta, key in zip(sent, record_keys, strict=True)]


def _produce_confluent(bootstrap: str, record_keys: list[str]) -> list[Produced]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    produced: list[Produced] = []
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            produced.append(Produced(message.partition(), message.offset(), message.key().decode()))

    for key in record_keys:
        producer.produce(TOPIC, key=key.encode(), value=b"payload", on_delivery=delivered)
    assert producer.flush(DEADLINE_S) == 0, "confluent producer did not deliver everything"
    assert not errors, errors
    return produced


def end_offsets(produced: list[Produced]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for record in produced:
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    return ends


# -- worker processes --------------------------------------------------------------------------------------


class Worker(WorkerProcess):
    """One consumer process and the JSON lines it has printed so far (read by a background thread)."""

    def __init__(self, name: str, argv: list[str], stderr_path: Path) -> None:
        super().__init__(name, argv, stderr_path)
        self.killed_at: float | None = None

    @property
    def owned(self) -> frozenset[int]:
        changes = self.events("assigned", "revoked", "lost")
        return frozenset(changes[-1]["owned"]) if changes else frozenset()

    @property
    def member_id(self) -> str:
        return str(self.events("assigned")[-1]["member_id"])

    def records(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self.events("record")]

    def last_commits(self) -> dict[int, int]:
        commits: dict[int, int] = {}
        for event in self.events("committed"):
            for partition, offset in event["offsets"].items():
                commits[int(partition)] = max(commits.get(int(partition), 0), offset)
        return commits

    def kill(self) -> None:
        """SIGKILL: no close, no LeaveGroup, no last words."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.killed_at = time.time()
        self._reader.join(timeout=10)

    def terminate(self) -> float:
        sent = time.time()
        self.process.send_signal(signal.SIGTERM)
        return sent

    def wait_exit(self, timeout: float = DEADLINE_S) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def describe(self) -> str:
        events = self.events()
        lines = [json.dumps(e) for e in events if e["event"] != "record"][-20:]
        stderr = self.stderr_path.read_text(errors="replace")[-2000:]
        return (
            f"--- worker {self.name} pid={self.process.pid} rc={self.process.poll()} "
            f"records={len(self.records())}\n" + "\n".join(lines) + f"\n--- stderr tail:\n{stderr}"
        )


class Fleet:
    """The consumer processes of one group against one broker process."""

    def __init__(self, broker: BrokerProcess, client: str, tmp_path: Path) -> None:
        self.broker = broker
        self.client = client
        self.tmp_path = tmp_path
        self.group = f"failover-{client}-{uuid.uuid4().hex[:8]}"
        self.workers: list[Worker] = []

    def start(self, name: str, *options: str) -> Worker:
        argv = [
            sys.executable, "-m", "tests.clients.worker",
            "--client", self.client, "--bootstrap", self.broker.bootstrap,
            "--group", self.group, "--topic", TOPIC, "--client-id", name,
            "--log-level", os.environ.get("FAILOVER_WORKER_LOG_LEVEL", "WARNING"), *options,
        ]  # fmt: skip
        worker = Worker(name, argv, self.tmp_path / f"{name}-{len(self.workers)}.stderr")
        self.workers.append(worker)
        return worker

    def produce(self, record_keys: list[str]) -> list[Produced]:
        return produce(self.client, self.broker.bootstrap, record_keys)

    def wait(self, condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> float:
        """Poll ``condition`` until it holds; return when it did (time.time()), or fail with everything known."""
        deadline = time.monotonic() + timeout
        while not condition():
            dead = [
                f"{w.name} (pid {w.process.pid})"
                for w in self.workers
                if not w.alive and w.killed_at is None and not w.events("closed")
            ]
            if dead or time.monotonic() > deadline:
                why = f"workers died: {dead}" if dead else f"timed out after {timeout}s"
                for worker in self.workers:
                    if worker.alive:
                        worker.process.send_signal(signal.SIGUSR1)  # the worker dumps its threads' stacks
                time.sleep(0.5)
                raise AssertionError(f"{why} waiting for {what}\n{self.describe()}")
            time.sleep(0.05)
        return time.time()

    def log(self) -> list[dict[str, Any]]:
        """The broker's JSON log lines about this group."""
        lines = []
        for raw in self.broker.log().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("group_id") == self.group:
                lines.append(line)
        return lines

    def logged(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.log() if line.get("event") == event]

    def describe(self) -> str:
        broker_lines = [json.dumps(line) for line in self.log()][-40:]
        return "\n".join([w.describe() for w in self.workers] + ["--- broker log (this group):", *broker_lines])

    def close(self) -> None:
        """Kill what still runs; keep every worker's lines next to the broker log for a post-mortem."""
        for index, worker in enumerate(self.workers):
            if worker.alive:
                worker.kill()
            lines = "".join(json.dumps(e) + "\n" for e in worker.events())
            (self.tmp_path / f"{worker.name}-{index}.jsonl").write_text(lines)


@pytest.fixture
def fleet(client: str, tmp_path: Path) -> Iterator[Fleet]:
    broker = start_broker_process(tmp_path, "--topic", f"{TOPIC}:{len(PARTITIONS)}")
    fleet = Fleet(broker, client, tmp_path)
    try:
        yield fleet
        assert broker.process.poll() is None, "the broker died:\n" + broker.log()[-4000:]
    finally:
        fleet.close()
        broker.stop()


# -- conditions and checks ---------------------------------------------------------------------------------


def balanced(workers: list[Worker]) -> bool:
    """Each worker holds an equal, disjoint share and together they hold the whole topic."""
    shares = [w.owned for w in workers]
    return (
        all(w.alive for w in workers)
        and all(len(s) == len(PARTITIONS) // len(workers) for s in shares)
        and frozenset().union(*shares) == PARTITIONS
    )


def seen(workers: list[Worker]) -> Counter[tuple[int, int]]:
    return Counter(record for w in workers for record in w.records())


def consumed(produced: list[Produced], workers: list[Worker]) -> Callable[[], bool]:
    """Every produced record has been seen and every partition's commits reached its end offset."""
    wanted = {(p.partition, p.offset) for p in produced}
    ends = end_offsets(produced)

    def done() -> bool:
        commits: dict[int, int] = {}
        for w in workers:
            for partition, offset in w.last_commits().items():
                commits[partition] = max(commits.get(partition, 0), offset)
        return wanted <= set(seen(workers)) and all(commits.get(p, 0) >= end for p, end in ends.items())

    return done


def assert_every_record_seen(produced: list[Produced], workers: list[Worker]) -> None:
    by_position = {(p.partition, p.offset): p.key for p in produced}
    consumed_keys = {(e["partition"], e["offset"]): e["key"] for w in workers for e in w.events("record")}
    missing = sorted(set(by_position) - set(consumed_keys))
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:10]}"
    unknown = sorted(set(consumed_keys) - set(by_position))
    assert not unknown, f"records consumed that were never produced: {unknown[:10]}"
    wrong = [pos for pos, key in consumed_keys.items() if by_position[pos] != key]
    assert not wrong, f"records with the wrong key at {wrong[:10]}"


def duplicates(workers: list[Worker]) -> dict[tuple[int, int], int]:
    return {record: n for record, n in seen(workers).items() if n > 1}


def assert_exclusive_per_generation(fleet: Fleet) -> None:
    """Within a generation no partition belongs to two members, and every (generation, member) a worker reports
    is one the broker logged in that generation's "join_completed" line.

    A restarted static member is the same member of the generation under a new id ("member_fenced"),
    so its processes count as one member (the old one was dead or closed before the new one took over)."""
    joined = {line["generation_id"]: set(line["members"]) for line in fleet.logged("join_completed")}
    replaced = {line["new_member_id"]: line["member_id"] for line in fleet.logged("member_fenced")}

    def first_id(member_id: str) -> str:
        while member_id in replaced:
            member_id = replaced[member_id]
        return member_id

    holdings: dict[int, dict[str, set[int]]] = {}
    for worker in fleet.workers:
        for event in worker.events("assigned", "revoked", "lost"):
            generation = event["generation"]
            if generation <= 0 or not event["member_id"]:
                continue  # not yet in a generation, or already out of one
            member = first_id(event["member_id"])
            assert generation in joined, f"{worker.name} reports generation {generation}, never logged: {joined}"
            assert member in joined[generation], (
                f"{worker.name} ({event['member_id']}) is not a member of generation {generation}: {joined[generation]}"
            )
            holdings.setdefault(generation, {}).setdefault(member, set()).update(event["owned"])
    assert holdings, "no worker reported an assignment"
    for generation, held in holdings.items():
        owners: dict[int, str] = {}
        for member, partitions in held.items():
            for partition in partitions:
                assert partition not in owners, (
                    f"generation {generation}: partition {partition} held by {owners[partition]} and {member}: {held}"
                )
                owners[partition] = member


def assert_redelivered_after_crash(workers: list[Worker], victim: Worker, victim_partitions: frozenset[int]) -> None:
    """At-least-once across a crash, exactly: the new owners of the victim's partitions resumed at its last commit
    (or later, had it been killed between a commit and the line reporting it, but never past what it had
    processed); the records seen twice are exactly those the victim processed from there on, and nothing else."""
    victim_commits = victim.last_commits()
    victim_last = {p: o for p, o in victim.records()}
    others = [w for w in workers if w is not victim]
    expected: set[tuple[int, int]] = set()
    for partition in victim_partitions:
        resumed = [o for w in others for p, o in w.records() if p == partition]
        if not resumed:
            continue  # nothing was left to consume there
        first = min(resumed)
        assert victim_commits.get(partition, 0) <= first <= victim_last.get(partition, -1) + 1, (
            f"partition {partition}: the new owner started at {first}; the victim committed "
            f"{victim_commits.get(partition)} and processed up to {victim_last.get(partition)}"
        )
        expected |= {(p, o) for p, o in victim.records() if p == partition and o >= first}
    seen_twice = duplicates(workers)
    assert set(seen_twice) == expected, (
        f"seen twice: {sorted(seen_twice)}; expected the victim's records after its last commit: {sorted(expected)}"
    )
    assert all(n == 2 for n in seen_twice.values()), seen_twice


def stop_all(workers: list[Worker]) -> None:
    """SIGTERM: each worker closes its consumer and exits 0."""
    for worker in workers:
        worker.terminate()
    for worker in workers:
        assert worker.wait_exit() == 0, worker.describe()
        assert worker.events("closed"), worker.describe()


# -- scenarios ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("client", CLIENTS)
def test_a_three_consumers_consume_everything_once(fleet: Fleet) -> None:
    """Three consumers split the topic, consume and commit every record once; no partition has two owners."""
    workers = [fleet.start(f"c{i}") for i in range(3)]
    fleet.wait(lambda: balanced(workers), "three consumers to split the topic")
    produced = fleet.produce(keys("a", 600))
    fleet.wait(consumed(produced, workers), "every record consumed and committed")

    assert_every_record_seen(produced, workers)
    assert not duplicates(workers), f"records seen twice in a group without failures: {duplicates(workers)}"
    assert_exclusive_per_generation(fleet)
    assert fleet.logged("sync_completed"), "the broker logged no SyncGroup completion"
    stop_all(workers)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", CLIENTS)
def test_b_killed_consumer_partitions_resume_from_its_commits(fleet: Fleet) -> None:
    """kill -9 in the middle of a batch: the broker expires the member after its session timeout (no LeaveGroup),
    the survivors resume its partitions at its last commit, and only its uncommitted records come twice."""
    # Slow batches, so the kill lands between a batch's records and its commit: those records come again.
    slow = ("--max-poll-records", "20", "--processing-ms", "100")
    workers = [fleet.start(f"c{i}", *slow) for i in range(3)]
    victim, survivors = workers[0], workers[1:]
    fleet.wait(lambda: balanced(workers), "three consumers to split the topic")
    first = fleet.produce(keys("b1", 600))
    fleet.wait(
        lambda: (
            bool(victim.events("committed"))
            and len(victim.records()) >= 40
            and victim.events()[-1]["event"] == "record"
        ),
        "the victim to commit part of its share and be in the middle of a batch",
    )
    victim_partitions = victim.owned
    victim_member = victim.member_id
    victim.kill()
    assert victim.killed_at is not None
    produced = first + fleet.produce(keys("b2", 600))
    fleet.wait(
        lambda: balanced(survivors) and consumed(produced, workers)(),
        "the survivors to take over and consume everything",
        timeout=SESSION_MS / 1000 + DEADLINE_S,
    )

    assert_every_record_seen(produced, workers)
    assert_redelivered_after_crash(workers, victim, victim_partitions)
    assert_exclusive_per_generation(fleet)
    # The broker expired the victim (no LeaveGroup); the survivors got its partitions only after that.
    gone = [line for line in fleet.logged("member_expired") if line["member_id"] == victim_member]
    assert len(gone) == 1 and gone[0]["cause"] == "session_timeout", gone
    assert gone[0]["since_last_heartbeat_ms"] >= SESSION_MS, gone
    assert not [line for line in fleet.logged("member_left") if line["member_id"] == victim_member]
    takeovers = [e for w in survivors for e in w.events("assigned") if e["ts"] > victim.killed_at]
    takeover = min(e["ts"] for e in takeovers if victim_partitions & set(e["partitions"]))
    assert takeover - victim.killed_at >= (SESSION_MS - 1000) / 1000, (
        f"the survivors took over {takeover - victim.killed_at:.2f}s after the kill, before the session timeout"
    )
    stop_all(survivors)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("client", CLIENTS)
def test_c_graceful_close_rebalances_without_waiting_for_the_session(fleet: Fleet) -> None:
    """SIGTERM -> consumer.close(): LeaveGroup, so the survivors take over in well under the session timeout."""
    workers = [fleet.start(f"c{i}") for i in range(3)]
    leaving, survivors = workers[1], [workers[0], workers[2]]
    fleet.wait(lambda: balanced(workers), "three consumers to split the topic")
    first = fleet.produce(keys("c1", 300))
    fleet.wait(consumed(first, workers), "the first records consumed and committed")
    leaving_member = leaving.member_id

    leaving.terminate()
    assert leaving.wait_exit() == 0, leaving.describe()
    fleet.wait(lambda: balanced(survivors), "the survivors to take over")
    closing = leaving.events("closing")[0]["ts"]
    rebalanced = max(w.events("assigned")[-1]["ts"] for w in survivors)
    assert rebalanced - closing < SESSION_MS / 2000, (
        f"the survivors took over {rebalanced - closing:.2f}s after the close (session timeout {SESSION_MS} ms)"
    )
    produced = first + fleet.produce(keys("c2", 300))
    fleet.wait(consumed(produced, workers), "everything consumed by the survivors")

    assert_every_record_seen(produced, workers)
    assert not duplicates(workers), f"records seen twice after a graceful close: {duplicates(workers)}"
    assert_exclusive_per_generation(fleet)
    gone = [line for line in fleet.logged("member_left") if line["member_id"] == leaving_member]
    assert len(gone) == 1 and gone[0]["cause"] == "leave_group", gone
    stop_all(survivors)


def start_static(fleet: Fleet, index: int, name: str = "") -> Worker:
    options = ("--instance-id", f"static-{index}", "--session-timeout-ms", str(STATIC_SESSION_MS))
    return fleet.start(name or f"s{index}", *options)


def restart_static(fleet: Fleet, workers: list[Worker], old: Worker, stop: Callable[[Worker], None]) -> Worker:
    """Stop a static member, start a new process with its instance id, check nothing in the group moved."""
    index = workers.index(old)
    joins = fleet.logged("join_completed")
    before, member = old.owned, old.member_id
    stop(old)
    new = workers[index] = start_static(fleet, index, f"{old.name}-restarted")
    fleet.wait(lambda: bool(new.events("assigned")), f"static-{index} to rejoin", timeout=STATIC_SESSION_MS / 1000)
    assigned = new.events("assigned")[-1]
    assert new.owned == before, f"static-{index} came back with {assigned}, it had {sorted(before)}"
    assert assigned["generation"] == joins[-1]["generation_id"], f"static-{index} is in a new generation: {assigned}"
    assert fleet.logged("join_completed") == joins, f"the group rebalanced for static-{index}:\n{fleet.describe()}"
    assert not [line for line in fleet.logged("member_left") if line["member_id"] == member], fleet.describe()
    assert not [line for line in fleet.logged("member_expired") if line["member_id"] == member], fleet.describe()
    replaced = [line for line in fleet.logged("member_fenced") if line["member_id"] == member]
    assert len(replaced) == 1 and replaced[0]["new_member_id"] == new.member_id, replaced
    assert replaced[0]["cause"] == "static_member_replaced", replaced
    return new


def close(worker: Worker) -> None:
    worker.terminate()
    assert worker.wait_exit() == 0, worker.describe()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", CLIENTS)
def test_d_static_member_restarts_without_a_rebalance(fleet: Fleet) -> None:
    """kill -9 and restart the leader, then close and restart a follower, each with its group.instance.id."""
    workers = [start_static(fleet, i) for i in range(3)]
    fleet.wait(lambda: balanced(workers), "three static consumers to split the topic")
    produced = fleet.produce(keys("d1", 300))
    fleet.wait(consumed(produced, workers), "the first records consumed and committed")
    leader = fleet.logged("join_completed")[-1]["leader"]

    crashed = next(w for w in workers if w.member_id == leader)
    crashed_partitions = crashed.owned
    back = restart_static(fleet, workers, crashed, Worker.kill)
    produced += fleet.produce(keys("d2", 300))
    fleet.wait(consumed(produced, fleet.workers), "the records consumed after the crash and restart")

    follower = next(w for w in workers if w is not back)
    restart_static(fleet, workers, follower, close)
    produced += fleet.produce(keys("d3", 300))
    fleet.wait(consumed(produced, fleet.workers), "the records consumed after the graceful restart")

    assert balanced(workers)
    assert_every_record_seen(produced, fleet.workers)
    assert_redelivered_after_crash(fleet.workers, crashed, crashed_partitions)
    assert_exclusive_per_generation(fleet)
    stop_all(workers)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("client", COOPERATIVE_CLIENTS)
def test_e_cooperative_sticky_moves_only_what_it_must(fleet: Fleet) -> None:
    """KIP-429: a third member joins two; each of the two gives up one partition and is never asked for the others."""
    cooperative = ("--assignor", "cooperative-sticky")
    first_two = [fleet.start(f"c{i}", *cooperative) for i in range(2)]
    fleet.wait(lambda: balanced(first_two), "two cooperative consumers to split the topic")
    produced = fleet.produce(keys("e1", 300))
    fleet.wait(consumed(produced, first_two), "the first records consumed and committed")
    before = {w.name: w.owned for w in first_two}
    marks = {w.name: len(w.events()) for w in first_two}

    third = fleet.start("c2", *cooperative)
    workers = [*first_two, third]
    fleet.wait(lambda: balanced(workers), "the third consumer to get its share")

    moved_total: set[int] = set()
    for worker in first_two:
        later = worker.events()[marks[worker.name] :]
        kept = before[worker.name] & worker.owned
        moved = before[worker.name] - worker.owned
        revoked = {p for e in later if e["event"] in ("revoked", "lost") for p in e["partitions"]}
        reassigned = {p for e in later if e["event"] == "assigned" for p in e["partitions"]}
        assert not [e for e in later if e["event"] == "lost"], f"{worker.name} lost partitions: {later}"
        assert len(kept) == 2 and len(moved) == 1, f"{worker.name}: before {before[worker.name]}, now {worker.owned}"
        assert revoked == moved, f"{worker.name} revoked {revoked}, but only {moved} moved (kept {kept})"
        assert not reassigned, f"{worker.name} was assigned {reassigned} again: the revocation was not incremental"
        moved_total |= moved
    assert third.owned == moved_total
    assert not third.events("revoked", "lost") or all(not e["partitions"] for e in third.events("revoked", "lost"))

    more = fleet.produce(keys("e2", 300))
    produced = produced + more
    fleet.wait(consumed(produced, workers), "everything consumed after the cooperative move")
    assert_every_record_seen(produced, workers)
    assert not duplicates(workers), f"records seen twice across a cooperative move: {duplicates(workers)}"
    assert_exclusive_per_generation(fleet)
    stop_all(workers)


def test_aiokafka_offers_no_cooperative_protocol() -> None:
    """Why scenario e leaves aiokafka out: nothing in the installed package mentions a cooperative protocol."""
    import aiokafka

    package = Path(aiokafka.__file__).parent
    mentions = [p for p in package.rglob("*.py") if "cooperative" in p.read_text(encoding="utf-8").lower()]
    assert mentions == []
