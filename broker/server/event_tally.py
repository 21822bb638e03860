"""The event-driven series of /metrics, counted from the broker's first event without prometheus_client.

The control API loads on its first HTTP connection (``broker/server/control_listener.py``) and prometheus_client
with it (about 5 MB of idle RSS, issue 17), but a rebalance that happens before anyone scrapes must still be
counted: this tally subscribes to the event hub when the broker's state is built, keeps plain counters and
histogram buckets, and ``broker/control/metrics.py`` renders them at scrape time. Each label set remembers when it
was first counted: prometheus_client's ``_created`` samples.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable

from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.events.hub import Record
from broker.events.names import (
    GROUP_DELETED,
    GROUP_EPOCH_BUMPED,
    MEMBER_EXPIRED,
    MEMBER_RECONCILED,
    REBALANCE_STARTED,
    REFEREE_VIOLATION,
    STATE_CHANGED,
    SYNC_COMPLETED,
    TARGET_ASSIGNMENT_COMPUTED,
    TRANSACTION_ENDINGS,
)

# A consumer group's rebalance ends when it is Stable again, or is over without one when it is Empty.
_SETTLED = frozenset({ConsumerGroupState.STABLE.value, ConsumerGroupState.EMPTY.value})
# Rebalances and evictions take from milliseconds (kicks, tests) to minutes (default timeouts).
SLOW_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0, 600.0)

Labels = tuple[str, ...]


class CountedSeries:
    """A counter family: one value per label set, each with the time it was first counted."""

    __slots__ = ("created", "values")

    def __init__(self) -> None:
        self.values: dict[Labels, float] = {}
        self.created: dict[Labels, float] = {}

    def add(self, labels: Labels, amount: float = 1) -> None:
        if labels not in self.values:
            self.values[labels] = 0
            self.created[labels] = time.time()
        self.values[labels] += amount


class HistogramSeries:
    """A histogram family over ``SLOW_BUCKETS``: per label set the count in each bucket (``le``, the last one
    +Inf), the sum of the observations and the time of the first one."""

    __slots__ = ("buckets", "created", "sums")

    def __init__(self) -> None:
        self.buckets: dict[Labels, list[int]] = {}
        self.sums: dict[Labels, float] = {}
        self.created: dict[Labels, float] = {}

    def observe(self, labels: Labels, value: float) -> None:
        counts = self.buckets.get(labels)
        if counts is None:
            counts = self.buckets[labels] = [0] * (len(SLOW_BUCKETS) + 1)
            self.sums[labels] = 0.0
            self.created[labels] = time.time()
        counts[bisect.bisect_left(SLOW_BUCKETS, value)] += 1  # the first bound >= value: Prometheus' le
        self.sums[labels] += value


class EventTally:
    """The rebalance, eviction, referee, consumer-group and transaction series, fed by ``observe``."""

    def __init__(self, subscribe: Callable[[Callable[[Record], None]], object]) -> None:
        self.rebalances = CountedSeries()  # (group, cause)
        self.rebalance_duration = HistogramSeries()  # (protocol,)
        self.eviction_delay = HistogramSeries()  # (cause,)
        self.violations = CountedSeries()  # (group, kind)
        self.events = CountedSeries()  # (event,)
        self.epoch_bumps = CountedSeries()  # (group, cause)
        self.target_assignments = CountedSeries()  # (group,)
        self.partitions_moved = CountedSeries()  # (group,)
        self.reconciliations = CountedSeries()  # (state,)
        self.transactions_ended = CountedSeries()  # (outcome,)
        for outcome in TRANSACTION_ENDINGS.values():
            self.transactions_ended.add((outcome,), 0)  # every outcome shows, at 0 until it happens
        # Per consumer group: when its first epoch bump since it was last Stable happened (events' ts_ms).
        self._unsettled_since: dict[str, int] = {}
        subscribe(self.observe)

    def observe(self, record: Record) -> None:
        name = record["event"]
        group = record["group_id"]
        self.events.add((name,))
        outcome = TRANSACTION_ENDINGS.get(name)
        if outcome is not None:
            self.transactions_ended.add((outcome,))
            return
        group_type = record.get("group_type")
        if group_type == GroupType.CONSUMER:
            self._observe_consumer(name, group, record)
        elif group_type == GroupType.SHARE:
            # A share group has no rebalances and its member_expired says which timer fired (as a consumer
            # group's does): its series are read from the share views at scrape time (control/metrics.py).
            return
        elif name == REBALANCE_STARTED:
            self.rebalances.add((group, record["cause"]))
        elif name == SYNC_COMPLETED:
            protocol = record["rebalance_protocol"] or "other"
            self.rebalance_duration.observe((protocol,), record["rebalance_ms"] / 1000)
        elif name == MEMBER_EXPIRED:
            self.eviction_delay.observe((record["cause"],), record["since_last_heartbeat_ms"] / 1000)
        elif name == REFEREE_VIOLATION:
            self.violations.add((group, record["kind"]))

    def _observe_consumer(self, name: str, group: str, record: Record) -> None:
        """A consumer group's rebalance runs from an epoch bump to the group being Stable again (docs/events.md)."""
        if name == GROUP_EPOCH_BUMPED:
            self.epoch_bumps.add((group, record["cause"]))
            self._unsettled_since.setdefault(group, record["ts_ms"])
        elif name == TARGET_ASSIGNMENT_COMPUTED:
            self.target_assignments.add((group,))
            self.partitions_moved.add((group,), len(record["moved"]))
        elif name == MEMBER_RECONCILED:
            self.reconciliations.add((record["state"],))
        elif name == STATE_CHANGED:
            started = self._unsettled_since.pop(group, None) if record["to"] in _SETTLED else None
            if started is not None and record["to"] == ConsumerGroupState.STABLE.value:
                self.rebalance_duration.observe((GroupType.CONSUMER.value,), max(record["ts_ms"] - started, 0) / 1000)
        elif name == MEMBER_EXPIRED:
            # A session runs out exactly its timeout after the last heartbeat (section 7.1); a rebalance timer
            # after the member began revoking (7.3).
            self.eviction_delay.observe((f"{record['timer']}_timeout",), record["timeout_ms"] / 1000)
        elif name == REFEREE_VIOLATION:
            self.violations.add((group, record["kind"]))
        elif name == GROUP_DELETED:
            self._unsettled_since.pop(group, None)
