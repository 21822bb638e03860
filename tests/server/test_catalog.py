"""The coordinator's topic catalog over the registry (docs/spec/consumer-groups.md sections 3.6, 4.10): live reads,
and a version that moves on every create, delete and partition growth, and only then."""

from __future__ import annotations

import uuid

from broker.coordinator.modern.types import TopicInfo
from broker.server.broker import BrokerServer
from broker.server.catalog import RegistryCatalog
from broker.storage.partition_log import StorageBudget
from broker.storage.topics import LogDefaults, TopicRegistry


def registry() -> TopicRegistry:
    return TopicRegistry(auto_create=True, default_partitions=2, defaults=LogDefaults(), budget=StorageBudget(-1))


def test_the_version_moves_on_create_delete_and_growth_only() -> None:
    topics = registry()
    catalog = RegistryCatalog(topics)
    assert catalog.version == 0
    orders = topics.create("orders", 3)
    assert catalog.version == 1
    topics.create("orders", 3)  # already there: nothing changed
    topics.get_or_auto_create("orders")
    assert catalog.version == 1
    topics.get_or_auto_create("auto")
    assert catalog.version == 2
    topics.add_partitions(orders, 5)
    assert catalog.version == 3
    topics.add_partitions(orders, 5)  # not a growth
    assert catalog.version == 3
    seen: list[int] = []
    topics.on_delete(lambda topic: seen.append(catalog.version))
    topics.delete(orders)
    assert catalog.version == 4
    assert seen == [4]  # the deletion's listeners already see the new version


def test_lookups_by_name_and_id_read_the_registry_as_it_is() -> None:
    topics = registry()
    catalog = RegistryCatalog(topics)
    orders = topics.create("orders", 3)
    info = TopicInfo("orders", orders.topic_id, 3)
    assert (catalog.by_name("orders"), catalog.by_id(orders.topic_id)) == (info, info)
    assert (catalog.by_name("missing"), catalog.by_id(uuid.uuid4())) == (None, None)
    topics.add_partitions(orders, 4)
    assert catalog.by_id(orders.topic_id) == TopicInfo("orders", orders.topic_id, 4)
    topics.create("payments", 1)
    assert sorted(catalog.names()) == ["orders", "payments"]
    topics.delete(orders)
    recreated = topics.create("orders", 3)
    # A topic deleted and created again is another topic: a new id, and the old one is gone.
    assert recreated.topic_id != orders.topic_id
    assert catalog.by_id(orders.topic_id) is None
    assert catalog.by_name("orders") == TopicInfo("orders", recreated.topic_id, 3)


async def test_the_server_hands_the_coordinator_its_registry(server: BrokerServer) -> None:
    catalog = server.coordinator.topics
    assert isinstance(catalog, RegistryCatalog)
    topic = server.topics.get("topic")
    assert topic is not None
    assert catalog.by_name("topic") == TopicInfo("topic", topic.topic_id, 3)
    before = catalog.version
    server.topics.create("created-later", 2)
    assert catalog.version == before + 1
    assert catalog.by_name("created-later") is not None


def test_by_id_answers_from_its_cache_until_the_registry_changes() -> None:
    """The cache behind ``by_id`` (a ShareFetch looks its topic up several times): the same TopicInfo while nothing
    changed, the new partition count after a growth, None after a delete, and unknown ids are not remembered."""
    topics = registry()
    catalog = RegistryCatalog(topics)
    orders = topics.create("orders", 3)
    first = catalog.by_id(orders.topic_id)
    assert first == TopicInfo("orders", orders.topic_id, 3)
    assert catalog.by_id(orders.topic_id) is first
    for _ in range(3):
        assert catalog.by_id(uuid.uuid4()) is None
    assert len(catalog._infos) == 1
    topics.add_partitions(orders, 5)
    assert catalog.by_id(orders.topic_id) == TopicInfo("orders", orders.topic_id, 5)
    topics.delete(orders)
    assert catalog.by_id(orders.topic_id) is None
