"""The StandardAuthorizer's decision, rule by rule (docs/spec/security.md 9.2 and 9.3), without a broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.coordinator.client import Client
from broker.events.names import AUTHORIZATION_DENIED
from broker.security.acls import (
    CLUSTER_NAME,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    binding,
    binding_error,
)
from broker.security.authorizer import Authorizer

Op, R, P = Operation, ResourceType, PatternType
DENY = Permission.DENY
BOB, ALICE = "User:bob", "User:alice"
HOST = "127.0.0.1"


def allows(authorizer: Authorizer, operation: Operation, kind: ResourceType, name: str, who: str = BOB) -> bool:
    return authorizer.allows(who, HOST, operation, kind, name)


def test_rule_1_a_super_user_is_allowed_whatever_the_acls_say() -> None:
    authorizer = Authorizer([ALICE])
    authorizer.add([binding(R.TOPIC, "t", ALICE, Op.ALL, DENY)])
    assert allows(authorizer, Op.WRITE, R.TOPIC, "t", ALICE)
    assert not allows(authorizer, Op.WRITE, R.TOPIC, "t", BOB)


def test_rule_2_literal_wildcard_and_prefixed_patterns_cover_a_name() -> None:
    authorizer = Authorizer()
    authorizer.add(
        [
            binding(R.GROUP, "exact", BOB, Op.READ),
            binding(R.TOPIC, "*", BOB, Op.READ),
            binding(R.GROUP, "pfx-", BOB, Op.READ, pattern_type=P.PREFIXED),
            binding(R.TRANSACTIONAL_ID, "*", BOB, Op.WRITE, pattern_type=P.PREFIXED),
        ]
    )
    assert allows(authorizer, Op.READ, R.GROUP, "exact")
    assert not allows(authorizer, Op.READ, R.GROUP, "exact2")  # LITERAL is exact
    assert allows(authorizer, Op.READ, R.TOPIC, "any-topic")  # LITERAL * is every name
    assert allows(authorizer, Op.READ, R.GROUP, "pfx-a")
    assert not allows(authorizer, Op.READ, R.GROUP, "other")
    # A PREFIXED "*" is the character, not a wildcard.
    assert allows(authorizer, Op.WRITE, R.TRANSACTIONAL_ID, "*txn")
    assert not allows(authorizer, Op.WRITE, R.TRANSACTIONAL_ID, "txn")


def test_rule_3_principal_wildcard_and_host_matching() -> None:
    authorizer = Authorizer()
    authorizer.add(
        [
            binding(R.TOPIC, "open", "User:*", Op.READ),
            binding(R.TOPIC, "remote", BOB, Op.READ, host="10.0.0.1"),
        ]
    )
    assert allows(authorizer, Op.READ, R.TOPIC, "open", "User:anyone")
    assert not allows(authorizer, Op.READ, R.TOPIC, "remote")  # from 127.0.0.1, not 10.0.0.1
    assert authorizer.allows(BOB, "10.0.0.1", Op.READ, R.TOPIC, "remote")


def test_rule_3_implied_operations_allow_only() -> None:
    authorizer = Authorizer()
    granted = ((Op.READ, "r"), (Op.WRITE, "w"), (Op.DELETE, "d"), (Op.ALTER, "a"), (Op.ALTER_CONFIGS, "c"))
    for operation, name in granted:
        authorizer.add([binding(R.TOPIC, name, BOB, operation)])
    for name in "rwda":
        assert allows(authorizer, Op.DESCRIBE, R.TOPIC, name)
    assert allows(authorizer, Op.DESCRIBE_CONFIGS, R.TOPIC, "c")
    assert not allows(authorizer, Op.DESCRIBE, R.TOPIC, "c")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS only
    assert not allows(authorizer, Op.WRITE, R.TOPIC, "r")  # READ implies nothing but DESCRIBE
    # A DENY READ does not deny DESCRIBE (checklist 51).
    authorizer.add([binding(R.GROUP, "pfx-", BOB, Op.DESCRIBE, pattern_type=P.PREFIXED)])
    authorizer.add([binding(R.GROUP, "pfx-c", BOB, Op.READ, DENY), binding(R.GROUP, "pfx-b", BOB, Op.DESCRIBE, DENY)])
    assert allows(authorizer, Op.DESCRIBE, R.GROUP, "pfx-a")
    assert not allows(authorizer, Op.DESCRIBE, R.GROUP, "pfx-b")
    assert allows(authorizer, Op.DESCRIBE, R.GROUP, "pfx-c")
    assert not allows(authorizer, Op.DESCRIBE, R.GROUP, "other")


def test_rule_4_deny_wins_and_deny_all_overrides_every_allow() -> None:
    authorizer = Authorizer([ALICE])
    authorizer.add(
        [
            binding(R.TOPIC, "t", BOB, Op.ALL),
            binding(R.TOPIC, "t", "User:*", Op.WRITE, DENY),
            binding(R.TOPIC, "u", BOB, Op.READ),
            binding(R.TOPIC, "u", BOB, Op.ALL, DENY),
        ]
    )
    assert allows(authorizer, Op.READ, R.TOPIC, "t")
    assert not allows(authorizer, Op.WRITE, R.TOPIC, "t")
    assert not allows(authorizer, Op.READ, R.TOPIC, "u")
    assert not allows(authorizer, Op.DESCRIBE, R.TOPIC, "u")
    assert allows(authorizer, Op.READ, R.TOPIC, "u", ALICE)  # super users excepted (checklist 52)


def test_rule_5_no_acl_found_defaults_to_denied_or_to_the_setting() -> None:
    closed = Authorizer()
    assert not allows(closed, Op.DESCRIBE, R.TOPIC, "nobody-has-acls")
    open_ = Authorizer(allow_if_no_acl=True)
    assert allows(open_, Op.DESCRIBE, R.TOPIC, "t")
    # As soon as anybody has an ACL on the topic, everyone else is denied (checklist 40).
    open_.add([binding(R.TOPIC, "t", ALICE, Op.READ)])
    assert not allows(open_, Op.DESCRIBE, R.TOPIC, "t")
    assert allows(open_, Op.DESCRIBE, R.TOPIC, "other")


def test_any_resource_of_a_type_for_idempotent_producers() -> None:
    client = Client(principal=BOB)
    authorizer = Authorizer()
    assert not authorizer.authorize_by_resource_type(client, "InitProducerId", Op.WRITE, R.TOPIC)
    authorizer.add([binding(R.TOPIC, "orders-", BOB, Op.WRITE, pattern_type=P.PREFIXED)])
    assert authorizer.authorize_by_resource_type(client, "InitProducerId", Op.WRITE, R.TOPIC)
    # A DENY on a shorter prefix cancels it; implied operations do not count.
    authorizer.add([binding(R.TOPIC, "ord", BOB, Op.WRITE, DENY, pattern_type=P.PREFIXED)])
    assert not authorizer.authorize_by_resource_type(client, "InitProducerId", Op.WRITE, R.TOPIC)
    reader = Authorizer()
    reader.add([binding(R.TOPIC, "t", BOB, Op.READ)])
    assert not reader.authorize_by_resource_type(client, "InitProducerId", Op.DESCRIBE, R.TOPIC)
    literal = Authorizer()
    literal.add([binding(R.TOPIC, "t", BOB, Op.WRITE), binding(R.TOPIC, "t", BOB, Op.WRITE, DENY)])
    assert not literal.authorize_by_resource_type(client, "InitProducerId", Op.WRITE, R.TOPIC)
    wildcard_deny = Authorizer()
    wildcard_deny.add([binding(R.TOPIC, "x", BOB, Op.WRITE), binding(R.TOPIC, "*", "User:*", Op.WRITE, DENY)])
    assert not wildcard_deny.authorize_by_resource_type(client, "InitProducerId", Op.WRITE, R.TOPIC)
    assert Authorizer([BOB]).authorize_by_resource_type(client, "InitProducerId", Op.WRITE, R.TOPIC)


def test_authorized_operations_are_the_bits_of_the_allowed_operations() -> None:
    authorizer = Authorizer()
    authorizer.add([binding(R.GROUP, "g", BOB, Op.READ)])
    bits = authorizer.authorized_operations(Client(principal=BOB), R.GROUP, "g")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    everything = Authorizer([BOB]).authorized_operations(Client(principal=BOB), R.CLUSTER, CLUSTER_NAME)
    assert everything == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def test_filters_any_match_literal_prefixed() -> None:
    authorizer = Authorizer()
    acls = [
        binding(R.TOPIC, "orders", BOB, Op.READ),
        binding(R.TOPIC, "*", BOB, Op.DESCRIBE),
        binding(R.TOPIC, "ord", BOB, Op.WRITE, pattern_type=P.PREFIXED),
        binding(R.TOPIC, "orders", ALICE, Op.WRITE, pattern_type=P.PREFIXED),
        binding(R.GROUP, "orders", BOB, Op.READ),
    ]
    authorizer.add(acls)
    def names(f: AclFilter) -> list[tuple[str, str, PatternType]]:
        return [(p.resource_type.name, p.name, p.pattern_type) for p in authorizer.describe(f)]
    assert len(names(AclFilter())) == 5
    both = [("TOPIC", "orders", P.LITERAL), ("TOPIC", "orders", P.PREFIXED)]
    assert names(AclFilter(R.TOPIC, "orders", P.ANY)) == both
    assert names(AclFilter(R.TOPIC, "orders", P.MATCH)) == [
        ("TOPIC", "orders", P.LITERAL), ("TOPIC", "*", P.LITERAL), ("TOPIC", "ord", P.PREFIXED),
        ("TOPIC", "orders", P.PREFIXED),
    ]  # fmt: skip
    assert names(AclFilter(R.TOPIC, "orders", P.LITERAL)) == [("TOPIC", "orders", P.LITERAL)]
    assert names(AclFilter(R.ANY, None, P.PREFIXED)) == [("TOPIC", "ord", P.PREFIXED), ("TOPIC", "orders", P.PREFIXED)]
    assert names(AclFilter(principal=ALICE)) == [("TOPIC", "orders", P.PREFIXED)]
    assert AclFilter(R.UNKNOWN).error() is not None
    # A binding created twice is one binding.
    authorizer.add(acls[:1])
    assert len(authorizer.bindings) == 5
    (gone,) = authorizer.delete([AclFilter(R.GROUP)])
    assert gone == [acls[4]]
    assert not allows(authorizer, Op.READ, R.GROUP, "orders")


@pytest.mark.parametrize(
    ("acl", "wrong"),
    [
        (binding(R.ANY, "x", BOB, Op.READ), "resourceType"),
        (binding(R.TOPIC, "x", BOB, Op.READ, pattern_type=P.MATCH), "patternType"),
        (binding(R.TOPIC, "x", BOB, Op.ANY), "operation"),
        (binding(R.TOPIC, "", BOB, Op.READ), "empty"),
        (binding(R.CLUSTER, "other", BOB, Op.ALTER), "kafka-cluster"),
        (binding(R.TOPIC, "x", "alice", Op.READ), "principal"),
        (binding(R.TOPIC, "x", BOB, Op.READ, Permission.ANY), "permissionType"),
    ],
)
def test_invalid_bindings_say_why(acl: object, wrong: str) -> None:
    from broker.security.acls import AclBinding

    assert isinstance(acl, AclBinding)
    error = binding_error(acl)
    assert error is not None and wrong in error


class _Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, dict[str, object]]] = []
        self.wants_debug = False

    def emit(self, event: str, group_id: str, fields: dict[str, object], *, debug: bool = False) -> None:
        self.emitted.append((event, group_id, fields))


def test_denials_are_emitted_once_a_second_per_action() -> None:
    now = [1000]
    events = _Events()
    authorizer = Authorizer(events=events, now_ms=lambda: now[0])
    client = Client(host="/127.0.0.1", principal=BOB)
    for _ in range(3):
        assert not authorizer.authorize(client, "JoinGroup", Op.READ, R.GROUP, "g")
    assert not authorizer.authorize(client, "ListGroups", Op.DESCRIBE, R.GROUP, "g", report=False)
    now[0] += 1000
    authorizer.authorize(client, "JoinGroup", Op.READ, R.GROUP, "g")
    assert events.emitted == [
        (AUTHORIZATION_DENIED, "g", {
            "principal": BOB, "host": HOST, "api": "JoinGroup", "resource_type": "GROUP", "resource_name": "g",
            "operation": "READ",
        }),
    ] * 2  # fmt: skip


def test_bindings_survive_a_restart_in_the_store(tmp_path: Path) -> None:
    store = tmp_path / "acls.json"
    first = Authorizer(store=store)
    first.add([binding(R.GROUP, "g", BOB, Op.READ)])
    first.add([binding(R.TOPIC, "t-", BOB, Op.WRITE, DENY, pattern_type=P.PREFIXED)])
    again = Authorizer(store=store)
    assert again.bindings == first.bindings
    again.delete([AclFilter(R.GROUP)])
    assert len(Authorizer(store=store).bindings) == 1
