"""A client of a running broker's control API shaped for assertions: waits and checks that fail a test with a
readable message.

Everything goes through the broker's real HTTP control API, so ``BrokerControl`` works the same against a broker
in another process or container as against ``EmbeddedBroker`` (``embedded.py``), which is one::

    control = BrokerControl("http://127.0.0.1:9644")
    control.wait_for("orders-app", state="Stable", members=2)
    with control.no_rebalance("orders-app"):
        ...

Rebalances are read from the group's events (docs/events.md): a classic group's ``rebalance_started``, a KIP-848
consumer group's ``group_epoch_bumped`` (each bump makes the next heartbeat compute a new target assignment). Both
kinds of group are waited for the same way: ``wait_for(group, state="Stable", members=2)`` returns once a consumer
group's every member is reconciled to its target, and a member's ``assignment`` is what it holds.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Self

from broker.control.client import ControlClient, ControlError
from broker.coordinator.group_type import GroupType
from broker.events import names
from broker.testing.cluster import AsyncCluster, ClusterControl
from broker.testing.share import AsyncShare, ShareControl
from broker.testing.waits import JSON, POLL_S, RECENT_EVENTS, EventBlock, WaitTimeout, describe_event, threaded

__all__ = ["REBALANCE_EVENTS", "AsyncControl", "BrokerControl", "Fault", "RebalanceCheck", "WaitTimeout"]

#: The events that start a rebalance: a classic group's, and a consumer group's epoch bump (docs/events.md).
REBALANCE_EVENTS = frozenset({names.REBALANCE_STARTED, names.GROUP_EPOCH_BUMPED})


class BrokerControl(ShareControl, ClusterControl):
    """The control API of a running broker, with waits and checks that fail a test with a readable message."""

    def __init__(self, admin_url: str | None = None, timeout: float = 10.0) -> None:
        self._client = ControlClient(admin_url, timeout) if admin_url is not None else None

    @property
    def client(self) -> ControlClient:
        """The plain control API client (``broker.control.client.ControlClient``)."""
        if self._client is None:
            raise RuntimeError("the broker is not running: no control API to talk to")
        return self._client

    @property
    def admin_url(self) -> str:
        return self.client.base_url

    @functools.cached_property
    def aio(self) -> AsyncControl:
        """The same calls as coroutines, for asyncio tests: they wait in a thread, not on the test's loop."""
        return AsyncControl(self)

    # -- reading --------------------------------------------------------------------------------------------

    def groups(self) -> list[JSON]:
        return self.client.groups()

    def group(self, group: str) -> JSON:
        """The group's detail (state, generation, members and their assignments); ControlError(404) if unknown."""
        return self.client.group(group)

    def member_ids(self, group: str) -> list[str]:
        return [member["member_id"] for member in self.group(group)["members"]]

    def assignments(self, group: str) -> dict[str, dict[str, list[int]] | None]:
        """Each member's partitions by topic, as the group holds them now (None: a classic member's assignment
        that is not the consumer protocol's). A consumer group's member: what it may own now, not its target."""
        return {member["member_id"]: member["assignment"] for member in self.group(group)["members"]}

    def offsets(self, group: str) -> list[JSON]:
        """One row per partition the group committed or a member owns now, sorted by topic and partition:
        ``topic``, ``partition``, ``committed_offset``, ``log_end_offset``, ``lag``, ``member_id``, ``client_id``,
        ``host`` (None where there is none), what ``kafka-consumer-groups.sh --describe`` prints."""
        rows: list[JSON] = self.group(group)["offsets"]
        return rows

    def lag(self, group: str) -> dict[tuple[str, int], int | None]:
        """``{(topic, partition): lag}``, the log end offset minus the committed offset; None for a partition the
        group owns but committed nothing for, as Kafka's tool prints "-" (not the log end offset)."""
        return {(row["topic"], row["partition"]): row["lag"] for row in self.offsets(group)}

    def wait_for_assignment(
        self,
        group: str,
        members: int | None = None,
        timeout: float = 30.0,
        poll: Callable[[], object] | None = None,
    ) -> dict[str, dict[str, list[int]] | None]:
        """Each member's partitions once the group is Stable (with ``members`` members, if given): for a consumer
        group, once every member has acknowledged its target. Raises WaitTimeout as ``wait_for`` does."""
        detail = self.wait_for(group, state="Stable", members=members, timeout=timeout, poll=poll)
        return {member["member_id"]: member["assignment"] for member in detail["members"]}

    def events(self, group: str | None = None, since_seq: int = 0) -> list[JSON]:
        """Buffered events after ``since_seq`` (of one group, or of all), oldest first (docs/events.md)."""
        if group is not None:
            try:
                return self.client.events(group, since_seq=since_seq)
            except ControlError as error:
                if error.status == 404:
                    return []
                raise
        merged = [record for name in self._group_ids() for record in self.events(name, since_seq)]
        return sorted(merged, key=lambda record: int(record["seq"]))

    def _group_ids(self) -> list[str]:
        return [summary["group_id"] for summary in self.groups()]

    def last_seq(self, group: str) -> int:
        """The seq of the group's latest event (0 if none): pass it as ``since_seq`` to see only what follows."""
        try:
            latest = self.client.events(group, limit=1)
        except ControlError as error:
            if error.status == 404:
                return 0
            raise
        return int(latest[-1]["seq"]) if latest else 0

    def wait_for(
        self,
        group: str,
        state: str | None = None,
        members: int | None = None,
        min_generation: int | None = None,
        timeout: float = 30.0,
        poll: Callable[[], object] | None = None,
    ) -> JSON:
        """The group's detail once every condition holds (none given: once the group exists).

        ``poll`` is for clients that only rebalance inside their own poll() (kafka-python, confluent-kafka): it
        is called over and over while waiting, e.g. ``poll=lambda: consumer.poll(0.1)`` (its records are lost).
        Raises WaitTimeout, saying what the group looked like at the deadline and its latest events."""
        conditions = {"state": state, "members": members, "min_generation": min_generation}
        deadline = time.monotonic() + timeout
        while True:
            if poll is not None:
                poll()
            remaining = max(deadline - time.monotonic(), 0.0)
            # With a poll function, ask briefly and poll again; without, let the broker hold one request.
            slice_s = min(remaining, POLL_S) if poll is not None else remaining
            try:
                return self.client.wait(group, state, members, min_generation, timeout_ms=round(slice_s * 1000))
            except ControlError as error:
                if error.status != 408:
                    raise
                if remaining <= slice_s:
                    last = error.payload.get("group")
                    break
        wanted = ", ".join(f"{name}={value}" for name, value in conditions.items() if value is not None)
        message = f"group {group!r} did not reach {wanted or 'existence'} within {timeout:g} s"
        if not isinstance(last, dict):
            raise WaitTimeout(f"{message}: the broker has no such group")
        ids = [member["member_id"] for member in last.get("members", [])]
        if last.get("group_type") == GroupType.CONSUMER:
            shape = f"epoch {last.get('group_epoch')} (target assignment {last.get('assignment_epoch')})"
            waiting = [f"{m['member_id']}: {m['state']} at {m['member_epoch']}" for m in last.get("members", [])
                       if m.get("state") != "stable" or m.get("member_epoch") != last.get("assignment_epoch")]
        else:
            shape, waiting = f"generation {last.get('generation_id')}", []
        message += f": it is {last.get('state')}, {shape}, {len(ids)} member(s) {ids}"
        if waiting:
            message += f", not reconciled: {'; '.join(waiting)}"
        if last.get("pending_members"):
            message += f", pending {last['pending_members']}"
        recent = self.events(group)[-RECENT_EVENTS:]
        if recent:
            message += "; latest events: " + "; ".join(describe_event(record) for record in recent)
        raise WaitTimeout(message)

    # -- disturbing -----------------------------------------------------------------------------------------

    def kick(self, group: str, member_id: str) -> JSON:
        """Evict a member at once, down the session-expiry path: the group rebalances (cause member_kicked). A
        consumer group's member is fenced as if it had left; its client re-joins."""
        return self.client.kick(group, member_id)

    def fence(self, group: str, instance_id: str) -> JSON:
        """Fence a static member, as if another process took its ``group.instance.id`` (a consumer group's static
        member is removed instead, as Kafka's ``removeMembersFromConsumerGroup`` does)."""
        return self.client.fence(group, instance_id)

    def rebalance(self, group: str) -> JSON:
        """Start a rebalance of a group with members (cause forced); ControlError(409) if Empty or rebalancing. A
        consumer group's epoch is bumped: a sticky assignor then moves nothing in an unchanged group."""
        return self.client.rebalance(group)

    def mark(self, group: str, action: str, **fields: Any) -> JSON:
        """Record what the test is about to do to a member the broker cannot see (a ``chaos_action`` event:
        ``signal=``, ``client_id=``, ``member_id=``, ``pid=``, ``note=``, ...), so the event log and ``analyze``
        mark it; the record as the broker stamped it."""
        return self.client.chaos_action(group, action, **fields)

    def fault(
        self,
        api: str | int | None = None,
        *,
        action: str | None = None,
        error: str | int | None = None,
        delay_ms: int | None = None,
        group_id: str | None = None,
        member_id: str | None = None,
        group_instance_id: str | None = None,
        client_id: str | None = None,
        transactional_id: str | None = None,
        count: int | None = None,
        probability: float | None = None,
        seed: int | None = None,
        duration_ms: int | None = None,
    ) -> Fault:
        """Add a fault rule (docs/control-api.yaml, FaultRuleSpec); ``with`` it to delete it after the block.

        ``action`` follows from ``error`` ("error") or ``delay_ms`` ("delay"); "close" and "swallow_heartbeats"
        are named. The broker rejects a malformed rule with ControlError(400) saying why.
        """
        if action is None:
            action = "error" if error is not None else "delay" if delay_ms is not None else None
        if action is None:
            raise ValueError(
                "say what the rule does: error=..., delay_ms=..., action='close' or action='swallow_heartbeats'"
            )
        rule = self.client.add_fault(
            api=api,
            action=action,
            error=error,
            delay_ms=delay_ms,
            group_id=group_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            transactional_id=transactional_id,
            count=count,
            probability=probability,
            seed=seed,
            duration_ms=duration_ms,
        )
        return Fault(self, rule)

    def faults(self) -> list[JSON]:
        return self.client.faults()

    def clear_faults(self) -> int:
        """Delete every fault rule; how many there were."""
        return self.client.clear_faults()

    # -- offsets ---------------------------------------------------------------------------------------------

    def reset_offsets(
        self,
        group: str,
        topic: str | None = None,
        partitions: Iterable[int] | None = None,
        *,
        topics: Mapping[str, Iterable[int] | None] | None = None,
        all_topics: bool = False,
        to_earliest: bool = False,
        to_latest: bool = False,
        to_offset: int | None = None,
        shift_by: int | None = None,
        to_datetime: str | datetime | None = None,
        by_duration: str | timedelta | None = None,
        execute: bool = True,
    ) -> dict[tuple[str, int], int]:
        """Reset the group's committed offsets as ``kafka-consumer-groups.sh --reset-offsets`` does: the scope is
        ``topic`` (with ``partitions``, else all of them), ``topics`` ({topic: partitions or None}) or
        ``all_topics``, and exactly one target. Committed unless ``execute=False`` (a dry run); the new offset of
        each partition. ControlError(409) while the group has members, (400) for bad arguments."""
        scope: dict[str, list[int] | None] = {}
        if topic is not None:
            scope[topic] = None if partitions is None else list(partitions)
        for name, wanted in (topics or {}).items():
            scope[name] = None if wanted is None else list(wanted)
        body: dict[str, Any] = {"execute": execute}
        if scope:
            body["topics"] = scope
        if all_topics:
            body["all_topics"] = True
        if to_earliest and to_latest:
            raise ValueError("exactly one target: to_earliest or to_latest, not both")
        if to_earliest or to_latest:
            body["to"] = "earliest" if to_earliest else "latest"
        for key, value in (("to_offset", to_offset), ("shift_by", shift_by)):
            if value is not None:
                body[key] = value
        if to_datetime is not None:
            body["to_datetime"] = to_datetime.isoformat() if isinstance(to_datetime, datetime) else to_datetime
        if by_duration is not None:
            body["by_duration"] = _iso_duration(by_duration) if isinstance(by_duration, timedelta) else by_duration
        plan = self.client.reset_offsets(group, body)
        return {(row["topic"], row["partition"]): row["new_offset"] for row in plan["offsets"]}

    def delete_offsets(self, group: str, topic: str, partitions: Iterable[int] = ()) -> list[tuple[str, int]]:
        """OffsetDelete for one topic (all its partitions unless named); the partitions whose offsets went.
        ControlError(409) with Kafka's error (GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to it)."""
        answer = self.client.delete_offsets(group, topic, partitions)
        return [(row["topic"], row["partition"]) for row in answer["offsets"]]

    def delete_group(self, group: str) -> None:
        """DeleteGroups for one group; ControlError(409, NON_EMPTY_GROUP) while it has members, (404) if none."""
        self.client.delete_group(group)

    # -- rebalance checks -----------------------------------------------------------------------------------

    def no_rebalance(self, group: str) -> RebalanceCheck:
        """``with``/``async with``: fail if the group starts a rebalance during the block (a consumer group: if its
        epoch is bumped)."""
        return RebalanceCheck(self, group, expect=False)

    def expect_rebalance(self, group: str, cause: str | None = None, timeout: float = 5.0) -> RebalanceCheck:
        """``with``/``async with``: fail unless the group starts a rebalance (of this cause, if given) during the
        block or within ``timeout`` seconds after it. Causes: docs/events.md, ``rebalance_started`` (a consumer
        group's: ``group_epoch_bumped``)."""
        return RebalanceCheck(self, group, expect=True, cause=cause, timeout=timeout)


class Fault:
    """A fault rule on the broker. As a context manager (``with`` or ``async with``) it is deleted on exit."""

    def __init__(self, control: BrokerControl, rule: JSON) -> None:
        self._control = control
        self.id: str = rule["id"]
        self.rule = rule  # as the broker stored it

    def __repr__(self) -> str:
        return f"Fault({self.rule!r})"

    def state(self) -> JSON | None:
        """The rule as the broker has it now (``hits``, ``active``), or None once deleted."""
        return next((rule for rule in self._control.faults() if rule["id"] == self.id), None)

    def hits(self) -> int:
        current = self.state()
        return int(current["hits"]) if current is not None else 0

    def delete(self) -> bool:
        """Delete the rule; False if it was already gone (clear_faults, or deleted before)."""
        try:
            self._control.client.delete_fault(self.id)
        except ControlError as error:
            if error.status == 404:
                return False
            raise
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.delete()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.delete)


class RebalanceCheck(EventBlock):
    """The ``no_rebalance``/``expect_rebalance`` block. ``rebalances`` holds the events seen that start one:
    ``rebalance_started`` (classic groups), ``group_epoch_bumped`` (consumer groups)."""

    def __init__(
        self, control: BrokerControl, group: str, *, expect: bool, cause: str | None = None, timeout: float = 0.0
    ) -> None:
        super().__init__(control, group, timeout if expect else 0.0)
        self._expect = expect
        self._cause = cause
        self._timeout = timeout
        self.rebalances: list[JSON] = []

    def _matching(self) -> list[JSON]:
        return [r for r in self.rebalances if self._cause is None or r.get("cause") == self._cause]

    def _collect(self) -> bool:
        """Read the events since the block began; True once the outcome can no longer change."""
        self.events = self._control.events(self.group, since_seq=self._since)
        self.rebalances = [record for record in self.events if record.get("event") in REBALANCE_EVENTS]
        return bool(self._matching()) if self._expect else True

    def _verdict(self) -> None:
        seen = "; ".join(
            f"{describe_event(r)}: {r['reason']}" if r.get("reason") else describe_event(r) for r in self.rebalances
        )
        if not self._expect and self.rebalances:
            raise AssertionError(f"group {self.group!r} rebalanced during the block: {seen}")
        if self._expect and not self._matching():
            of_cause = f" with cause {self._cause!r}" if self._cause else ""
            found = f"saw only {seen}" if seen else "saw none"
            raise AssertionError(
                f"expected group {self.group!r} to start a rebalance{of_cause} during the block "
                f"(or {self._timeout:g} s after it); {found}"
            )


class AsyncControl(AsyncShare, AsyncCluster):
    """``BrokerControl``'s calls as coroutines; each runs in a worker thread while the caller's loop goes on."""

    def __init__(self, control: BrokerControl) -> None:
        AsyncShare.__init__(self, control)
        AsyncCluster.__init__(self, control)
        self.groups = threaded(control.groups)
        self.group = threaded(control.group)
        self.member_ids = threaded(control.member_ids)
        self.assignments = threaded(control.assignments)
        self.offsets = threaded(control.offsets)
        self.lag = threaded(control.lag)
        self.wait_for_assignment = threaded(control.wait_for_assignment)
        self.events = threaded(control.events)
        self.last_seq = threaded(control.last_seq)
        self.wait_for = threaded(control.wait_for)
        self.kick = threaded(control.kick)
        self.fence = threaded(control.fence)
        self.mark = threaded(control.mark)
        self.rebalance = threaded(control.rebalance)
        self.fault = threaded(control.fault)
        self.faults = threaded(control.faults)
        self.clear_faults = threaded(control.clear_faults)
        self.reset_offsets = threaded(control.reset_offsets)
        self.delete_offsets = threaded(control.delete_offsets)
        self.delete_group = threaded(control.delete_group)


def _iso_duration(duration: timedelta) -> str:
    """A ``timedelta`` as an ISO-8601 duration in seconds (``PT90.5S``), which the broker reads as Java does."""
    millis = round(duration.total_seconds() * 1000)
    sign, millis = ("-", -millis) if millis < 0 else ("", millis)
    return f"{sign}PT{millis // 1000}.{millis % 1000:03d}S"
