"""How the report shows things, on its plots and its page alike: the colours and durations in words."""

from __future__ import annotations

import math

EAGER = "#3b6fb6"
COOPERATIVE = "#e07b39"
OTHER = "#8c8c8c"
PROTOCOL_COLORS = {"eager": EAGER, "cooperative": COOPERATIVE}
#: By rebalance cause (``rebalance_started.cause``, docs/events.md).
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
