"""KIP-848 consumer groups in the load generator: members that join, acknowledge and heartbeat.

Members speak ConsumerGroupHeartbeat over raw sockets the way librdkafka 2.16 does
(docs/spec/consumer-groups.md sections 2.1, 12.3-12.5): a join carries epoch 0, the rebalance timeout, the topic
names, the regex "" (v1) and TopicPartitions []; every assignment received is acknowledged at once with
TopicPartitions = that set; otherwise a heartbeat is "steady" (the current epoch, every optional field null or
-1). A member told UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH joins again with epoch 0 and the same member id.
Each member has one request in flight; ConsumerGroupHeartbeat is never parked (section 7.2), so members may share
a connection.

Jobs (run with benchmarks.jobs.run_jobs as ``benchmarks.cg_loadgen:<name>``): ``cg_form_groups`` forms many
groups for the heartbeat runs, ``cg_form_one`` times one group from its first join to reconciled, and
``cg_heartbeats`` measures steady heartbeats per second.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import time
import uuid
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from benchmarks import wire
from benchmarks.loadgen import CLIENT_ID, Client, HeartbeatPipe, connect_many, drive_pipes

# What librdkafka sends as RebalanceTimeoutMs: max.poll.interval.ms, 300000 by default (section 12.1).
REBALANCE_TIMEOUT_MS = 300_000
_LOST = {wire.UNKNOWN_MEMBER_ID, wire.FENCED_MEMBER_EPOCH}  # section 12.5: re-join with epoch 0
_SIZE = struct.Struct(">i")


class CgMember(NamedTuple):
    """A reconciled member, as the heartbeat runs need it."""

    group_id: str
    member_id: str
    epoch: int
    owned: wire.Owned


@dataclass
class CgOptions:
    version: int
    topic: str
    partitions: int  # of ``topic``: a reconciled group owns every one of them exactly once
    gap_s: float = 0.0  # pause before a heartbeat with nothing to report (0: at once)
    timeout_s: float = 60.0


def new_member_id() -> str:
    """Like librdkafka's (section 12.2): a random Uuid in standard base64, no padding (22 characters, + and /)."""
    return base64.b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _join_fields(version: int, topic: str) -> dict[str, Any]:
    """What a join and a full request carry besides the epoch and TopicPartitions (section 12.3)."""
    regex = {"topic_regex": ""} if version >= 1 else {}  # v1+: librdkafka sends "" when it has no regex
    return {"rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "topic_names": [topic], **regex}


@dataclass
class FormResult:
    group_id: str
    ok: bool
    reason: str = ""
    seconds: float = 0.0  # first join written -> reconciled
    epoch: int = -1
    heartbeats: int = 0  # answers read before reconciled
    rejoins: int = 0  # UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH answers
    members: list[CgMember] = field(default_factory=list)


class GroupFormation:
    """One consumer group's members, from their first join to reconciled.

    Reconciled (benchmarks/README.md, "Consumer groups (KIP-848), exactly"), judged from the answers alone:
    every member's latest answer has error 0, no assignment other than the one the member has acknowledged, and
    the same member epoch E > 0 as every other member's; every member has acknowledged (sent back as
    TopicPartitions, answered without error) the last assignment it received; and the members' assignments split
    the topic: each of its partitions is owned by exactly one member. That is Kafka's Stable group (section 3.4):
    the target of epoch E is the assignment and every member is reconciled to it.
    """

    def __init__(self, group_id: str, clients: Sequence[Client], options: CgOptions) -> None:
        count = len(clients)
        self.group_id = group_id
        self.clients = clients
        self.options = options
        self.ids = [new_member_id() for _ in range(count)]
        self.epochs = [0] * count
        self.owned: list[wire.Owned] = [()] * count
        self.acked: list[wire.Owned | None] = [None] * count  # last set acknowledged without error
        self.in_flight_ack: list[wire.Owned | None] = [None] * count  # TopicPartitions of the request in flight
        self.settled = [-1] * count  # epoch the member is settled at, -1 when it is not
        self.settled_at: Counter[int] = Counter()
        self.join = _join_fields(options.version, options.topic)
        self.heartbeats = 0
        self.rejoins = 0
        self.started = 0.0
        self.stopped = False
        self.done: asyncio.Future[FormResult] = asyncio.get_running_loop().create_future()

    def start(self) -> None:
        self.started = time.perf_counter()
        for i in range(len(self.clients)):
            self._send(i)

    def _send(self, i: int) -> None:
        if self.stopped:
            return
        v, epoch = self.options.version, self.epochs[i]
        self.in_flight_ack[i] = None
        if epoch == 0:  # a join (again, when the mock could not give it an epoch yet): TopicPartitions []
            body = wire.consumer_heartbeat_body(v, self.group_id, self.ids[i], 0, owned=(), **self.join)
        elif self.owned[i] != self.acked[i]:  # acknowledge the assignment received (section 12.3)
            self.in_flight_ack[i] = self.owned[i]
            body = wire.consumer_heartbeat_body(v, self.group_id, self.ids[i], epoch, owned=self.owned[i])
        else:
            body = wire.consumer_heartbeat_body(v, self.group_id, self.ids[i], epoch)
        frame = wire.frame(wire.CONSUMER_GROUP_HEARTBEAT, v, 1, CLIENT_ID, body)
        self.clients[i].send(frame).add_done_callback(partial(self._on_answer, i))

    def _settle(self, i: int, epoch: int) -> None:
        old = self.settled[i]
        if old == epoch:
            return
        if old >= 0:
            self.settled_at[old] -= 1
        self.settled[i] = epoch
        if epoch >= 0:
            self.settled_at[epoch] += 1

    def _on_answer(self, i: int, future: asyncio.Future[bytes]) -> None:
        if self.stopped:
            return
        try:
            answer = wire.parse_consumer_heartbeat(future.result())
        except (ConnectionError, wire.ParseError) as error:
            self._finish(False, f"member {i}: {error!r}")
            return
        self.heartbeats += 1
        if answer.error in _LOST:
            self.rejoins += 1
            self.epochs[i], self.owned[i], self.acked[i] = 0, (), None
            self._settle(i, -1)
            self._send(i)
            return
        if answer.error:
            self._finish(False, f"member {i} answered error {answer.error}: {answer.message}")
            return
        if self.in_flight_ack[i] is not None:
            self.acked[i] = self.in_flight_ack[i]
        epoch = self.epochs[i] = answer.member_epoch
        news = answer.assignment is not None and answer.assignment != self.acked[i]
        if news:
            assert answer.assignment is not None
            self.owned[i] = answer.assignment
        quiet = epoch > 0 and not news and self.owned[i] == self.acked[i]
        self._settle(i, epoch if quiet else -1)
        if quiet and self.settled_at[epoch] == len(self.clients) and self._split_exactly():
            self._finish(True)
            return
        if news or self.options.gap_s <= 0:  # an acknowledgement goes at once (section 12.7 item 9)
            self._send(i)
        else:
            asyncio.get_running_loop().call_later(self.options.gap_s, self._send, i)

    def _split_exactly(self) -> bool:
        topics = {topic for owned in self.owned for topic, _ in owned}
        owned = sorted(p for member in self.owned for _, partitions in member for p in partitions)
        return len(topics) <= 1 and owned == list(range(self.options.partitions))

    def _finish(self, ok: bool, reason: str = "") -> None:
        if self.done.done():
            return
        self.stopped = True
        seconds = time.perf_counter() - self.started
        epochs = sorted(set(self.epochs))
        members = [CgMember(self.group_id, m, e, o) for m, e, o in zip(self.ids, self.epochs, self.owned, strict=True)]
        result = FormResult(self.group_id, ok, reason, seconds, epochs[-1], self.heartbeats, self.rejoins, members)
        self.done.set_result(result)

    def timed_out(self) -> None:
        settled = sum(1 for e in self.settled if e >= 0)
        epochs = dict(Counter(self.epochs).most_common(3))
        self._finish(
            False,
            f"not reconciled within {self.options.timeout_s:.0f} s: {settled} of "
            f"{len(self.clients)} members settled, member epochs {epochs}, {self.heartbeats} answers",
        )

    async def run(self) -> FormResult:
        self.start()
        try:
            return await asyncio.wait_for(asyncio.shield(self.done), self.options.timeout_s)
        except TimeoutError:
            self.timed_out()
            return self.done.result()

    async def leave(self) -> None:
        """Every member leaves (epoch -1, section 4.4), untimed: the next formation starts from a quiet system."""
        v = self.options.version
        frames = [
            wire.frame(
                wire.CONSUMER_GROUP_HEARTBEAT, v, 9, CLIENT_ID, wire.consumer_heartbeat_body(v, self.group_id, m, -1)
            )
            for m in self.ids
        ]
        futures = [client.send(f) for client, f in zip(self.clients, frames, strict=True)]
        await asyncio.wait(futures, timeout=self.options.timeout_s)


# -- jobs: forming groups -----------------------------------------------------------------------------------------


async def cg_form_one(
    host: str, port: int, group_ids: Sequence[str], count: int, options: dict[str, Any]
) -> dict[str, Any]:
    """Groups of ``count`` members, one after the other, each timed from its first join to reconciled.

    Each member has a connection of its own, opened (and answered an ApiVersions) before the clock starts, as
    ``count`` consumers would. All joins are written at once. Afterwards every member leaves, untimed. Stops at
    the first group that does not reconcile.
    """
    settings = CgOptions(**options)
    results = []
    for group_id in group_ids:
        clients = await connect_many(host, port, count)
        formation = GroupFormation(group_id, clients, settings)
        result = await formation.run()
        results.append(
            {
                "ok": result.ok,
                "reason": result.reason,
                "seconds": result.seconds,
                "epoch": result.epoch,
                "heartbeats": result.heartbeats,
                "rejoins": result.rejoins,
            }
        )
        if result.ok:
            await formation.leave()
        for client in clients:
            client.close()
        await asyncio.sleep(0.1)
        if not result.ok:
            break
    return {"groups": results}


async def cg_form_groups(
    host: str,
    port: int,
    group_ids: Sequence[str],
    members_per_group: int,
    options: dict[str, Any],
    members_at_once: int = 2000,
    connections: int = 16,
    attempts: int = 3,
) -> dict[str, Any]:
    """Form many groups in waves of ``members_at_once`` members sharing ``connections`` connections.

    A group that does not reconcile is formed again under a new id (``<id>~<n>``, new member ids), up to
    ``attempts`` times; its members are simply abandoned (their session will expire).
    """
    settings = CgOptions(**options)
    per_wave = max(1, members_at_once // members_per_group)
    pool = await connect_many(host, port, connections)
    todo = deque((group_id, 1) for group_id in group_ids)
    members: list[CgMember] = []
    failures: list[str] = []
    heartbeats = rejoins = 0
    started = time.perf_counter()
    while todo:
        wave = [todo.popleft() for _ in range(min(per_wave, len(todo)))]
        formations = []
        for g, (group_id, n) in enumerate(wave):
            share = [pool[(g * members_per_group + j) % len(pool)] for j in range(members_per_group)]
            formations.append(GroupFormation(f"{group_id}~{n}" if n > 1 else group_id, share, settings))
        results = await asyncio.gather(*(f.run() for f in formations))
        for (group_id, n), result in zip(wave, results, strict=True):
            heartbeats += result.heartbeats
            rejoins += result.rejoins
            if result.ok:
                members.extend(result.members)
                continue
            failures.append(f"{result.group_id}: {result.reason}")
            if n < attempts:
                todo.append((group_id, n + 1))
        if any(client.closed for client in pool):
            failures.append("a formation connection was closed by the server")
            for i, client in enumerate(pool):
                if client.closed:
                    pool[i] = (await connect_many(host, port, 1))[0]
    seconds = time.perf_counter() - started
    for client in pool:
        client.close()
    await asyncio.sleep(0.1)
    return {
        "members": members,
        "failures": failures,
        "seconds": seconds,
        "heartbeats": heartbeats,
        "rejoins": rejoins,
    }


# -- jobs: steady heartbeats ----------------------------------------------------------------------------------------


class ConsumerHeartbeatPipe(HeartbeatPipe):
    """HeartbeatPipe for ConsumerGroupHeartbeat, with a warm-up before the timed run on the same connection.

    Each answer carries its member's id and epoch, so the answer expected to each frame is learnt in the warm-up:
    a full request per member first (what librdkafka sends on a new connection, section 12.3: with the mock the
    member's connection moved and it re-sends the assignment), then one steady heartbeat per member, whose answer
    is the one the timed run must see again.
    """

    def __init__(self, frames: Sequence[bytes], window: int, refill: int, error_offset: int) -> None:
        super().__init__(frames, window, refill, [b"-"], error_offset)  # the answers come from the warm-up
        self.warming: deque[asyncio.Future[bytes]] | None = deque()
        self.warm_buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        if self.warming is None:
            super().data_received(data)
            return
        buffer = self.warm_buffer
        buffer += data
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            end = start + 4 + size
            if end > len(buffer):
                break
            if self.warming:
                self.warming.popleft().set_result(bytes(buffer[start:end]))
            start = end
        del buffer[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        while self.warming:
            self.warming.popleft().set_exception(ConnectionError(f"connection closed in the warm-up: {exc!r}"))
        super().connection_lost(exc)

    async def exchange(self, frames: Sequence[bytes]) -> list[bytes]:
        """Answers (size prefix included) to ``frames``, at most ``window`` in flight."""
        assert self.transport is not None and self.warming is not None
        loop = asyncio.get_running_loop()
        answers: list[bytes] = []
        for start in range(0, len(frames), self.window):
            chunk = frames[start : start + self.window]
            futures = [loop.create_future() for _ in chunk]
            self.warming.extend(futures)
            self.transport.write(b"".join(chunk))
            answers += await asyncio.wait_for(asyncio.gather(*futures), 60)
        return answers

    def run_with(self, answers: Sequence[bytes]) -> None:
        self.expect(answers)
        self.warming = None


async def _warm_up(pipe: ConsumerHeartbeatPipe, mine: Sequence[CgMember], version: int, topic: str) -> int:
    """Re-sync then one steady heartbeat per member; returns how many re-syncs were answered with an assignment."""
    join = _join_fields(version, topic)
    full = [
        wire.frame(
            wire.CONSUMER_GROUP_HEARTBEAT,
            version,
            1,
            CLIENT_ID,
            wire.consumer_heartbeat_body(version, m.group_id, m.member_id, m.epoch, owned=m.owned, **join),
        )
        for m in mine
    ]
    with_assignment = 0
    for member, frame in zip(mine, await pipe.exchange(full), strict=True):
        answer = wire.parse_consumer_heartbeat(frame[4:])
        if answer.error or answer.member_epoch != member.epoch:
            raise RuntimeError(f"re-sync of {member.member_id} in {member.group_id} at epoch {member.epoch}: {answer}")
        with_assignment += answer.assignment is not None
    steady = pipe.blob[: pipe.offsets[pipe.count]]
    frames = [steady[pipe.offsets[i] : pipe.offsets[i + 1]] for i in range(pipe.count)]
    answers = await pipe.exchange(frames)
    for member, frame in zip(mine, answers, strict=True):
        answer = wire.parse_consumer_heartbeat(frame[4:])
        if answer.error or answer.member_epoch != member.epoch or answer.assignment is not None:
            raise RuntimeError(f"steady heartbeat of {member.member_id} in {member.group_id}: {answer}")
    pipe.run_with(answers)
    return with_assignment


async def cg_heartbeats(
    host: str,
    port: int,
    members: Sequence[CgMember],
    version: int,
    topic: str,
    connections: int,
    window: int,
    seconds: float,
    refill: int = 16,
    barrier: Any = None,
) -> dict[str, Any]:
    """Pipelined steady ConsumerGroupHeartbeats for ``seconds``; members are dealt to connections round robin."""
    if not members:
        raise ValueError("no members to heartbeat")
    loop = asyncio.get_running_loop()
    pipes: list[ConsumerHeartbeatPipe] = []
    resent = 0
    for c in range(connections):
        mine = members[c::connections] or members[:1]
        frames = [
            wire.frame(
                wire.CONSUMER_GROUP_HEARTBEAT,
                version,
                1,
                CLIENT_ID,
                wire.consumer_heartbeat_body(version, m.group_id, m.member_id, m.epoch),
            )
            for m in mine
        ]
        offset = wire.consumer_heartbeat_error_offset()
        _, pipe = await loop.create_connection(
            partial(ConsumerHeartbeatPipe, frames, window, refill, offset), host, port
        )
        resent += await _warm_up(pipe, mine, version, topic)
        pipes.append(pipe)
    return {**await drive_pipes(pipes, barrier, seconds), "resync_with_assignment": resent}
