"""How the report shows things, on its plots and its page alike: the colours and durations in words."""

from __future__ import annotations

import math
from collections.abc import Mapping

EAGER = "#3b6fb6"
COOPERATIVE = "#e07b39"
CONSUMER = "#2a9d8f"  # KIP-848 consumer groups
OTHER = "#8c8c8c"
#: The rebalance protocols, in the order the report shows them: classic eager and cooperative, then consumer.
PROTOCOLS = ("eager", "cooperative", "consumer")
PROTOCOL_COLORS = {"eager": EAGER, "cooperative": COOPERATIVE, "consumer": CONSUMER}
#: Episodes that formed a group from Empty (``tables/formation.py``'s ``with_formation``): a series of their own,
#: named as that module's ``FORMATION`` and ``NO_PROTOCOL`` name them.
FORMATION_COLOR = "#9467bd"
FORMATION_SERIES = "formation"
NO_PROTOCOL_SERIES = "none"
#: By rebalance cause (``rebalance_started.cause``, or a consumer group's ``group_epoch_bumped.cause``: the
#: analysis calls a new member's bump ``member_joined`` too; docs/events.md, docs/analytics.md).
CAUSE_COLORS = {
    "member_joined": "#3b6fb6",
    "member_rejoined": "#7fa7dc",
    "member_left": "#59a14f",
    "member_expired": "#d62728",
    "member_kicked": "#b07aa1",
    "member_fenced": "#9c755f",
    "static_member_replaced": "#edc948",
    "sync_timeout": "#ff9da7",
    "forced": "#76b7b2",
    # consumer groups only
    "subscription_changed": "#4e79a7",
    "metadata_changed": "#a0cbe8",
    "member_removed": "#f28e2b",
}


def duration(ms: float | None) -> str:
    """3 ms, 2.54 s, 4.2 min, 1.5 h: the unit a person reads."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "-"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.3g} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.3g} min"
    return f"{ms / 3_600_000:.3g} h"


def protocol_series(counts: Mapping[str, int]) -> list[str]:
    """The protocols of ``counts`` (rebalances by series) in the report's order, any other protocol after."""
    others = set(counts) - {*PROTOCOLS, FORMATION_SERIES, NO_PROTOCOL_SERIES}
    return [*PROTOCOLS, *sorted(others)]


def counts_phrase(counts: Mapping[str, int]) -> str:
    """Rebalances by series as the report says them everywhere (issue 26: one set of numbers that adds up):
    "11 eager, 14 cooperative, 0 consumer; +2 formations, +2 with no protocol"."""
    said = ", ".join(f"{counts.get(p, 0):,} {p}" for p in protocol_series(counts))
    formations = counts.get(FORMATION_SERIES, 0)
    plural = "" if formations == 1 else "s"
    return f"{said}; +{formations:,} formation{plural}, +{counts.get(NO_PROTOCOL_SERIES, 0):,} with no protocol"
