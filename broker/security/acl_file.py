"""``--acl-file``: ACLs loaded at start, one binding line per line (docs/spec/security.md 14.3).

    ALLOW|DENY  <principal>  <host or *>  <OPERATION[,OPERATION...]>  <TYPE>:<name>  [LITERAL|PREFIXED]

``#`` starts a comment. Names are case-sensitive; permission, operation, type and pattern names are Kafka's, in any
case; the cluster is ``CLUSTER:kafka-cluster``. A line with several operations is one binding per operation. A line
that is not valid stops the broker, naming the file and the line (``AclFileError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from broker.security.acls import (
    AccessEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    binding_error,
)


class AclFileError(OSError):
    """A line of the ACL file that is not a binding, with the file's name and the line's number. An OSError, as a
    refused data directory is: ``serve`` prints its one line and exits 1."""


_Code = TypeVar("_Code", Permission, Operation, ResourceType, PatternType)


def _member(kind: type[_Code], text: str, what: str) -> _Code:
    try:
        found = kind[text.upper()]
    except KeyError:
        known = ", ".join(m.name for m in kind if m.name not in ("UNKNOWN", "ANY", "MATCH"))
        raise ValueError(f"unknown {what} {text!r} (one of {known})") from None
    return found


def parse_line(line: str) -> list[AclBinding]:
    """The bindings of one non-blank, comment-free line; ValueError saying what is wrong."""
    parts = line.split()
    if len(parts) not in (5, 6):
        raise ValueError(
            "expected ALLOW|DENY PRINCIPAL HOST OPERATION[,OPERATION...] TYPE:NAME [LITERAL|PREFIXED], "
            f"got {len(parts)} fields"
        )
    permission = _member(Permission, parts[0], "permission")
    principal, host, operations, resource = parts[1:5]
    pattern_type = _member(PatternType, parts[5], "pattern type") if len(parts) == 6 else PatternType.LITERAL
    type_name, colon, name = resource.partition(":")
    if not colon:
        raise ValueError(f"expected TYPE:NAME for the resource, got {resource!r}")
    resource_type = _member(ResourceType, type_name, "resource type")
    pattern = ResourcePattern(resource_type, name, pattern_type)
    bindings = []
    for operation_name in operations.split(","):
        operation = _member(Operation, operation_name, "operation")
        acl = AclBinding(pattern, AccessEntry(principal, host, operation, permission))
        error = binding_error(acl)
        if error is not None:
            raise ValueError(error)
        bindings.append(acl)
    return bindings


def parse_acl_text(text: str, source: str = "<acls>") -> list[AclBinding]:
    bindings: list[AclBinding] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            bindings.extend(parse_line(line))
        except ValueError as error:
            raise AclFileError(f"{source} line {number}: {error}") from None
    return bindings


def load_acl_file(path: str) -> list[AclBinding]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise AclFileError(f"cannot read the ACL file {path}: {error.strerror}") from None
    return parse_acl_text(text, path)
