"""What a share-partition reads of its partition's log (storage's ``PartitionLog`` answers it): the protocols of
``partition.py``, which re-exports them. The coordinator never imports storage (its layer is beside it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

__all__ = ["AbortedRange", "LoggedBatch", "ShareLog"]


class LoggedBatch(Protocol):
    """A stored record batch, as ``PartitionLog`` keeps it."""

    @property
    def data(self) -> bytes: ...

    @property
    def base_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def is_control(self) -> bool: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def is_transactional(self) -> bool: ...


class AbortedRange(Protocol):
    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...


class ShareLog(Protocol):
    """What a share-partition reads of its partition's log."""

    log_start_offset: int

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    def batches_from(self, offset: int) -> Iterator[LoggedBatch]: ...

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> Sequence[AbortedRange]: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...

    def bytes_from(self, offset: int) -> int: ...
