"""The server-side assignors of consumer groups (section 6 of ``docs/spec/consumer-groups.md``), by the name a
member asks for in ServerAssignor and ``group.consumer.assignors`` lists (section 6.2). The group picks one and
computes the subscription type itself (section 6.3); these only turn a ``GroupSpec`` into targets."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from broker.coordinator.modern.assignors.base import Assignor, AssignorError, GroupSpec, MemberSpec
from broker.coordinator.modern.assignors.range import RangeAssignor
from broker.coordinator.modern.assignors.uniform import UniformAssignor

# Kafka's built-ins, "uniform" first: it is the default of group.consumer.assignors (section 6.2).
ASSIGNORS: Mapping[str, Assignor] = MappingProxyType(
    {UniformAssignor.name: UniformAssignor(), RangeAssignor.name: RangeAssignor()}
)

__all__ = ["ASSIGNORS", "Assignor", "AssignorError", "GroupSpec", "MemberSpec", "RangeAssignor", "UniformAssignor"]
