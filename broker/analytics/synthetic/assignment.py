"""What the group leader assigns at each SyncGroup: Kafka's ``RangeAssignor`` or ``CooperativeStickyAssignor``.

Partitions are codes, ``topic index << 12 | partition``, so that a member's partitions are a sorted list of ints.
"""

from __future__ import annotations

from broker.analytics.synthetic.world import Group, Member

#: Range slices by (topics, member count): they depend on nothing else, so each is computed once.
RangeCache = dict[tuple[str, int], list[list[int]]]


def range_slices(parts: list[int], topics: int, members: int) -> list[list[int]]:
    """The range assignor's partitions for the i-th member (MemberInfo order) of ``members``."""
    out: list[list[int]] = [[] for _ in range(members)]
    for t in range(topics):
        codes = [c for c in parts if c >> 12 == t]
        q, r = divmod(len(codes), members)
        start = 0
        for i in range(members):
            take = q + (1 if i < r else 0)
            out[i].extend(codes[start : start + take])
            start += take
    return out


def assign(g: Group, ranges: RangeCache) -> tuple[dict[str, list[int]], set[str]]:
    """The leader's assignment (member id -> partition codes) and, when cooperative, who must revoke."""
    members = list(g.members.values())
    if not g.coop:
        # Range: per topic, consecutive slices in MemberInfo order.
        slices = ranges.get((g.tkey, len(members)))
        if slices is None:
            slices = ranges[(g.tkey, len(members))] = range_slices(g.parts, len(g.tnames), len(members))
        ordered = sorted(members, key=Member.sort_key)
        by_id = {m.id: slices[i] for i, m in enumerate(ordered)}
        return {m.id: by_id[m.id] for m in members}, set()
    return _cooperative(g, members)


def _cooperative(g: Group, members: list[Member]) -> tuple[dict[str, list[int]], set[str]]:
    """Cooperative sticky (KIP-429): keep what each member owns up to its fair share, hand out the rest; a
    partition that another live member still owns is only revoked this round (assigned to nobody)."""
    total = len(g.parts)
    q, r = divmod(total, len(members))
    owner = {c: m.id for m in members for c in m.owned}
    balanced = sum(1 for m in members if len(m.owned) == q + 1) == r
    if len(owner) == total and balanced and all(q <= len(m.owned) <= q + 1 for m in members):
        return {m.id: m.owned for m in members}, set()  # balanced and complete: nothing moves
    ordered = sorted(members, key=lambda m: -len(m.owned))
    ceil_left = r
    kept: dict[str, list[int]] = {}
    targets: dict[str, int] = {}
    for m in ordered:
        limit = q
        if len(m.owned) > q and ceil_left > 0:
            limit = q + 1
            ceil_left -= 1
        kept[m.id] = m.owned[:limit]
        targets[m.id] = limit
    for m in ordered:
        if ceil_left <= 0:
            break
        if targets[m.id] == q:
            targets[m.id] = q + 1
            ceil_left -= 1
    taken = {c for codes in kept.values() for c in codes}
    pool = [c for c in g.parts if c not in taken]
    revokers: set[str] = set()
    i = 0
    for m in sorted(ordered, key=lambda m: len(kept[m.id])):
        need = targets[m.id] - len(kept[m.id])
        if need <= 0:
            continue
        for c in pool[i : i + need]:
            was = owner.get(c)
            if was is not None and was != m.id:
                revokers.add(was)
            else:
                kept[m.id].append(c)
        i += need
    return {m.id: sorted(kept[m.id]) for m in members}, revokers
