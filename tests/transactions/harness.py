"""A transaction coordinator on a manual clock, with shorthands for the checklist tests.

Topic ``t`` has 3 partitions (transactions spec section 9's setup); completions are collected in order.
Nothing sleeps: ``h.advance(ms)`` moves time and fires due deadlines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.timing.clock import ManualClock
from broker.timing.purgatory import Purgatory
from broker.transactions.config import TxnConfig
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.messages import (
    AddOffsetsRequest,
    AddPartitionsRequest,
    Completion,
    EndTxnRequest,
    EndTxnResult,
    InitProducerIdRequest,
    InitProducerIdResult,
    PartitionsResult,
    TopicPartition,
)
from broker.transactions.state import TxnMetadata

E = ErrorCode
TID = "txn-1"
TIMEOUT_MS = 60_000
T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


@dataclass
class Harness:
    config: TxnConfig = field(default_factory=TxnConfig)
    topics: dict[str, int] = field(default_factory=lambda: {"t": 3})
    completions: list[Completion] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clock = ManualClock()
        self.purgatory = Purgatory(self.clock)
        self.clock.attach(self.purgatory)
        self.tc = TransactionCoordinator(self.clock, self.purgatory, self.exists, self.completions.append, self.config)
        self.tc.start()

    def exists(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.topics.get(topic, 0)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def meta(self, tid: str = TID) -> TxnMetadata:
        meta = self.tc.get(tid)
        assert meta is not None
        return meta

    def init(
        self, tid: str | None = TID, timeout_ms: int = TIMEOUT_MS, pid: int = -1, epoch: int = -1
    ) -> InitProducerIdResult:
        return self.tc.init_producer_id(InitProducerIdRequest(tid, timeout_ms, pid, epoch))

    def ready(self, tid: str = TID) -> tuple[int, int]:
        """A fresh producer: InitProducerId answered NONE; its pid and epoch."""
        result = self.init(tid)
        assert result.error is E.none
        return result.producer_id, result.producer_epoch

    def add(self, pid: int, epoch: int, *partitions: TopicPartition, tid: str = TID, tv: int = 1) -> PartitionsResult:
        return self.tc.add_partitions(AddPartitionsRequest(tid, pid, epoch, partitions, tv))

    def add_offsets(self, pid: int, epoch: int, group: str = "g", tid: str = TID) -> ErrorCode:
        return self.tc.add_offsets(AddOffsetsRequest(tid, pid, epoch, group))

    def end(self, pid: int, epoch: int, commit: bool = True, tid: str = TID, tv: int = 1) -> EndTxnResult:
        return self.tc.end_txn(EndTxnRequest(tid, pid, epoch, commit, tv))

    def ongoing(self, *partitions: TopicPartition, tid: str = TID) -> tuple[int, int]:
        """A producer with an open transaction over ``partitions`` (t-0 if none given)."""
        pid, epoch = self.ready(tid)
        assert self.add(pid, epoch, *(partitions or (T0,)), tid=tid).error is E.none
        return pid, epoch
