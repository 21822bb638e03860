"""What a data directory refuses with: one line each, printed by ``serve`` before it exits 1."""

from __future__ import annotations


class DataDirError(Exception):
    """The data directory cannot be used: locked by another broker, of another cluster, of an unknown format."""


class CorruptEntry(DataDirError):
    """An entry that fails its length or CRC check with valid data after it: not a torn tail but damage in the
    middle, so the start stops rather than drop what follows (cluster-and-durability.md 3.5)."""
