"""The simulated world: topics, applications, group shapes, the chances of things, and its groups and members.

Everything a group, a member or a consumer process is, and the numbers the scenario draws from. The states and
timeouts are Kafka's (``GroupState``, ``group.initial.rebalance.delay.ms``); the reasons are what the Java client
sends (JoinGroup v8+, LeaveGroup v5+, KIP-800). A share of the groups are KIP-848 consumer groups
(``ConsumerState``, docs/spec/consumer-groups.md), with the broker's default timers (section 11).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Topics with Kafka-typical partition counts; a group consumes one or two of them.
TOPICS: tuple[tuple[str, int], ...] = (
    ("orders", 12),
    ("payments", 6),
    ("clicks", 24),
    ("inventory", 8),
    ("audit-log", 3),
    ("sessions", 16),
    ("shipments", 4),
    ("metrics", 32),
)
APPS: tuple[str, ...] = (
    "billing",
    "checkout",
    "fraud-scorer",
    "search-indexer",
    "notifier",
    "ledger",
    "recommender",
    "etl",
    "reporting",
    "archiver",
    "pricing",
    "shipping-tracker",
)
# Group sizes and how often they occur.
SIZES: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12)
SIZE_WEIGHTS: tuple[float, ...] = (10, 20, 25, 15, 15, 10, 5)

PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
EMPTY = "Empty"
DEAD = "Dead"

INITIAL_REBALANCE_DELAY_MS = 3000  # group.initial.rebalance.delay.ms
MEAN_STABLE_MS = 600_000  # mean quiet time of a group between disturbances, before its activity factor

# What the Java client says (JoinGroup v8+, LeaveGroup v5+); other clients send no reason.
REJOIN_REASON = "group is already rebalancing"
REVOKE_REASON = "need to revoke partitions and re-join"
CLOSE_REASON = "the consumer is being closed"

# Disturbances of a Stable group, by weight.
KILL, LEAVE, RESTART, SCALE_UP, STATIC_BOUNCE, STATIC_DOWN, KICK, FORCE, SHUTDOWN = range(9)
DISTURBANCE_WEIGHTS: dict[int, float] = {
    KILL: 28,
    LEAVE: 6,
    RESTART: 22,
    SCALE_UP: 10,
    STATIC_BOUNCE: 22,
    STATIC_DOWN: 6,
    KICK: 1,
    FORCE: 1,
    SHUTDOWN: 2.5,
}

# KIP-848 consumer groups: their share, and the broker's defaults for their timers (section 11, 7.1, 7.2).
P_CONSUMER_GROUP = 0.25
CONSUMER_SESSION_MS = 45_000
CONSUMER_HEARTBEAT_MS = 5_000
CONSUMER_ASSIGNOR = "uniform"
# Consumer-group member states (section 3.3), as member_reconciled names them.
M_STABLE = "stable"
M_UNREVOKED = "unrevoked_partitions"
M_UNRELEASED = "unreleased_partitions"
# Consumer-group states (section 3.4).
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"

# Chances of the rarer twists.
P_SECOND_VICTIM = 0.2  # a SIGKILL takes two members (one host)
P_REPLACEMENT = 0.6  # a SIGKILLed process is restarted (k8s) and joins again
P_STUCK = 0.0015  # a member that must rejoin is stuck in processing past the rebalance timeout
P_SYNC_LAGGARD = 0.004  # a follower never sends SyncGroup
P_COMPLETING_RESTART = 0.05  # something happens while the leader computes the assignment

# The actions of the simulation: client requests, coordinator timers and scenario steps.
(
    A_START,
    A_JOIN,
    A_REJOIN,
    A_SYNC,
    A_LEAVE,
    A_EXPIRE,
    A_STATIC_RETURN,
    A_INITIAL_DELAY,
    A_JOIN_DEADLINE,
    A_SYNC_DEADLINE,
    A_DISTURB,
    A_EMPTY_NEXT,
    A_CG_HEARTBEAT,
) = range(13)


@dataclass(slots=True)
class Process:
    """A consumer process: what survives its member id (a restart, a broker restart)."""

    cid: str
    host: str
    iid: str | None


class Member:
    """A member of a group, with its JSON fragments rendered once (the lines are f-strings of them)."""

    __slots__ = (
        "alive",
        "awaiting",
        "cid",
        "cid_js",
        "host_js",
        "id",
        "iid",
        "iid_js",
        "js",
        "last_hb",
        "owned",
        "stuck",
    )

    def __init__(self, member_id: str, iid: str | None, cid: str, host: str) -> None:
        self.id = member_id
        self.js = f'"{member_id}"'
        self.iid = iid
        self.iid_js = "null" if iid is None else f'"{iid}"'
        self.cid = cid
        self.cid_js = f'"{cid}"'
        self.host_js = f'"{host}"'
        self.alive = True
        self.awaiting = True
        self.stuck = False
        self.last_hb = 0
        self.owned: list[int] = []  # partition codes (topic index << 12 | partition), sorted

    def sort_key(self) -> tuple[int, str]:
        # Kafka's MemberInfo order, which the range assignor follows: static members by instance id first.
        return (0, self.iid) if self.iid is not None else (1, self.id)

    def process(self) -> Process:
        """The process behind this member, to join again as it."""
        return Process(self.cid, self.host_js[1:-1], self.iid)


class ConsumerState:
    """The coordinator's view of a consumer group beyond ``Group``'s: epochs, targets, owners (sections 3.1, 3.5)."""

    __slots__ = ("assignment_epoch", "group_epoch", "owners", "targets")

    def __init__(self) -> None:
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.targets: dict[str, list[int]] = {}  # member id -> its target partitions, sorted
        self.owners: dict[int, str] = {}  # partition code -> the member that has it assigned or pending


class ConsumerMember(Member):
    """A member of a KIP-848 consumer group (section 3.2): ``Member`` for the scenario (never static here), and
    the coordinator's view of it: its epoch, its state and what it owns."""

    __slots__ = ("assigned", "epoch", "hb_due", "pending", "revoked", "state")

    def __init__(self, member_id: str, cid: str, host: str) -> None:
        super().__init__(member_id, None, cid, host)
        self.epoch = 0
        self.state = M_STABLE
        self.assigned: list[int] = []  # partition codes, sorted
        self.pending: list[int] = []  # pending revocation: still owned (section 3.5)
        self.revoked = False  # it has let its pending partitions go: its next heartbeat says so
        self.hb_due = False  # a heartbeat of it is scheduled


class Group:
    """A consumer group: its fixed shape (topics, protocol, timeouts, size) and the coordinator's state of it."""

    __slots__ = (
        "activity",
        "cg",
        "coop",
        "created",
        "disturb_pending",
        "epoch",
        "exists",
        "gen",
        "gid",
        "hb",
        "js",
        "leader",
        "members",
        "new_added",
        "next_client",
        "parts",
        "prev_state",
        "processes",
        "proto",
        "proto_js",
        "protocols_js",
        "reason",
        "reb_proto_js",
        "reb_start",
        "rejoin_js",
        "rto",
        "session",
        "size",
        "state",
        "static",
        "static_ids",
        "tkey",
        "tnames",
        "view",
        "waiting",
    )

    def __init__(self, gid: str, rng: random.Random, consumer_share: float = P_CONSUMER_GROUP) -> None:
        """``consumer_share``: the chance that it is a KIP-848 consumer group."""
        self.gid = gid
        self.js = f'"{gid}"'
        chosen = sorted(rng.sample(TOPICS, 2 if rng.random() < 0.3 else 1))
        self.tnames = [name for name, _ in chosen]
        self.tkey = "+".join(self.tnames)
        self.parts = [(t << 12) | p for t, (_, count) in enumerate(chosen) for p in range(count)]
        consumer = rng.random() < consumer_share
        self.coop = not consumer and rng.random() < 0.4
        if consumer:
            self.proto = CONSUMER_ASSIGNOR
            self.protocols_js = "null"
            self.reb_proto_js = '"consumer"'
        elif self.coop:
            self.proto = "cooperative-sticky"
            self.protocols_js = '["cooperative-sticky"]'
            self.reb_proto_js = '"cooperative"'
        else:
            self.proto = "range"
            # The Java client's default since 3.0 lists both; the group still picks range, everyone's first.
            self.protocols_js = '["range","cooperative-sticky"]' if rng.random() < 0.5 else '["range"]'
            self.reb_proto_js = '"eager"'
        self.proto_js = f'"{self.proto}"'
        self.static = not consumer and rng.random() < 0.2
        self.reason = rng.random() < 0.7  # a Java client (JoinGroup v8+): requests carry reasons
        self.rejoin_js = f'"{REJOIN_REASON}"' if self.reason else "null"
        self.session = rng.choice((10_000, 10_000, 30_000, 45_000, 45_000))
        self.rto = rng.choice((300_000, 300_000, 60_000))
        self.hb = min(3000, self.session // 3)
        if consumer:  # the broker's timers, not the client's (section 7)
            self.session, self.hb = CONSUMER_SESSION_MS, CONSUMER_HEARTBEAT_MS
        self.size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        self.activity = rng.lognormvariate(0.0, 1.0)  # a few groups flap a lot, most are quiet
        self.processes: list[Process] = []
        self.next_client = 1
        self.cg: ConsumerState | None = ConsumerState() if consumer else None
        self.reset()

    def reset(self) -> None:
        """The coordinator forgot the group (deleted, or the broker restarted)."""
        self.exists = False
        self.created = 0
        self.state = EMPTY
        self.prev_state = DEAD
        self.gen = 0
        self.members: dict[str, Member] = {}
        self.static_ids: dict[str, str] = {}
        self.leader: str | None = None
        self.view: dict[str, list[int]] | None = None  # the last generation's owners: member id -> partitions
        self.reb_start = 0
        self.new_added = False
        self.waiting = 0  # members that have not (re)joined the current rebalance
        self.epoch = 0
        self.disturb_pending = False
        if self.cg is not None:
            self.cg = ConsumerState()


def group_ids(count: int, offset: int, stride: int) -> list[str]:
    """Group ids for one file of several: every ``stride``-th from ``offset``, named after an application."""
    return [f"{APPS[i % len(APPS)]}-{i:05d}" for i in range(offset, offset + count * stride, stride)]
