"""Where a connection's request queue stands, and what its pipeline asks of the transport's side
(broker/server/pipeline.py; its SASL steps in broker/server/sasl_steps.py read the same states)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol


class PipelineState(enum.Enum):
    """Where the connection's queue stands; the one place its state is kept."""

    READY = "ready"  # the next queued request is answered now
    PARKED = "parked"  # a Deferred answer (a JoinGroup waiting for its group, a delayed Fetch) holds the queue
    DELAYED = "delayed"  # a gate's Delay holds the queue, the delayed request at its head
    CLOSED = "closed"  # nothing more is read or answered


# The states as module constants: in Python 3.11 an Enum member read from its class costs a Python-level lookup.
READY = PipelineState.READY
PARKED = PipelineState.PARKED
DELAYED = PipelineState.DELAYED
CLOSED = PipelineState.CLOSED


class PipelineIO(Protocol):
    """What the pipeline asks of the side that owns the transport and the loop (``Connection``, or a test)."""

    @property
    def unsent_bytes(self) -> int:
        """Answer bytes written and not yet sent (the transport's write buffer)."""

    def close_transport(self) -> None:
        """Close the transport once what was written has gone."""

    def run_now(self) -> None:
        """Run a pass (``RequestPipeline.run``) now, and whatever the transport's side does after one."""

    def run_soon(self) -> None:
        """Run a pass at the loop's next turn: the caller runs inside the coordinator, not to be re-entered."""

    def call_later(self, seconds: float, callback: Callable[[], None]) -> None: ...
