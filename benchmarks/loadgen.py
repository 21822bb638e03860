"""The load generator: group formation and pipelined Heartbeats over raw sockets, in processes of its own.

Every job runs in a fresh process (multiprocessing, spawn) on uvloop with asyncio protocols, so it
shares no interpreter with the orchestrator or the system under test. Heartbeat frames are encoded
once before the clock starts; every frame on a connection carries the same correlation id, so every
answer is the same bytes and a whole read is checked with one comparison (error code 0 at its known
offset in each answer); only a read that differs is walked answer by answer to count the errors.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from benchmarks import wire

_SIZE = struct.Struct(">i")
CLIENT_ID = "bench"
TOPIC = "bench"


class Versions(NamedTuple):
    join: int
    sync: int
    heartbeat: int


class Member(NamedTuple):
    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None


@dataclass
class FormOptions:
    versions: Versions
    session_timeout_ms: int = 300_000
    rebalance_timeout_ms: int = 60_000
    static: bool = False  # static members (group.instance.id) join in one round; dynamic ones may need two
    join_timeout_s: float = 30.0


# -- one connection, answers in request order -----------------------------------------------------


class Client(asyncio.Protocol):
    """Kafka answers a connection's requests in order, so answers pop the oldest waiter."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiters: deque[asyncio.Future[bytes]] = deque()
        self.buffer = bytearray()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            end = start + 4 + size
            if end > len(buffer):
                break
            body = bytes(buffer[start + 4 : end])
            start = end
            if self.waiters:
                waiter = self.waiters.popleft()
                if not waiter.done():
                    waiter.set_result(body)
        del buffer[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ConnectionError("connection closed by the server"))
                waiter.exception()  # retrieved: a waiter nobody awaits any more is not worth a warning

    def send(self, frame: bytes) -> asyncio.Future[bytes]:
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if self.closed or self.transport is None:
            future.set_exception(ConnectionError("connection is closed"))
            return future
        self.waiters.append(future)
        self.transport.write(frame)
        return future

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True


async def connect(host: str, port: int) -> Client:
    _, client = await asyncio.get_running_loop().create_connection(Client, host, port)
    return client


async def connect_many(host: str, port: int, count: int, batch: int = 4) -> list[Client]:
    """``count`` connections, each with one ApiVersions answered (so the server has surely accepted it).

    Few connects at a time: the mock cluster listens with a backlog of 5 and accepts one connection
    per poll loop, and a burst beyond its backlog gets connections reset.
    """
    clients: list[Client] = []
    while len(clients) < count:
        size = min(batch, count - len(clients))
        fresh = await asyncio.gather(*(connect(host, port) for _ in range(size)))
        await asyncio.gather(*(c.send(wire.api_versions_request(1, CLIENT_ID)) for c in fresh))
        clients.extend(fresh)
    return clients


# -- group formation ----------------------------------------------------------------------------


@dataclass
class Formation:
    group_id: str
    ok: bool
    reason: str = ""
    seconds: float = 0.0  # first JoinGroup written -> last SyncGroup answered
    generation_id: int = -1
    generations: int = 0  # generations completed on the way (1: everyone made the first one)
    join_rounds: int = 1  # 2 when dynamic members had to come back with MEMBER_ID_REQUIRED's id
    members: list[Member] = field(default_factory=list)


def _protocols(rejoin: bool = False) -> list[tuple[str, bytes]]:
    # A rejoin round subscribes to one more topic: with changed metadata every member's JoinGroup
    # counts (Kafka answers a follower that rejoins a Stable group unchanged at once, no rebalance).
    return [("range", wire.subscription([TOPIC, f"{TOPIC}-more"] if rejoin else [TOPIC]))]


_RETRIABLE_SYNC = {0, wire.REBALANCE_IN_PROGRESS, wire.ILLEGAL_GENERATION}


async def form_group(
    clients: Sequence[Client],
    group_id: str,
    options: FormOptions,
    max_generations: int = 1,
    member_ids: Sequence[str] | None = None,
) -> Formation:
    """Every member sends JoinGroup at once (connection i plays member i), then SyncGroup.

    With ``member_ids`` the members already belong to the group and rejoin it (with a changed
    subscription, so the coordinator rebalances). A member answered MEMBER_ID_REQUIRED (KIP-394)
    joins again at once with the id it was given.

    When a generation completes, its followers send SyncGroup first, then the leader, after an
    ApiVersions round trip on its own connection: by then the followers' SyncGroups are parked on
    the server. (The mock cluster completes the sync as soon as the leader's assignment covers every
    member and answers SyncGroups that arrive afterwards with INVALID_REQUEST; this order is the one
    both systems answer with error 0.) One connection per member: both systems hold back a
    connection's later requests while a JoinGroup or SyncGroup on it is parked, as Kafka does.

    A generation without every member counts as a failure once ``max_generations`` generations
    have completed; before that its members sync (any of 0, REBALANCE_IN_PROGRESS or
    ILLEGAL_GENERATION) and join again, as a client told to rebalance does.
    """
    v = options.versions
    count = len(clients)
    rejoin = member_ids is not None
    ids = list(member_ids) if member_ids is not None else [""] * count
    instance_ids = [f"{group_id}-{i}" if options.static else None for i in range(count)]
    protocols = _protocols(rejoin)

    def join_frame(i: int, correlation_id: int) -> bytes:
        body = wire.join_body(
            v.join,
            group_id,
            ids[i],
            instance_ids[i],
            options.session_timeout_ms,
            options.rebalance_timeout_ms,
            protocols,
        )
        return wire.frame(wire.JOIN_GROUP, v.join, correlation_id, CLIENT_ID, body)

    first = [join_frame(i, 1) for i in range(count)]  # encoded before the clock starts
    by_generation: dict[int, dict[int, wire.JoinAnswer]] = {}
    leaders: dict[int, int] = {}
    events: asyncio.Queue[int | str] = asyncio.Queue()  # a complete generation, or why it failed
    state = {"rounds": 1}

    def on_answer(i: int, future: asyncio.Future[bytes]) -> None:
        # Callbacks rather than a task per member: answers are read as fast as they arrive.
        try:
            answer = wire.parse_join(v.join, future.result())
        except (ConnectionError, wire.ParseError) as error:
            events.put_nowait(f"JoinGroup failed: {error!r}")
            return
        if answer.error == wire.MEMBER_ID_REQUIRED:
            state["rounds"] = 2
            ids[i] = answer.member_id
            clients[i].send(join_frame(i, 2)).add_done_callback(partial(on_answer, i))
            return
        if answer.error:
            events.put_nowait(f"JoinGroup answered error {answer.error}")
            return
        ids[i] = answer.member_id
        generation = answer.generation_id
        answered = by_generation.setdefault(generation, {})
        answered[i] = answer
        if answer.members:
            leaders[generation] = i
        leader = leaders.get(generation)
        if leader is not None and len(answered) == len(answered[leader].members):
            events.put_nowait(generation)

    def sync_frame(i: int, generation: int, assignments: list[tuple[str, bytes]]) -> bytes:
        body = wire.sync_body(v.sync, group_id, generation, ids[i], instance_ids[i], assignments)
        return wire.frame(wire.SYNC_GROUP, v.sync, 3, CLIENT_ID, body)

    def failed(reason: str, generations: int) -> Formation:
        return Formation(group_id, False, reason, generations=generations, join_rounds=state["rounds"])

    started = time.perf_counter()
    for i, (client, request) in enumerate(zip(clients, first, strict=True)):
        client.send(request).add_done_callback(partial(on_answer, i))
    written_ms = (time.perf_counter() - started) * 1000
    generations = 0
    while True:
        try:
            event = await asyncio.wait_for(events.get(), options.join_timeout_s)
        except TimeoutError:
            return failed(f"no generation completed within {options.join_timeout_s:.0f} s", generations)
        if isinstance(event, str):
            return failed(event, generations)
        generations += 1
        generation = event
        answered = by_generation[generation]
        leader = leaders[generation]
        everyone = len(answered) == count
        if not everyone and generations >= max_generations:
            return failed(
                f"generation {generation} formed with {len(answered)} of {count} members"
                f" (all JoinGroups written in {written_ms:.1f} ms)",
                generations,
            )
        syncs = [clients[i].send(sync_frame(i, generation, [])) for i in answered if i != leader]
        try:
            await clients[leader].send(wire.api_versions_request(4, CLIENT_ID))
            plan = [(answer.member_id, wire.assignment(TOPIC, [p])) for p, answer in enumerate(answered.values())]
            syncs.append(clients[leader].send(sync_frame(leader, generation, plan)))
            bodies = await asyncio.wait_for(asyncio.gather(*syncs), options.join_timeout_s)
            errors = [wire.parse_sync(v.sync, body) for body in bodies]
        except (ConnectionError, TimeoutError, wire.ParseError) as error:
            return failed(f"SyncGroup failed: {error!r}", generations)
        if everyone:
            seconds = time.perf_counter() - started
            bad = [e for e in errors if e]
            if bad:
                return failed(f"{len(bad)} SyncGroups answered errors {sorted(set(bad))}", generations)
            members = [Member(group_id, generation, ids[i], instance_ids[i]) for i in range(count)]
            return Formation(group_id, True, "", seconds, generation, generations, state["rounds"], members)
        unexpected = sorted(set(errors) - _RETRIABLE_SYNC)
        if unexpected:
            return failed(f"SyncGroup of an incomplete generation answered {unexpected}", generations)
        for i in answered:  # told to rebalance: join again with the member id
            clients[i].send(join_frame(i, 2)).add_done_callback(partial(on_answer, i))


async def form_groups(
    host: str,
    port: int,
    group_ids: Sequence[str],
    members_per_group: int,
    options: FormOptions,
    max_generations: int,
    connections: int = 2000,
    attempts: int = 3,
) -> dict[str, Any]:
    """Form many groups in waves over a pool of connections; a group that fails is formed again."""
    per_wave = max(1, connections // members_per_group)
    pool = await connect_many(host, port, min(per_wave, len(group_ids)) * members_per_group)
    todo = deque((group_id, 1) for group_id in group_ids)
    members: list[Member] = []
    failures: list[str] = []
    generations: dict[int, int] = {}
    started = time.perf_counter()
    while todo:
        wave = [todo.popleft() for _ in range(min(per_wave, len(todo)))]
        slices = [pool[i * members_per_group : (i + 1) * members_per_group] for i in range(len(wave))]
        results = await asyncio.gather(
            *(
                form_group(s, f"{gid}~{n}" if n > 1 else gid, options, max_generations)
                for (gid, n), s in zip(wave, slices, strict=True)
            )
        )
        for (gid, n), result, clients in zip(wave, results, slices, strict=True):
            if result.ok:
                members.extend(result.members)
                generations[result.generations] = generations.get(result.generations, 0) + 1
                continue
            failures.append(f"{result.group_id}: {result.reason}")
            if n < attempts:
                todo.append((gid, n + 1))
            # Its connections may hold parked requests: replace them.
            start = pool.index(clients[0])
            for client in clients:
                client.close()
            pool[start : start + len(clients)] = await connect_many(host, port, len(clients))
    seconds = time.perf_counter() - started
    for client in pool:
        client.close()
    await asyncio.sleep(0.1)
    return {"members": members, "failures": failures, "seconds": seconds, "generations": generations}


async def form_one(
    host: str,
    port: int,
    group_ids: Sequence[str],
    count: int,
    options: FormOptions,
    max_generations: int,
    rejoin_round: bool,
) -> dict[str, Any]:
    """Groups of ``count`` members formed from scratch, one after the other, each on fresh connections.

    The connections are opened, each with one ApiVersions answered, before the clock starts. With
    ``rejoin_round`` the formed group then rebalances once more, every member rejoining at once, and
    that round is timed too. Stops at the first group that does not form.
    """
    results = []
    for group_id in group_ids:
        clients = await connect_many(host, port, count)
        fresh = await form_group(clients, group_id, options, max_generations)
        result: dict[str, Any] = {
            "ok": fresh.ok,
            "reason": fresh.reason,
            "fresh_seconds": fresh.seconds,
            "fresh_generations": fresh.generations,
            "join_rounds": fresh.join_rounds,
        }
        if fresh.ok and rejoin_round:
            await asyncio.sleep(0.05)
            again = await form_group(clients, group_id, options, 1, [m.member_id for m in fresh.members])
            result.update(ok=again.ok, reason=again.reason, rejoin_seconds=again.seconds)
        for client in clients:
            client.close()
        await asyncio.sleep(0.1)
        results.append(result)
        if not result["ok"]:
            break
    return {"groups": results}


# -- pipelined heartbeats -----------------------------------------------------------------------


class HeartbeatPipe(asyncio.Protocol):
    """Keeps up to ``window`` Heartbeats in flight on one connection.

    Answered requests are replaced in batches of at least ``refill`` (one write for several
    requests), so a server that writes its answers one at a time does not cost the generator one
    write per answer as well.
    """

    def __init__(
        self, frames: Sequence[bytes], window: int, refill: int, answers: Sequence[bytes], error_offset: int
    ) -> None:
        count = len(frames)
        self.repeats = -(-(count + window) // count)
        extended = list(frames) * self.repeats
        self.blob = b"".join(extended)
        self.offsets = [0]
        for f in extended:
            self.offsets.append(self.offsets[-1] + len(f))
        self.count = count
        self.position = 0
        self.window = window
        self.expect(answers)
        self.error_offset = error_offset
        self.buffer = bytearray()
        self.answers = 0
        self.errors = 0
        self.error_codes: dict[int, int] = {}
        self.refill = max(1, min(refill, window))
        self.owed = 0  # answered and not yet replaced
        self.sent = 0
        self.end_at = 0.0
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.last_answer_at = 0.0
        self.lost: str | None = None

    def expect(self, answers: Sequence[bytes]) -> None:
        """The answer to each frame, in frame order (or one answer to all of them), every one the same size.

        Answers come back in request order and frames go out cycling through ``frames`` from the first, so the
        answers expected next are a slice of these laid end to end. (Classic Heartbeat answers are all alike;
        a ConsumerGroupHeartbeat answer carries its member's id and epoch.)
        """
        laid = list(answers) * (self.count if len(answers) == 1 else 1)
        sizes = {len(a) for a in laid}
        if len(laid) != self.count or len(sizes) != 1:
            raise ValueError(f"expected {self.count} answers of one size, got {len(laid)} of sizes {sorted(sizes)}")
        self.answer_size = sizes.pop()
        self.expected = b"".join(laid * self.repeats)
        self.answer_position = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _next(self, n: int) -> bytes:
        p = self.position
        chunk = self.blob[self.offsets[p] : self.offsets[p + n]]
        self.position = (p + n) % self.count
        return chunk

    def start(self, end_at: float) -> None:
        assert self.transport is not None
        self.end_at = end_at
        self.sent = self.window
        self.transport.write(self._next(self.window))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        size = self.answer_size
        n = len(buffer) // size
        if not n:
            return
        used = n * size
        start = self.answer_position * size
        if buffer[:used] != self.expected[start : start + used]:
            self._count_errors(buffer, n, start)
        self.answer_position = (self.answer_position + n) % self.count
        del buffer[:used]
        self.answers += n
        now = time.perf_counter()
        self.last_answer_at = now
        if now < self.end_at:
            self.owed += n
            if self.owed >= self.refill:
                assert self.transport is not None
                self.transport.write(self._next(self.owed))
                self.sent += self.owed
                self.owed = 0
        elif self.answers >= self.sent and not self.done.done():
            self.done.set_result(None)

    def _count_errors(self, buffer: bytearray, n: int, expected_start: int) -> None:
        size, offset = self.answer_size, self.error_offset
        for i in range(n):
            start = i * size
            (code,) = struct.unpack_from(">h", buffer, start + offset)
            expected = self.expected[expected_start + start : expected_start + start + size]
            if code or buffer[start : start + size] != expected:
                self.errors += 1
                self.error_codes[code] = self.error_codes.get(code, 0) + 1

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():  # the server hung up before the run ended
            self.lost = f"connection lost after {self.answers} answers: {exc!r}"
            self.done.set_result(None)


async def heartbeats(
    host: str,
    port: int,
    members: Sequence[Member],
    version: int,
    connections: int,
    window: int,
    seconds: float,
    refill: int = 16,
    barrier: Any = None,
) -> dict[str, Any]:
    """Pipelined Heartbeats for ``seconds``; members are dealt to connections round robin."""
    loop = asyncio.get_running_loop()
    answer = wire.heartbeat_answer(version, 1)
    offset = wire.heartbeat_error_offset(version)
    pipes: list[HeartbeatPipe] = []
    for c in range(connections):
        mine = members[c::connections] or members[:1]
        frames = [
            wire.frame(
                wire.HEARTBEAT,
                version,
                1,
                CLIENT_ID,
                wire.heartbeat_body(version, m.group_id, m.generation_id, m.member_id, m.instance_id),
            )
            for m in mine
        ]
        _, pipe = await loop.create_connection(
            partial(HeartbeatPipe, frames, window, refill, [answer], offset), host, port
        )
        pipes.append(pipe)
    return await drive_pipes(pipes, barrier, seconds)


async def drive_pipes(pipes: Sequence[HeartbeatPipe], barrier: Any, seconds: float) -> dict[str, Any]:
    """Run connected pipes together for ``seconds`` (after the barrier, when several generators start at once) and
    sum what they measured: the shared tail of the classic and the consumer-group heartbeat jobs."""
    if barrier is not None:
        await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
    started = time.perf_counter()
    cpu_started = time.process_time()
    for pipe in pipes:
        pipe.start(started + seconds)
    await asyncio.wait_for(asyncio.gather(*(p.done for p in pipes)), seconds + 30)
    finished = max(p.last_answer_at for p in pipes)
    cpu_seconds = time.process_time() - cpu_started
    for pipe in pipes:
        if pipe.transport is not None:
            pipe.transport.close()
    codes: dict[int, int] = {}
    for pipe in pipes:
        for code, n in pipe.error_codes.items():
            codes[code] = codes.get(code, 0) + n
    return {
        "answers": sum(p.answers for p in pipes),
        "errors": sum(p.errors for p in pipes),
        "error_codes": codes,
        "seconds": finished - started,
        "cpu_seconds": cpu_seconds,
        "lost": [p.lost for p in pipes if p.lost],
    }
