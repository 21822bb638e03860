"""The broker: its state, its listeners, and the loop timer that drives the purgatory.

``BrokerServer`` builds the shared state (coordinator, topics, purgatory, events, fault rules), listens on each of
Kafka's listeners (an ``Acceptor`` each, under the broker-wide connection quotas: broker/server/acceptor.py and
quotas.py), and stops as Kafka unloads: parked requests answered, then connections closed. Each accepted
connection is a ``Connection`` (broker/server/connection.py), whose ``RequestPipeline`` (pipeline.py) answers its
requests; a connection sees the broker through ``ConnectionHost`` (host.py), never this class.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import importlib
import sys
import threading
from typing import TYPE_CHECKING, Any, cast

from broker.api.base import ApiContext, BrokerIdentity
from broker.api.dispatch import FAMILY_MODULES, HANDLERS
from broker.config.settings import Endpoint, Settings
from broker.events.hub import EventFile, EventHub
from broker.log import get_logger
from broker.log import set_up as set_up_logging
from broker.server.acceptor import Acceptor, bind
from broker.server.connection import Connection
from broker.server.control_listener import ControlListener
from broker.server.faults import FaultRules
from broker.server.gates import FaultGate, Gate
from broker.server.listener import Listener, Pending, log_of
from broker.server.loop_timer import LoopTimer
from broker.server.quotas import ConnectionQuotas, Slot
from broker.server.settings import uses_tls
from broker.server.stats import RequestStats
from broker.timing.clock import Clock, SystemClock
from broker.timing.keys import DATA_DIR_FSYNC, LOG_RETENTION, MALLOC_TRIM
from broker.timing.purgatory import Purgatory
from broker.transactions.producer_ids import ProducerIds

if TYPE_CHECKING:

    from broker.cluster.layout import Moved
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.security.authorizer import Authorizer
    from broker.security.tls import TlsListeners
    from broker.server.durable import DurableState
    from broker.server.event_tally import EventTally
    from broker.server.host import OpenConnection
    from broker.server.nodes import NodeSet
    from broker.server.security import BrokerSecurity
    from broker.storage.delayed_fetch import DelayedFetches
    from broker.storage.topics import Topic, TopicRegistry
    from broker.transactions.coordinator import TransactionCoordinator
    from broker.transactions.messages import Completion

# The modules of the broker's state that the listener does not need for its first answer (issue 17): a broker
# started with ``load_in_background`` imports them in a worker thread while its loop already answers ApiVersions.
# The handler modules come along, so that a family's first request does not import on the loop.
STATE_MODULES = (
    "broker.coordinator.coordinator",
    "broker.server.catalog",
    "broker.server.event_tally",
    "broker.storage.control",
    "broker.storage.delayed_fetch",
    "broker.storage.partition_log",
    "broker.storage.topics",
    "broker.transactions.coordinator",
    *sorted(FAMILY_MODULES),
)
# While that thread imports, the loop gets the GIL back every millisecond instead of every 5 (Python's default
# switch interval): the first ApiVersions answer takes a few hand-overs of the GIL.
_LOADING_SWITCH_INTERVAL = 0.001

log = get_logger("server")  # structlog, imported at the first call (broker/log.py)

_TRIM_AFTER_CLOSES = 1_000  # connections closed since the last trim that make a burst (``connection_closed``)
_TRIM_DELAY_MS = 1_000  # the trim waits this long after the burst's last counted close, for the rest of it


class BrokerServer:
    """The broker. ``load_in_background`` (``group-broker serve``) listens and answers ApiVersions before the
    group coordinator, the topics and the transaction coordinator are imported (issue 17: the first answer within
    150 ms); ``ready`` (``/readyz``) turns true once they are. Without it (tests, the embedded broker) the whole
    state is built here."""

    def __init__(self, settings: Settings, clock: Clock | None = None, *, load_in_background: bool = False) -> None:
        # The data directory (issue 27) is opened first: a locked, foreign or unreadable one refuses the start
        # before anything binds (broker/server/durable.py), and a stored cluster id is the broker's.
        self.durable: DurableState | None = None
        if settings.data_dir:
            from broker.server.durable import DurableState

            self.durable = DurableState(settings)
            settings = dataclasses.replace(settings, cluster_id=self.durable.cluster_id)
        self.settings = settings
        self.load_report: dict[str, int | float] = {}  # what the data directory held (broker_started)
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
        self.faults = FaultRules(self.clock, self.events)
        # Consulted once per request, before any path answers it (broker/server/gates.py); authentication next.
        self.gates: tuple[Gate, ...] = (FaultGate(self.faults, self._has_member),)
        self.authorizer: Authorizer | None = None  # the ACLs' (issue 30); None when off: no request pays for it
        if settings.acls.enabled:
            from broker.server.acl_gate import AuthorizationGate, authorizer_for

            self.authorizer = authorizer_for(settings, self.events, self.clock.now_ms)
            self.gates = (*self.gates, AuthorizationGate(self.authorizer))
        self.request_stats = RequestStats()
        self.connections_accepted = 0
        self._closed_since_trim = 0
        # One producer id allocator for idempotent and transactional producers (transactions spec section 3.4).
        self.producer_ids = ProducerIds()  # durable in blocks with a data directory (issue 27)
        self.connections: set[OpenConnection] = set()
        self.quotas = ConnectionQuotas(
            settings.max_connections, settings.max_connections_per_ip, settings.max_connections_per_ip_overrides
        )
        self._servers: list[Acceptor] = []  # one per listener
        # What the SSL and SASL_SSL listeners share (issue 30), made before anything binds: a certificate that cannot
        # be read or made refuses the start. cryptography and ssl load only when a listener speaks TLS.
        self.tls: TlsListeners | None = None
        if any(uses_tls(settings.security_protocol(e)) for e in settings.bind_endpoints()):
            from broker.security.tls import server_context

            self.tls = server_context(settings.tls, settings.tls_advertised_hosts())
        # The nodes (issue 29), made on first use: a one-node broker loads none of broker/cluster/ to answer.
        self._nodes: NodeSet | None = None
        # Every node's advertised address, by listener name (each node's Metadata lists the others on its own).
        self.node_endpoints: dict[str, dict[int, tuple[str, int]]] = {}
        self.listeners: list[Listener] = []
        self._listening: list[dict[str, Any]] = []  # each listener's "broker listening" line, logged once up
        self._timer: LoopTimer | None = None
        self.api: ApiContext
        self.port = 0
        self.ready = False  # /readyz: every API answered (the state is built), until stop begins
        self.stopping = False
        self.control: ControlListener | None = None  # the control API, when it runs
        self._loaded = False
        self._loader: threading.Thread | None = None
        self._load_error: BaseException | None = None
        self.coordinator: GroupCoordinator
        self.topics: TopicRegistry
        self.fetches: DelayedFetches
        self.transactions: TransactionCoordinator
        self.tally: EventTally
        if load_in_background:
            self.coordinator = cast("GroupCoordinator", Pending(self, "coordinator"))
            self.topics = cast("TopicRegistry", Pending(self, "topics"))
            self.fetches = cast("DelayedFetches", Pending(self, "fetches"))
            self.transactions = cast("TransactionCoordinator", Pending(self, "transactions"))
            self.tally = cast("EventTally", Pending(self, "tally"))
        else:
            self._build_state()

    def _build_state(self) -> None:
        """The group coordinator, the topics, delayed fetches and the transaction coordinator (imported here: under
        ``serve`` a worker thread has imported them already)."""
        from broker.changes import NULL_CHANGES
        from broker.coordinator.coordinator import GroupCoordinator
        from broker.server.catalog import RegistryCatalog
        from broker.server.event_tally import EventTally
        from broker.storage.delayed_fetch import DelayedFetches
        from broker.storage.partition_log import StorageBudget
        from broker.storage.topics import TopicRegistry
        from broker.transactions.coordinator import TransactionCoordinator

        settings = self.settings
        durable = self.durable
        changes = durable.changes if durable is not None else NULL_CHANGES
        self.producer_ids.changes = changes
        self.tally = EventTally(self.events.subscribe)  # /metrics' event series, counted from the first event
        topics = TopicRegistry(
            auto_create=settings.auto_create_topics,
            default_partitions=settings.num_partitions,
            defaults=settings.log,
            budget=StorageBudget(settings.storage_max_bytes),
            max_partitions_per_request=settings.max_partitions_per_request,
            max_partitions_per_topic=settings.max_partitions_per_topic,
        )
        self.topics = topics
        self.coordinator = GroupCoordinator(
            settings.group,
            self.clock,
            self.purgatory,
            events=self.events,
            partition_count=self._partition_count,
            topics=RegistryCatalog(topics),  # consumer groups see topics by id (consumer-groups.md 3.6)
            changes=changes,
        )
        topics.on_delete(self._topic_deleted)
        self.fetches = DelayedFetches(self.purgatory)
        # Share groups read the partition logs and wake their parked ShareFetches on new data (KIP-932).
        share = self.coordinator.share
        share.wire_logs(lambda topic_id, partition: log_of(topics, topic_id, partition))
        self.fetches.listeners.append(share.data_appended)
        self.transactions = TransactionCoordinator(
            self.clock,
            self.purgatory,
            self._partition_exists,
            self._complete_transaction,
            settings.txn,
            next_producer_id=self.producer_ids.__next__,
            events=self.events,  # transaction events share the groups' hub (docs/events.md, "Transactions")
            changes=changes,
        )
        if durable is not None:
            self.load_report = durable.load(topics, self.coordinator, self.transactions, self.producer_ids)
        for name, partitions in settings.topics:  # --topic: made once, kept by a data directory
            if topics.get(name) is None:
                topics.create(name, partitions)
        self._schedule_retention()
        if settings.cluster.nodes > 1:  # issue 29: a coordinator move unloads and loads its groups
            self.nodes.on_coordinators_moved = self.nodes.groups_moved_by(self.coordinator)
            self.nodes.on_leaders_moved = self._leaders_moved
            if durable is not None:  # the logs loaded: each leader appends in the epoch the layout restored
                self.nodes.layout.stamp_restored()
        for listener in self.listeners:  # contexts made while the state was pending
            listener.api.coordinator = self.coordinator
            listener.api.topics = topics
            listener.api.fetches = self.fetches
            listener.api.transactions = self.transactions
        self._loaded = True

    def finish_loading(self) -> None:
        """Build the state now if it is still pending: wait for the worker thread's imports (never import on two
        threads at once), then build it. A no-op once built."""
        if self._loaded:
            return
        if self._loader is not None:
            self._loader.join()
            self._loader = None
            if HANDLERS.before_load == self.finish_loading:
                HANDLERS.before_load = None
            if self._load_error is not None:
                raise self._load_error
        self._build_state()

    async def _load_in_background(self, loop: asyncio.AbstractEventLoop) -> None:
        imported: asyncio.Future[None] = loop.create_future()

        def done() -> None:
            if not imported.done():
                imported.set_result(None)

        def work() -> None:
            try:
                set_up_logging()  # structlog, loaded and configured here rather than before the first answer
                for name in STATE_MODULES:
                    importlib.import_module(name)
            except BaseException as error:  # re-raised on the loop by finish_loading
                self._load_error = error
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                    loop.call_soon_threadsafe(done)

        # A request that needs a handler module meanwhile waits for this thread first (broker/api/dispatch.py).
        HANDLERS.before_load = self.finish_loading
        self._loader = threading.Thread(target=work, name="group-broker-load", daemon=True)
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(_LOADING_SWITCH_INTERVAL)
        try:
            self._loader.start()
            await imported
        finally:
            sys.setswitchinterval(switch_interval)
        self.finish_loading()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = LoopTimer(loop, self.clock, self.purgatory)
        if self.settings.admin_port >= 0:
            # Bound before the Kafka port, so a script that waited for that one finds it too, and so that each
            # listener's DescribeConfigs advertises its URL from the first request (issue 18); aiohttp loads at its
            # first connection, and a taken default port gives way to a free one (broker/server/control_listener.py).
            control = ControlListener(self)
            await control.start(
                self.settings.admin_host, self.settings.admin_port, movable=self.settings.admin_port_movable()
            )
            self.control = control
        try:
            for index in range(self.settings.cluster.nodes):
                for endpoint in self.settings.bind_endpoints():
                    await self._listen(endpoint, index)
        except OSError:
            await self._close_listeners()
            raise
        self.port, self.api = self.listeners[0].port, self.listeners[0].api
        if not self._loaded:
            try:
                await self._load_in_background(loop)
            except BaseException:
                await self._close_listeners()
                raise
        self.transactions.start()  # the timeout and id-expiration scans (transactions spec section 3.9)
        if self.durable is not None and self.settings.fsync == "interval":
            self._schedule_fsync()
        self.ready = True
        self._announce_start()
        for fields in self._listening:
            log.info("broker listening", **fields)
        for endpoint in self.settings.unmapped_listeners():  # docs/spec/security.md 14.6 item 1
            log.warning(
                "listener has no security protocol, served as PLAINTEXT", listener=endpoint.name,
                hint=f"Kafka refuses to start: --listener-security-protocol-map {endpoint.name}:PLAINTEXT says so",
            )  # fmt: skip
        if self.tls is not None:
            self.tls.announce()
        # What --topic made, with its partition count: a bare `--topic orders` makes one (issue 18).
        log.info(
            "topics created", topics={topic.name: topic.partitions for topic in self.topics.all()},
            auto_create=self.settings.auto_create_topics, auto_create_partitions=self.settings.num_partitions,
        )
        if self.control is not None:
            self.control.announce()

    async def _listen(self, endpoint: Endpoint, index: int = 0) -> None:
        """One listener of node ``index`` (server/nodes.py: its port is the listener's + index)."""
        listener = Listener(endpoint.name)
        node_id = self.settings.node_id + index
        # Kafka's "PLAINTEXT://:9092" (an empty host) listens on every interface.
        port = endpoint.port + index if endpoint.port else 0  # node i: the listener's port + i (server/nodes.py)
        protocol = self.settings.security_protocol(endpoint)
        tls = self.tls.context if self.tls is not None and uses_tls(protocol) else None
        # An SSL connection's principal comes from the client's certificate; SASL_SSL's from SASL (spec section 1).
        ssl_principal = tls is not None and protocol == "SSL"
        principal_of = self.tls.principal_of if self.tls is not None and ssl_principal else None
        acceptor = Acceptor(endpoint.name, await bind(endpoint.host, port), self.quotas, tls)
        self._servers.append(acceptor)
        listener.port = acceptor.port
        # Node i's own advertised listener, or the advertised port + i (config/settings.py: node_advertised).
        advertised_host, advertised_port = self.settings.node_advertised(endpoint, listener.port, index)
        identity = BrokerIdentity(node_id, advertised_host, advertised_port, self.settings.cluster_id)
        endpoints = self.node_endpoints.setdefault(endpoint.name, {})
        endpoints[node_id] = (advertised_host, advertised_port)
        route = None
        if self.settings.cluster.nodes > 1:
            from broker.cluster.routing import NodeRoute

            route = NodeRoute(self.nodes.layout, node_id, self.clock.now_ms, endpoints)
        control_url = self.control.url(advertised_host) if self.control is not None else None
        # Listeners share all state (producer ids included); only the addresses they hand out differ.
        listener.api = (
            dataclasses.replace(self.listeners[0].api, identity=identity, control_url=control_url, route=route)
            if self.listeners
            else ApiContext(
                self.coordinator, self.topics, identity, self.fetches, producer_ids=self.producer_ids,
                settings=self.settings, transactions=self.transactions, control_url=control_url, route=route,
                authorizer=self.authorizer, user_store=lambda: self.security.users(),
            )
        )  # fmt: skip
        # SASL_PLAINTEXT and SASL_SSL log in with SASL (the protocol as --listener-security-protocol-map names it).
        listener.api.sasl = self.security.listener(endpoint) if protocol.startswith("SASL") else None
        self.listeners.append(listener)

        def connection(slot: Slot) -> Connection:
            return Connection(self, listener.api, slot, principal_of)

        acceptor.start(connection)
        # Said once the broker is up (start): logging is not loaded before the first answer (broker/log.py).
        self._listening.append({
            "listener": endpoint.name, "security_protocol": protocol,
            **({"sasl_mechanisms": ",".join(self.settings.sasl.enabled_mechanisms)} if listener.api.sasl else {}),
            "host": endpoint.host, "port": listener.port, "advertised": f"{advertised_host}:{advertised_port}",
            "node_id": node_id, "cluster_id": self.settings.cluster_id,
            "initial_rebalance_delay_ms": self.settings.group.initial_rebalance_delay_ms,
        })  # fmt: skip
        if route is not None:  # one of several nodes: stopping it closes this acceptor, starting it binds again

            async def listen_again() -> Acceptor:
                again = Acceptor(endpoint.name, await bind(endpoint.host, listener.port), self.quotas, tls)
                self._servers.append(again)
                again.start(connection)
                return again

            self.nodes.listens(node_id, acceptor, listen_again)

    async def _close_listeners(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        if self.control is not None:
            await self.control.stop()
            self.control = None

    @functools.cached_property
    def security(self) -> BrokerSecurity:
        """SASL users and listeners (issue 30), loaded by the first SASL listener or SCRAM credential request."""
        from broker.server.security import BrokerSecurity
        return BrokerSecurity(self.settings, self.clock, self.events)

    @property
    def nodes(self) -> NodeSet:
        """The nodes of this process and the verbs on them (server/nodes.py), with the cluster layout."""
        if self._nodes is None:
            from broker.server.nodes import LAYOUT, make_nodes

            durable = None if self.durable is None else (self.durable.changes, self.durable.stored(LAYOUT))
            self._nodes = make_nodes(
                self.settings, self.events, lambda: self.connections, self.clock.now_ms, lambda: self.topics,
                durable, self.purgatory,
            )  # fmt: skip
        return self._nodes

    def _partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return topic.partitions if topic is not None else None

    def _partition_exists(self, name: str, partition: int) -> bool:
        topic = self.topics.get(name)
        return topic is not None and topic.log(partition) is not None

    def _complete_transaction(self, completion: Completion) -> None:
        """Transactions spec section 3.8 step 2: each data partition's control batch, then the groups' pending
        offsets (section 5.3), as Kafka's WriteTxnMarkers does on the partition leaders and the group coordinator."""
        from broker.storage.control import Marker, MarkerType  # loaded with the state (STATE_MODULES)
        from broker.storage.records import InvalidBatch

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
        self.coordinator.share.topic_deleted(topic.topic_id)
        log.info("topic deleted", topic=topic.name, topic_id=str(topic.topic_id))

    def _leaders_moved(self, moves: list[Moved]) -> None:
        """Each moved partition's parked fetches answer now, at every node, as Kafka completes a partition's
        delayed fetches when it makes it leader or follower (ReplicaManager.completeDelayedFetchOrProduceRequests):
        the old leader's with FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER and the new leader."""
        for moved in moves:
            topic = self.topics.get(moved.topic)
            partition_log = topic.log(moved.partition) if topic is not None else None
            if partition_log is not None:
                self.fetches.leader_moved(partition_log)

    def _schedule_retention(self) -> None:
        self.purgatory.schedule(LOG_RETENTION, self.settings.log_retention_check_interval_ms, self._retention)

    def _retention(self) -> None:
        dropped = self.topics.enforce_retention(self.clock.now_ms())
        if dropped:
            log.info("log retention", batches_deleted=dropped, stored_bytes=self.topics.budget.used)
        self._schedule_retention()

    def _announce_start(self) -> None:
        """``broker_started`` with what the data directory held and how long loading it took; after a kill, the
        ``broker_stopped`` the killed process could not emit comes first (docs/events.md, "Broker restarts")."""
        from broker.events.names import BROKER_STARTED, BROKER_STOPPED

        durable = self.durable
        if durable is not None and not durable.clean_shutdown:
            self.events.emit(BROKER_STOPPED, "", {"clean": False, "detected_at_start": True})
        self.events.emit(
            BROKER_STARTED, "",
            {
                "data_dir": None if durable is None else str(durable.directory.path),
                "clean_shutdown": True if durable is None else durable.clean_shutdown,
                "loaded": {k: v for k, v in self.load_report.items() if k != "load_ms"},
                "load_ms": self.load_report.get("load_ms", 0),
            },
        )  # fmt: skip

    def _schedule_fsync(self) -> None:
        self.purgatory.schedule(DATA_DIR_FSYNC, self.settings.fsync_interval_ms, self._fsync)

    def _fsync(self) -> None:
        if self.durable is not None:
            self.durable.tick()
            self._schedule_fsync()

    def _has_member(self, group_id: str, member_id: str) -> bool:
        return self.coordinator.has_member(group_id, member_id)

    def connection_opened(self, connection: OpenConnection) -> None:
        self.connections.add(connection)
        self.connections_accepted += 1

    def connection_lost(self, connection: OpenConnection) -> None:
        self.connections.discard(connection)
        if self._loaded:
            self.coordinator.share.connection_closed(connection.connection_id)  # its share sessions end at once
        self.connection_closed()

    def connection_closed(self) -> None:
        """A connection went away (``connection_lost``). After a burst of them, give the heap they freed
        back to the OS (issue 17): glibc keeps freed memory for reuse, and 2,000 connections gone after forming
        100,000 members left ~3.7 MB of RSS that ``malloc_trim(0)`` returns (~10 ms). One trim per burst, a second
        after its ``_TRIM_AFTER_CLOSES``-th close, so that nothing polls (a manual clock moved by days in tests
        runs no timer for it)."""
        self._closed_since_trim += 1
        if self._closed_since_trim == _TRIM_AFTER_CLOSES:
            self.purgatory.schedule(MALLOC_TRIM, _TRIM_DELAY_MS, self._trim)

    def _trim(self) -> None:
        self._closed_since_trim = 0
        import ctypes  # here, not at start-up: most brokers never see such a burst

        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc only (not musl, not macOS)
        if trim is not None:
            trim(0)

    async def abandon(self) -> None:
        """Go as a SIGKILL would have it (the pytest plugin's ``restart()``): every connection dropped unanswered,
        nothing unloaded or announced, the data directory's files closed and its lock released without the
        clean-shutdown marker. What was written stays written; the next start on the directory is a recovery."""
        self.ready = False
        self.stopping = True
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.abort()
        if self._timer is not None:
            self._timer.stop()
        if self.durable is not None:
            self.durable.directory.abandon()
            self.durable = None
        for server in self._servers:
            await server.wait_closed()
        if self.control is not None:
            await self.control.stop()
        self.events.close()

    async def stop(self) -> None:
        """Stop listening, answer every parked request as Kafka does on unload, then hang up."""
        self.ready = False
        self.stopping = True
        for server in self._servers:
            server.close()
        from broker.events.names import BROKER_STOPPED

        self.events.emit(BROKER_STOPPED, "", {"clean": True})
        if self.durable is not None:
            # Closed before the coordinators unload: what they give up on the way out is not a change to keep.
            self.durable.close()
            self.durable = None
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
