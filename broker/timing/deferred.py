"""A deferred answer: the coordinator's future for a parked request, free of any event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class Deferred(Generic[T]):
    """A response the coordinator will give later (a parked JoinGroup or SyncGroup).

    The coordinator completes it; the connection that asked attaches one callback
    to write the answer. Completing twice is a no-op, so every path that answers a
    parked request can do so without checking who answered first.
    """

    __slots__ = ("_callbacks", "_value", "done")

    def __init__(self) -> None:
        self._value: T | None = None
        self._callbacks: list[Callable[[T], object]] = []
        self.done = False

    @property
    def value(self) -> T:
        if not self.done:
            raise RuntimeError("response still parked")
        return self._value  # type: ignore[return-value]

    def complete(self, value: T) -> bool:
        if self.done:
            return False
        self._value = value
        self.done = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(value)
        return True

    def map(self, transform: Callable[[T], U]) -> Deferred[U]:
        """A Deferred of ``transform(value)``, completed when this one is."""
        mapped: Deferred[U] = Deferred()
        self.add_done_callback(lambda value: mapped.complete(transform(value)))
        return mapped

    def add_done_callback(self, callback: Callable[[T], object]) -> None:
        if self.done:
            callback(self._value)  # type: ignore[arg-type]
        else:
            self._callbacks.append(callback)
