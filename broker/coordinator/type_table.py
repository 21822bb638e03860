"""The group coordinator's table of group types: per type, its keeper, its control-API views and verbs (by group id)
and what a failed verb does. ``GroupCoordinator`` dispatches ListGroups, DeleteGroups and the control API through it,
so a type adds a row here, not a branch there (``docs/architecture.md``, "A new group type")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.verbs import ClassicVerbs
from broker.coordinator.config import GroupConfig
from broker.coordinator.group import GroupKeeper
from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.consumer.verbs import ConsumerVerbs
from broker.coordinator.modern.share.service import ShareCoordinator
from broker.coordinator.modern.share.verbs import ShareVerbs
from broker.coordinator.modern.share.views import share_detail, summarize_share
from broker.coordinator.modern.types import TopicCatalog
from broker.coordinator.registry import GroupRegistry
from broker.coordinator.views import GroupDetail, GroupSummary, consumer_detail, detail, summarize, summarize_consumer

__all__ = ["TypeHandlers", "type_handlers"]


@dataclass(frozen=True, slots=True)
class TypeHandlers:
    """One group type's row of the dispatch table: its groups, its control-API views and verbs (by group id)."""

    keeper: GroupKeeper
    summary: Callable[[str], GroupSummary]
    detail: Callable[[str], GroupDetail]
    kick: Callable[[str, str], None]
    fence: Callable[[str, str], tuple[str, str | None]]
    force_rebalance: Callable[[str], None]
    failed: Callable[[str, str, Exception], None]


def type_handlers(
    registry: GroupRegistry,
    classic: ClassicGroups,
    classic_verbs: ClassicVerbs,
    consumer: ConsumerGroups,
    share: ShareCoordinator,
    config: Callable[[], GroupConfig],
    topics: TopicCatalog,
    log: structlog.typing.FilteringBoundLogger,
) -> dict[GroupType, TypeHandlers]:
    consumer_verbs = ConsumerVerbs(consumer)
    share_verbs = ShareVerbs(share.groups, share.fetcher)

    def consumer_summary(group_id: str) -> GroupSummary:
        return summarize_consumer(registry.consumer(group_id), config().consumer_assignors[0])

    def consumer_group_detail(group_id: str) -> GroupDetail:
        settings = config()
        return consumer_detail(
            registry.consumer(group_id), topics, settings.consumer_assignors[0], settings.consumer_session_timeout_ms
        )

    def consumer_failed(group_id: str, operation: str, error: Exception) -> None:
        # Nothing of a consumer group is parked, so it is not restarted: the failure is counted and logged, as a
        # failed ConsumerGroupHeartbeat is.
        consumer.failures += 1
        log.exception(f"{operation} failed", group_id=group_id)

    def share_group_detail(group_id: str) -> GroupDetail:
        return share_detail(registry.share(group_id), topics, share.groups.session_timeout_ms(group_id))

    def share_failed(group_id: str, operation: str, error: Exception) -> None:
        share.groups.failures += 1
        log.exception(f"{operation} failed", group_id=group_id)

    return {
        GroupType.CLASSIC: TypeHandlers(
            classic,
            lambda group_id: summarize(registry.classic(group_id)),
            lambda group_id: detail(registry.classic(group_id)),
            # Looked up at each call, not bound here: a verb replaced at run time (a test's) is the one run.
            lambda group_id, member_id: classic_verbs.kick(group_id, member_id),
            lambda group_id, instance_id: classic_verbs.fence(group_id, instance_id),
            lambda group_id: classic_verbs.force_rebalance(group_id),
            classic.fail,
        ),
        GroupType.CONSUMER: TypeHandlers(
            consumer,
            consumer_summary,
            consumer_group_detail,
            lambda group_id, member_id: consumer_verbs.kick(group_id, member_id),
            lambda group_id, instance_id: (consumer_verbs.fence(group_id, instance_id), None),
            lambda group_id: consumer_verbs.force_rebalance(group_id),
            consumer_failed,
        ),
        GroupType.SHARE: TypeHandlers(
            share.groups,
            lambda group_id: summarize_share(registry.share(group_id)),
            share_group_detail,
            lambda group_id, member_id: share_verbs.kick(group_id, member_id),
            lambda group_id, instance_id: share_verbs.fence(group_id, instance_id),
            lambda group_id: share_verbs.force_rebalance(group_id),
            share_failed,
        ),
    }
