"""One broker's log file: records numbered within a run, rendered as JSON lines and written in batches.

Lines are rendered with f-strings (every string is a known-safe identifier, so nothing needs escaping) to write a
few hundred thousand events a second in plain Python; the format is docs/events.md's, version
``FORMAT_VERSION``. The simulation's clock lives here too: it stamps each record.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TextIO

from broker.analytics.synthetic.world import Group
from broker.events.names import FORMAT_VERSION, GROUP_CREATED

_HEAD = f'{{"v":{FORMAT_VERSION},"seq":'
_PSTR = [str(i) for i in range(4096)]
#: Rendered assignments kept at most: cooperative groups can make many distinct lists.
RENDERED_MAX = 200_000
#: What ``--bad-lines`` writes, each plainly noise: a line of text, the tail of a torn record, a hand-written
#: record's group (and its mistyped seq and ts_ms).
INJECTED_TEXT = "not an event: injected by generate-events --bad-lines"
INJECTED_TORN = "<- a torn record: injected by generate-events --bad-lines"
INJECTED_GROUP = "injected-by-generate-events--bad-lines"


class LogWriter:
    """The records of one file, and the clock and random source they are drawn with."""

    def __init__(self, path: Path, rng: random.Random, start_ms: int) -> None:
        self.path = path
        self.rng = rng
        self.rnd = rng.random
        self.now = start_ms
        self.seq = 0
        self.runs = 0
        self.bad = 0
        self.bytes = 0
        self.run_id = ""
        self.tail = ""
        self.buf: list[str] = []
        self.rendered: dict[tuple[object, ...], tuple[str, int]] = {}

    def r(self, low: int, high: int) -> int:
        """A uniform int in [low, high): random.randrange's job at a tenth of its cost."""
        return low + int(self.rnd() * (high - low))

    def new_run(self) -> None:
        """The broker (re)started: a new ``run_id``, and ``seq`` from 1 again."""
        self.runs += 1
        self.seq = 0
        run_id = f"{self.rng.getrandbits(48):012x}"
        self.run_id = run_id
        self.tail = f',"run_id":"{run_id}","event":"'

    def emit(self, name: str, g: Group, rest: str) -> None:
        """A record of event ``name`` about ``g``; ``rest``: its own fields, rendered, each after a comma."""
        self.seq += 1
        self.buf.append(f'{_HEAD}{self.seq},"ts_ms":{self.now}{self.tail}{name}","group_id":{g.js}{rest}}}\n')

    def emit_js(self, name: str, group_js: str, rest: str) -> None:
        """``emit`` for a group that is not a ``Group`` (a share group: ``synthetic/share.py``), by its JSON id."""
        self.seq += 1
        self.buf.append(f'{_HEAD}{self.seq},"ts_ms":{self.now}{self.tail}{name}","group_id":{group_js}{rest}}}\n')

    def flush(self, out: TextIO) -> None:
        text = "".join(self.buf)
        self.buf.clear()
        self.bytes += len(text)
        out.write(text)

    def bad_line(self) -> None:
        """A line a reader must reject and report, without taking a seq (it is not a record of this run).

        Each says it was injected (issue 18): ``analyze`` quotes bad lines as examples, and a quoted line that
        reads like a real failure (a JVM error, say) sends a reader after a crash that never happened. The draws
        are the same as they always were (one for the kind, one more for a torn write's length), so a seed writes
        the same events around its bad lines.
        """
        kind = self.r(0, 3)
        last = self.buf[-1] if self.buf else f'{_HEAD}1,"ts_ms":0,"run_id":"x","event":"{GROUP_CREATED}"}}\n'
        if kind == 0:  # a torn write: the start of a record, cut short (its closing brace is always cut off)
            line = last[: self.r(10, max(len(last) - 2, 11))] + f" {INJECTED_TORN}\n"
        elif kind == 1:  # not JSON at all
            line = f"{INJECTED_TEXT}\n"
        elif self.bad % 2 == 0:  # a record without its seq and ts_ms, as if written by hand
            line = (
                f'{{"v":{FORMAT_VERSION},"run_id":"{self.run_id}","event":"{GROUP_CREATED}",'
                f'"group_id":"{INJECTED_GROUP}"}}\n'
            )
        else:  # a record whose seq and ts_ms have the wrong types
            line = (
                f'{{"v":{FORMAT_VERSION},"seq":"{INJECTED_GROUP}","ts_ms":"{INJECTED_GROUP}",'
                f'"run_id":"{self.run_id}","event":"{GROUP_CREATED}","group_id":"{INJECTED_GROUP}"}}\n'
            )
        self.buf.append(line)
        self.bad += 1

    def render_assignment(self, g: Group, assignment: dict[str, list[int]]) -> tuple[str, str, int]:
        """``assignments`` and ``assignment_bytes`` as JSON, and how many partitions nobody owns."""
        cache = self.rendered
        tkey = g.tkey
        parts_js: list[str] = []
        sizes_js: list[str] = []
        owned = 0
        for member_id, codes in assignment.items():
            hit = cache.get((tkey, *codes))
            if hit is None:
                hit = cache[(tkey, *codes)] = render_partitions(g.tnames, codes)
            owned += len(codes)
            parts_js.append(f'"{member_id}":{hit[0]}')
            sizes_js.append(f'"{member_id}":{hit[1]}')
        if len(cache) > RENDERED_MAX:
            cache.clear()
        return "{" + ",".join(parts_js) + "}", "{" + ",".join(sizes_js) + "}", len(g.parts) - owned


def render_partitions(tnames: list[str], codes: list[int]) -> tuple[str, int]:
    """One member's partitions as JSON ({topic: [partition]}) and the size of its encoded assignment."""
    size = 10  # ConsumerProtocolAssignment: int16 version, int32 topic count, int32 user data length (null)
    if not codes:
        return "{}", size
    topics: list[str] = []
    current = codes[0] >> 12
    ps: list[str] = []
    for c in codes:
        t = c >> 12
        if t != current:
            topics.append(f'"{tnames[current]}":[{",".join(ps)}]')
            size += 6 + len(tnames[current]) + 4 * len(ps)  # int16 name length, name, int32 count, int32 each
            current = t
            ps = []
        ps.append(_PSTR[c & 4095])
    topics.append(f'"{tnames[current]}":[{",".join(ps)}]')
    size += 6 + len(tnames[current]) + 4 * len(ps)
    return "{" + ",".join(topics) + "}", size


def moved(g: Group, assignment: dict[str, list[int]]) -> str:
    """``moved``: the partitions whose owner changed since the last generation's assignment (none after Empty).

    Compared member by member: a member whose partitions are the same list costs one comparison.
    """
    before = g.view
    if before is None:
        return "[]"
    gained: dict[int, str] = {}
    lost: dict[int, str] = {}
    for member_id, codes in assignment.items():
        old = before.get(member_id)
        if old is None:
            gained.update(dict.fromkeys(codes, member_id))
        elif old != codes:
            new_set, old_set = set(codes), set(old)
            gained.update(dict.fromkeys(new_set - old_set, member_id))
            lost.update(dict.fromkeys(old_set - new_set, member_id))
    for member_id, old in before.items():
        if member_id not in assignment:
            lost.update(dict.fromkeys(old, member_id))
    if not gained and not lost:
        return "[]"
    tnames = g.tnames
    moves = []
    for c in sorted(gained.keys() | lost.keys()):
        frm = lost.get(c)
        to = gained.get(c)
        frm_js = "null" if frm is None else f'"{frm}"'
        to_js = "null" if to is None else f'"{to}"'
        moves.append(f'{{"topic":"{tnames[c >> 12]}","partition":{c & 4095},"from":{frm_js},"to":{to_js}}}')
    return "[" + ",".join(moves) + "]"


def js(value: str | None) -> str:
    """A string as JSON (it needs no escaping), or null."""
    return "null" if value is None else f'"{value}"'
