"""structlog set-up: readable on a terminal, JSON lines everywhere else.

``group-broker serve`` loads structlog with rich hidden (broker/cli/main.py): structlog imports rich for its console
tracebacks whenever it is installed, ~70 ms and several MB before the first answer (issue 17). The console format
therefore renders tracebacks with rich itself, imported when the first one is logged.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog
from structlog.typing import ExcInfo

from broker import log


def configure(level: str = "info", fmt: str = "auto") -> None:
    """Route structlog to stderr at ``level`` (``--log-level``) in ``fmt`` (``--log-format``: console, json, auto)."""
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.typing.Processor
    if fmt == "console":
        # Colours only on a terminal: `docker compose logs` and files get plain text, not escape codes.
        colors = sys.stderr.isatty()
        renderer = structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=RichTraceback(colors))
    elif fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        raise ValueError(f"unknown log format {fmt!r}: expected console, json or auto")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    log.configured()


class RichTraceback:
    """The console format's tracebacks: rich's (with locals, as structlog's default when rich was loaded with it),
    imported at the first traceback; structlog's plain one where rich is not installed."""

    def __init__(self, colors: bool) -> None:
        self.colors = colors

    def __call__(self, sio: TextIO, exc_info: ExcInfo) -> None:
        try:
            from rich.console import Console
            from rich.traceback import Traceback
        except ImportError:
            structlog.dev.plain_traceback(sio, exc_info)
            return
        sio.write("\n")
        console = Console(file=sio, color_system="truecolor" if self.colors else None)
        console.print(Traceback.from_exception(*exc_info, show_locals=True))
