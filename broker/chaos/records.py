"""What a chaos run produced and consumed, and what of it was lost or came twice.

The producer (``broker.chaos.producer``) reports in a JSON status file which keys the broker acknowledged; each
consumer (``broker.chaos.consumer``) appends ``partition offset key`` to its own file before committing. A key
acknowledged but in no consumer's file is lost; one in several lines was delivered again (at-least-once allows it).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.chaos.producer import key_of

# The producer's keys are k-000000, k-000001, ...: the runner passes it this prefix.
KEY_PREFIX = "k"

JSON = dict[str, Any]


class Records:
    """The consumers' record files, read incrementally: ``partition offset key`` per complete line."""

    def __init__(self) -> None:
        self.keys: Counter[str] = Counter()
        self.lines = 0
        self.per_file: Counter[str] = Counter()
        self._positions: dict[Path, int] = {}

    def read(self, path: Path) -> None:
        position = self._positions.get(path, 0)
        try:
            with path.open("rb") as file:
                file.seek(position)
                chunk = file.read()
        except FileNotFoundError:
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            return  # nothing complete yet (a process killed mid-line leaves a torn last line: never counted)
        for line in chunk[: end + 1].decode("utf-8", errors="replace").splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue
            self.keys[parts[2]] += 1
            self.lines += 1
            self.per_file[path.name] += 1
        self._positions[path] = position + end + 1

    def settled(self) -> Set[str]:
        """The keys the drain waits for: consumed (a share run's records: accepted, ``share_run.ShareRecords``)."""
        return self.keys.keys()


@dataclass
class Produced:
    """The producer's final status: keys ``0 .. sent-1`` except ``unacked`` were acknowledged."""

    sent: int = 0
    acked: int = 0
    unacked: list[int] = field(default_factory=list)
    done: bool = False
    ready: bool = False
    errors: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Produced:
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        return cls(
            sent=int(status.get("sent", 0)),
            acked=int(status.get("acked", 0)),
            unacked=[int(i) for i in status.get("unacked", [])],
            done=bool(status.get("done", False)),
            ready=bool(status.get("ready", False)),
            errors=dict(status.get("errors", {})),
        )

    def keys(self) -> set[str]:
        missing = set(self.unacked)
        return {key_of(KEY_PREFIX, i) for i in range(self.sent) if i not in missing}


def records_report(produced: Produced, consumed: Records) -> JSON:
    """The report's ``records``: the counts, and the first hundred lost and duplicated keys."""
    wanted = produced.keys()
    seen = consumed.keys
    lost = sorted(wanted - seen.keys())
    return {
        "sent": produced.sent,
        "produced": len(wanted),
        "unacked": len(produced.unacked),
        "consumed": consumed.lines,
        "unique": len(seen),
        "lost": len(lost),
        "duplicated": sum(n - 1 for n in seen.values() if n > 1),
        "unexpected": len(set(seen) - wanted),
        "lost_keys": lost[:100],
        "duplicated_keys": sorted(k for k, n in seen.items() if n > 1)[:100],
    }
