"""What the control client's waits and checks share (``control.py``, ``share.py``): the timeout error, the polling
interval, the coroutine twin of a blocking call and one event as a failure message names it."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, Protocol, Self, TypeVar

from broker.events import names

JSON = dict[str, Any]
P = ParamSpec("P")
R = TypeVar("R")

POLL_S = 0.05
RECENT_EVENTS = 8


class WaitTimeout(TimeoutError, AssertionError):
    """A group did not reach the shape ``wait_for`` asked for. An AssertionError too: in a test it is a failure."""

    __module__ = "broker.testing.control"  # its public home, as tracebacks and earlier releases name it


def threaded(function: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """``function`` as a coroutine run in a worker thread, so the caller's event loop keeps running meanwhile."""

    @functools.wraps(function)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(function, *args, **kwargs)

    return call


def describe_event(record: JSON) -> str:
    extras = [
        f"{name}={record[name]}"
        for name in ("cause", "member_id", "generation_id", "group_epoch")
        if record.get(name) is not None
    ]
    if record.get("event") == names.STATE_CHANGED:
        extras.insert(0, f"{record.get('from')} -> {record.get('to')}")
    text = f"#{record.get('seq')} {record.get('event')}"
    return f"{text} ({', '.join(extras)})" if extras else text


class _EventSource(Protocol):
    def events(self, group: str | None = None, since_seq: int = 0) -> list[JSON]: ...

    def last_seq(self, group: str) -> int: ...


class EventBlock:
    """A ``with``/``async with`` block judged by a group's events from its start (``RebalanceCheck`` in
    ``control.py``, ``RedeliveryCheck`` in ``share.py``). A subclass reads the events in ``_collect`` (True once the
    outcome can no longer change) and says what it found in ``_verdict``; on exit the events are read again until
    ``_collect`` is satisfied or ``wait_s`` has passed, then judged. A block that raised is not judged: its own
    failure says more."""

    def __init__(self, control: _EventSource, group: str, wait_s: float) -> None:
        self._control = control
        self.group = group
        self._wait_s = wait_s
        self._since = 0
        self.events: list[JSON] = []

    def _collect(self) -> bool:
        raise NotImplementedError

    def _verdict(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        # Each group's events are buffered in seq order, so its latest seq now divides "before" from "during".
        self._since = self._control.last_seq(self.group)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            return
        deadline = time.monotonic() + self._wait_s
        while not self._collect() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        self._verdict()

    async def __aenter__(self) -> Self:
        self._since = await asyncio.to_thread(self._control.last_seq, self.group)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            return
        deadline = time.monotonic() + self._wait_s
        while not await asyncio.to_thread(self._collect) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
        await asyncio.to_thread(self._verdict)
