"""KIP-848 consumer-group members over the raw Kafka protocol, for the control API, CLI and test-tooling tests.

A ``Member`` behaves as section 12.3 of ``docs/spec/consumer-groups.md`` draws a client: a full join (epoch 0), then
steady heartbeats with every optional field null, and an acknowledgement (its complete owned set) right after each
new assignment. Told UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH it drops its partitions and re-joins under the same
member id (12.5). The requests are ConsumerGroupHeartbeat v1, built by the wire tests' helpers.

``MembersThread`` runs members on their own event loop in a thread, heartbeating every ``interval_s`` as a client
does, for tests whose broker runs in another process and whose own thread runs the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from tests.wire.client import WireClient
from tests.wire.test_consumer_group_api import assigned, heartbeat, join

E = ErrorCode
Owned = dict[uuid.UUID, tuple[int, ...]]


@dataclass
class Member:
    client: WireClient
    group_id: str
    topics: tuple[str, ...] = ("topic",)
    instance_id: str | None = None
    assignor: str | None = None
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    owned: Owned = field(default_factory=dict)
    ack_due: bool = False
    errors: list[ErrorCode] = field(default_factory=list)  # every error it was answered, in order

    async def join(self) -> Any:
        self.epoch, self.owned, self.ack_due = 0, {}, False
        request = join(1, self.group_id, self.member_id, self.topics, instance_id=self.instance_id,
                       assignor=self.assignor)
        return self._apply(await self.client.call(request))

    async def poll(self) -> Any:
        """The next heartbeat: a join when not in the group, an acknowledgement when one is due, else steady."""
        if self.epoch <= 0:
            return await self.join()
        owned = self.owned if self.ack_due else None
        self.ack_due = False
        return self._apply(await self.client.call(heartbeat(1, self.group_id, self.member_id, self.epoch, owned=owned)))

    async def leave(self, epoch: int = -1) -> Any:
        """Epoch -1 leaves for good; -2 is a static member's temporary leave (section 4.4)."""
        answer = await self.client.call(
            heartbeat(1, self.group_id, self.member_id, epoch, instance_id=self.instance_id)
        )
        self.epoch, self.owned, self.ack_due = epoch, {}, False
        return answer

    def _apply(self, answer: Any) -> Any:
        error = answer.error_code
        if error is not E.none:
            self.errors.append(error)
            if error in (E.unknown_member_id, E.fenced_member_epoch):
                self.epoch, self.owned, self.ack_due = 0, {}, False  # lost: re-join on the next poll
                return answer
            raise AssertionError(f"{self.member_id}: {error.name} {answer.error_message}")
        self.epoch = answer.member_epoch
        given = assigned(answer)
        if given is not None:
            owned = {topic_id: tuple(partitions) for topic_id, partitions in given.items() if partitions}
            if owned != self.owned:
                self.owned = owned
                self.ack_due = True
        return answer


async def members(port: int, group_id: str, count: int, **options: Any) -> list[Member]:
    """``count`` members of one group, each on its own connection (client id ``<group>-c<i>``), not yet joined."""
    return [
        Member(await WireClient.connect(port, f"{group_id}-c{i}"), group_id, **options) for i in range(count)
    ]


async def settle(group: Iterable[Member], rounds: int = 30) -> None:
    """Poll every member in turn until none has anything left to acknowledge and every one is at one epoch.

    Nothing here asks the broker for the group's state: the caller checks that through the control API."""
    group = list(group)
    for _ in range(rounds):
        for member in group:
            await member.poll()
        if not any(m.ack_due for m in group) and len({m.epoch for m in group}) == 1 and group[0].epoch > 0:
            for member in group:  # one more round: everyone learns the final epoch with nothing to move
                await member.poll()
            if not any(m.ack_due for m in group):
                return
    raise AssertionError(f"members did not settle: {[(m.member_id, m.epoch, m.ack_due) for m in group]}")


async def close(group: Iterable[Member]) -> None:
    for member in group:
        await member.client.close()


class MembersThread:
    """Members heartbeating every ``interval_s`` on their own loop in a daemon thread, until ``stop``.

    ``pause(member_id)`` stops one member's heartbeats (a process frozen or killed: the broker expires it).
    """

    def __init__(self, port: int, group_id: str, count: int, interval_s: float = 0.1, **options: Any) -> None:
        self.port = port
        self.group_id = group_id
        self.count = count
        self.interval_s = interval_s
        self.options = options
        self.members: list[Member] = []
        self._paused: set[str] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"members-{group_id}", daemon=True)

    def __enter__(self) -> MembersThread:
        self._thread.start()
        if not self._ready.wait(10) or self._failure is not None:
            raise RuntimeError(f"members did not start: {self._failure}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def member_ids(self) -> list[str]:
        return [member.member_id for member in self.members]

    def pause(self, member_id: str) -> None:
        self._paused.add(member_id)

    def stop(self) -> None:
        if self._stopping is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)
        if self._failure is not None:
            raise RuntimeError(f"a member failed: {self._failure}") from self._failure

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._heartbeat())
        except BaseException as error:
            self._failure = error
            self._ready.set()
        finally:
            self._loop.close()

    async def _heartbeat(self) -> None:
        self._stopping = asyncio.Event()
        self.members = await members(self.port, self.group_id, self.count, **self.options)
        self._ready.set()
        try:
            while not self._stopping.is_set():
                for member in self.members:
                    if member.member_id not in self._paused:
                        await member.poll()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.interval_s)
        finally:
            for member in self.members:
                if member.member_id not in self._paused and member.epoch > 0:
                    await member.leave()
            await close(self.members)
