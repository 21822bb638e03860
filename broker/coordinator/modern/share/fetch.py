"""ShareFetch (78) and ShareAcknowledge (79) past their wire form: share sessions, piggy-backed acknowledgements,
acquisition and long polling (KafkaApis ``handleShareFetchRequest``/``handleShareAcknowledgeRequest``,
SharePartitionManager ``fetchMessages``/``acknowledge``, DelayedShareFetch; sections 7-9 of
``docs/spec/share-groups.md``).

Order, as Kafka's: the member id, the v2 renew rules, the session (a session error is the top-level ErrorCode of an
otherwise empty answer), the acknowledgements of every partition that carried them (each answered in its
AcknowledgeErrorCode, applied before fetching so that a RELEASEd record may come back in the same answer), then
acquisition over the session's partitions from a rotating start, MaxRecords for the whole request. When nothing
could be acquired and MaxWaitMs allows, the answer waits (a ``Deferred``) until one of its partitions has
acquirable records or the wait is over; the acquisition happens when it completes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.coordinator.modern.share.events import ShareEventLog
from broker.coordinator.modern.share.messages import (
    FetchedPartition,
    PartitionAcks,
    ShareAcknowledgeRequest,
    ShareAnswer,
    ShareFetchRequest,
)
from broker.coordinator.modern.share.partition import AcknowledgeType, ShareLog, validate_batches
from broker.coordinator.modern.share.partitions import SharePartitions
from broker.coordinator.modern.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, ShareSessions, next_epoch
from broker.coordinator.modern.types import TopicCatalog, TopicId
from broker.timing.deferred import Deferred
from broker.timing.keys import share_fetch_key
from broker.timing.purgatory import Purgatory

__all__ = ["LogOf", "ShareFetcher"]

E = ErrorCode
LogOf = Callable[[TopicId, int], ShareLog | None]


@dataclass(slots=True, frozen=True)
class _Resolved:
    """One requested partition: its log or why it has none."""

    topic_id: TopicId
    partition: int
    log: ShareLog | None
    error: ErrorCode


class ShareFetcher:
    def __init__(
        self,
        partitions: SharePartitions,
        sessions: ShareSessions,
        topics: TopicCatalog,
        purgatory: Purgatory,
        events: ShareEventLog,
    ) -> None:
        self.partitions = partitions
        self.sessions = sessions
        self.topics = topics
        self.purgatory = purgatory
        self.events = events
        self.log_of: LogOf = lambda topic_id, partition: None  # storage's logs, wired by the server
        self.parked: dict[int, _ParkedFetch] = {}
        self._numbers = itertools.count()
        # The partitions resolved to a log, while the catalog's version stays the same (a topic created, deleted or
        # grown changes it): every ShareFetch resolves its partitions for the acknowledgements and the acquisition.
        self._resolved: dict[tuple[TopicId, int], _Resolved] = {}
        self._resolved_version = -1

    def resolve(self, topic_id: TopicId, partition: int) -> _Resolved:
        """Section 8.2: an unknown topic id, then an unknown partition."""
        version = self.topics.version
        if version != self._resolved_version:
            self._resolved.clear()
            self._resolved_version = version
        found = self._resolved.get((topic_id, partition))
        if found is not None:
            return found
        info = self.topics.by_id(topic_id)
        if info is None:
            return _Resolved(topic_id, partition, None, E.unknown_topic_id)
        log = self.log_of(topic_id, partition) if 0 <= partition < info.partitions else None
        if log is None:
            return _Resolved(topic_id, partition, None, E.unknown_topic_or_partition)
        found = self._resolved[(topic_id, partition)] = _Resolved(topic_id, partition, log, E.none)
        return found

    # -- ShareFetch -----------------------------------------------------------------------------------------------

    def fetch(self, request: ShareFetchRequest, connection: int) -> ShareAnswer | Deferred[ShareAnswer]:
        # A top-level error is ShareFetchRequest.getErrorResponse's answer: no partitions, AcquisitionLockTimeoutMs 0.
        group_id = request.group_id or ""
        if not request.member_id:
            return ShareAnswer(E.invalid_request, "MemberId can't be empty.")
        if not group_id:
            return ShareAnswer(E.invalid_request, "GroupId can't be empty.")
        if request.renew and (
            request.max_bytes or request.min_bytes or request.max_records or request.max_wait_ms
            or any(not p.acknowledged for p in request.partitions)
        ):  # fmt: skip
            return ShareAnswer(
                E.invalid_request, "Renew acknowledgement requests must not fetch (MaxBytes, MinBytes, MaxRecords and "
                "MaxWaitMs 0, every partition acknowledged).",
            )  # fmt: skip
        member_id, epoch = request.member_id, request.session_epoch
        session = self.sessions.get(group_id, member_id)
        added: list[tuple[TopicId, int]] = []
        if epoch == INITIAL_EPOCH:
            if any(p.acknowledged for p in request.partitions):
                return ShareAnswer(E.invalid_request, "Acknowledge data present on initial epoch of share session.")
            if session is not None:
                self.sessions.remove(session)  # Kafka's newContext only removes it: its records are not released
            if self.sessions.full():
                refused = ShareAnswer(E.share_session_limit_reached, "The share session cache is full.")
                return self._idle(refused, request.max_wait_ms)
            session = self.sessions.open(group_id, member_id, connection)
            for p in request.partitions:
                session.partitions.setdefault((p.topic_id, p.partition))
            self.events.session_opened(group_id, member_id, len(session.partitions))
        else:
            if session is None:
                message = f"Share session not found for member {member_id}."
                return ShareAnswer(E.share_session_not_found, message)
            if epoch != FINAL_EPOCH and epoch != session.epoch:
                return ShareAnswer(
                    E.invalid_share_session_epoch,
                    f"The share session epoch {epoch} does not match the expected epoch {session.epoch}.",
                )
            if epoch != FINAL_EPOCH:
                for p in request.partitions:
                    if (p.topic_id, p.partition) not in session.partitions:
                        session.partitions[(p.topic_id, p.partition)] = None
                        added.append((p.topic_id, p.partition))
                for forgotten in request.forgotten:
                    session.partitions.pop(forgotten, None)
                session.epoch = next_epoch(session.epoch)
        answer = ShareAnswer(E.none, None, self.partitions.lock_duration_ms(group_id))
        shown: dict[tuple[TopicId, int], FetchedPartition] = {}
        self._acknowledge(group_id, member_id, request.partitions, request.renew, shown)
        if epoch == FINAL_EPOCH:
            self.close(session, "closed by ShareFetch with the final epoch")
            answer.partitions = list(shown.values())
            return answer
        if epoch == INITIAL_EPOCH:
            for key in session.partitions:
                shown.setdefault(key, FetchedPartition(*key))
        for key in added:
            shown.setdefault(key, FetchedPartition(*key))
        if request.renew or request.max_records <= 0 or request.max_bytes <= 0:  # processShareFetch: nothing to fetch
            answer.partitions = list(shown.values())
            return answer
        waits_for_bytes = request.max_wait_ms > 0 and not self._min_bytes_met(session, request)
        acquired = not waits_for_bytes and self._acquire(session, request, shown)
        # A failed acknowledgement does not answer early: Kafka combines its result with the (delayed) fetch's.
        if acquired or request.max_wait_ms <= 0 or not session.partitions:
            answer.partitions = list(shown.values())
            return answer
        return self._park(session, request, shown, answer, connection)

    def fetch_steady(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
        batch_size: int,
        acks: PartitionAcks | None,
        request: Callable[[], ShareFetchRequest],
        connection: int,
    ) -> ShareAnswer | Deferred[ShareAnswer] | None:
        """``fetch`` for the steady poll of a one-partition session (v1, no renew, no forgotten topics), without its
        generic request: the same steps on the one key, in the same order. None, before anything changed, unless
        the request is exactly that: a session at ``epoch`` (neither initial nor final) whose only partition is the
        one ``acks`` names (if any), MinBytes at most 1, MaxRecords and MaxBytes above 0; the caller then takes the
        full path. ``request`` builds the generic request only for a fetch that parks (``_ParkedFetch`` keeps it)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH) or min_bytes > 1 or max_records <= 0 or max_bytes <= 0:
            return None
        session = self.sessions.get(group_id, member_id)
        if session is None or epoch != session.epoch or len(session.partitions) != 1:
            return None
        (key,) = session.partitions
        if acks is not None and (acks.topic_id, acks.partition) != key:
            return None
        session.epoch = next_epoch(session.epoch)
        answer = ShareAnswer(E.none, None, self.partitions.lock_duration_ms(group_id))
        shown: dict[tuple[TopicId, int], FetchedPartition] = {}
        if acks is not None and acks.acknowledged:
            entry = shown[key] = FetchedPartition(*key)
            entry.acknowledge_error, entry.acknowledge_error_message = self.acknowledge_partition(
                group_id, member_id, acks, False
            )
        # ``_acquire`` on one key: the rotation's start is 0, the whole MaxBytes is the partition's share.
        resolved = self.resolve(*key)
        session.rotation = 1
        log = resolved.log
        anything = False
        if resolved.error is not E.none or log is None:
            shown.setdefault(key, FetchedPartition(*key)).error = resolved.error
        else:
            self.partitions.ensure((group_id, *key), log)
            ranges, batches, _ = self.partitions.acquire(
                (group_id, *key), log, member_id, max_records, batch_size, record_limit=False, max_bytes=max_bytes,
                at_least_one=True,
            )  # fmt: skip
            if ranges:
                anything = True
                entry = _entry(shown, key)
                entry.records = [batch.data for batch in batches]
                entry.acquired = ranges
        if anything or max_wait_ms <= 0:
            answer.partitions = list(shown.values())
            return answer
        return self._park(session, request(), shown, answer, connection)

    def _acknowledge(
        self,
        group_id: str,
        member_id: str,
        partitions: tuple[PartitionAcks, ...],
        renew: bool,
        shown: dict[tuple[TopicId, int], FetchedPartition],
    ) -> bool:
        """Apply the acknowledgements of every partition that carried them; True if any partition failed to."""
        failed = False
        for acks in partitions:
            if not acks.acknowledged:
                continue
            entry = _entry(shown, (acks.topic_id, acks.partition))
            error, message = self.acknowledge_partition(group_id, member_id, acks, renew)
            entry.acknowledge_error, entry.acknowledge_error_message = error, message
            failed = failed or error is not E.none
        return failed

    def acknowledge_partition(
        self, group_id: str, member_id: str, acks: PartitionAcks, renew: bool
    ) -> tuple[ErrorCode, str | None]:
        # KafkaApis' order: the topic id, then validateAcknowledgementBatches, then the partition in the metadata.
        if self.topics.by_id(acks.topic_id) is None:
            return E.unknown_topic_id, None
        problem = validate_batches(acks.batches, renew)
        if problem is None and not renew and any(AcknowledgeType.RENEW in b.types for b in acks.batches):
            problem = "Renew acknowledgement type is only allowed with IsRenewAck"
        if problem is not None:
            return E.invalid_request, problem
        resolved = self.resolve(acks.topic_id, acks.partition)
        if resolved.error is not E.none:
            return resolved.error, None
        key = (group_id, acks.topic_id, acks.partition)
        return self.partitions.acknowledge(key, resolved.log, member_id, acks.batches)

    def _acquire(
        self, session: ShareSession, request: ShareFetchRequest, shown: dict[tuple[TopicId, int], FetchedPartition]
    ) -> bool:
        """Acquire for the session's partitions from the rotating start; True if anything was acquired."""
        keys = list(session.partitions)
        if not keys:
            return False
        resolved_of = {key: self.resolve(*key) for key in keys}
        for key, found in resolved_of.items():  # SharePartitionManager.processShareFetch: getOrCreateSharePartition
            if found.log is not None:
                self.partitions.ensure((session.group_id, *key), found.log)
        start = session.rotation % len(keys)
        session.rotation = start + 1
        budget = request.max_records
        # MaxBytes as DelayedShareFetch reads: MaxBytes / n a partition (PartitionMaxBytesStrategy UNIFORM) within
        # what the request has left, at least one batch until a partition returned data (ReplicaManager.readFromLog).
        bytes_left, share_of_bytes, at_least_one = request.max_bytes, request.max_bytes // len(keys), True
        anything = False
        for key in keys[start:] + keys[:start]:
            if budget <= 0:
                break
            resolved = resolved_of[key]
            if resolved.error is not E.none or resolved.log is None:
                entry = shown.setdefault(key, FetchedPartition(*key))
                entry.error = resolved.error
                continue
            if request.not_led is not None and request.not_led(*key):
                shown.setdefault(key, FetchedPartition(*key)).error = E.not_leader_or_follower
                continue
            ranges, batches, read = self.partitions.acquire(
                (session.group_id, *key), resolved.log, session.member_id, budget, request.batch_size,
                record_limit=request.record_limit, max_bytes=min(share_of_bytes, bytes_left), at_least_one=at_least_one,
            )  # fmt: skip
            bytes_left = max(0, bytes_left - read)
            at_least_one = at_least_one and read == 0
            if not ranges:
                continue
            anything = True
            budget -= sum(last - first + 1 for first, last, _ in ranges)
            entry = _entry(shown, key)
            entry.records = [batch.data for batch in batches]  # never joined: the answer's encoder writes each
            entry.acquired = ranges
        return anything

    def _min_bytes_met(self, session: ShareSession, request: ShareFetchRequest) -> bool:
        """DelayedShareFetch.isMinBytesSatisfied: the bytes from each session partition's next fetch offset up to its
        high watermark (last stable offset for read_committed), counted as if all were acquirable, reach MinBytes.
        MinBytes 1 or less needs nothing beyond something to acquire (the caller parks when nothing was)."""
        if request.min_bytes <= 1:
            return True
        total = 0
        for key in session.partitions:
            log = self.resolve(*key).log
            if log is None:
                continue
            share = self.partitions.ensure((session.group_id, *key), log)
            upper = log.last_stable_offset if self.partitions.read_committed(session.group_id) else log.high_watermark
            total += max(0, log.bytes_from(share.fetch_offset()) - log.bytes_from(upper))
        return total >= request.min_bytes

    # -- long polling (DelayedShareFetch) --------------------------------------------------------------------------

    def _park(
        self,
        session: ShareSession,
        request: ShareFetchRequest,
        shown: dict[tuple[TopicId, int], FetchedPartition],
        answer: ShareAnswer,
        connection: int,
    ) -> Deferred[ShareAnswer]:
        parked = _ParkedFetch(self, next(self._numbers), session, request, shown, answer, connection)
        self.parked[parked.number] = parked
        for key in session.partitions:
            self.partitions.wait((session.group_id, *key), parked, self.resolve(*key).log)
        self.purgatory.schedule(share_fetch_key(parked.number), request.max_wait_ms, parked.time_out)
        return parked.pending

    def _idle(self, answer: ShareAnswer, wait_ms: int) -> ShareAnswer | Deferred[ShareAnswer]:
        """SharePartitionManager.createIdleShareFetchTimerTask: a ShareFetch refused a session is answered after its
        MaxWaitMs, so that a client without a session does not spin on the broker."""
        if wait_ms <= 0:
            return answer
        pending: Deferred[ShareAnswer] = Deferred()

        def answer_now() -> None:
            pending.complete(answer)

        self.purgatory.schedule(share_fetch_key(next(self._numbers)), wait_ms, answer_now)
        return pending

    def unpark(self, parked: _ParkedFetch) -> None:
        self.parked.pop(parked.number, None)
        self.purgatory.cancel(share_fetch_key(parked.number))
        for key in parked.session.partitions:
            self.partitions.unwait((parked.session.group_id, *key), parked)

    # -- ShareAcknowledge (section 9) --------------------------------------------------------------------------------

    def acknowledge(self, request: ShareAcknowledgeRequest) -> ShareAnswer:
        # A top-level error is ShareAcknowledgeRequest.getErrorResponse's answer: AcquisitionLockTimeoutMs 0 (v2).
        group_id = request.group_id or ""
        if not request.member_id:
            return ShareAnswer(E.invalid_request, "MemberId can't be empty.")
        if not group_id:
            return ShareAnswer(E.invalid_request, "GroupId can't be empty.")
        epoch = request.session_epoch
        if epoch == INITIAL_EPOCH:
            return ShareAnswer(E.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session (epoch 0).")
        session = self.sessions.get(group_id, request.member_id)
        if session is None:
            return ShareAnswer(E.share_session_not_found, f"Share session not found for member {request.member_id}.")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ShareAnswer(
                E.invalid_share_session_epoch,
                f"The share session epoch {epoch} does not match the expected epoch {session.epoch}.",
            )
        shown: dict[tuple[TopicId, int], FetchedPartition] = {}
        for acks in request.partitions:
            entry = shown.setdefault((acks.topic_id, acks.partition), FetchedPartition(acks.topic_id, acks.partition))
            entry.error, entry.error_message = self.acknowledge_partition(
                group_id, request.member_id, acks, request.renew
            )
        if epoch == FINAL_EPOCH:
            self.close(session, "closed by ShareAcknowledge with the final epoch")
        else:
            session.epoch = next_epoch(session.epoch)
        return ShareAnswer(E.none, None, self.partitions.lock_duration_ms(group_id), list(shown.values()))

    # -- sessions ending ----------------------------------------------------------------------------------------------

    def close(self, session: ShareSession, cause: str) -> None:
        """Section 6.8: the session goes, and what the member holds of its partitions becomes available again."""
        self.sessions.remove(session)
        for parked in [p for p in self.parked.values() if p.session is session]:
            parked.cancel()
        for key in session.partitions:
            self.partitions.release_member((session.group_id, *key), session.member_id)
        self.events.session_closed(session.group_id, session.member_id, cause)

    def connection_closed(self, connection: int) -> None:
        for parked in [p for p in self.parked.values() if p.connection == connection]:
            parked.cancel()
        for session in self.sessions.of_connection(connection):
            self.close(session, "its connection closed")


def _entry(shown: dict[tuple[TopicId, int], FetchedPartition], key: tuple[TopicId, int]) -> FetchedPartition:
    """The answer's entry for ``key``, made when it has none (``setdefault`` would build one every time)."""
    entry = shown.get(key)
    if entry is None:
        entry = shown[key] = FetchedPartition(*key)
    return entry


class _ParkedFetch:
    """A ShareFetch waiting for acquirable records (DelayedShareFetch): woken by its partitions, answered by the
    first wake that acquires something, or by its MaxWaitMs."""

    __slots__ = ("answer", "connection", "fetcher", "number", "pending", "request", "session", "shown")

    def __init__(
        self,
        fetcher: ShareFetcher,
        number: int,
        session: ShareSession,
        request: ShareFetchRequest,
        shown: dict[tuple[TopicId, int], FetchedPartition],
        answer: ShareAnswer,
        connection: int,
    ) -> None:
        self.fetcher = fetcher
        self.number = number
        self.session = session
        self.request = request
        self.shown = shown
        self.answer = answer
        self.connection = connection
        self.pending: Deferred[ShareAnswer] = Deferred()

    def wake(self) -> None:
        if self.pending.done:
            return
        if self.fetcher.sessions.get(self.session.group_id, self.session.member_id) is not self.session:
            self._complete()
            return
        if self.fetcher._min_bytes_met(self.session, self.request) and self.fetcher._acquire(
            self.session, self.request, self.shown
        ):
            self._complete()

    def time_out(self) -> None:
        """MaxWaitMs is over: whatever is acquirable now is acquired (MinBytes or not, DelayedShareFetch.onComplete)."""
        if self.pending.done:
            return
        if self.fetcher.sessions.get(self.session.group_id, self.session.member_id) is self.session:
            self.fetcher._acquire(self.session, self.request, self.shown)
        self._complete()

    def cancel(self) -> None:
        """The connection or the session went: nothing is acquired for it any more."""
        if not self.pending.done:
            self._complete()

    def _complete(self) -> None:
        self.fetcher.unpark(self)
        self.answer.partitions = list(self.shown.values())
        self.pending.complete(self.answer)

