"""structlog set-up: readable on a terminal, JSON lines everywhere else."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "info", fmt: str = "auto") -> None:
    """Route structlog to stderr at ``level`` (``--log-level``) in ``fmt`` (``--log-format``: console, json, auto)."""
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.typing.Processor
    if fmt == "console":
        # Colours only on a terminal: `docker compose logs` and files get plain text, not escape codes.
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
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
