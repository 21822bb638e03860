"""ACL bindings and filters: Kafka's ``AclBinding`` / ``AclBindingFilter`` with the codes of the wire (spec 9.1).

A binding is a resource pattern (type, name, pattern type) and an entry (principal, host, operation, permission).
A filter has the same fields, any of which may say "any" (ANY, or None for the strings; MATCH for the pattern
type), and is what DescribeAcls and DeleteAcls carry (``ResourcePatternFilter`` / ``AccessControlEntryFilter``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the cluster resource's one name (Kafka's Resource.CLUSTER_NAME)
WILDCARD = "*"  # LITERAL "*" names every resource of its type; "User:*" every principal; "*" every host
WILDCARD_PRINCIPAL = "User:*"

# AclEntry.supportedOperations: the operations a resource type has, the bits of an AuthorizedOperations field.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        Operation.READ,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE, Operation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.USER: (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def render(self) -> str:
        """As Kafka's log shows it: ``Group:LITERAL:billing``."""
        return f"{_camel(self.resource_type.name)}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessEntry


def binding(
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: Operation,
    permission: Permission = Permission.ALLOW,
    *,
    pattern_type: PatternType = PatternType.LITERAL,
    host: str = WILDCARD,
) -> AclBinding:
    """A binding from its parts, LITERAL and any host unless said (tests, the ACL file)."""
    pattern = ResourcePattern(resource_type, name, pattern_type)
    return AclBinding(pattern, AccessEntry(principal, host, operation, permission))


def binding_error(acl: AclBinding) -> str | None:
    """Why CreateAcls refuses ``acl`` with INVALID_REQUEST (spec 11.2, AclControlManager.validateNewAcl), or None."""
    pattern, entry = acl.pattern, acl.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {entry.permission.name}"
    if not pattern.name:
        return "Resource name should not be empty"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if ":" not in entry.principal:
        return (
            f"Could not parse principal from `{entry.principal}` (no colon is present separating the principal "
            "type from the principal name)"
        )
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls match: None and ANY are "whatever" (spec 11.1)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def error(self) -> str | None:
        """Why the filter is refused with INVALID_REQUEST: an UNKNOWN in any field."""
        for part in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if part == 0:
                return f"Filter contains UNKNOWN elements: {part.__class__.__name__} UNKNOWN"
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted is not pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if wanted in (PatternType.ANY, PatternType.LITERAL, PatternType.PREFIXED):
            return self.name == pattern.name
        # MATCH: every pattern that applies to a resource of that name.
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        return pattern.pattern_type is PatternType.PREFIXED and self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessEntry) -> bool:
        """AccessControlEntryFilter.matches."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is Operation.ANY or self.operation is entry.operation)
            and (self.permission is Permission.ANY or self.permission is entry.permission)
        )

    def matches(self, acl: AclBinding) -> bool:
        return self.matches_pattern(acl.pattern) and self.matches_entry(acl.entry)


def _camel(name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId, as Kafka's enums print in the authorizer log."""
    return "".join(part.capitalize() for part in name.split("_"))
