"""What the control client's waits and checks share (``control.py``, ``share.py``): the timeout error, the polling
interval, the coroutine twin of a blocking call and one event as a failure message names it."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

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
