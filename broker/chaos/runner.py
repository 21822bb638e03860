"""``group-broker chaos run``: kill consumers on a seeded schedule and measure what the group does about it.

The runner starts a producer (``broker.chaos.producer``: keys ``k-000000``, ``k-000001``, ... at ``--rate``) and
``--consumers`` consumer processes (``broker.chaos.consumer``: at-least-once, every record appended to a file
before its offset is committed), waits for the group to be Stable, then every ``--interval`` seconds picks a live
consumer with a seeded RNG and sends it SIGKILL (share ``--kill-ratio``) or SIGTERM (a graceful close:
LeaveGroup), and starts a new incarnation of it ``--restart-after`` seconds later. Each incarnation has the
client id ``chaos-<slot>-<incarnation>``; the broker's ``member_joined`` events tie member ids to client ids.

After ``--duration`` seconds it stops killing, stops the producer, lets the consumers drain until every
acknowledged key has been consumed (bounded by ``--drain-timeout``), and stops them gracefully. It then reports,
per kill, how long the broker took to notice and the group to recover (``measure.py``), and the records produced
(acknowledged), consumed, unique, lost (acknowledged keys never consumed) and duplicated (``records.py``). Exit 0
when nothing was lost, 1 otherwise.

Right before each signal the runner tells the broker (``POST /v1/events``: a ``chaos_action`` event, who and
with which signal), which cannot see a kill: the broker's event log then marks each kill, and ``group-broker
analyze`` links it to the rebalance it caused. ``--event-log PATH`` gives the broker the runner starts an event
log (a running broker has its own: refused with ``--bootstrap``).

Without ``--bootstrap`` the runner starts its own broker (``python -m broker serve --port 0 --admin-port 0``) with
the topic, and stops it at the end; with ``--bootstrap HOST:PORT --admin URL`` it uses a running one (the topic is
created if it does not exist).

``--broker-restart-every S`` (its own broker only) gives that broker a data directory and fixed ports, and
SIGKILLs and restarts it every S seconds besides the consumer kills (``broker_restarts``): the report's
``broker_restarts`` says how long each took, what the new broker loaded, and each consumer's time to its first
acknowledged commit after it; the run fails if an acknowledged record was lost or an acknowledged commit forgotten.

``--nodes N`` starts that broker with N nodes; ``--stop-node-every S`` stops the group's coordinator node and
``--move-coordinator-every S`` moves the group's coordinator (``cluster_chaos``): the report's ``cluster_actions``
say, per action, the time to every consumer's next acknowledged commit; no duplicate past a commit either.

``--group-protocol consumer`` makes the group a KIP-848 consumer group (confluent consumers with
``group.protocol=consumer``; docs/spec/consumer-groups.md): the broker it starts gets the session timeout and
heartbeat interval as its consumer-group timers (section 7), the group is watched through its events (state,
members, group and assignment epochs: ``protocols.GroupView``), and a recovery is the group Stable again (every
member reconciled) rather than a SyncGroup. The measurements are the same otherwise.

``--group-protocol share`` makes the group a KIP-932 share group of confluent ``ShareConsumer`` processes
(``share_run``; docs/spec/share-groups.md): the kills are SIGKILL or SIGSTOP (SIGCONT after ``--restart-after``),
the broker it starts gets a short record lock (``--share-lock-ms``), and the report's ``share`` is the verdict of
``share_judge`` on what the workers wrote: every record delivered and accepted, never to two members under one
lock, the redeliveries by cause (exit 1 otherwise).

``--exactly-once`` makes the members transactional consume-transform-produce workers (``exactly_once``,
``eos_worker``) under the same schedule; what is consumed is then the output topic, read read_committed, and at
the end the whole output topic must hold every acknowledged input exactly once (the report's ``exactly_once``;
exit 1 otherwise).

This module is the orchestration; its parts, one concern each: ``options`` (the flags), ``launch`` (the
processes), ``schedule`` (the kills), ``records`` and ``measure`` (what is counted), ``protocols`` (what the events
mean for each group protocol), ``display`` (what is shown).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from broker.chaos import cluster_chaos, exactly_once, library_available, missing_library_message, share_run
from broker.chaos.broker_restarts import BrokerRestarts, data_dir, durability_report, restart_notes, restart_reports
from broker.chaos.cluster_chaos import ClusterChaos, running_cluster_problem
from broker.chaos.display import Display, print_report
from broker.chaos.launch import (
    STOP_TIMEOUT_S,
    Broker,
    ChaosError,
    Incarnation,
    consumer_group_timers,
    start_consumer,
    start_producer,
    stop_all,
    stop_process,
    tail,
    wait_until_ready,
)
from broker.chaos.measure import (
    EVENT_POLL_S,
    EventFollower,
    consumer_reports,
    group_report,
    kill_notes,
    kill_reports,
    member_clients,
    summarize,
)
from broker.chaos.options import (
    DESCRIPTION,
    PROGRAM,
    add_arguments,
    argument_problems,
    config_report,
    resolve_defaults,
    share_lock_ms,
)
from broker.chaos.protocols import PROTOCOLS
from broker.chaos.records import Produced, Records, records_report
from broker.chaos.schedule import Schedule
from broker.chaos.share_display import print_share_report
from broker.control.client import ControlClient, ControlError, configured_url
from broker.control.grace import GraceError, grace_seconds

# What the command line uses: ``add_arguments`` on its ``chaos run`` parser, then ``run``.
__all__ = ["add_arguments", "main", "run"]

STABLE_TIMEOUT_S = 60.0
TICK_S = 0.1
# After an error or an interrupt, how long what still runs gets to close before SIGKILL.
CLEANUP_GRACE_S = 5.0

JSON = dict[str, Any]


class Run:
    """One chaos run, phase by phase (``execute``): its processes, its kills, its records and its notes."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.run_id = uuid.uuid4().hex[:8]
        self.topic: str = args.topic or f"chaos-{self.run_id}"
        self.group: str = args.group or f"chaos-{self.run_id}"
        self.seed: int = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        self.share = args.group_protocol == "share"
        gentle = "SIGSTOP" if self.share else "SIGTERM"
        self.schedule = Schedule(self.seed, args.kill_ratio, args.restart_after, gentle)
        self.protocol = PROTOCOLS[args.group_protocol]
        self.display = Display()
        self.broker: Broker | None = None
        self.control: ControlClient | None = None
        self.follower: EventFollower | None = None
        self.producer: subprocess.Popen[bytes] | None = None
        self.producer_status = workdir / "producer.json"
        self.slots: dict[int, Incarnation] = {}
        self.incarnations: list[Incarnation] = []
        # With --exactly-once, what is consumed is the output topic: exactly_once.OutputRecords once the broker is up.
        self.records = share_run.ShareRecords() if self.share else Records()
        self.notes: list[str] = []
        self.chaos_ended: float | None = None
        self.drained: float | None = None
        self.stopped_at: float | None = None
        self.phase = "starting"
        self.producer_exited = False
        every = args.broker_restart_every
        self.broker_restarts = BrokerRestarts(every) if every is not None else None
        self.nodes = ClusterChaos.from_args(args, self.seed)  # --stop-node-every, --move-coordinator-every

    # -- processes

    def start_consumer(self, slot: int, incarnation: int) -> Incarnation:
        assert self.broker is not None
        start = exactly_once.start_worker if self.args.exactly_once else start_consumer
        start = share_run.start_worker if self.share else start
        consumer = start(self.args, self.broker.bootstrap, self.topic, self.group, self.workdir, slot, incarnation)
        self.slots[slot] = consumer
        self.incarnations.append(consumer)
        return consumer

    def start_producer(self) -> None:
        assert self.broker is not None
        log = self.workdir / "producer.log"
        self.producer = start_producer(self.args, self.broker.bootstrap, self.topic, self.producer_status, log)
        wait_until_ready(self.producer, self.producer_status, log)

    def tail(self, name: str, chars: int = 1500) -> str:
        return tail(self.workdir / name, chars)

    def reap(self) -> None:
        """Notice exits: a process the schedule did not stop has crashed (it is restarted like a killed one)."""
        now = time.time()
        for consumer in self.incarnations:
            if consumer.exited_at is not None or consumer.alive:
                continue
            consumer.exited_at = now
            if consumer.signalled is None:
                consumer.signalled = "crashed"
                self.notes.append(
                    f"{consumer.client_id} exited by itself with {consumer.process.returncode}: "
                    f"{self.tail(consumer.log.name, 300)}"
                )
                self.display.say(f"[red]{consumer.client_id} crashed[/red] (exit {consumer.process.returncode})")
                if self.slots.get(consumer.slot) is consumer:
                    self.schedule.restart_later(consumer.slot, now)
            elif consumer.signalled == "SIGTERM" and consumer.process.returncode != 0:
                self.notes.append(f"{consumer.client_id} exited with {consumer.process.returncode} after SIGTERM")
        for consumer in self.incarnations:  # a graceful close that hangs becomes a SIGKILL
            if (
                consumer.signalled == "SIGTERM"
                and consumer.alive
                and consumer.signalled_at is not None
                and now - consumer.signalled_at > STOP_TIMEOUT_S
            ):
                self.notes.append(f"{consumer.client_id} did not exit {STOP_TIMEOUT_S:.0f}s after SIGTERM: SIGKILL")
                consumer.process.kill()
                consumer.signalled_at = None
        producer = self.producer
        if self.phase == "chaos" and not self.producer_exited and producer is not None and producer.poll() is not None:
            self.producer_exited = True
            self.notes.append(f"the producer stopped early (exit {producer.returncode})")
            self.display.say(f"[red]the producer stopped early[/red] (exit {producer.returncode})")

    def restart_due(self) -> None:
        for slot in self.schedule.due(time.time()):
            old = self.slots[slot]
            if old.signalled == "SIGSTOP":  # a share run's stopped member goes on where it stopped
                assert self.control is not None
                with contextlib.suppress(ControlError):  # only its mark in the event log would be missing
                    self.control.chaos_action(self.group, "resume", signal="SIGCONT", client_id=old.client_id,
                                              pid=old.process.pid)  # fmt: skip
                self.schedule.resume(old)
                self.display.say(f"SIGCONT {old.client_id} (pid {old.process.pid})")
                continue
            if old.alive:  # a SIGTERMed consumer gets to finish closing first
                continue
            new = self.start_consumer(slot, old.incarnation + 1)
            self.schedule.restarted(old, new)
            self.display.say(f"restarted slot {slot} as {new.client_id} (pid {new.process.pid})")

    def announce(self, victim: Incarnation, how: str) -> None:
        """Tell the broker what is about to happen to ``victim`` (a ``chaos_action`` event, docs/events.md), so
        its event log, and ``analyze`` on it, mark the kill and link it to the rebalance it causes."""
        assert self.control is not None
        events = self.follower.snapshot() if self.follower is not None else []
        members = [member for member, client in member_clients(events).items() if client == victim.client_id]
        timeout = self.args.session_timeout_ms if self.protocol.name == "classic" or self.broker_managed else None
        try:
            self.control.chaos_action(
                self.group, "pause" if how == "SIGSTOP" else "kill", signal=how, client_id=victim.client_id,
                pid=victim.process.pid,
                member_id=members[-1] if members else None, session_timeout_ms=timeout,
                note=f"kill #{len(self.schedule.kills) + 1} of chaos run {self.run_id} (seed {self.seed})",
            )  # fmt: skip
        except ControlError as error:  # the kill goes ahead: only its mark in the event log is missing
            self.notes.append(f"kill #{len(self.schedule.kills) + 1} was not recorded as an event: {error}")

    @property
    def broker_managed(self) -> bool:
        return self.broker is not None and self.broker.managed

    def kill_one(self) -> None:
        kill = self.schedule.kill_one(self.slots, self.announce)
        if kill is None:
            message = f"kill #{len(self.schedule.kills) + 1} skipped: no live consumer"
            self.notes.append(message)
            self.display.say(message)
            return
        style = "red" if kill.signal == "SIGKILL" else "yellow"
        self.display.say(f"kill #{kill.number}: [{style}]{kill.signal}[/{style}] {kill.client_id} (pid {kill.pid})")

    def tick(self) -> None:
        self.reap()
        self.restart_due()
        for consumer in self.incarnations:
            self.records.read(consumer.out)
        produced = Produced.load(self.producer_status).acked
        summary = self.follower.summary if self.follower is not None else None
        if self.nodes is not None and self.control is not None:  # the nodes' stops, starts and moves due
            self.nodes.tick(self.control, self.group, self.display.say, chaos=self.phase == "chaos")
        self.display.progress(self.phase, len(self.schedule.kills), produced, self.records.lines, summary)

    # -- phases

    def setup(self) -> None:
        consumer_groups = self.protocol.name == "consumer"
        if self.args.bootstrap is None:
            self.display.say("starting a broker")
            settings = consumer_group_timers(self.args.session_timeout_ms, self.args.heartbeat_interval_ms)
            settings = share_run.broker_settings(self.args) if self.share else settings if consumer_groups else []
            settings = settings + (exactly_once.broker_settings() if self.args.exactly_once else [])
            if self.args.event_log is not None:
                settings += ["--event-log", str(Path(self.args.event_log).resolve())]
            self.broker = Broker.start(
                self.topic, self.args.partitions, self.workdir / "broker.log", settings,
                data_dir=None if self.broker_restarts is None else data_dir(self.workdir), nodes=self.args.nodes,
            )  # fmt: skip
        else:
            self.broker = Broker(self.args.bootstrap, self.args.admin or configured_url())
            if consumer_groups or self.share:
                kind = "share" if self.share else "consumer"
                self.display.say(f"a running broker: its own {kind}-group session timeout and heartbeat apply")
        # A running broker may still be starting (the README starts it in the background): wait for it (issue 26).
        try:
            grace_s = 0.0 if self.broker.managed else grace_seconds(self.args)
        except GraceError as error:
            raise ChaosError(str(error)) from None
        self.control = ControlClient(self.broker.admin, grace_s=grace_s)
        try:
            self.control.health()
        except ControlError as error:
            raise ChaosError(str(error)) from None
        self.display.say(
            f"broker {self.broker.bootstrap} (control API {self.broker.admin}), topic {self.topic} "
            f"({self.args.partitions} partitions), {self.protocol.name} group {self.group}, {self.args.consumers} "
            f"{self.args.client} consumers, seed {self.seed}"
        )
        self.follower = EventFollower(self.control, self.group, from_events=consumer_groups or self.share)
        self.follower.start()
        if self.share:  # before any member fetches: from the earliest offset, with the run's lock (share_run)
            limit = share_run.configure_group(self.broker.bootstrap, self.group, share_lock_ms(self.args))
            assert isinstance(self.records, share_run.ShareRecords)
            self.records.limit = limit
            self.records.watch(self.control, self.group)
            self.display.say(f"share group {self.group}: record lock {share_lock_ms(self.args)} ms, from earliest")
        self.start_producer()
        if self.args.exactly_once:
            output = exactly_once.output_topic(self.topic)
            exactly_once.ensure_output_topic(self.broker.bootstrap, output, self.args.partitions)
            self.records = exactly_once.OutputRecords(self.broker.bootstrap, output, self.args.partitions)
            self.display.say(f"exactly once: transactional workers write {self.topic} to {output}")
        for slot in range(self.args.consumers):
            self.start_consumer(slot, 0)
        self.wait_stable("the consumers to join")

    def wait_stable(self, what: str, timeout_s: float = STABLE_TIMEOUT_S) -> bool:
        """Until the group is Stable with every consumer in it, ticking; ChaosError at the start, False later.

        A classic group is asked of the control API (``/wait``); a consumer group is read from its events."""
        assert self.control is not None and self.follower is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.tick()
            if self.protocol.name != "classic":
                if self.follower.stable_with(self.args.consumers):
                    return True
                time.sleep(TICK_S)
                continue
            try:
                self.control.wait(self.group, state="Stable", members=self.args.consumers, timeout_ms=500)
                return True
            except ControlError as error:
                if error.status != 408:
                    raise ChaosError(f"waiting for {what}: {error}") from None
        if self.schedule.started is None:
            raise ChaosError(f"the group {self.group} was not Stable with {self.args.consumers} members "
                             f"after {timeout_s:.0f}s, waiting for {what}")  # fmt: skip
        self.notes.append(f"the group was not Stable with {self.args.consumers} members {timeout_s:.0f}s after {what}")
        return False

    def chaos(self) -> None:
        self.phase = "chaos"
        self.schedule.started = start = time.time()
        self.display.say(
            f"chaos for {self.args.duration:g}s: a kill every {self.args.interval:g}s "
            f"({self.args.kill_ratio:.0%} SIGKILL), restarts after {self.args.restart_after:g}s"
        )
        next_kill = start + self.args.interval
        end = start + self.args.duration
        if self.broker_restarts is not None:
            self.broker_restarts.start(start)
            self.display.say(f"and the broker: SIGKILL and restart every {self.broker_restarts.every_s:g}s")
        if self.nodes is not None:
            self.nodes.start(start)
        while time.time() < end:
            if time.time() >= next_kill:
                self.kill_one()
                next_kill += self.args.interval
            if self.broker_restarts is not None and self.broker_restarts.due(time.time()):
                self.restart_broker()
            self.tick()
            time.sleep(TICK_S)
        self.chaos_ended = time.time()
        if self.nodes is not None and self.control is not None:  # every node runs for the drain
            self.nodes.start_all(self.control, self.group, self.display.say)

    def restart_broker(self) -> None:
        """SIGKILL the broker and start it again (``broker_restarts``); the consumer kills wait meanwhile."""
        assert self.broker_restarts is not None and self.broker is not None
        assert self.control is not None and self.follower is not None and self.schedule.started is not None
        restart = self.broker_restarts.restart(self.broker, self.follower, self.control, self.schedule.started)
        loaded = "" if restart.load_ms is None else f", loaded in {restart.load_ms:.0f} ms: {restart.loaded}"
        self.display.say(
            f"broker restart #{restart.number}: [red]SIGKILL[/red], listening again after {restart.down_ms:.0f} ms"
            + loaded
        )

    def stop_producer(self) -> Produced:
        self.phase = "draining"
        assert self.producer is not None
        code = stop_process(self.producer, STOP_TIMEOUT_S)
        produced = Produced.load(self.producer_status)
        if code != 0 or not produced.done:
            self.notes.append(f"the producer exited with {code}: {self.tail('producer.log', 500)}")
        if produced.unacked:
            self.notes.append(f"{len(produced.unacked)} records sent but not acknowledged: {produced.errors}")
        self.display.say(f"producer stopped: {produced.acked} records acknowledged")
        return produced

    def drain(self, produced: Produced) -> None:
        """Restarts still due, then until every acknowledged key is consumed and the group is whole again."""
        wanted = produced.keys()
        deadline = time.monotonic() + self.args.drain_timeout
        while time.monotonic() < deadline:
            self.tick()
            if not self.schedule.restarts and wanted <= self.records.settled():
                break
            time.sleep(TICK_S)
        else:
            missing = len(wanted - self.records.settled())
            self.notes.append(f"drain timed out after {self.args.drain_timeout:g}s with {missing} records unconsumed")
        # Let the last disruption settle so it can be measured: Stable with every consumer, then the events.
        self.wait_stable("the last restart", timeout_s=max(10.0, self.args.session_timeout_ms / 1000 * 3))
        time.sleep(2 * EVENT_POLL_S)
        self.drained = time.time()
        self.display.say(f"drained: {self.records.lines} records consumed")

    def stop_consumers(self) -> None:
        self.phase = "stopping"
        self.stopped_at = time.time()
        for consumer in self.slots.values():
            if consumer.alive:
                consumer.signalled = consumer.signalled or "stop"
                consumer.process.terminate()
        for consumer in self.slots.values():
            try:
                code = consumer.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                consumer.process.kill()
                code = consumer.process.wait()
                self.notes.append(f"{consumer.client_id} did not close within {STOP_TIMEOUT_S:.0f}s: SIGKILL")
            if code != 0 and consumer.signalled == "stop":
                self.notes.append(f"{consumer.client_id} exited with {code} at the end: {self.tail(consumer.log.name)}")
        for consumer in self.incarnations:
            self.records.read(consumer.out)

    def kill_everything(self) -> None:
        """Whatever still runs (after an error or an interrupt): SIGTERM, a few seconds to close, then SIGKILL."""
        stop_all([c.process for c in self.incarnations] + ([self.producer] if self.producer else []), CLEANUP_GRACE_S)
        if self.follower is not None:
            self.follower.stop()
        if self.broker is not None:
            self.broker.stop()

    # -- the report

    def report(self, produced: Produced, finished_at: float) -> JSON:
        assert self.broker is not None and self.follower is not None
        events = self.follower.snapshot()
        clients = member_clients(events)
        share = None
        if self.share:  # share_judge's verdict, the kills as the records tell them, the broker's counts
            assert isinstance(self.records, share_run.ShareRecords) and self.control is not None
            share = share_run.report(
                self.records, produced.keys(), self.incarnations, self.schedule.kills, events, self.control,
                self.group, share_lock_ms(self.args), self.stopped_at, self.notes,
            )  # fmt: skip
        if share is None:
            kills = kill_reports(self.schedule.kills, events, clients, self.protocol)
            self.notes.extend(kill_notes(kills, self.protocol))
        else:
            kills = share.pop("kills")
        records = {**records_report(produced, self.records), **durability_report(self.incarnations)}
        restarts = None
        if self.broker_restarts is not None:
            restarts = restart_reports(self.broker_restarts.restarts, self.incarnations)
            self.notes.extend(restart_notes(restarts))
        if produced.acked == 0:
            self.notes.append("no record was acknowledged: nothing to check")
        start = self.schedule.started
        check = None if not self.args.exactly_once else exactly_once.check_output(
            self.broker.bootstrap, self.topic, self.args.partitions, produced, self.notes, self.display.say)
        cluster = cluster_chaos.report(self.nodes, self.incarnations, self.notes)  # {} without node chaos
        ok = records["lost"] == 0 and produced.acked > 0 and (check is None or check["ok"])
        ok = ok and (share is None or share["ok"])
        # Across broker restarts and node stops a commit the broker acknowledged must hold as well as a record.
        ok = ok and ((restarts is None and not cluster) or records["duplicated_after_commit"] == 0)
        return {
            "version": 1,
            "ok": ok,
            "config": config_report(self.args, self.topic, self.group, self.seed),
            "broker": {
                "bootstrap": self.broker.bootstrap,
                "admin": self.broker.admin,
                "managed": self.broker.managed,
                "event_log": str(Path(self.args.event_log).resolve()) if self.args.event_log else None,
                "run_ids": sorted({str(e.get("run_id")) for e in events}),
            },
            "chaos_started_at": start,
            "chaos_ended_at": self.chaos_ended,
            "finished_at": finished_at,
            "records": records,
            "kills": kills,
            "broker_restarts": restarts or [],
            "summary": share_run.summarize(kills) if self.share else summarize(kills),
            "group": group_report(events, start, self.drained, self.follower.errors, self.protocol),
            "consumers": consumer_reports(self.incarnations, clients, self.records),
            "notes": self.notes,
            "workdir": str(self.workdir),
            **({} if check is None else {"exactly_once": check}),
            **cluster,
            **({} if share is None else {"share": share}),
        }

    def execute(self) -> JSON:
        try:
            self.setup()
            self.chaos()
            produced = self.stop_producer()
            self.drain(produced)
            self.stop_consumers()
            assert self.follower is not None
            self.follower.stop()
            return self.report(produced, time.time())
        finally:
            self.display.close()
            if isinstance(self.records, exactly_once.OutputRecords):
                self.records.close()
            self.kill_everything()


def run(args: argparse.Namespace) -> int:
    """Run the scenario ``args`` describes; 0 when no acknowledged record was lost (and, with --exactly-once, the
    output held every input exactly once), 1 otherwise, 2 for bad options."""
    problems = argument_problems(args)
    if problems:
        print(f"{PROGRAM}: error: {'; '.join(problems)}", file=sys.stderr)
        return 2
    if not library_available(args.client):
        print(f"{PROGRAM}: error: {missing_library_message(args.client)}", file=sys.stderr)
        return 2
    problem = running_cluster_problem(args)  # --bootstrap: does the running broker have several nodes?
    if problem is not None:
        print(f"{PROGRAM}: error: {problem}", file=sys.stderr)
        return 2
    resolve_defaults(args)
    keep = args.workdir is not None
    workdir = Path(args.workdir) if keep else Path(tempfile.mkdtemp(prefix="chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    chaos = Run(args, workdir)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = chaos.execute()
    except ChaosError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        kept = keep or any(workdir.iterdir())
        if kept:
            print(f"{PROGRAM}: logs are in {workdir}", file=sys.stderr)
        else:
            workdir.rmdir()
        if args.json is not None:
            write_json(args.json, {"version": 1, "ok": False, "error": str(error),
                                   "workdir": str(workdir.resolve()) if kept else None})
        return 1
    except KeyboardInterrupt:
        print(f"{PROGRAM}: interrupted; logs are in {workdir}", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    (print_share_report if args.group_protocol == "share" else print_report)(report)
    # A clean run's temporary directory is deleted: the report then names none (issue 18: it named a directory
    # that no longer existed), and says so; a kept one is named by its absolute path.
    kept = keep or not report["ok"] or bool(report["notes"])
    report["workdir"] = str(workdir.resolve()) if kept else None
    if kept:
        print(f"logs and record files: {report['workdir']}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
        print("logs and record files: deleted, a clean run (--workdir DIR keeps them)")
    if args.json is not None:
        write_json(args.json, report)
        print(f"report: {Path(args.json).resolve()}")
    if args.event_log is not None:
        print(f"event log: {report['broker']['event_log']} (group-broker analyze {args.event_log} --out DIR --report)")
    return 0 if report["ok"] else 1


def write_json(path: str, report: JSON) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(report, file, indent=2)
        file.write("\n")


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.chaos.runner", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    problems = argument_problems(args)
    if problems:
        parser.error("; ".join(problems))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
