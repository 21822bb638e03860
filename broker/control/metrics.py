"""Prometheus metrics for /metrics: request figures, group gauges read at scrape time, and event-driven series.

Classic groups and KIP-848 consumer groups share the group families, labelled by ``type``; a consumer group's
generation gauge is its group epoch. The consumer groups' own series (epoch bumps, target assignments, reconciliation
steps, heartbeats) come from their events (docs/events.md, version 2) and the request counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.coordinator.classic.state import GroupState
from broker.coordinator.modern.types import ConsumerGroupState
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
from broker.server.stats import LATENCY_BUCKETS
from broker.transactions.state import ONGOING
from protocol.apis import ApiKey, kafka_name

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

# A consumer group's rebalance ends when it is Stable again, or is over without one when it is Empty.
_SETTLED = frozenset({ConsumerGroupState.STABLE.value, ConsumerGroupState.EMPTY.value})
# Rebalances and evictions take from milliseconds (kicks, tests) to minutes (default timeouts).
SLOW_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0, 600.0)


class _ScrapeTime(Collector):
    """What is read from the broker when Prometheus asks."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        server = self.server
        requests = CounterMetricFamily(
            "kafka_requests", "Kafka requests answered, by API and version", labels=["api", "version"]
        )
        latency = HistogramMetricFamily(
            "kafka_request_duration_seconds",
            "Time from reading a request to writing its answer",
            labels=["api", "version"],
        )
        for (api_key, version), entry in sorted(server.request_stats.by_api.items()):
            labels = [kafka_name(api_key), str(version)]
            requests.add_metric(labels, entry.count)
            cumulative = 0
            buckets = []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), entry.buckets, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            latency.add_metric(labels, buckets, entry.total)
        yield requests
        yield latency
        heartbeats = sum(
            entry.count for (api_key, _), entry in server.request_stats.by_api.items()
            if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT
        )
        yield CounterMetricFamily(
            "group_broker_consumer_heartbeats",
            "ConsumerGroupHeartbeat requests answered (joins, heartbeats, acknowledgements and leaves)",
            value=heartbeats,
        )

        groups = server.coordinator.group_summaries()
        by_state = GaugeMetricFamily("group_broker_groups", "Groups by type and state", labels=["type", "state"])
        counts = {("classic", state.value): 0 for state in GroupState if state is not GroupState.DEAD}
        counts.update(
            {("consumer", state.value): 0 for state in ConsumerGroupState if state is not ConsumerGroupState.DEAD}
        )
        for group in groups:
            key = (group.group_type, group.state)
            if key in counts:
                counts[key] += 1
        for (group_type, state), count in counts.items():
            by_state.add_metric([group_type, state], count)
        yield by_state
        members = GaugeMetricFamily("group_broker_group_members", "Members of each group", labels=["group", "type"])
        generation = GaugeMetricFamily(
            "group_broker_group_generation",
            "Generation of each group (a consumer group's: its group epoch)",
            labels=["group", "type"],
        )
        assignment_epoch = GaugeMetricFamily(
            "group_broker_group_assignment_epoch",
            "Epoch of each consumer group's target assignment (below the group epoch while Assigning)",
            labels=["group"],
        )
        total = 0
        for group in groups:
            members.add_metric([group.group_id, group.group_type], group.member_count)
            generation.add_metric([group.group_id, group.group_type], group.generation_id)
            if group.assignment_epoch is not None:
                assignment_epoch.add_metric([group.group_id], group.assignment_epoch)
            total += group.member_count
        yield members
        yield generation
        yield assignment_epoch
        yield GaugeMetricFamily("group_broker_members", "Members of all groups", value=total)
        yield GaugeMetricFamily("group_broker_connections", "Open Kafka connections", value=len(server.connections))
        yield CounterMetricFamily(
            "group_broker_connections_accepted", "Kafka connections accepted", value=server.connections_accepted
        )
        # Transactions in flight (Ongoing or Prepare*: transactions spec section 3.2), read at scrape time.
        open_txns = sum(
            1 for meta in server.transactions.transactions.values() if meta.state is ONGOING or meta.state.preparing
        )
        yield GaugeMetricFamily(
            "group_broker_open_transactions", "Transactions in flight (Ongoing, PrepareCommit, PrepareAbort)",
            value=open_txns,
        )
        hits = CounterMetricFamily(
            "group_broker_fault_hits", "Requests a fault rule acted on", labels=["rule", "action"]
        )
        for rule in server.faults.rules.values():
            hits.add_metric([rule.id, rule.action], rule.hits)
        yield hits


class BrokerMetrics:
    """The registry a broker's /metrics serves: its own, so brokers in one process never mix their figures."""

    def __init__(self, server: BrokerServer) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_ScrapeTime(server))
        self.rebalances = Counter(
            "group_broker_rebalances",
            "Rebalances started, by group and cause",
            ["group", "cause"],
            registry=self.registry,
        )
        # Histograms carry no group label: a child per group costs kilobytes, and a broker may hold thousands of
        # groups. Counters keep theirs; group_broker_events and the event log have the per-group detail.
        self.rebalance_duration = Histogram(
            "group_broker_rebalance_duration_seconds",
            "From a rebalance's start to the group being Stable again",
            ["protocol"],
            buckets=SLOW_BUCKETS,
            registry=self.registry,
        )
        self.eviction_delay = Histogram(
            "group_broker_eviction_delay_seconds",
            "From a member's last heartbeat to its eviction (session expiry or kick)",
            ["cause"],
            buckets=SLOW_BUCKETS,
            registry=self.registry,
        )
        self.violations = Counter(
            "group_broker_referee_violations",
            "Assignment referee findings, by group and kind",
            ["group", "kind"],
            registry=self.registry,
        )
        self.events = Counter("group_broker_events", "Group events emitted, by name", ["event"], registry=self.registry)
        # KIP-848 consumer groups (docs/spec/consumer-groups.md): what a classic group's rebalance counters say.
        self.epoch_bumps = Counter(
            "group_broker_epoch_bumps",
            "Consumer group epoch bumps, by group and cause",
            ["group", "cause"],
            registry=self.registry,
        )
        self.target_assignments = Counter(
            "group_broker_target_assignments",
            "Target assignments computed for consumer groups, by group",
            ["group"],
            registry=self.registry,
        )
        self.partitions_moved = Counter(
            "group_broker_partitions_moved",
            "Partitions given another owner by a consumer group's new target assignment, by group",
            ["group"],
            registry=self.registry,
        )
        self.reconciliations = Counter(
            "group_broker_reconciliations",
            "Consumer group members moved a step toward their target, by the state they are in after it",
            ["state"],
            registry=self.registry,
        )
        self.transactions_ended = Counter(
            "group_broker_transactions_ended",
            "Transactions ended, by outcome: committed, aborted (by the client), timed_out, fenced (docs/events.md)",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in TRANSACTION_ENDINGS.values():
            self.transactions_ended.labels(outcome)  # every outcome shows, at 0 until it happens
        # Per consumer group: when its first epoch bump since it was last Stable happened (events' ts_ms).
        self._unsettled_since: dict[str, int] = {}
        server.events.subscribe(self.observe)

    def observe(self, record: Record) -> None:
        name = record["event"]
        group = record["group_id"]
        self.events.labels(name).inc()
        outcome = TRANSACTION_ENDINGS.get(name)
        if outcome is not None:
            self.transactions_ended.labels(outcome).inc()
            return
        if record.get("group_type") == "consumer":
            self._observe_consumer(name, group, record)
        elif name == REBALANCE_STARTED:
            self.rebalances.labels(group, record["cause"]).inc()
        elif name == SYNC_COMPLETED:
            protocol = record["rebalance_protocol"] or "other"
            self.rebalance_duration.labels(protocol).observe(record["rebalance_ms"] / 1000)
        elif name == MEMBER_EXPIRED:
            self.eviction_delay.labels(record["cause"]).observe(record["since_last_heartbeat_ms"] / 1000)
        elif name == REFEREE_VIOLATION:
            self.violations.labels(group, record["kind"]).inc()

    def _observe_consumer(self, name: str, group: str, record: Record) -> None:
        """A consumer group's rebalance runs from an epoch bump to the group being Stable again (docs/events.md)."""
        if name == GROUP_EPOCH_BUMPED:
            self.epoch_bumps.labels(group, record["cause"]).inc()
            self._unsettled_since.setdefault(group, record["ts_ms"])
        elif name == TARGET_ASSIGNMENT_COMPUTED:
            self.target_assignments.labels(group).inc()
            self.partitions_moved.labels(group).inc(len(record["moved"]))
        elif name == MEMBER_RECONCILED:
            self.reconciliations.labels(record["state"]).inc()
        elif name == STATE_CHANGED:
            started = self._unsettled_since.pop(group, None) if record["to"] in _SETTLED else None
            if started is not None and record["to"] == ConsumerGroupState.STABLE.value:
                self.rebalance_duration.labels("consumer").observe(max(record["ts_ms"] - started, 0) / 1000)
        elif name == MEMBER_EXPIRED:
            # A session runs out exactly its timeout after the last heartbeat (section 7.1); a rebalance timer
            # after the member began revoking (7.3).
            self.eviction_delay.labels(f"{record['timer']}_timeout").observe(record["timeout_ms"] / 1000)
        elif name == REFEREE_VIOLATION:
            self.violations.labels(group, record["kind"]).inc()
        elif name == GROUP_DELETED:
            self._unsettled_since.pop(group, None)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
