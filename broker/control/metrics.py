"""Prometheus metrics for /metrics: request figures, group gauges read at scrape time, and event-driven series.

Classic groups and KIP-848 consumer groups share the group families, labelled by ``type``; a consumer group's
generation gauge is its group epoch. The consumer groups' own series (epoch bumps, target assignments, reconciliation
steps, heartbeats) come from their events (docs/events.md, version 2) and the request counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from broker.control.lag import group_offsets, total_lag
from broker.coordinator.classic.state import GroupState
from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.share.state import ShareGroupState
from broker.server.event_tally import SLOW_BUCKETS, CountedSeries, HistogramSeries
from broker.server.stats import LATENCY_BUCKETS
from broker.transactions.state import ONGOING
from protocol.apis import ApiKey, kafka_name

if TYPE_CHECKING:
    from broker.coordinator.views import GroupSummary
    from broker.server.broker import BrokerServer


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
        counts = {(GroupType.CLASSIC.value, state.value): 0 for state in GroupState if state is not GroupState.DEAD}
        counts.update(
            {
                (GroupType.CONSUMER.value, state.value): 0
                for state in ConsumerGroupState
                if state is not ConsumerGroupState.DEAD
            }
        )
        counts.update(
            {(GroupType.SHARE.value, state.value): 0 for state in ShareGroupState if state is not ShareGroupState.DEAD}
        )
        for group in groups:
            key = (group.group_type.value, group.state)
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
        yield from _lag_families(server, groups)
        yield from _share_families(server, groups)


def _lag_families(server: BrokerServer, groups: tuple[GroupSummary, ...]) -> Iterator[Metric]:
    """Committed offsets and lag per group and partition, and each group's total (kafka-exporter / Burrow style),
    computed now from the coordinator's offsets view (``broker/coordinator/lag.py``); a partition without a
    committed offset or a log end offset has no lag sample, as Kafka's tool prints "-"."""
    labels = ["group", "topic", "partition"]
    lag = GaugeMetricFamily(
        "group_broker_consumer_group_lag", "Log end offset minus committed offset, per partition", labels=labels
    )
    committed = GaugeMetricFamily(
        "group_broker_consumer_group_committed_offset", "The group's committed offset, per partition", labels=labels
    )
    lag_sum = GaugeMetricFamily(
        "group_broker_consumer_group_lag_sum", "The sum of a group's known partition lags", labels=["group"]
    )
    for group in groups:
        rows = group_offsets(server, group.group_id) or ()
        for row in rows:
            key = [group.group_id, row.topic, str(row.partition)]
            if row.committed_offset is not None:
                committed.add_metric(key, row.committed_offset)
            if row.lag is not None:
                lag.add_metric(key, row.lag)
        lag_sum.add_metric([group.group_id], total_lag(rows))
    yield lag
    yield committed
    yield lag_sum


def _share_families(server: BrokerServer, groups: tuple[GroupSummary, ...]) -> Iterator[Metric]:
    """KIP-932 share-partitions, read now from the share coordinator (``coordinator/modern/share/views.py``): the
    SPSO and SPEO, the in-flight records by state, and the deliveries, redeliveries and archived records since the
    share-partition was created (or loaded from a data directory: the totals are not journalled)."""
    from broker.control.share_api import partitions_of

    labels = ["group", "topic", "partition"]
    start = GaugeMetricFamily("group_broker_share_start_offset", "Share-partition start offset (SPSO)", labels=labels)
    end = GaugeMetricFamily("group_broker_share_end_offset", "Share-partition end offset (SPEO)", labels=labels)
    in_flight = GaugeMetricFamily(
        "group_broker_share_records_in_flight",
        "In-flight records (SPSO to SPEO) by state: available, acquired, acknowledged, archived",
        labels=[*labels, "state"],
    )
    delivered = CounterMetricFamily(
        "group_broker_share_deliveries", "Records delivered (first deliveries and redeliveries)", labels=labels
    )
    redelivered = CounterMetricFamily(
        "group_broker_share_redeliveries", "Records delivered again after a release or lock expiry", labels=labels
    )
    archived = CounterMetricFamily(
        "group_broker_share_archived",
        "Records archived (rejected, at the delivery-count limit, or never deliverable)",
        labels=labels,
    )
    for group in groups:
        if group.group_type is not GroupType.SHARE:
            continue
        for view in partitions_of(server, group.group_id):
            key = [group.group_id, view.topic, str(view.partition)]
            start.add_metric(key, view.start_offset)
            end.add_metric(key, view.end_offset)
            for state in ("available", "acquired", "acknowledged", "archived"):
                in_flight.add_metric([*key, state], getattr(view, state))
            delivered.add_metric(key, view.delivered_total)
            redelivered.add_metric(key, view.redelivered_total)
            archived.add_metric(key, view.archived_total)
    yield from (start, end, in_flight, delivered, redelivered, archived)


class _Tallied(Collector):
    """The event-driven series, counted by the broker's ``EventTally`` since its first event."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        tally = self.server.tally
        yield _counter("group_broker_rebalances", "Rebalances started, by group and cause", ["group", "cause"],
                       tally.rebalances)
        # Histograms carry no group label: a child per group costs kilobytes, and a broker may hold thousands of
        # groups. Counters keep theirs; group_broker_events and the event log have the per-group detail.
        yield _histogram("group_broker_rebalance_duration_seconds",
                         "From a rebalance's start to the group being Stable again", ["protocol"],
                         tally.rebalance_duration)
        yield _histogram("group_broker_eviction_delay_seconds",
                         "From a member's last heartbeat to its eviction (session expiry or kick)", ["cause"],
                         tally.eviction_delay)
        yield _counter("group_broker_referee_violations", "Assignment referee findings, by group and kind",
                       ["group", "kind"], tally.violations)
        yield _counter("group_broker_events", "Group events emitted, by name", ["event"], tally.events)
        # KIP-848 consumer groups (docs/spec/consumer-groups.md): what a classic group's rebalance counters say.
        yield _counter("group_broker_epoch_bumps", "Consumer group epoch bumps, by group and cause",
                       ["group", "cause"], tally.epoch_bumps)
        yield _counter("group_broker_target_assignments", "Target assignments computed for consumer groups, by group",
                       ["group"], tally.target_assignments)
        yield _counter("group_broker_partitions_moved",
                       "Partitions given another owner by a consumer group's new target assignment, by group",
                       ["group"], tally.partitions_moved)
        yield _counter("group_broker_reconciliations",
                       "Consumer group members moved a step toward their target, by the state they are in after it",
                       ["state"], tally.reconciliations)
        yield _counter("group_broker_transactions_ended",
                       "Transactions ended, by outcome: committed, aborted (by the client), timed_out, fenced "
                       "(docs/events.md)", ["outcome"], tally.transactions_ended)


def _counter(name: str, documentation: str, labels: list[str], series: CountedSeries) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for key, value in series.values.items():
        family.add_metric(list(key), value, created=series.created[key])
    return family


def _histogram(name: str, documentation: str, labels: list[str], series: HistogramSeries) -> Metric:
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for key, counts in series.buckets.items():
        cumulative = 0
        buckets = []
        for bound, count in zip((*SLOW_BUCKETS, float("inf")), counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        family.add_metric(list(key), buckets, series.sums[key])
        # What prometheus_client's own Histogram adds to each child: when it was first observed.
        family.samples.append(Sample(f"{name}_created", dict(zip(labels, key, strict=True)), series.created[key]))
    return family


class BrokerMetrics:
    """The registry a broker's /metrics serves: its own, so brokers in one process never mix their figures."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, server: BrokerServer) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_ScrapeTime(server))
        self.registry.register(_Tallied(server))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
