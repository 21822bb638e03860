"""The broker: its state, its listeners, and the loop timer that drives the purgatory.

``BrokerServer`` builds the shared state (coordinator, topics, purgatory, events, fault rules), listens on each of
Kafka's listeners (an ``Acceptor`` each, under the broker-wide connection quotas: broker/server/acceptor.py and
quotas.py), and stops as Kafka unloads: parked requests answered, then connections closed. Each accepted
connection is a ``Connection`` (broker/server/connection.py), which reads and answers its requests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import itertools
from typing import Any

import structlog

from broker.api.base import ApiContext, BrokerIdentity
from broker.config.settings import Endpoint, Settings
from broker.coordinator.coordinator import GroupCoordinator
from broker.events.hub import EventFile, EventHub
from broker.server.acceptor import Acceptor, bind
from broker.server.catalog import RegistryCatalog
from broker.server.connection import Connection
from broker.server.faults import FaultRules
from broker.server.quotas import ConnectionQuotas, Slot
from broker.server.stats import RequestStats
from broker.storage.control import Marker, MarkerType
from broker.storage.delayed_fetch import DelayedFetches
from broker.storage.partition_log import StorageBudget
from broker.storage.records import InvalidBatch
from broker.storage.topics import Topic, TopicRegistry
from broker.timing.clock import Clock, SystemClock
from broker.timing.keys import LOG_RETENTION
from broker.timing.purgatory import Purgatory
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.messages import Completion

log = structlog.get_logger("server")


class LoopTimer:
    """Drives a Purgatory from the event loop: one loop timer, at the earliest deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock, purgatory: Purgatory) -> None:
        self._loop = loop
        self._clock = clock
        self._purgatory = purgatory
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = 0
        purgatory.set_wakeup(self.arm)
        first = purgatory.next_deadline()
        if first is not None:
            self.arm(first)

    def arm(self, deadline_ms: int) -> None:
        if self._handle is not None:
            if self._armed_for <= deadline_ms:
                return
            self._handle.cancel()
        # +1 ms: the loop's clock may wake a hair early, and an early wake would find nothing due.
        delay = max(deadline_ms - self._clock.now_ms() + 1, 0) / 1000
        self._armed_for = deadline_ms
        self._handle = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        try:
            self._purgatory.run_due()
        except Exception:
            log.exception("timer action failed")
        upcoming = self._purgatory.next_deadline()
        if upcoming is not None:
            self.arm(upcoming)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class Listener:
    """One of Kafka's listeners: a name, the port it bound, and the API context that advertises its address."""

    __slots__ = ("api", "name", "port")

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        self.api: ApiContext


class BrokerServer:
    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.purgatory = Purgatory(self.clock)
        self.events = EventHub(
            self.clock,
            ring_size=settings.event_buffer_size,
            buffer_total=settings.event_buffer_total,
            debug=settings.log_level == "debug",
            file=EventFile(settings.event_log, settings.event_log_max_bytes, settings.event_log_backups)
            if settings.event_log
            else None,
        )
        self.topics = TopicRegistry(
            auto_create=settings.auto_create_topics,
            default_partitions=settings.num_partitions,
            defaults=settings.log,
            budget=StorageBudget(settings.storage_max_bytes),
            max_partitions_per_request=settings.max_partitions_per_request,
            max_partitions_per_topic=settings.max_partitions_per_topic,
        )
        for name, partitions in settings.topics:
            self.topics.create(name, partitions)
        self.coordinator = GroupCoordinator(
            settings.group,
            self.clock,
            self.purgatory,
            events=self.events,
            partition_count=self._partition_count,
            topics=RegistryCatalog(self.topics),  # consumer groups see topics by id (consumer-groups.md 3.6)
        )
        self.faults = FaultRules(self.clock)
        self.request_stats = RequestStats()
        self.connections_accepted = 0
        self.topics.on_delete(self._topic_deleted)
        self.fetches = DelayedFetches(self.purgatory)
        # One producer id allocator for idempotent and transactional producers (transactions spec section 3.4).
        self.producer_ids = itertools.count()
        self.transactions = TransactionCoordinator(
            self.clock,
            self.purgatory,
            self._partition_exists,
            self._complete_transaction,
            settings.txn,
            next_producer_id=self.producer_ids.__next__,
            events=self.events,  # transaction events share the groups' hub (docs/events.md, "Transactions")
        )
        self._schedule_retention()
        self.connections: set[Connection] = set()
        self.quotas = ConnectionQuotas(
            settings.max_connections, settings.max_connections_per_ip, settings.max_connections_per_ip_overrides
        )
        self._servers: list[Acceptor] = []  # one per listener
        self.listeners: list[Listener] = []
        self._timer: LoopTimer | None = None
        self.api: ApiContext
        self.port = 0
        self.ready = False
        self.control: Any = None  # the control API's site, when it runs

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = LoopTimer(loop, self.clock, self.purgatory)
        self.transactions.start()  # the timeout and id-expiration scans (transactions spec section 3.9)
        try:
            for endpoint in self.settings.bind_endpoints():
                await self._listen(endpoint)
        except OSError:
            await self._close_listeners()
            raise
        self.port, self.api = self.listeners[0].port, self.listeners[0].api
        self.ready = True
        if self.settings.admin_port >= 0:
            # aiohttp takes ~200 ms to import: a worker thread does it while this loop already answers Kafka.
            control = await loop.run_in_executor(None, importlib.import_module, "broker.control.app")
            self.control = control.ControlApi(self)
            try:
                await self.control.start(self.settings.admin_host, self.settings.admin_port)
            except OSError:
                await self._close_listeners()
                self.control = None
                raise

    async def _listen(self, endpoint: Endpoint) -> None:
        listener = Listener(endpoint.name)
        # Kafka's "PLAINTEXT://:9092" (an empty host) listens on every interface.
        acceptor = Acceptor(endpoint.name, await bind(endpoint.host, endpoint.port), self.quotas)
        self._servers.append(acceptor)
        listener.port = acceptor.port
        advertised_host, advertised_port = self.settings.advertised_for(endpoint, listener.port)
        identity = BrokerIdentity(self.settings.node_id, advertised_host, advertised_port, self.settings.cluster_id)
        # Listeners share all state (producer ids included); only the address they hand out differs.
        listener.api = (
            dataclasses.replace(self.listeners[0].api, identity=identity)
            if self.listeners
            else ApiContext(
                self.coordinator,
                self.topics,
                identity,
                self.fetches,
                producer_ids=self.producer_ids,
                settings=self.settings,
                transactions=self.transactions,
            )
        )
        self.listeners.append(listener)

        def connection(slot: Slot) -> Connection:
            return Connection(self, listener.api, slot)

        acceptor.start(connection)
        log.info(
            "broker listening",
            listener=endpoint.name,
            host=endpoint.host,
            port=listener.port,
            advertised=f"{advertised_host}:{advertised_port}",
            node_id=self.settings.node_id,
            cluster_id=self.settings.cluster_id,
            initial_rebalance_delay_ms=self.settings.group.initial_rebalance_delay_ms,
        )

    async def _close_listeners(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()

    def _partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return topic.partitions if topic is not None else None

    def _partition_exists(self, name: str, partition: int) -> bool:
        topic = self.topics.get(name)
        return topic is not None and topic.log(partition) is not None

    def _complete_transaction(self, completion: Completion) -> None:
        """Transactions spec section 3.8 step 2: each data partition's control batch, then the groups' pending
        offsets (section 5.3), as Kafka's WriteTxnMarkers does on the partition leaders and the group coordinator."""
        now = self.clock.now_ms()
        for marker in completion.markers:
            topic = self.topics.get(marker.topic)
            partition_log = topic.log(marker.partition) if topic is not None else None
            if partition_log is None:
                continue  # deleted since it joined the transaction: Kafka drops its marker too
            kind = MarkerType.COMMIT if marker.committed else MarkerType.ABORT
            try:
                partition_log.append_marker(
                    Marker(kind, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch), now
                )
            except InvalidBatch as error:
                # A stale marker (section 4.2): Kafka's marker writer logs it and moves on.
                log.warning(
                    "transaction marker refused",
                    topic=marker.topic,
                    partition=marker.partition,
                    producer_id=marker.producer_id,
                    error=error.error.name,
                    reason=str(error),
                )
                continue
            self.fetches.appended(partition_log)  # a parked read_committed fetch may now see past the LSO
        # The groups' pending offsets (section 5.3): on one node a call, not a marker in __consumer_offsets.
        self.coordinator.complete_transaction(completion.producer_id, completion.groups, completion.committed)

    def _topic_deleted(self, topic: Topic) -> None:
        self.coordinator.on_topic_deleted(topic.name)
        log.info("topic deleted", topic=topic.name, topic_id=str(topic.topic_id))

    def _schedule_retention(self) -> None:
        self.purgatory.schedule(LOG_RETENTION, self.settings.log_retention_check_interval_ms, self._retention)

    def _retention(self) -> None:
        dropped = self.topics.enforce_retention(self.clock.now_ms())
        if dropped:
            log.info("log retention", batches_deleted=dropped, stored_bytes=self.topics.budget.used)
        self._schedule_retention()

    async def stop(self) -> None:
        """Stop listening, answer every parked request as Kafka does on unload, then hang up."""
        self.ready = False
        for server in self._servers:
            server.close()
        self.coordinator.shutdown()
        self.transactions.stop()
        if self._timer is not None:
            self._timer.stop()
        await asyncio.sleep(0)  # let the answers just written reach the transports
        for connection in list(self.connections):
            connection.hang_up()
        for server in self._servers:
            await server.wait_closed()
        if self.control is not None:
            await self.control.stop()
        self.events.close()
        log.info("broker stopped")
