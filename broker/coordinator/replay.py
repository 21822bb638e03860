"""A group coordinator rebuilt from a data directory's changes (issue 27; cluster-and-durability.md 2.3).

Kafka's ``GroupMetadataManager.replay`` and ``onLoaded``: classic groups as stored (Stable with the same
generation, protocol, leader and member ids, each member's session started afresh with its full timeout; Empty
without members), KIP-848 consumer groups with their epochs and assignments (``modern/consumer/durable.py``),
committed offsets, and pending transactional offsets still pending. A group id known only by its offsets (a
simple group) comes back as an Empty classic group, as Kafka's offset replay creates one.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.changes import Change, of_kind
from broker.coordinator.classic import durable as classic_durable
from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.sessions import Sessions
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.consumer.restore import load_consumer_groups
from broker.coordinator.offsets.manager import OffsetManager
from broker.coordinator.registry import GroupRegistry


def load(
    registry: GroupRegistry,
    classic: ClassicGroups,
    sessions: Sessions,
    consumer: ConsumerGroups,
    offsets: OffsetManager,
    changes: Iterable[Change],
) -> None:
    changes = list(changes)
    now = classic.clock.now_ms()
    for change in of_kind(changes, "classic."):
        if change.value is None:
            continue
        group = ClassicGroup(str(change.key[0]), now, registry.offsets)
        registry.add_classic(group)
        classic.stored.add(group.group_id)
        members = classic_durable.rebuild(group, change.value)
        group.stored()  # as its record says
        for member in members:
            sessions.start(group, member, member.session_timeout_ms)
    load_consumer_groups(consumer, of_kind(changes, "consumer."))
    highest = max(
        registry.offsets.load(of_kind(changes, "offsets.commit")),
        offsets.transactional.load(of_kind(changes, "offsets.pending")),
    )
    offsets.continue_orders_after(highest)
    for group_id in [*registry.offsets.group_ids(), *offsets.transactional.group_ids()]:
        if registry.get(group_id) is None:
            registry.add_classic(ClassicGroup(group_id, now, registry.offsets))
