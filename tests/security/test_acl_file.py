"""``--acl-file`` (docs/spec/security.md 14.3): the format, and the line number of a line that is not valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.security.acl_file import AclFileError, load_acl_file, parse_acl_text
from broker.security.acls import Operation, PatternType, Permission, ResourceType, binding

SPEC_EXAMPLE = """\
# the spec's example
ALLOW User:bob * READ,DESCRIBE GROUP:billing
ALLOW User:bob * READ TOPIC:orders- PREFIXED   # a trailing comment
DENY  User:*   * WRITE TOPIC:audit
allow User:ops 10.0.0.1 alter cluster:kafka-cluster literal
"""


def test_the_spec_example_parses_one_binding_per_operation() -> None:
    assert parse_acl_text(SPEC_EXAMPLE) == [
        binding(ResourceType.GROUP, "billing", "User:bob", Operation.READ),
        binding(ResourceType.GROUP, "billing", "User:bob", Operation.DESCRIBE),
        binding(ResourceType.TOPIC, "orders-", "User:bob", Operation.READ, pattern_type=PatternType.PREFIXED),
        binding(ResourceType.TOPIC, "audit", "User:*", Operation.WRITE, Permission.DENY),
        binding(ResourceType.CLUSTER, "kafka-cluster", "User:ops", Operation.ALTER, host="10.0.0.1"),
    ]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("PERMIT User:bob * READ TOPIC:t", "unknown permission"),
        ("ALLOW User:bob * READ", "fields"),
        ("ALLOW User:bob * EAT TOPIC:t", "unknown operation"),
        ("ALLOW User:bob * READ TABLE:t", "unknown resource type"),
        ("ALLOW User:bob * READ TOPIC", "TYPE:NAME"),
        ("ALLOW bob * READ TOPIC:t", "principal"),
        ("ALLOW User:bob * READ CLUSTER:other", "kafka-cluster"),
        ("ALLOW User:bob * READ TOPIC:t MATCH", "patternType"),
    ],
)
def test_an_invalid_line_is_refused_with_its_number(line: str, says: str) -> None:
    with pytest.raises(AclFileError, match=rf"acls.txt line 3: .*{says}"):
        parse_acl_text(f"# first\n\n{line}\n", "acls.txt")


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(AclFileError, match="cannot read the ACL file"):
        load_acl_file(str(tmp_path / "none.txt"))
