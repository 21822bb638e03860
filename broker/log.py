"""Loggers that import structlog at their first call, and the set-up that runs before the first one binds.

structlog is the broker's logging (docs/architecture.md), but importing it costs about an eighth of what
``group-broker serve`` runs before its first ApiVersions answer (issue 17: within 150 ms of the process start), and
nothing is logged on that path. So the modules on it take their logger from ``get_logger`` here: a stand-in that
imports structlog when it is first called. ``serve`` registers its set-up (structlog loaded with rich hidden, then
configured: broker/cli/main.py) with ``set_up_with``; the broker's loading thread runs it with ``set_up``, and a
logger called before that runs it on the spot. Everywhere else (tests, the other commands) there is no set-up and a
logger is structlog's own, bound at its first call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

_lock = threading.Lock()
_pending: list[Callable[[], None]] = []
# Bumped by every configuration of the broker's logging (broker/config/logs.py): what a caller remembered of a
# logger's levels (``level_enabled``) holds until it moves.
_generation = 0


def configured() -> None:
    """The broker's logging was (re)configured: remembered levels are stale."""
    global _generation
    _generation += 1


def generation() -> int:
    return _generation


def level_enabled(logger: Any, level: int) -> bool:
    """Whether ``logger`` writes lines of ``level`` (a ``logging`` level): structlog's filtering loggers say so (at
    ``--log-level warning`` their ``info`` does nothing, but a call still binds its keywords); any other logger is
    taken to write everything."""
    try:
        check = logger.is_enabled_for
    except AttributeError:
        return True
    return bool(check(level))


def set_up_with(step: Callable[[], None]) -> None:
    """Run ``step`` (it imports and configures structlog) before any logger of this module binds."""
    with _lock:
        _pending.append(step)


def set_up() -> None:
    """Run the registered set-up now, once; a no-op when there is none left."""
    if not _pending:
        return
    with _lock:
        while _pending:
            _pending.pop(0)()


class _Logger:
    """Stands for ``structlog.get_logger(name)`` until its first method call, then forwards to it."""

    __slots__ = ("_bound", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._bound: Any = None

    def __getattr__(self, method: str) -> Any:  # info, warning, exception, bind, ...: nothing else is looked up
        bound = self._bound
        if bound is None:
            set_up()
            import structlog

            bound = self._bound = structlog.get_logger(self._name)
        return getattr(bound, method)


def get_logger(name: str) -> FilteringBoundLogger:
    """A logger named ``name`` (structlog's logger name, as ``structlog.get_logger(name)``)."""
    return cast("FilteringBoundLogger", _Logger(name))
