"""What a chaos run measures, from the broker's group events (control API, ``/v1/groups/{group}/events``).

Per disruption (docs/events.md names the events; ``protocols.py`` says what recovers and what is a rebalance for
each group protocol):

- detect: the kill -> the broker's ``member_expired`` (SIGKILL: session timeout) or ``member_left`` (SIGTERM:
  LeaveGroup, or a consumer-protocol heartbeat with epoch -1) event for the victim's member;
- recover: the kill -> the first recovery after the detection: a ``sync_completed`` with ``unowned == 0``
  (classic: Stable again, every partition owned), or a ``state_changed`` to Stable (consumer protocol: every
  member reconciled to the new target assignment);
- rebalances: rebalances from the kill to the recovery (``rebalance_started``; consumer protocol:
  ``group_epoch_bumped``);
- rejoin: the kill -> the first recovery at which the restarted consumer owns partitions.

Event times are the broker's ``ts_ms`` (wall clock, epoch ms) against the runner's ``time.time()`` at the kill:
both are the same machine's wall clock. The broker's ``member_joined`` events tie member ids to client ids, and so
to the consumer processes (``chaos-<slot>-<incarnation>``).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections import Counter
from typing import Any

from broker.chaos.launch import Incarnation
from broker.chaos.protocols import JOINED, PROTOCOLS, GroupProtocol, GroupView, detect_cause
from broker.chaos.records import Records
from broker.chaos.schedule import Kill
from broker.control.client import ControlClient, ControlError
from broker.events import names

EVENT_POLL_S = 0.25
# A member's events must come after its kill; the broker stamps whole milliseconds.
CLOCK_SLACK_MS = 2

JSON = dict[str, Any]


# -- following the events ----------------------------------------------------------------------------------------


class EventFollower:
    """Polls ``/v1/groups/{group}/events?since_seq=`` in a thread, and the group's summary for the progress line.

    ``view`` is the group as its events tell it (``protocols.GroupView``); ``from_events``: the summary is the
    view's rather than the control API's (consumer groups: their epochs are in the events).

    A broker restart (``pause``, then ``resume``) starts its ``seq`` at 1 again under a new ``run_id``: the
    follower then asks from 0 and keeps every event in the order it came, so ``events`` stays in time order across
    restarts (``measure`` goes by position in it, not by ``seq``). Polls while paused are not made: the broker is
    down on purpose, its refusals are no errors.
    """

    def __init__(self, control: ControlClient, group: str, from_events: bool = False) -> None:
        self.control = control
        self.group = group
        self.from_events = from_events
        self.events: list[JSON] = []
        self.view = GroupView()
        self._summary: JSON | None = None
        self.errors: Counter[str] = Counter()
        self._last_seq = 0
        self._run_id: str | None = None
        self._paused = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        last_summary = 0.0
        while not self._stop.wait(EVENT_POLL_S):
            self.poll()
            if not self.from_events and time.monotonic() - last_summary >= 1.0:
                last_summary = time.monotonic()
                with contextlib.suppress(ControlError):
                    self._summary = self.control.group(self.group)

    @property
    def summary(self) -> JSON | None:
        """The group for the progress line: the view's (from the events), or the control API's last answer."""
        if self.from_events:
            with self._lock:
                return self.view.summary() if self.events else None
        return self._summary

    def poll(self) -> None:
        if not self._paused.is_set():
            self._fetch()

    def _fetch(self) -> None:
        try:
            new = self.control.events(self.group, since_seq=self._last_seq)
        except ControlError as error:
            if error.status != 404 and not self._paused.is_set():  # 404: the broker has not seen the group yet
                self.errors[str(error)] += 1
            return
        with self._lock:
            for event in new:
                if not isinstance(event.get("seq"), int):
                    continue
                run_id = event.get("run_id")
                if run_id != self._run_id:  # the first event, or the first of a restarted broker
                    self._run_id, self._last_seq = run_id, 0
                if event["seq"] > self._last_seq:
                    self.events.append(event)
                    self.view.apply(event)
                    self._last_seq = event["seq"]

    def pause(self) -> None:
        """The broker is about to be killed: one last poll, for what it emitted since the previous one (its ring
        dies with it), then none until ``resume``."""
        self._paused.set()
        self._fetch()

    def resume(self) -> None:
        """The broker is back, a new run: its events from the first (a poll with the old ``seq`` could skip the
        new run's first events, numbered from 1 again)."""
        with self._lock:
            self._last_seq = 0
        self._paused.clear()

    def stable_with(self, members: int) -> bool:
        """The group, as its events tell it, is Stable with exactly ``members`` members."""
        with self._lock:
            return self.view.state == "Stable" and len(self.view.members) == members

    def snapshot(self) -> list[JSON]:
        with self._lock:
            return list(self.events)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.poll()


# -- per kill -----------------------------------------------------------------------------------------------------


def member_clients(events: list[JSON]) -> dict[str, str]:
    """member id -> client id, from member_joined (and a static member's replacement)."""
    clients: dict[str, str] = {}
    for event in events:
        if event.get("event") in JOINED and event.get("member_id"):
            clients[event["member_id"]] = str(event.get("client_id"))
    return clients


def measure(
    kill: Kill,
    events: list[JSON],
    clients: dict[str, str],
    next_kill: Kill | None,
    protocol: GroupProtocol = PROTOCOLS["classic"],
) -> JSON:
    """Detection, recovery and rebalances of one disruption, from the group's events.

    ``recover_generation`` is the generation (classic) or the group epoch (consumer) the group recovered at."""
    kill_ms = kill.at * 1000
    victims = {member for member, client in clients.items() if client == kill.client_id}
    after = [e for e in events if e.get("ts_ms", 0) >= kill_ms - CLOCK_SLACK_MS]
    result: JSON = {
        "member_ids": sorted(victims),
        "detected": False,
        "detect_event": None,
        "detect_cause": None,
        "detect_s": None,
        "recovered": False,
        "recover_s": None,
        "recover_generation": None,
        "rebalances": None,
        "rejoin_s": None,
        "overlapped": False,
    }
    gone = (names.MEMBER_EXPIRED, names.MEMBER_LEFT)
    # By position in ``after``, which is arrival order: ``seq`` starts again at 1 after a broker restart.
    found = next(
        ((i, e) for i, e in enumerate(after) if e.get("event") in gone and e.get("member_id") in victims), None
    )
    if found is None:
        return result
    detected_at, detection = found
    result.update(
        detected=True,
        detect_event=detection["event"],
        detect_cause=detect_cause(detection),
        detect_s=round((detection["ts_ms"] - kill_ms) / 1000, 3),
    )
    recovered = next(((i, e) for i, e in enumerate(after) if i > detected_at and protocol.is_recovery(e)), None)
    if recovered is not None:
        recovered_at, recovery = recovered
        result.update(
            recovered=True,
            recover_s=round((recovery["ts_ms"] - kill_ms) / 1000, 3),
            recover_generation=protocol.epoch(recovery),
            rebalances=sum(1 for e in after[:recovered_at] if e.get("event") == protocol.rebalance_event),
        )
        result["overlapped"] = next_kill is not None and next_kill.at * 1000 < recovery["ts_ms"]
    if kill.restarted_as is not None:
        newcomers = {member for member, client in clients.items() if client == kill.restarted_as}
        rejoined = protocol.rejoined(after, newcomers)
        if rejoined is not None:
            result["rejoin_s"] = round((rejoined["ts_ms"] - kill_ms) / 1000, 3)
    return result


# -- over the whole run -----------------------------------------------------------------------------------------------


def stats(values: list[float]) -> JSON:
    if not values:
        return {"count": 0, "mean": None, "max": None, "min": None}
    return {
        "count": len(values),
        "mean": round(statistics.fmean(values), 3),
        "max": round(max(values), 3),
        "min": round(min(values), 3),
    }


def summarize(kills: list[JSON]) -> JSON:
    def of(subset: list[JSON]) -> JSON:
        return {
            "kills": len(subset),
            "detected": sum(1 for k in subset if k["detected"]),
            "recovered": sum(1 for k in subset if k["recovered"]),
            "detect_s": stats([k["detect_s"] for k in subset if k["detect_s"] is not None]),
            "recover_s": stats([k["recover_s"] for k in subset if k["recover_s"] is not None]),
            "rebalances": stats([float(k["rebalances"]) for k in subset if k["rebalances"] is not None]),
        }

    return {
        **of(kills),
        "by_signal": {name: of([k for k in kills if k["signal"] == name]) for name in ("SIGKILL", "SIGTERM")},
    }


def kill_reports(
    kills: list[Kill], events: list[JSON], clients: dict[str, str], protocol: GroupProtocol = PROTOCOLS["classic"]
) -> list[JSON]:
    """The report's ``kills``: each kill, its restart, and what ``measure`` read from the events about it."""
    reports: list[JSON] = []
    for index, kill in enumerate(kills):
        following = kills[index + 1] if index + 1 < len(kills) else None
        reports.append({
            "number": kill.number,
            "t_s": round(kill.t, 3),
            "at": kill.at,
            "slot": kill.slot,
            "incarnation": kill.incarnation,
            "client_id": kill.client_id,
            "pid": kill.pid,
            "signal": kill.signal,
            "restarted_as": kill.restarted_as,
            "restart_s": None if kill.restarted_at is None else round(kill.restarted_at - kill.at, 3),
            **measure(kill, events, clients, following, protocol),
        })  # fmt: skip
    return reports


def kill_notes(reports: list[JSON], protocol: GroupProtocol = PROTOCOLS["classic"]) -> list[str]:
    """The kills the events do not account for: never joined, never detected, or never recovered from."""
    notes = []
    for row in reports:
        if not row["member_ids"]:
            notes.append(f"kill #{row['number']} ({row['client_id']}): it had not joined the group yet")
        elif not row["detected"]:
            notes.append(f"kill #{row['number']} ({row['client_id']}) was never detected by the broker")
        elif not row["recovered"]:
            notes.append(f"kill #{row['number']} ({row['client_id']}): no recovery ({protocol.recovery_words})")
    return notes


def group_report(
    events: list[JSON],
    started: float | None,
    drained: float | None,
    errors: Counter[str],
    protocol: GroupProtocol = PROTOCOLS["classic"],
) -> JSON:
    """The report's ``group``: its events and rebalances, and how often following the events failed.

    ``generation`` is the last generation (classic) or group epoch (consumer protocol) seen."""
    rebalances = [e for e in events if e.get("event") == protocol.rebalance_event]
    return {
        "protocol": protocol.name,
        "events": len(events),
        "rebalances": len(rebalances),
        # from the first kill's clock start to the end of the drain, before the consumers were stopped
        "rebalances_during_run": sum(
            1 for e in rebalances if started is not None and started * 1000 <= e["ts_ms"] <= (drained or 0) * 1000
        ),
        "generation": max((protocol.epoch(e) or 0 for e in events), default=0),
        "event_errors": dict(errors),
    }


def consumer_reports(incarnations: list[Incarnation], clients: dict[str, str], consumed: Records) -> list[JSON]:
    """The report's ``consumers``: every process started, its member ids, how it ended, the records it wrote."""
    return [
        {
            "client_id": c.client_id,
            "slot": c.slot,
            "incarnation": c.incarnation,
            "pid": c.process.pid,
            "member_ids": sorted(m for m, client in clients.items() if client == c.client_id),
            "started_at": c.started_at,
            "stopped_by": c.signalled,
            "exit_code": c.process.returncode,
            "records": consumed.per_file[c.out.name],
        }
        for c in incarnations
    ]
