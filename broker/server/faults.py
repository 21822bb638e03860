"""Fault rules: make the broker misbehave on purpose, for one member or many, without a proxy.

A rule matches requests by API and by who sent them (group, member id, instance id, client id, transactional id)
and then answers an error code, delays the request, closes the connection, or swallows heartbeats (the member
is told all is well while its session runs out, so the coordinator evicts it by timeout). A rule fires at
most ``count`` times, with a seeded ``probability``, and lapses after ``duration_ms``.

Pure logic on an injected clock: the server asks ``match`` and carries out the action.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.api.routes import FAULTABLE_APIS
from broker.events.names import FAULT_RULE_ADDED, FAULT_RULE_REMOVED
from broker.timing.clock import Clock
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, kafka_name

if TYPE_CHECKING:
    from broker.events.hub import GroupEvents

ERROR, DELAY, CLOSE, SWALLOW = "error", "delay", "close", "swallow_heartbeats"
ACTIONS = (ERROR, DELAY, CLOSE, SWALLOW)

# The APIs an ``error`` rule can answer for: every API but ApiVersions, each in its own error shape (the route
# table of broker/api/routes.py, where each API declares its error answer beside its handler).
ERROR_APIS = FAULTABLE_APIS

_API_BY_NAME = {kafka_name(key).replace("_", "").lower(): int(key) for key in SUPPORTED_VERSIONS}
_MATCH_FIELDS = ("group_id", "member_id", "group_instance_id", "client_id", "transactional_id")
_KNOWN_FIELDS = frozenset(
    {"api", "action", "error", "delay_ms", "count", "probability", "seed", "duration_ms", *_MATCH_FIELDS}
)
MAX_DELAY_MS = 600_000


class FaultSpecError(ValueError):
    """A rule the client asked for is malformed; the message says which field and why."""


@dataclass(slots=True)
class FaultRule:
    id: str
    action: str
    api: int | None = None
    group_id: str | None = None
    member_id: str | None = None
    group_instance_id: str | None = None
    client_id: str | None = None
    transactional_id: str | None = None
    error: ErrorCode | None = None
    delay_ms: int | None = None
    count: int | None = None
    probability: float | None = None
    seed: int | None = None
    duration_ms: int | None = None
    created_ms: int = 0
    hits: int = 0
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def is_active(self, now_ms: int) -> bool:
        if self.count is not None and self.hits >= self.count:
            return False
        return self.duration_ms is None or now_ms < self.created_ms + self.duration_ms

    def applies_to(self, api_key: int) -> bool:
        if self.api is not None:
            return self.api == api_key
        if self.action == SWALLOW:
            return api_key == ApiKey.HEARTBEAT
        if self.action == ERROR:
            return api_key in ERROR_APIS
        return True

    def match_json(self) -> dict[str, Any]:
        """What the rule matches: its API (Kafka's name) and the identities it names; the rest match anything."""
        matched: dict[str, Any] = {} if self.api is None else {"api": kafka_name(self.api)}
        matched.update({name: getattr(self, name) for name in _MATCH_FIELDS if getattr(self, name) is not None})
        return matched

    def event_fields(self) -> dict[str, Any]:
        """A ``fault_rule_added`` / ``fault_rule_removed`` record's fields (docs/events.md, "Disturbances")."""
        fields: dict[str, Any] = {"rule_id": self.id, "action": self.action, "match": self.match_json()}
        if self.error is not None:
            fields["error"] = self.error.name.upper()
        for name in ("delay_ms", "count", "probability", "duration_ms"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return fields

    def to_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "api": kafka_name(self.api) if self.api is not None else None,
            "group_id": self.group_id,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "client_id": self.client_id,
            "transactional_id": self.transactional_id,
            "action": self.action,
            "error": self.error.name.upper() if self.error is not None else None,
            "error_code": self.error.value if self.error is not None else None,
            "delay_ms": self.delay_ms,
            "count": self.count,
            "probability": self.probability,
            "seed": self.seed,
            "duration_ms": self.duration_ms,
            "created_ms": self.created_ms,
            "hits": self.hits,
            "active": self.is_active(now_ms),
        }


class FaultRules:
    """The rules, in the order they are matched. ``events``: where a rule's addition and removal are recorded
    (``fault_rule_added``, ``fault_rule_removed``: whoever changes the rules, the event log says so)."""

    def __init__(self, clock: Clock, events: GroupEvents | None = None) -> None:
        self.clock = clock
        self.events = events
        self.rules: dict[str, FaultRule] = {}
        self._ids = itertools.count(1)

    def __bool__(self) -> bool:
        """Any rule at all. (The server's hot path tests ``rules`` itself: a dict's truth costs no Python call.)"""
        return bool(self.rules)

    def add(self, spec: Mapping[str, Any]) -> FaultRule:
        rule = parse_rule(spec, f"f{next(self._ids)}", self.clock.now_ms())
        self.rules[rule.id] = rule
        if self.events is not None:
            self.events.emit(FAULT_RULE_ADDED, rule.group_id or "", rule.event_fields())
        return rule

    def delete(self, rule_id: str) -> bool:
        rule = self.rules.pop(rule_id, None)
        if rule is not None:
            self._removed(rule, "deleted")
        return rule is not None

    def clear(self) -> int:
        rules = list(self.rules.values())
        self.rules.clear()
        for rule in rules:
            self._removed(rule, "cleared")
        return len(rules)

    def _removed(self, rule: FaultRule, reason: str) -> None:
        if self.events is not None:
            fields = {**rule.event_fields(), "reason": reason, "hits": rule.hits}
            self.events.emit(FAULT_RULE_REMOVED, rule.group_id or "", fields)

    def match(
        self,
        api_key: int,
        client_id: str,
        group_id: str | None,
        member_id: str | None,
        group_instance_id: str | None,
        is_member: Callable[[str, str], bool] = lambda group_id, member_id: True,
        transactional_id: str | None = None,
    ) -> FaultRule | None:
        """The first active rule that matches this request and fires (probability permitting); counts the hit.

        A swallow rule passes over a member the coordinator no longer has: once evicted, it must hear so, as it
        would from Kafka. ``is_member`` says which members it has. ``transactional_id`` is the one the request
        names (broker.api.routes.request_identity), None when it names none.
        """
        now = self.clock.now_ms()
        for rule in self.rules.values():
            if not rule.applies_to(api_key) or not rule.is_active(now):
                continue
            if rule.client_id is not None and rule.client_id != client_id:
                continue
            if rule.group_id is not None and rule.group_id != group_id:
                continue
            if rule.member_id is not None and rule.member_id != member_id:
                continue
            if rule.group_instance_id is not None and rule.group_instance_id != group_instance_id:
                continue
            if rule.transactional_id is not None and rule.transactional_id != transactional_id:
                continue
            if rule.action == SWALLOW and not is_member(group_id or "", member_id or ""):
                continue
            if rule.probability is not None and rule._random.random() >= rule.probability:
                continue
            rule.hits += 1
            return rule
        return None


def _int(spec: Mapping[str, Any], name: str, minimum: int, maximum: int = 2**31 - 1) -> int | None:
    value = spec.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultSpecError(f"{name} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        raise FaultSpecError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def _text(spec: Mapping[str, Any], name: str) -> str | None:
    value = spec.get(name)
    if value is not None and not isinstance(value, str):
        raise FaultSpecError(f"{name} must be a string, got {value!r}")
    return value


def parse_api(value: Any) -> int:
    """An API by its Kafka name (JoinGroup, join_group, JOIN_GROUP) or key number."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value not in SUPPORTED_VERSIONS:
            raise FaultSpecError(f"api {value} is not an API this broker serves")
        return value
    if isinstance(value, str):
        key = _API_BY_NAME.get(value.replace("_", "").replace("-", "").lower())
        if key is not None:
            return key
        names = sorted(kafka_name(k) for k in SUPPORTED_VERSIONS)
        raise FaultSpecError(f"unknown api {value!r}; expected one of {names}")
    raise FaultSpecError(f"api must be an API name or key, got {value!r}")


def parse_error(value: Any) -> ErrorCode:
    """A Kafka error by name (REBALANCE_IN_PROGRESS, any case) or by code (27)."""
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            error = ErrorCode(value)
        elif isinstance(value, str):
            error = ErrorCode[value.strip().lower()]
        else:
            raise FaultSpecError(f"error must be a Kafka error name or code, got {value!r}")
    except (KeyError, ValueError):
        raise FaultSpecError(f"error {value!r} is not a Kafka error name or code") from None
    if error is ErrorCode.none:
        raise FaultSpecError("error must be an error: NONE (0) answers nothing wrong")
    return error


def parse_rule(spec: Mapping[str, Any], rule_id: str, now_ms: int) -> FaultRule:
    if not isinstance(spec, Mapping):
        raise FaultSpecError("a fault rule is a JSON object")
    unknown = sorted(set(spec) - _KNOWN_FIELDS)
    if unknown:
        raise FaultSpecError(f"unknown field(s) {unknown}; known fields are {sorted(_KNOWN_FIELDS)}")
    action = spec.get("action")
    if action not in ACTIONS:
        raise FaultSpecError(f"action must be one of {list(ACTIONS)}, got {action!r}")
    api = parse_api(spec["api"]) if spec.get("api") is not None else None
    rule = FaultRule(rule_id, action, api, created_ms=now_ms)
    for name in _MATCH_FIELDS:
        setattr(rule, name, _text(spec, name))

    if action == ERROR:
        if spec.get("error") is None:
            raise FaultSpecError("action 'error' needs an error (a Kafka error name or code)")
        rule.error = parse_error(spec["error"])
        if api is not None and api not in ERROR_APIS:
            names = sorted(kafka_name(k) for k in ERROR_APIS)
            raise FaultSpecError(f"action 'error' can answer for {names}, not {kafka_name(api)}")
    elif spec.get("error") is not None:
        raise FaultSpecError(f"error applies to action 'error', not {action!r}")
    if action == DELAY:
        rule.delay_ms = _int(spec, "delay_ms", 1, MAX_DELAY_MS)
        if rule.delay_ms is None:
            raise FaultSpecError("action 'delay' needs delay_ms")
    elif spec.get("delay_ms") is not None:
        raise FaultSpecError(f"delay_ms applies to action 'delay', not {action!r}")
    if action == SWALLOW and api is not None and api != ApiKey.HEARTBEAT:
        raise FaultSpecError(f"action 'swallow_heartbeats' applies to Heartbeat, not {kafka_name(api)}")

    rule.count = _int(spec, "count", 1)
    rule.duration_ms = _int(spec, "duration_ms", 1)
    rule.seed = _int(spec, "seed", -(2**63), 2**63 - 1)
    probability = spec.get("probability")
    if probability is not None:
        if isinstance(probability, bool) or not isinstance(probability, int | float) or not 0 < probability <= 1:
            raise FaultSpecError(f"probability must be a number in (0, 1], got {probability!r}")
        rule.probability = float(probability)
    rule._random = random.Random(rule.seed)
    return rule
