"""The ACL authorizer: Kafka's StandardAuthorizer (``StandardAuthorizerData.authorize``), owned by the broker.

The decision for (principal, host, operation, resource type, name), spec 9.2:

1. a super user is allowed, nothing else looked at;
2. the ACLs of that type whose pattern covers the name (LITERAL equal, LITERAL ``*``, PREFIXED a prefix of it);
3. of those, the ones for the principal or ``User:*``, from the host or ``*``, whose operation matches (ALL matches
   everything; an ALLOW READ/WRITE/DELETE/ALTER also grants DESCRIBE, an ALLOW ALTER_CONFIGS DESCRIBE_CONFIGS; a
   DENY only denies its own operation);
4. any DENY denies, else any ALLOW allows;
5. nothing matched: denied if the resource had ACLs for anybody, else ``allow.everyone.if.no.acl.found``.

Bindings are kept in the order they were created (DescribeAcls answers in that order, as Kafka's ACL image lists
them by id) with an index per type: literal names in a dict, prefixes in a dict looked up once per prefix of the
name. A denial the client asked for explicitly is logged at INFO as Kafka's ``kafka.authorizer.logger`` logs it,
and emitted as an ``authorization_denied`` event (at most once a second for the same principal, API, resource and
operation: a client retrying every 100 ms must not flood the ring). Filtering denials (ListGroups, an all-topics
Metadata) are neither, as Kafka logs them at DEBUG only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.events.names import AUTHORIZATION_DENIED
from broker.security.acls import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessEntry,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

if TYPE_CHECKING:
    from broker.coordinator.client import Client
    from broker.events.hub import GroupEvents

# The made-up topic name authorize_by_resource_type tries first (Kafka's Authorizer default method uses "hardcode").
_PROBE_NAME = "hardcode"
_EVENT_INTERVAL_MS = 1000
_IMPLIED_BY_ALLOW: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
_NONE: frozenset[Operation] = frozenset()
ACL_STORE_FILE = "acls.json"  # in the data directory


def _log() -> Any:
    from broker.log import get_logger

    return get_logger("kafka.authorizer.logger")


class Authorizer:
    """The ACL store and its decisions. ``events`` and ``now_ms`` report denials; ``store`` keeps the bindings
    across restarts (a JSON file in the data directory, rewritten on each change)."""

    def __init__(
        self,
        super_users: Iterable[str] = (),
        *,
        allow_if_no_acl: bool = False,
        events: GroupEvents | None = None,
        now_ms: Callable[[], int] | None = None,
        store: Path | None = None,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._events = events
        self._now_ms = now_ms
        self._store = store
        self._acls: dict[AclBinding, None] = {}  # insertion-ordered set
        self._literal: dict[tuple[ResourceType, str], list[AccessEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AccessEntry]]] = {}
        self._last_event: dict[tuple[str, str, ResourceType, str, Operation], int] = {}
        if store is not None and store.exists():
            self.add(_read_store(store), persist=False)

    # -- the store -------------------------------------------------------------------------------------------

    @property
    def bindings(self) -> list[AclBinding]:
        return list(self._acls)

    def add(self, acls: Iterable[AclBinding], *, persist: bool = True) -> None:
        """Create bindings; one that exists already changes nothing (CreateAcls succeeds for it)."""
        changed = False
        for acl in acls:
            if acl in self._acls:
                continue
            self._acls[acl] = None
            self._index(acl).append(acl.entry)
            changed = True
        if changed and persist:
            self._save()

    def delete(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter, the bindings it removed (an ACL two filters match is
        reported by the first)."""
        removed: list[list[AclBinding]] = []
        for acl_filter in filters:
            gone = [acl for acl in self._acls if acl_filter.matches(acl)]
            for acl in gone:
                del self._acls[acl]
                self._index(acl).remove(acl.entry)
            removed.append(gone)
        if any(removed):
            self._save()
        return removed

    def describe(self, acl_filter: AclFilter) -> dict[ResourcePattern, list[AccessEntry]]:
        """The bindings ``acl_filter`` matches, per resource pattern, in creation order."""
        found: dict[ResourcePattern, list[AccessEntry]] = {}
        for acl in self._acls:
            if acl_filter.matches(acl):
                found.setdefault(acl.pattern, []).append(acl.entry)
        return found

    def _index(self, acl: AclBinding) -> list[AccessEntry]:
        pattern = acl.pattern
        if pattern.pattern_type is PatternType.PREFIXED:
            return self._prefixed.setdefault(pattern.resource_type, {}).setdefault(pattern.name, [])
        return self._literal.setdefault((pattern.resource_type, pattern.name), [])

    def _save(self) -> None:
        if self._store is None:
            return
        rows = [_row(acl) for acl in self._acls]
        temporary = self._store.with_suffix(".tmp")
        temporary.write_text(json.dumps(rows, indent=1) + "\n")
        os.replace(temporary, self._store)  # atomic: a crash leaves the old file or the new one

    # -- decisions -------------------------------------------------------------------------------------------

    def allows(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Spec 9.2 for one action, nothing logged. ``host`` is the client's address without Java's "/"."""
        if principal in self.super_users:
            return True
        entries = self._covering(resource_type, name)
        if not entries:
            return self.allow_if_no_acl
        implied = _IMPLIED_BY_ALLOW.get(operation, _NONE)
        allowed = False
        for entry in entries:
            if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
                continue
            if entry.host != host and entry.host != WILDCARD:
                continue
            acl_operation = entry.operation
            if entry.permission is Permission.DENY:
                if acl_operation is operation or acl_operation is Operation.ALL:
                    return False
            elif acl_operation is operation or acl_operation is Operation.ALL or acl_operation in implied:
                allowed = True
        return allowed

    def _covering(self, resource_type: ResourceType, name: str) -> list[AccessEntry]:
        """Step 2: every entry of a pattern that covers ``name``."""
        literal = self._literal
        entries = [*literal.get((resource_type, name), ()), *literal.get((resource_type, WILDCARD), ())]
        prefixes = self._prefixed.get(resource_type)
        if prefixes:
            for end in range(1, len(name) + 1):
                found = prefixes.get(name[:end])
                if found:
                    entries.extend(found)
        return entries

    def authorize(
        self,
        client: Client,
        api: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        *,
        report: bool = True,
    ) -> bool:
        """``allows`` for a request's client; a denial is logged and emitted unless ``report`` is False (the
        filtering checks, which Kafka logs at DEBUG only)."""
        host = client.host.removeprefix("/")
        if self.allows(client.principal, host, operation, resource_type, name):
            return True
        if report:
            self._denied(client.principal, host, api, operation, resource_type, name)
        return False

    def authorize_by_resource_type(
        self, client: Client, api: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether the client may do ``operation`` on some resource of the type (spec 9.3, Kafka's
        ``Authorizer.authorizeByResourceType``: an idempotent producer's WRITE on any topic). Implied operations
        do not count here."""
        principal, host = client.principal, client.host.removeprefix("/")
        if self.allows(principal, host, operation, resource_type, _PROBE_NAME):
            return True
        denied_literal: set[str] = set()
        denied_prefixes: set[str] = set()
        allowed: list[tuple[PatternType, str]] = []
        for acl in self._acls:
            pattern, entry = acl.pattern, acl.entry
            if pattern.resource_type is not resource_type:
                continue
            if entry.host not in (host, WILDCARD) or entry.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if entry.operation is not operation and entry.operation is not Operation.ALL:
                continue
            if entry.permission is Permission.DENY:
                if pattern.pattern_type is PatternType.LITERAL:
                    if pattern.name == WILDCARD:
                        return False
                    denied_literal.add(pattern.name)
                else:
                    denied_prefixes.add(pattern.name)
            elif pattern.pattern_type is PatternType.LITERAL and pattern.name == WILDCARD:
                return True
            else:
                allowed.append((pattern.pattern_type, pattern.name))
        for pattern_type, name in allowed:
            if pattern_type is PatternType.LITERAL and name in denied_literal:
                continue
            if not any(name[:end] in denied_prefixes for end in range(1, len(name) + 1)):
                return True
        self._denied(principal, host, api, operation, resource_type, "*")
        return False

    def authorized_operations(self, client: Client, resource_type: ResourceType, name: str) -> int:
        """An AuthorizedOperations bit set: ``1 << code`` for each operation of the type the client may do."""
        principal, host = client.principal, client.host.removeprefix("/")
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.allows(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def _denied(
        self, principal: str, host: str, api: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> None:
        pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
        # Kafka's line: "Principal = User:bob is Denied operation = READ from host = 127.0.0.1 on resource =
        # Group:LITERAL:billing for request = JoinGroup with resourceRefCount = 1 based on rule ..."
        _log().info(
            f"Principal = {principal} is Denied operation = {operation.name} from host = {host} on resource = "
            f"{pattern.render()} for request = {api} with resourceRefCount = 1"
        )
        events = self._events
        if events is None:
            return
        now = self._now_ms() if self._now_ms is not None else 0
        key = (principal, api, resource_type, name, operation)
        last = self._last_event.get(key)
        if last is not None and now - last < _EVENT_INTERVAL_MS:
            return
        if len(self._last_event) > 10_000:  # a client probing many names: forget the old ones
            self._last_event.clear()
        self._last_event[key] = now
        fields = {
            "principal": principal,
            "host": host,
            "api": api,
            "resource_type": resource_type.name,
            "resource_name": name,
            "operation": operation.name,
        }
        events.emit(AUTHORIZATION_DENIED, name if resource_type is ResourceType.GROUP else "", fields)


def _row(acl: AclBinding) -> dict[str, str]:
    pattern, entry = acl.pattern, acl.entry
    return {
        "resource_type": pattern.resource_type.name,
        "name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permission": entry.permission.name,
    }


def _read_store(path: Path) -> list[AclBinding]:
    rows = json.loads(path.read_text())
    return [
        AclBinding(
            ResourcePattern(ResourceType[row["resource_type"]], row["name"], PatternType[row["pattern_type"]]),
            AccessEntry(row["principal"], row["host"], Operation[row["operation"]], Permission[row["permission"]]),
        )
        for row in rows
    ]
