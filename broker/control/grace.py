"""A grace window for a broker that is starting (issue 26, item 1): retry a refused connection for a while.

The README's walkthrough starts ``group-broker serve ... &`` and runs the next command at once; that command used
to lose the race ("connection refused") every time. Every command that talks to a broker now wraps its first
connection in ``with_grace``: a connection *refused* (nothing listens yet) is tried again every
``RETRY_S`` until the grace ends, then the last error is raised as it would have been without the grace. Any other
failure (a timeout, a reset, an answer that is an error) is raised at once: only "nobody listens yet" is what a
starting broker looks like. While it waits, one line goes to stderr, and only when stderr is a terminal, so scripts
and logs stay as they were.

The grace is ``--wait-for-broker S`` (0 = do not wait), else ``GROUP_BROKER_WAIT_FOR_BROKER``, else
``DEFAULT_GRACE_S``. ``health`` does not use it: a container HEALTHCHECK must answer at once.

Standard library only, and cheap to import: the command line imports it for every client command, the chaos runner
for ``chaos run --bootstrap``, and a Kafka wire client may wrap its ``socket.create_connection`` in it too::

    sock = with_grace(lambda: socket.create_connection((host, port), 5), target="localhost:9092", grace_s=10)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import IO, TypeVar

T = TypeVar("T")

DEFAULT_GRACE_S = 10.0
GRACE_ENV = "GROUP_BROKER_WAIT_FOR_BROKER"
FLAG = "--wait-for-broker"
RETRY_S = 0.2


def is_refused(error: BaseException) -> bool:
    """Whether ``error`` says nothing listens at the address (yet): ``ConnectionRefusedError``, or an error of ours
    that carries ``refused = True`` (the control client's ``ControlError``, discovery's ``DiscoveryError``)."""
    if isinstance(error, ConnectionRefusedError):
        return True
    return getattr(error, "refused", False) is True


def with_grace(
    connect: Callable[[], T],
    *,
    target: str,
    grace_s: float,
    refused: Callable[[BaseException], bool] = is_refused,
    stream: IO[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``connect()``'s result; while it raises an error ``refused`` accepts, try again until ``grace_s`` seconds
    have passed, then raise the last error. ``target`` names what is waited for in the one line printed on
    ``stream`` (stderr) while waiting, when it is a terminal. ``connect`` must be safe to call again after a
    refusal: nothing was sent."""
    deadline = clock() + max(0.0, grace_s)
    said = False
    while True:
        try:
            return connect()
        except Exception as error:
            left = deadline - clock()
            if not refused(error) or left <= 0:
                raise
            if not said:
                said = True
                _say(stream if stream is not None else sys.stderr, target, grace_s)
        sleep(min(RETRY_S, max(0.0, left)))


def _say(stream: IO[str], target: str, grace_s: float) -> None:
    try:
        if not stream.isatty():
            return
        stream.write(f"waiting up to {grace_s:g} s for the broker at {target} to start…\n")
        stream.flush()
    except (OSError, ValueError, UnicodeError):
        pass  # a closed or narrow stream: waiting quietly is fine


def parse_seconds(text: str) -> float:
    """``--wait-for-broker``'s value: seconds, 0 or more (a number, ``inf`` and ``nan`` refused)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds (0 or more; 0 = do not wait)") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"{text!r} is not a number of seconds (0 or more; 0 = do not wait)")
    return value


def _argparse_seconds(text: str) -> float:
    try:
        return parse_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--wait-for-broker S``, left None when not given (``grace_seconds`` then reads the environment)."""
    parser.add_argument(
        FLAG,
        dest="wait_for_broker",
        type=_argparse_seconds,
        default=None,
        metavar="S",
        help=f"while nothing listens at the broker's address yet (a broker starting), retry for up to S seconds; "
        f"0 = fail at once [env {GRACE_ENV}; default {DEFAULT_GRACE_S:g}]",
    )


class GraceError(ValueError):
    """``GROUP_BROKER_WAIT_FOR_BROKER`` holds something that is not a number of seconds."""


def grace_seconds(args: argparse.Namespace | None = None) -> float:
    """The grace to use: ``--wait-for-broker`` when given, else the environment variable, else the default."""
    given = getattr(args, "wait_for_broker", None) if args is not None else None
    if given is not None:
        return float(given)
    text = os.environ.get(GRACE_ENV)
    if text is None or not text.strip():
        return DEFAULT_GRACE_S
    try:
        return parse_seconds(text.strip())
    except ValueError as error:
        raise GraceError(f"{GRACE_ENV}={text!r}: {error}") from None
