"""A deferred answer: the coordinator's future for a parked request, free of any event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from broker.log import get_logger

log = get_logger("timing")  # structlog, imported at the first call (broker/log.py)

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
        """Answer the parked request; False if it was answered already.

        Each callback runs in isolation: the coordinator completes many answers in one loop (every parked
        JoinGroup of a generation), and one listener that raises (an answer that cannot be encoded) must not
        stop the others from being answered nor abort the coordinator's operation half-way. Kafka's
        CompletableFuture does the same: an exception in a dependent stage does not reach ``complete``'s caller.
        """
        if self.done:
            return False
        self._value = value
        self.done = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(value)
            except Exception:
                log.exception("callback of a parked answer failed", callback=repr(callback))
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
