"""``group-broker watch``: a live view of the groups, polling the control API about 4 times a second.

The view survives the broker going away: it says "broker unreachable" and keeps polling, and starts afresh (the
event sequence numbers restart with a new broker run) when the broker is back. ``--once`` renders one frame and
exits: 0, or 1 when the broker cannot be reached or the group does not exist. With ``--json`` the command follows
the event stream (Server-Sent Events) and prints each event as one JSON line; ``--json --once`` prints one
snapshot of the groups and their latest events instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.cli.format import (
    consumer_member_row,
    duration,
    event_row,
    generation_text,
    has_epochs,
    is_consumer_group,
    member_row,
    plural,
    protocol_text,
)
from broker.cli.offsets import OFFSET_HEADERS, offset_rows
from broker.cli.share import (
    RECORD_HEADERS,
    SHARE_PARTITION_HEADERS,
    is_share_group,
    record_rows,
    share_member_row,
    share_partition_rows,
)
from broker.control.client import ControlClient, ControlError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

JSON = dict[str, Any]

REFRESH_S = 0.25
EVENTS_SHOWN = 10
EVENTS_KEPT = 50  # per group, for the merged "latest events" of the all-groups view
RECONNECT_S = 1.0


def run(args: argparse.Namespace) -> int:
    # --once and --json wait out a broker that is starting (--wait-for-broker); the live view needs no grace: it
    # says "broker unreachable" and keeps polling until it answers.
    live = not args.once and not args.json
    api = ControlClient(args.admin, timeout=3.0, grace_s=0.0 if live else getattr(args, "wait_for_broker", None) or 0.0)
    if args.json:
        return snapshot_json(api, args.group) if args.once else follow_json(api, args.group)
    console = make_console()
    poller = Poller(api, args.group)
    if args.once:
        frame = poller.poll()
        console.print(render(frame, api.base_url, live=False))
        if frame.problem is not None:
            print(f"group-broker: {frame.problem}", file=sys.stderr)
            return 1
        return 0
    try:
        live_view(console, poller, api.base_url)
    except KeyboardInterrupt:
        return 0
    return 0  # pragma: no cover - the view ends with Ctrl-C


def live_view(console: Console, poller: Poller, url: str) -> None:
    """Redraw the frame every ``REFRESH_S`` until Ctrl-C (KeyboardInterrupt) or an error ends it.

    On a terminal the view runs in its alternate screen (rich's screen mode, ``ESC[?1049h``): each frame is drawn
    from the top-left corner over the whole screen, so lines that background processes (a broker, consumers)
    write to the same terminal cannot push stale frames up above the live one. Leaving the view leaves the
    alternate screen (``ESC[?1049l``, in Live's ``__exit__``: on Ctrl-C and on errors too), and the terminal is
    as it was before. Not a terminal (a pipe, a file): no screen switching, the last frame is printed at the end.
    """
    from rich.live import Live

    with Live(render(poller.poll(), url), console=console, auto_refresh=False, screen=console.is_terminal) as live:
        while True:
            started = time.monotonic()
            live.update(render(poller.poll(), url), refresh=True)
            time.sleep(max(0.0, REFRESH_S - (time.monotonic() - started)))


def make_console() -> Console:
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=200)  # a pipe or a file: don't fold ids at 80 columns
    return console


# -- polling ------------------------------------------------------------------------------------------------


@dataclass
class Frame:
    groups: list[JSON] = field(default_factory=list)
    events: list[JSON] = field(default_factory=list)  # the latest, oldest first
    unreachable: str | None = None
    missing: str | None = None  # the one group watched does not exist
    single: bool = False  # ``watch GROUP``: one group, shown with its offsets table
    share_records: JSON | None = None  # ``watch GROUP`` of a share group: its record-level view
    at: float = field(default_factory=time.time)

    @property
    def problem(self) -> str | None:
        return self.unreachable or self.missing


class Poller:
    """Reads the groups' details and, incrementally (``since_seq``), their events."""

    def __init__(self, api: ControlClient, group_id: str | None) -> None:
        self.api = api
        self.group_id = group_id
        self._events: dict[str, list[JSON]] = {}

    def poll(self) -> Frame:
        try:
            return self._poll()
        except ControlError as error:
            self._events.clear()  # a broker coming back is a new run: its sequence numbers start again
            reason = error.message if error.status == 0 else f"the control API answered {error.status}: {error.message}"
            return Frame(unreachable=f"broker unreachable: {reason}")

    def _poll(self) -> Frame:
        if self.group_id is not None:
            details = [self._detail(self.group_id)]
        else:
            details = [self._detail(g["group_id"]) for g in self.api.groups()]
        groups = [d for d in details if d is not None]
        if self.group_id is not None and not groups:
            self._events.clear()
            return Frame(missing=f"group {self.group_id} does not exist (yet)")
        for stale in set(self._events) - {g["group_id"] for g in groups}:
            del self._events[stale]
        events: list[JSON] = []
        for group in groups:
            events.extend(self._new_events(group["group_id"]))
        events.sort(key=lambda e: e.get("seq", 0))
        records = None
        if self.group_id is not None and is_share_group(groups[0]):
            records = self._share_records(self.group_id)
        return Frame(groups=groups, events=events[-EVENTS_SHOWN:], single=self.group_id is not None,
                     share_records=records)  # fmt: skip

    def _share_records(self, group_id: str) -> JSON | None:
        try:
            return self.api.share_partitions(group_id)
        except ControlError as error:
            if error.status == 404:
                return None  # gone, or no longer a share group, since the detail was read
            raise

    def _detail(self, group_id: str) -> JSON | None:
        try:
            return self.api.group(group_id)
        except ControlError as error:
            if error.status == 404:
                return None  # gone between the listing and now
            raise

    def _new_events(self, group_id: str) -> list[JSON]:
        known = self._events.get(group_id)
        try:
            if not known:
                fresh = self.api.events(group_id)
            else:
                fresh = self.api.events(group_id, since_seq=known[-1].get("seq", 0))
        except ControlError as error:
            if error.status == 404:
                return []
            raise
        if known and fresh and fresh[0].get("run_id") != known[-1].get("run_id"):
            known = []  # a restarted broker: forget the old run's events
            fresh = self.api.events(group_id)
        kept = [*(known or []), *fresh][-EVENTS_KEPT:]
        self._events[group_id] = kept
        return kept


# -- rendering ----------------------------------------------------------------------------------------------

STATE_STYLES = {
    "Stable": "bold green",
    "PreparingRebalance": "bold yellow",
    "CompletingRebalance": "bold yellow",
    "Assigning": "bold yellow",
    "Reconciling": "bold yellow",
    "Empty": "dim",
    "Dead": "bold red",
}


def render(frame: Frame, url: str, live: bool = True) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    stamp = time.strftime("%H:%M:%S", time.localtime(frame.at))
    header = Text.assemble(("group-broker watch", "bold"), f"  {url}  {stamp}")
    if frame.unreachable is not None:
        header.append(f"\n{frame.unreachable}{' (retrying)' if live else ''}", style="bold red")
        return header
    if frame.missing is not None:
        header.append(f"\n{frame.missing}", style="yellow")
        return header
    header.append(f"  {plural(len(frame.groups), 'group')}")
    parts: list[RenderableType] = [header]
    if not frame.groups:
        parts.append(Text("no groups", style="dim"))
    elif not frame.single:
        parts.append(lag_table(frame.groups))
    parts.extend(group_table(group) for group in frame.groups)
    if frame.single and frame.groups and is_share_group(frame.groups[0]):
        parts.append(share_partitions_table(frame.groups[0]))
        if frame.share_records is not None:
            parts.append(share_records_table(frame.share_records))
    elif frame.single and frame.groups:
        parts.append(offsets_table(frame.groups[0]))
    parts.append(events_table(frame.events, with_group=len(frame.groups) > 1))
    return Group(*parts)


def _cells(values: Iterable[str]) -> list[Any]:
    from rich.text import Text

    return [Text(value) for value in values]  # Text, not str: ids may hold rich markup like "[b]"


def group_table(group: JSON) -> RenderableType:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    state = str(group["state"])
    members: list[JSON] = group.get("members") or []
    consumer = is_consumer_group(group)
    title = Text.assemble(
        (str(group["group_id"]), "bold cyan"),
        "  ",
        (state, STATE_STYLES.get(state, "")),
        f"  {'epoch' if has_epochs(group) else 'generation'} {generation_text(group)}",
        f"  {protocol_text(group.get('protocol_type'), group.get('protocol'))}",
        f"  {plural(len(members), 'member')}",
        f"  for {duration(group.get('state_age_ms'))}",
    )
    if group.get("pending_members"):
        title.append(f"  {len(group['pending_members'])} pending", style="yellow")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, expand=False, pad_edge=False)
    if is_share_group(group):
        # KIP-932: members share partitions; what each subscribed to and is assigned (records: the tables below).
        for name in ("MEMBER ID", "CLIENT ID", "HOST", "EPOCH", "HEARTBEAT", "SUBSCRIBED", "ASSIGNMENT"):
            table.add_column(name, overflow="fold")
        for member in members:
            table.add_row(*_cells(share_member_row(member)))
        return table
    if consumer:
        # KIP-848: no leader; each member's epoch and reconciliation state, what it holds and must give up.
        for name in ("MEMBER ID", "INSTANCE ID", "CLIENT ID", "EPOCH", "STATE", "HEARTBEAT", "ASSIGNMENT", "REVOKING"):
            table.add_column(name, overflow="fold")
        for member in members:
            row = consumer_member_row(member)
            table.add_row(*_cells([row[0], row[1], row[2], row[4], row[5], row[6], row[7], row[8]]))
        return table
    for name in ("", "MEMBER ID", "INSTANCE ID", "CLIENT ID", "HOST", "HEARTBEAT", "ASSIGNMENT"):
        table.add_column(name, overflow="fold")
    for member in members:
        row = member_row(member)
        leader = "L" if member.get("is_leader") else ""
        table.add_row(*_cells([leader, row[0], row[1], row[2], row[3], row[5], row[6]]))
    return table


def lag_table(groups: list[JSON]) -> RenderableType:
    """The groups view's summary: each group's state, members and total lag (the sum of its known lags)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text("groups", style="bold"), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("GROUP", "STATE", "MEMBERS", "LAG"):
        table.add_column(name, overflow="fold", justify="right" if name in ("MEMBERS", "LAG") else "left")
    for group in groups:
        lag = None if is_share_group(group) else group.get("lag")  # a share group commits no offsets: no lag
        table.add_row(*_cells([str(group["group_id"]), str(group["state"]), str(len(group.get("members") or [])),
                               "-" if lag is None else str(lag)]))
    return table


def offsets_table(group: JSON) -> RenderableType:
    """``watch GROUP``: the group's offsets with ``kafka-consumer-groups.sh --describe``'s columns."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"offsets  total lag {group.get('lag', 0)}", style="bold"), title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for name in OFFSET_HEADERS[1:]:
        table.add_column(name, overflow="fold")
    for row in offset_rows(group):
        table.add_row(*_cells(row[1:]))
    return table


def share_partitions_table(group: JSON) -> RenderableType:
    """``watch GROUP`` of a share group: each share-partition's in-flight window (SPSO to SPEO) and its counts."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text("share partitions", style="bold"), title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)  # fmt: skip
    for name in SHARE_PARTITION_HEADERS:
        table.add_column(name, overflow="fold", justify="left" if name == "TOPIC" else "right")
    for row in share_partition_rows(group):
        table.add_row(*_cells(row))
    return table


RECORD_ROWS_SHOWN = 20


def share_records_table(view: JSON) -> RenderableType:
    """The in-flight runs of offsets: state, delivery count, the member holding them and the lock's time left."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    rows = record_rows(view)
    more = f"  (first {RECORD_ROWS_SHOWN} of {len(rows)})" if len(rows) > RECORD_ROWS_SHOWN else ""
    table = Table(title=Text(f"in-flight records{more}", style="bold"), title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)  # fmt: skip
    for name in RECORD_HEADERS:
        table.add_column(name, overflow="fold")
    for row in rows[:RECORD_ROWS_SHOWN]:
        cells = _cells(row)
        if row[4] == "acquired":
            cells[4].stylize("bold yellow")
        table.add_row(*cells)
    if not rows:
        table.add_row(*_cells(["-", "-", "none", "", "", "", "", ""]))
    return table


def events_table(events: list[JSON], with_group: bool) -> RenderableType:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text("latest events", style="bold"), title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    columns = ["SEQ", "TIME", *(["GROUP"] if with_group else []), "EVENT", "DETAILS"]
    for name in columns:
        table.add_column(name, overflow="fold")
    for event in events:
        seq, at, name, details = event_row(event)
        table.add_row(*_cells([seq, at, *([str(event.get("group_id", ""))] if with_group else []), name, details]))
    return table


# -- JSON -----------------------------------------------------------------------------------------------------


def snapshot_json(api: ControlClient, group_id: str | None) -> int:
    frame = Poller(api, group_id).poll()
    if frame.problem is not None:
        raise ControlError(0 if frame.unreachable else 404, frame.problem)
    snapshot: JSON = {"groups": frame.groups, "events": frame.events}
    if frame.share_records is not None:  # watching one share group: its record-level view too
        snapshot["share_records"] = frame.share_records
    print(json.dumps(snapshot, indent=2))
    return 0


def follow_json(api: ControlClient, group_id: str | None) -> int:
    """Every event as one JSON line, as it happens; reconnects when the broker goes away and comes back."""
    outage = False
    try:
        while True:
            try:
                stream = api.stream_events(group_id)  # connected once this returns
                if outage:
                    print("group-broker: reconnected", file=sys.stderr)
                    outage = False
                for event in stream:
                    sys.stdout.write(json.dumps(event) + "\n")
                    sys.stdout.flush()
            except ControlError as error:
                if error.status != 0:
                    raise
                if not outage:
                    print(f"group-broker: broker unreachable: {error.message} (retrying)", file=sys.stderr)
                    outage = True
            time.sleep(RECONNECT_S)
    except KeyboardInterrupt:
        return 0
