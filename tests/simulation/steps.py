"""The steps of a simulated schedule, and the hypothesis strategies that generate (and shrink) them.

A schedule is a list of steps, each one thing a client, an operator or time does to the coordinator. Steps name a
client by its slot (0-5) and choose among small sets of values by index, so any list of steps is valid whatever
happened before: a step that makes no sense at that moment (a request from a client whose connection waits for
an answer) is skipped, exactly as a real connection would not send it. Every step's ``repr`` is the Python that
builds it, so a failing schedule prints as a replay (``tests/simulation/world.py``: ``replay``).

The clients: slots 0-2 are consumers of group ``a``, 3-5 of group ``b``; slots 2 and 5 are static members
(KIP-345, ``group.instance.id`` ``static-2`` and ``static-5``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

CLIENTS = 6
GROUPS = ("a", "b")
STATIC_CLIENTS = frozenset({2, 5})

#: The protocol lists a JoinGroup may carry: the usual one, a superset, a disjoint one (the join is refused while
#: the others use range), a name listed twice (issue 14, defect 7), another order, and none at all.
PROTOCOL_CHOICES: tuple[tuple[str, ...], ...] = (
    ("range",),
    ("range", "roundrobin"),
    ("roundrobin",),
    ("range", "range"),
    ("roundrobin", "range", "roundrobin"),
    (),
)
SESSION_CHOICES_MS = (10_000, 6_000, 30_000, 1_000)  # 1 s is under group.min.session.timeout.ms: refused
REBALANCE_CHOICES_MS = (30_000, 6_000, 60_000)
ADVANCE_CHOICES_MS = (0, 1, 100, 500, 1_000, 2_999, 3_000, 6_000, 10_000, 30_000, 60_000, 300_000)
JOIN_VERSIONS = tuple(range(10))


def group_of(client: int) -> str:
    return GROUPS[client // 3]


@dataclass(frozen=True)
class Poll:
    """What Kafka's consumer does next in its poll loop: join when it has no generation (or was told to rejoin),
    sync when it joined but holds no assignment yet, heartbeat otherwise; nothing while a request is parked."""

    client: int


@dataclass(frozen=True)
class Round:
    """Every client of the group polls once, in slot order: the consumers' loops running side by side."""

    group: int


@dataclass(frozen=True)
class Join:
    """JoinGroup from the client with its current member id (empty for a new or restarted one)."""

    client: int
    version: int = 9
    protocols: int = 0
    session: int = 0
    rebalance: int = 0


@dataclass(frozen=True)
class Sync:
    """SyncGroup for the generation the client knows; a leader sends every member's assignment but ``omit``'s
    (an index into its member list, -1 for none); ``stale`` sends the generation before."""

    client: int
    omit: int = -1
    stale: bool = False


@dataclass(frozen=True)
class Heartbeat:
    client: int


@dataclass(frozen=True)
class Leave:
    """LeaveGroup for the client: by member id, or by instance id for a static one (``by_instance``); from another
    connection (``elsewhere``: an admin, or the client's other process) it is sent even while the client waits."""

    client: int
    by_instance: bool = False
    elsewhere: bool = False


@dataclass(frozen=True)
class Commit:
    """OffsetCommit as a member of the generation the client knows, or as a simple consumer (generation -1)."""

    client: int
    simple: bool = False


@dataclass(frozen=True)
class Restart:
    """The client's process dies and comes back: whatever it waited for is abandoned, it rejoins as new (a
    static member with its instance id)."""

    client: int


@dataclass(frozen=True)
class Kick:
    """The control API's kick verb on the client's member id."""

    client: int


@dataclass(frozen=True)
class Fence:
    """The control API's fence verb on the client's instance id (static clients only)."""

    client: int


@dataclass(frozen=True)
class ForceRebalance:
    group: int


@dataclass(frozen=True)
class DeleteGroup:
    group: int


@dataclass(frozen=True)
class MoveCoordinator:
    """The group's ``__consumer_offsets`` partition changes leader (issue 29): Kafka's unload and load, with no load
    delay. Its parked JoinGroups and SyncGroups are answered NOT_COORDINATOR; a rebalancing group comes back at its
    last stored generation."""

    group: int


@dataclass(frozen=True)
class Advance:
    """Time passes: ``ADVANCE_CHOICES_MS[choice]`` milliseconds, firing every deadline on the way."""

    choice: int


Step = (
    Poll
    | Round
    | Join
    | Sync
    | Heartbeat
    | Leave
    | Commit
    | Restart
    | Kick
    | Fence
    | ForceRebalance
    | DeleteGroup
    | MoveCoordinator
    | Advance
)

_client = st.integers(0, CLIENTS - 1)
_group = st.integers(0, len(GROUPS) - 1)
_SMALL_JUMPS = sum(1 for ms in ADVANCE_CHOICES_MS if ms < 6_000)  # within every session timeout


#: One step, drawn from weighted kinds: mostly consumers polling with short waits between (groups get to Stable
#: and live on), now and then anything else (a hostile request, an operator's verb, a process restart, a jump past
#: a timeout). A kind's weight is how often it is listed (``one_of`` would merge repeated branches).
_KINDS: list[tuple[int, st.SearchStrategy[Step]]] = [
    (6, st.builds(Round, group=_group)),
    (3, st.builds(Poll, client=_client)),
    (4, st.builds(Advance, choice=st.integers(0, _SMALL_JUMPS - 1))),
    (1, st.builds(Advance, choice=st.integers(0, len(ADVANCE_CHOICES_MS) - 1))),
    (
        1,
        st.builds(
            Join,
            client=_client,
            version=st.sampled_from(JOIN_VERSIONS),
            protocols=st.integers(0, len(PROTOCOL_CHOICES) - 1),
            session=st.integers(0, len(SESSION_CHOICES_MS) - 1),
            rebalance=st.integers(0, len(REBALANCE_CHOICES_MS) - 1),
        ),
    ),
    (1, st.builds(Sync, client=_client, omit=st.integers(-1, 3), stale=st.booleans())),
    (1, st.builds(Heartbeat, client=_client)),
    (1, st.builds(Leave, client=_client, by_instance=st.booleans(), elsewhere=st.booleans())),
    (1, st.builds(Commit, client=_client, simple=st.booleans())),
    (1, st.builds(Restart, client=_client)),
    (
        1,
        st.one_of(
            st.builds(Kick, client=_client),
            st.builds(Fence, client=_client),
            st.builds(ForceRebalance, group=_group),
            st.builds(DeleteGroup, group=_group),
            st.builds(MoveCoordinator, group=_group),
        ),
    ),
]
step: st.SearchStrategy[Step] = st.sampled_from([kind for weight, kind in _KINDS for _ in range(weight)]).flatmap(
    lambda kind: kind
)


def schedules(max_steps: int) -> st.SearchStrategy[list[Step]]:
    return st.lists(step, max_size=max_steps)
