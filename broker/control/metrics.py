"""Prometheus metrics for /metrics: request figures, group gauges read at scrape time, and event-driven series."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.coordinator.classic.state import GroupState
from broker.events.hub import Record
from broker.events.names import MEMBER_EXPIRED, REBALANCE_STARTED, REFEREE_VIOLATION, SYNC_COMPLETED
from broker.server.stats import LATENCY_BUCKETS
from protocol.apis import kafka_name

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

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

        groups = server.coordinator.group_summaries()
        by_state = GaugeMetricFamily("group_broker_groups", "Groups by state", labels=["state"])
        counts = {state.value: 0 for state in GroupState if state is not GroupState.DEAD}
        for group in groups:
            if group.state in counts:
                counts[group.state] += 1
        for state, count in counts.items():
            by_state.add_metric([state], count)
        yield by_state
        members = GaugeMetricFamily("group_broker_group_members", "Members of each group", labels=["group"])
        generation = GaugeMetricFamily("group_broker_group_generation", "Generation of each group", labels=["group"])
        total = 0
        for group in groups:
            members.add_metric([group.group_id], group.member_count)
            generation.add_metric([group.group_id], group.generation_id)
            total += group.member_count
        yield members
        yield generation
        yield GaugeMetricFamily("group_broker_members", "Members of all groups", value=total)
        yield GaugeMetricFamily("group_broker_connections", "Open Kafka connections", value=len(server.connections))
        yield CounterMetricFamily(
            "group_broker_connections_accepted", "Kafka connections accepted", value=server.connections_accepted
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
        server.events.subscribe(self.observe)

    def observe(self, record: Record) -> None:
        name = record["event"]
        group = record["group_id"]
        self.events.labels(name).inc()
        if name == REBALANCE_STARTED:
            self.rebalances.labels(group, record["cause"]).inc()
        elif name == SYNC_COMPLETED:
            protocol = record["rebalance_protocol"] or "other"
            self.rebalance_duration.labels(protocol).observe(record["rebalance_ms"] / 1000)
        elif name == MEMBER_EXPIRED:
            self.eviction_delay.labels(record["cause"]).observe(record["since_last_heartbeat_ms"] / 1000)
        elif name == REFEREE_VIOLATION:
            self.violations.labels(group, record["kind"]).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
